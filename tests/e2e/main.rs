//! The end-to-end tests: the real `shoal` binary, started on free ports in temporary prefixes,
//! talked to over real sockets (and, in the `nginx_diff*` modules, compared with real nginx).
//! One test binary with a module per area, so the suite links once; run one area or one test
//! with a filter: `cargo test --test e2e hostile::` or `cargo test --test e2e proxy_cache::`.
//!
//! The tests of every area run side by side as threads of this one process: nothing here may
//! change what the process shares (its environment, current directory, signal mask), and what
//! it must share it does in one place, in `common` (the free-port list, the open-files limit).
//!
//! Shared pieces: `common` (prefixes, the binary, the one HTTP client in `common::client`, the
//! upstream servers in `common::upstream`), `diff` (the nginx differential harness) and
//! `aio_support` (disks, page-cache residency and throttled cgroups for the thread-pool tests).

mod aio_support;
mod common;
mod diff;

mod access_log;
mod aio;
mod aio_cold;
mod auth_request;
mod bad_input;
mod cli;
mod conf_errors;
mod core_directives;
mod core_leftovers;
mod directio;
mod error_log;
mod error_pages;
mod fastcgi;
mod grpc;
mod grpc_idle;
mod gunzip;
mod gzip;
mod h2;
mod h2_conformance;
mod h2_data;
mod h2_hostile;
mod h2_log;
mod h2_park;
mod hostile;
mod keepalive_park;
mod limit_rate;
mod limits;
mod lingering;
mod listen;
mod map_split;
mod nginx_diff;
mod nginx_diff_access;
mod nginx_diff_auth_request;
mod nginx_diff_auth_schemes;
mod nginx_diff_autoindex;
mod nginx_diff_binary_map;
mod nginx_diff_cache;
mod nginx_diff_charset;
mod nginx_diff_cookie;
mod nginx_diff_core;
mod nginx_diff_dav;
mod nginx_diff_fastcgi;
mod nginx_diff_grpc;
mod nginx_diff_gzip;
mod nginx_diff_h2;
mod nginx_diff_hash;
mod nginx_diff_leftovers;
mod nginx_diff_leftovers21;
mod nginx_diff_limits;
mod nginx_diff_logs;
mod nginx_diff_proxy;
mod nginx_diff_realip;
mod nginx_diff_regex;
mod nginx_diff_requests;
mod nginx_diff_resolver;
mod nginx_diff_rewrite;
mod nginx_diff_sites;
mod nginx_diff_slice;
mod nginx_diff_small_modules;
mod nginx_diff_ssi;
mod nginx_diff_stream;
mod nginx_diff_sub;
mod nginx_diff_tls;
mod nginx_diff_userid;
mod nginx_diff_variables;
mod open_file_cache;
mod output_buffers;
mod package;
mod privsep;
mod process_init;
mod proxy;
mod proxy_cache;
mod proxy_cache_faults;
mod proxy_cache_hot;
mod proxy_cache_stale;
mod proxy_cookie;
mod proxy_store;
mod realip;
mod reload_load;
mod resolver;
mod shared_zones;
mod signals;
mod stream;
mod stream_errors;
mod stream_routes;
mod stream_upstream;
mod stub_status;
mod sub_filter;
mod tls;
mod tls_accept;
mod tls_hostile;
mod tls_ocsp;
mod tls_testssl;
mod tls_upstream;
mod transparent;
mod upgrade;
mod upstream_protocols;
mod upstream_server;
mod upstream_store;
mod uwsgi_ssl;
mod variables;
