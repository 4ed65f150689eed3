//! nginx's directives, by module: how shoal answers a directive it does not implement.
//!
//! shoal reads nginx configurations. A directive that shoal's own registry
//! knows is handled there; this table is consulted only for the names the
//! registry does not know, so that shoal can tell three cases apart:
//!
//! * a name that is not in this table either: a typo or a third-party module,
//!   reported as nginx reports it, `unknown directive "x"`;
//! * an [`Absent::Unsupported`] directive: a real nginx directive that would
//!   change what the server does (serve, filter, check access, proxy to an
//!   application server...). Ignoring it would silently change the behaviour
//!   of the configuration, so shoal refuses to start and names the module;
//! * an [`Absent::Inert`] directive: it only tunes a module shoal does not
//!   have (`image_filter_buffer`, `mp4_buffer_size`...), and nginx
//!   itself would do nothing with it unless an `Unsupported` directive of the
//!   same module were present, which shoal already refuses. Such a directive
//!   is accepted with a `[warn]`, so that configurations that keep, say,
//!   `image_filter_*` lines around for a location that was removed still
//!   load.
//!
//! The table lists every directive of open-source nginx 1.2x (1.20 to 1.29):
//! the main and events contexts, the http core and every standard http, stream
//! and mail module, including the ones shoal implements or will implement
//! (proxy, gzip, rewrite, upstream, map, split_clients, log, stub_status,
//! thread_pool, aio, stream core and proxy...). Those are all `Unsupported`
//! here: once shoal implements one, its registry answers first and the entry
//! is never reached (HTTP/2's are shoal's: `http/h2/conf.rs`). HTTP/3 and
//! QUIC are `Unsupported` for now, and so are the TLS directives of stream and mail and of newer nginx versions
//! (`ssl_ech_file`). The http and stream proxies' `proxy_ssl_*`, gRPC's `grpc_ssl_*` and
//! `uwsgi_ssl_*` are not listed: they are shoal's (`http/proxy/ssl.rs`), and neither are the
//! `*_store` and `*_ignore_client_abort` of the upstream modules (`http/upstream/store.rs`,
//! `http/upstream/conf.rs`), nor the DAV, FLV and random index modules' (`http/dav/`,
//! `http/flv.rs`, `http/random_index.rs`).
//!
//! Commercial-only directives (NGINX Plus) and third-party modules (njs,
//! Lua...) are not listed.
//!
//! A name used by several modules (`listen`, `server`, `proxy_pass`,
//! `access_log`, `ssl_certificate`...) appears once, under the module a user
//! meets first: the core module (main context), then the http modules, then
//! stream, then mail. Module names are the ones nginx's documentation uses
//! (`ngx_http_gzip_module`, not the internal `ngx_http_gzip_filter_module`);
//! the directives of the main and events contexts are under
//! `ngx_core_module`, as in nginx's documentation.

/// How shoal treats an nginx directive it has no implementation for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Absent {
    /// The directive would make nginx do something (serve content, filter, check access...):
    /// shoal refuses the configuration, naming the module.
    Unsupported,
    /// The directive only tunes a module shoal lacks, and has no effect unless an
    /// `Unsupported` directive of that module is present: accepted with a `[warn]`.
    Inert,
}

use Absent::{Inert, Unsupported};

/// (directive name, nginx module, how shoal treats it). Sorted by name for binary search.
#[rustfmt::skip]
pub static NGINX_DIRECTIVES: &[(&str, &str, Absent)] = &[
    ("absolute_redirect",              "ngx_http_core_module",          Unsupported),
    ("accept_mutex",                   "ngx_core_module",               Unsupported),
    ("accept_mutex_delay",             "ngx_core_module",               Unsupported),
    ("access_log",                     "ngx_http_log_module",           Unsupported),
    ("add_header",                     "ngx_http_headers_module",       Unsupported),
    ("add_header_inherit",             "ngx_http_headers_module",       Unsupported),
    ("add_trailer_inherit",            "ngx_http_headers_module",       Unsupported),
    ("aio",                            "ngx_http_core_module",          Unsupported),
    ("aio_write",                      "ngx_http_core_module",          Unsupported),
    ("alias",                          "ngx_http_core_module",          Unsupported),
    ("auth_http",                      "ngx_mail_auth_http_module",     Inert),
    ("auth_http_header",               "ngx_mail_auth_http_module",     Inert),
    ("auth_http_pass_client_cert",     "ngx_mail_auth_http_module",     Inert),
    ("auth_http_timeout",              "ngx_mail_auth_http_module",     Inert),
    ("break",                          "ngx_http_rewrite_module",       Unsupported),
    ("client_body_buffer_size",        "ngx_http_core_module",          Unsupported),
    ("client_body_timeout",            "ngx_http_core_module",          Unsupported),
    ("client_header_buffer_size",      "ngx_http_core_module",          Unsupported),
    ("client_header_timeout",          "ngx_http_core_module",          Unsupported),
    ("client_max_body_size",           "ngx_http_core_module",          Unsupported),
    ("daemon",                         "ngx_core_module",               Unsupported),
    ("debug_points",                   "ngx_core_module",               Unsupported),
    ("default_type",                   "ngx_http_core_module",          Unsupported),
    ("devpoll_changes",                "ngx_core_module",               Unsupported),
    ("devpoll_events",                 "ngx_core_module",               Unsupported),
    ("directio",                       "ngx_http_core_module",          Unsupported),
    ("directio_alignment",             "ngx_http_core_module",          Unsupported),
    ("disable_symlinks",               "ngx_http_core_module",          Unsupported),
    ("early_hints",                    "ngx_http_core_module",          Unsupported),
    ("env",                            "ngx_core_module",               Unsupported),
    ("error_page",                     "ngx_http_core_module",          Unsupported),
    ("etag",                           "ngx_http_core_module",          Unsupported),
    ("events",                         "ngx_core_module",               Unsupported),
    ("expires",                        "ngx_http_headers_module",       Unsupported),
    ("geoip_city",                     "ngx_http_geoip_module",         Unsupported),
    ("geoip_country",                  "ngx_http_geoip_module",         Unsupported),
    ("geoip_org",                      "ngx_http_geoip_module",         Unsupported),
    ("geoip_proxy",                    "ngx_http_geoip_module",         Inert),
    ("geoip_proxy_recursive",          "ngx_http_geoip_module",         Inert),
    ("google_perftools_profiles",      "ngx_google_perftools_module",   Unsupported),
    ("gzip",                           "ngx_http_gzip_module",          Unsupported),
    ("gzip_buffers",                   "ngx_http_gzip_module",          Unsupported),
    ("gzip_comp_level",                "ngx_http_gzip_module",          Unsupported),
    ("gzip_disable",                   "ngx_http_gzip_module",          Unsupported),
    ("gzip_hash",                      "ngx_http_gzip_module",          Unsupported),
    ("gzip_http_version",              "ngx_http_gzip_module",          Unsupported),
    ("gzip_min_length",                "ngx_http_gzip_module",          Unsupported),
    ("gzip_no_buffer",                 "ngx_http_gzip_module",          Unsupported),
    ("gzip_proxied",                   "ngx_http_gzip_module",          Unsupported),
    ("gzip_static",                    "ngx_http_gzip_static_module",   Unsupported),
    ("gzip_types",                     "ngx_http_gzip_module",          Unsupported),
    ("gzip_vary",                      "ngx_http_gzip_module",          Unsupported),
    ("gzip_window",                    "ngx_http_gzip_module",          Unsupported),
    ("hash",                           "ngx_http_upstream_module",      Unsupported),
    ("http",                           "ngx_http_core_module",          Unsupported),
    ("http2",                          "ngx_http_v2_module",            Unsupported),
    ("http2_body_preread_size",        "ngx_http_v2_module",            Unsupported),
    ("http2_chunk_size",               "ngx_http_v2_module",            Unsupported),
    ("http2_idle_timeout",             "ngx_http_v2_module",            Unsupported),
    ("http2_max_concurrent_pushes",    "ngx_http_v2_module",            Unsupported),
    ("http2_max_concurrent_streams",   "ngx_http_v2_module",            Unsupported),
    ("http2_max_field_size",           "ngx_http_v2_module",            Unsupported),
    ("http2_max_header_size",          "ngx_http_v2_module",            Unsupported),
    ("http2_max_requests",             "ngx_http_v2_module",            Unsupported),
    ("http2_pool_size",                "ngx_http_v2_module",            Unsupported),
    ("http2_push",                     "ngx_http_v2_module",            Unsupported),
    ("http2_push_preload",             "ngx_http_v2_module",            Unsupported),
    ("http2_recv_buffer_size",         "ngx_http_v2_module",            Unsupported),
    ("http2_recv_timeout",             "ngx_http_v2_module",            Unsupported),
    ("http2_streams_index_size",       "ngx_http_v2_module",            Unsupported),
    ("http3",                          "ngx_http_v3_module",            Unsupported),
    ("http3_hq",                       "ngx_http_v3_module",            Unsupported),
    ("http3_max_concurrent_streams",   "ngx_http_v3_module",            Unsupported),
    ("http3_stream_buffer_size",       "ngx_http_v3_module",            Unsupported),
    ("if",                             "ngx_http_rewrite_module",       Unsupported),
    ("if_modified_since",              "ngx_http_core_module",          Unsupported),
    ("ignore_invalid_headers",         "ngx_http_core_module",          Unsupported),
    ("image_filter",                   "ngx_http_image_filter_module",  Unsupported),
    ("image_filter_buffer",            "ngx_http_image_filter_module",  Inert),
    ("image_filter_interlace",         "ngx_http_image_filter_module",  Inert),
    ("image_filter_jpeg_quality",      "ngx_http_image_filter_module",  Inert),
    ("image_filter_sharpen",           "ngx_http_image_filter_module",  Inert),
    ("image_filter_transparency",      "ngx_http_image_filter_module",  Inert),
    ("image_filter_webp_quality",      "ngx_http_image_filter_module",  Inert),
    ("imap_auth",                      "ngx_mail_imap_module",          Inert),
    ("imap_capabilities",              "ngx_mail_imap_module",          Inert),
    ("imap_client_buffer",             "ngx_mail_imap_module",          Inert),
    ("include",                        "ngx_core_module",               Unsupported),
    ("index",                          "ngx_http_index_module",         Unsupported),
    ("internal",                       "ngx_http_core_module",          Unsupported),
    ("ip_hash",                        "ngx_http_upstream_module",      Unsupported),
    ("keepalive",                      "ngx_http_upstream_module",      Unsupported),
    ("keepalive_disable",              "ngx_http_core_module",          Unsupported),
    ("keepalive_min_timeout",          "ngx_http_core_module",          Unsupported),
    ("keepalive_requests",             "ngx_http_core_module",          Unsupported),
    ("keepalive_time",                 "ngx_http_core_module",          Unsupported),
    ("keepalive_timeout",              "ngx_http_core_module",          Unsupported),
    ("kqueue_changes",                 "ngx_core_module",               Unsupported),
    ("kqueue_events",                  "ngx_core_module",               Unsupported),
    ("large_client_header_buffers",    "ngx_http_core_module",          Unsupported),
    ("least_conn",                     "ngx_http_upstream_module",      Unsupported),
    ("lingering_close",                "ngx_http_core_module",          Unsupported),
    ("lingering_time",                 "ngx_http_core_module",          Unsupported),
    ("lingering_timeout",              "ngx_http_core_module",          Unsupported),
    ("listen",                         "ngx_http_core_module",          Unsupported),
    ("location",                       "ngx_http_core_module",          Unsupported),
    ("log_format",                     "ngx_http_log_module",           Unsupported),
    ("log_not_found",                  "ngx_http_core_module",          Unsupported),
    ("mail",                           "ngx_mail_core_module",          Unsupported),
    ("map",                            "ngx_http_map_module",           Unsupported),
    ("master_process",                 "ngx_core_module",               Unsupported),
    ("max_errors",                     "ngx_mail_core_module",          Inert),
    ("max_headers",                    "ngx_http_core_module",          Unsupported),
    ("max_ranges",                     "ngx_http_core_module",          Unsupported),
    ("merge_slashes",                  "ngx_http_core_module",          Unsupported),
    ("mp4",                            "ngx_http_mp4_module",           Unsupported),
    ("mp4_buffer_size",                "ngx_http_mp4_module",           Inert),
    ("mp4_max_buffer_size",            "ngx_http_mp4_module",           Inert),
    ("mp4_start_key_frame",            "ngx_http_mp4_module",           Inert),
    ("multi_accept",                   "ngx_core_module",               Unsupported),
    ("open_file_cache",                "ngx_http_core_module",          Unsupported),
    ("open_file_cache_errors",         "ngx_http_core_module",          Unsupported),
    ("open_file_cache_min_uses",       "ngx_http_core_module",          Unsupported),
    ("open_file_cache_valid",          "ngx_http_core_module",          Unsupported),
    ("output_buffers",                 "ngx_http_core_module",          Unsupported),
    ("pass",                           "ngx_stream_pass_module",        Unsupported),
    ("perl",                           "ngx_http_perl_module",          Unsupported),
    ("perl_modules",                   "ngx_http_perl_module",          Inert),
    ("perl_require",                   "ngx_http_perl_module",          Unsupported),
    ("perl_set",                       "ngx_http_perl_module",          Unsupported),
    ("pid",                            "ngx_core_module",               Unsupported),
    ("pop3_auth",                      "ngx_mail_pop3_module",          Inert),
    ("pop3_capabilities",              "ngx_mail_pop3_module",          Inert),
    ("port_in_redirect",               "ngx_http_core_module",          Unsupported),
    ("postpone_gzipping",              "ngx_http_gzip_module",          Unsupported),
    ("preread_buffer_size",            "ngx_stream_core_module",        Unsupported),
    ("preread_timeout",                "ngx_stream_core_module",        Unsupported),
    ("protocol",                       "ngx_mail_core_module",          Inert),
    ("proxy",                          "ngx_mail_proxy_module",         Inert),
    ("proxy_bind",                     "ngx_http_proxy_module",         Unsupported),
    ("proxy_buffer",                   "ngx_mail_proxy_module",         Inert),
    ("proxy_buffer_size",              "ngx_http_proxy_module",         Unsupported),
    ("proxy_buffering",                "ngx_http_proxy_module",         Unsupported),
    ("proxy_buffers",                  "ngx_http_proxy_module",         Unsupported),
    ("proxy_busy_buffers_size",        "ngx_http_proxy_module",         Unsupported),
    ("proxy_cache",                    "ngx_http_proxy_module",         Unsupported),
    ("proxy_cache_background_update",  "ngx_http_proxy_module",         Unsupported),
    ("proxy_cache_bypass",             "ngx_http_proxy_module",         Unsupported),
    ("proxy_cache_convert_head",       "ngx_http_proxy_module",         Unsupported),
    ("proxy_cache_key",                "ngx_http_proxy_module",         Unsupported),
    ("proxy_cache_lock",               "ngx_http_proxy_module",         Unsupported),
    ("proxy_cache_lock_age",           "ngx_http_proxy_module",         Unsupported),
    ("proxy_cache_lock_timeout",       "ngx_http_proxy_module",         Unsupported),
    ("proxy_cache_max_range_offset",   "ngx_http_proxy_module",         Unsupported),
    ("proxy_cache_methods",            "ngx_http_proxy_module",         Unsupported),
    ("proxy_cache_min_uses",           "ngx_http_proxy_module",         Unsupported),
    ("proxy_cache_path",               "ngx_http_proxy_module",         Unsupported),
    ("proxy_cache_revalidate",         "ngx_http_proxy_module",         Unsupported),
    ("proxy_cache_use_stale",          "ngx_http_proxy_module",         Unsupported),
    ("proxy_cache_valid",              "ngx_http_proxy_module",         Unsupported),
    ("proxy_connect_timeout",          "ngx_http_proxy_module",         Unsupported),
    ("proxy_download_rate",            "ngx_stream_proxy_module",       Unsupported),
    ("proxy_downstream_buffer",        "ngx_stream_proxy_module",       Unsupported),
    ("proxy_half_close",               "ngx_stream_proxy_module",       Unsupported),
    ("proxy_hide_header",              "ngx_http_proxy_module",         Unsupported),
    ("proxy_http_version",             "ngx_http_proxy_module",         Unsupported),
    ("proxy_ignore_headers",           "ngx_http_proxy_module",         Unsupported),
    ("proxy_intercept_errors",         "ngx_http_proxy_module",         Unsupported),
    ("proxy_max_temp_file_size",       "ngx_http_proxy_module",         Unsupported),
    ("proxy_next_upstream",            "ngx_http_proxy_module",         Unsupported),
    ("proxy_next_upstream_timeout",    "ngx_http_proxy_module",         Unsupported),
    ("proxy_next_upstream_tries",      "ngx_http_proxy_module",         Unsupported),
    ("proxy_no_cache",                 "ngx_http_proxy_module",         Unsupported),
    ("proxy_pass",                     "ngx_http_proxy_module",         Unsupported),
    ("proxy_pass_error_message",       "ngx_mail_proxy_module",         Inert),
    ("proxy_pass_header",              "ngx_http_proxy_module",         Unsupported),
    ("proxy_pass_request_body",        "ngx_http_proxy_module",         Unsupported),
    ("proxy_pass_request_headers",     "ngx_http_proxy_module",         Unsupported),
    ("proxy_pass_trailers",            "ngx_http_proxy_module",         Unsupported),
    ("proxy_protocol",                 "ngx_stream_proxy_module",       Unsupported),
    ("proxy_protocol_timeout",         "ngx_stream_core_module",        Unsupported),
    ("proxy_read_timeout",             "ngx_http_proxy_module",         Unsupported),
    ("proxy_redirect",                 "ngx_http_proxy_module",         Unsupported),
    ("proxy_request_buffering",        "ngx_http_proxy_module",         Unsupported),
    ("proxy_requests",                 "ngx_stream_proxy_module",       Unsupported),
    ("proxy_responses",                "ngx_stream_proxy_module",       Unsupported),
    ("proxy_send_timeout",             "ngx_http_proxy_module",         Unsupported),
    ("proxy_set_body",                 "ngx_http_proxy_module",         Unsupported),
    ("proxy_set_header",               "ngx_http_proxy_module",         Unsupported),
    ("proxy_smtp_auth",                "ngx_mail_proxy_module",         Inert),
    ("proxy_socket_keepalive",         "ngx_http_proxy_module",         Unsupported),
    ("proxy_temp_file_write_size",     "ngx_http_proxy_module",         Unsupported),
    ("proxy_timeout",                  "ngx_stream_proxy_module",       Unsupported),
    ("proxy_upload_rate",              "ngx_stream_proxy_module",       Unsupported),
    ("proxy_upstream_buffer",          "ngx_stream_proxy_module",       Unsupported),
    ("quic_active_connection_id",      "ngx_http_v3_module",            Unsupported),
    ("quic_bpf",                       "ngx_http_v3_module",            Unsupported),
    ("quic_gso",                       "ngx_http_v3_module",            Unsupported),
    ("quic_host_key",                  "ngx_http_v3_module",            Unsupported),
    ("quic_retry",                     "ngx_http_v3_module",            Unsupported),
    ("random",                         "ngx_http_upstream_module",      Unsupported),
    ("reset_timedout_connection",      "ngx_http_core_module",          Unsupported),
    ("return",                         "ngx_http_rewrite_module",       Unsupported),
    ("rewrite",                        "ngx_http_rewrite_module",       Unsupported),
    ("rewrite_log",                    "ngx_http_rewrite_module",       Unsupported),
    ("root",                           "ngx_http_core_module",          Unsupported),
    ("send_timeout",                   "ngx_http_core_module",          Unsupported),
    ("sendfile",                       "ngx_http_core_module",          Unsupported),
    ("sendfile_max_chunk",             "ngx_http_core_module",          Unsupported),
    ("server",                         "ngx_http_core_module",          Unsupported),
    ("server_name",                    "ngx_http_core_module",          Unsupported),
    ("server_name_in_redirect",        "ngx_http_core_module",          Unsupported),
    ("server_tokens",                  "ngx_http_core_module",          Unsupported),
    ("set",                            "ngx_http_rewrite_module",       Unsupported),
    ("smtp_auth",                      "ngx_mail_smtp_module",          Inert),
    ("smtp_capabilities",              "ngx_mail_smtp_module",          Inert),
    ("smtp_client_buffer",             "ngx_mail_smtp_module",          Inert),
    ("smtp_greeting_delay",            "ngx_mail_smtp_module",          Inert),
    ("split_clients",                  "ngx_http_split_clients_module", Unsupported),
    ("ssl_alpn",                       "ngx_stream_ssl_module",         Unsupported),
    ("ssl_certificate_compression",    "ngx_http_ssl_module",           Unsupported),
    ("ssl_ech_file",                   "ngx_http_ssl_module",           Unsupported),
    ("ssl_engine",                     "ngx_core_module",               Unsupported),
    ("ssl_handshake_timeout",          "ngx_stream_ssl_module",         Unsupported),
    ("ssl_object_cache_inheritable",   "ngx_core_module",               Unsupported),
    ("ssl_preread",                    "ngx_stream_ssl_preread_module", Unsupported),
    ("starttls",                       "ngx_mail_ssl_module",           Inert),
    ("sticky",                         "ngx_http_upstream_module",      Unsupported),
    ("stream",                         "ngx_stream_core_module",        Unsupported),
    ("stub_status",                    "ngx_http_stub_status_module",   Unsupported),
    ("tcp_nodelay",                    "ngx_http_core_module",          Unsupported),
    ("tcp_nopush",                     "ngx_http_core_module",          Unsupported),
    ("thread_pool",                    "ngx_core_module",               Unsupported),
    ("timeout",                        "ngx_mail_core_module",          Inert),
    ("try_files",                      "ngx_http_core_module",          Unsupported),
    ("types",                          "ngx_http_core_module",          Unsupported),
    ("underscores_in_headers",         "ngx_http_core_module",          Unsupported),
    ("uninitialized_variable_warn",    "ngx_http_rewrite_module",       Unsupported),
    ("upstream",                       "ngx_http_upstream_module",      Unsupported),
    ("use",                            "ngx_core_module",               Unsupported),
    ("user",                           "ngx_core_module",               Unsupported),
    ("uwsgi_string",                   "ngx_http_uwsgi_module",         Unsupported),
    ("worker_connections",             "ngx_core_module",               Unsupported),
    ("worker_processes",               "ngx_core_module",               Unsupported),
    ("worker_rlimit_nofile",           "ngx_core_module",               Unsupported),
    ("worker_shutdown_timeout",        "ngx_core_module",               Unsupported),
    ("xclient",                        "ngx_mail_proxy_module",         Inert),
    ("xml_entities",                   "ngx_http_xslt_module",          Inert),
    ("xslt_last_modified",             "ngx_http_xslt_module",          Inert),
    ("xslt_param",                     "ngx_http_xslt_module",          Inert),
    ("xslt_string_param",              "ngx_http_xslt_module",          Inert),
    ("xslt_stylesheet",                "ngx_http_xslt_module",          Unsupported),
    ("xslt_types",                     "ngx_http_xslt_module",          Inert),
    ("zone",                           "ngx_http_upstream_module",      Unsupported),
];

/// Looks up a directive shoal has no implementation for.
pub fn lookup(name: &str) -> Option<(&'static str, Absent)> {
    NGINX_DIRECTIVES
        .binary_search_by(|&(directive, _, _)| directive.cmp(name))
        .ok()
        .map(|i| (NGINX_DIRECTIVES[i].1, NGINX_DIRECTIVES[i].2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_without_duplicates() {
        for pair in NGINX_DIRECTIVES.windows(2) {
            assert!(
                pair[0].0 < pair[1].0,
                "{:?} must come before {:?}",
                pair[0].0,
                pair[1].0
            );
        }
    }

    #[test]
    fn names_and_modules_look_like_nginx() {
        for &(name, module, _) in NGINX_DIRECTIVES {
            assert!(!name.is_empty(), "empty directive name");
            assert!(
                name.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "odd directive name {name:?}"
            );
            assert!(
                module.starts_with("ngx_") && module.ends_with("_module"),
                "odd module name {module:?} for {name:?}"
            );
        }
    }

    #[test]
    fn every_inert_module_has_an_unsupported_directive() {
        for &(name, module, absent) in NGINX_DIRECTIVES {
            if absent != Inert {
                continue;
            }
            // The mail modules are all switched on by the `mail` block.
            let activator = if module.starts_with("ngx_mail_") {
                NGINX_DIRECTIVES
                    .iter()
                    .any(|&(n, _, a)| n == "mail" && a == Unsupported)
            } else {
                NGINX_DIRECTIVES
                    .iter()
                    .any(|&(_, m, a)| m == module && a == Unsupported)
            };
            assert!(
                activator,
                "{name:?} is inert but {module} has nothing to refuse"
            );
        }
    }

    /// Checks each (name, module, treatment) of `expected` against the table.
    fn check(expected: &[(&str, &str, Absent)]) {
        for &(name, module, absent) in expected {
            assert_eq!(lookup(name), Some((module, absent)), "{name}");
        }
    }

    #[test]
    fn modules_shoal_lacks() {
        check(&[
            // The FastCGI, uwsgi and SCGI modules are shoal's but for these (refused: they
            // would change what it does).
            ("uwsgi_string", "ngx_http_uwsgi_module", Unsupported),
            ("image_filter_buffer", "ngx_http_image_filter_module", Inert),
            ("mp4_buffer_size", "ngx_http_mp4_module", Inert),
            ("xslt_stylesheet", "ngx_http_xslt_module", Unsupported),
            ("image_filter", "ngx_http_image_filter_module", Unsupported),
            ("perl", "ngx_http_perl_module", Unsupported),
            ("mp4", "ngx_http_mp4_module", Unsupported),
            ("geoip_country", "ngx_http_geoip_module", Unsupported),
            ("mail", "ngx_mail_core_module", Unsupported),
            ("smtp_auth", "ngx_mail_smtp_module", Inert),
        ]);
    }

    #[test]
    fn tls_and_newer_protocols_are_refused() {
        check(&[
            ("ssl_ech_file", "ngx_http_ssl_module", Unsupported),
            ("ssl_engine", "ngx_core_module", Unsupported),
            ("http2", "ngx_http_v2_module", Unsupported),
            ("http3", "ngx_http_v3_module", Unsupported),
            ("quic_retry", "ngx_http_v3_module", Unsupported),
            ("ssl_preread", "ngx_stream_ssl_preread_module", Unsupported),
        ]);
    }

    #[test]
    fn directives_shoal_implements_are_listed_too() {
        check(&[
            ("thread_pool", "ngx_core_module", Unsupported),
            ("worker_connections", "ngx_core_module", Unsupported),
            ("include", "ngx_core_module", Unsupported),
            ("aio", "ngx_http_core_module", Unsupported),
            ("open_file_cache", "ngx_http_core_module", Unsupported),
            ("listen", "ngx_http_core_module", Unsupported),
            ("proxy_pass", "ngx_http_proxy_module", Unsupported),
            ("proxy_cache_path", "ngx_http_proxy_module", Unsupported),
            ("gzip_types", "ngx_http_gzip_module", Unsupported),
            ("gzip_vary", "ngx_http_gzip_module", Unsupported),
            (
                "split_clients",
                "ngx_http_split_clients_module",
                Unsupported,
            ),
            ("hash", "ngx_http_upstream_module", Unsupported),
            ("access_log", "ngx_http_log_module", Unsupported),
            ("stub_status", "ngx_http_stub_status_module", Unsupported),
            ("stream", "ngx_stream_core_module", Unsupported),
            ("proxy_timeout", "ngx_stream_proxy_module", Unsupported),
        ]);
    }

    #[test]
    fn unknown_names_are_not_found() {
        assert_eq!(lookup("no_such_directive"), None);
        assert_eq!(lookup(""), None);
        assert_eq!(lookup("Listen"), None);
        assert_eq!(lookup("lua_package_path"), None);
    }
}
