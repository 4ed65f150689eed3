//! shoal's blocking-work machinery, pure of the server: named bounded thread pools (nginx's
//! `thread_pool`), the page-cache residency check that decides whether a file range may be read
//! or sent inline on a worker, the offloading file reads and sendfile built on both, and the
//! per-worker open-file cache, and the memory processes share (nginx's shared memory zones).
//!
//! It knows no HTTP and parses no configuration; the server maps its directives onto these
//! types. The one rule everything here serves: **blocking work never runs on a worker**. Each
//! module's first line says which side it runs on. Linux only.

pub mod direct;
pub mod file;
pub mod fxhash;
pub mod open_file_cache;
pub mod pool;
pub mod residency;
pub mod shm;
pub mod syscall;
