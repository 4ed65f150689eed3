//! shoal's server: the directive registry and typed configuration, the master and its
//! workers, listening sockets, and the HTTP modules.
//!
//! Runs on the threads the master creates: the master thread (configuration, signals,
//! sockets) and one thread per worker, each with its own current_thread tokio runtime. Nothing
//! on a worker blocks; blocking work goes to `shoal_io`'s thread pools.

pub mod accept;
pub mod conf;
pub mod config;
pub mod core;
pub mod cycle;
pub mod deadline;
pub mod error;
pub mod event;
pub mod http;
pub mod listen;
pub mod log;
pub mod master;
pub mod pending;
pub mod pinned;
pub mod pools;
pub mod privileges;
pub mod process_init;
pub mod resolver;
pub mod root_master;
pub mod signal_process;
pub mod spare;
pub mod status;
pub mod stream;
pub mod syslog;
pub mod tls;
pub mod upgrade;
pub mod upstream;
pub mod variables;
pub mod worker;

/// shoal's version, as `-v` and `Server:` print it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
