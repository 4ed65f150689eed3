//! nginx's http modules, as a list: what each adds to a request's way (its location-level
//! configuration, its preaccess and access handlers, its header filter, its variables).
//!
//! A module is a file or folder with a `Module` type implementing [`HttpModule`] (the hooks it
//! does not need do nothing), and one line in [`http_modules!`]'s list below: that line gives
//! `LocConf` the module's configuration (as `lc.NAME`, merged http → server → location), the
//! registry its directives, the phases its handlers and the header-filter chain its filter, in
//! the list's order. Nothing in the protocol code changes for a module.
//!
//! The order is nginx's: post-read handlers (`realip`, with the server's configuration, before
//! the server's rewrites), preaccess handlers (`realip` again with the location's, then
//! `limit_req` before `limit_conn`), access handlers
//! (`allow`/`deny`, then `auth_basic`) combined by `satisfy`, then the header filters as nginx
//! runs them (not-modified, headers, gunzip, addition, sub, charset, ssi, gzip, range; the writer's own framing
//! comes after).
//! Every hook is called through the list with static dispatch: a module's unused hook costs
//! nothing.

use std::cell::RefCell;
use std::rc::Rc;

use super::access::{Answer, Client, Decision, Gate};
use super::reply::Reply;
use super::request::Req;
use super::rewrite;
use super::upstream::record::Record;
use super::LocConf;
use crate::conf::Command;
use crate::log::Level;
use crate::variables::{Template, Vars};

/// What a phase handler or a filter sees of a request.
pub struct Cx<'a, 's, 'r> {
    pub r: &'a Req<'s, 'r>,
    /// The location's configuration.
    pub lc: &'a LocConf,
    /// The rewrite state: the current URI, arguments, captures and `set` variables.
    pub rw: &'a rewrite::State,
    /// A proxied request's exchange (`$upstream_*` in `add_header`).
    pub upstream: Option<&'a Rc<RefCell<Record>>>,
}

impl Cx<'_, '_, '_> {
    /// The client's address as the access modules see it (realip's, once it changed it).
    pub fn client(&self) -> Client {
        match self.r.peer() {
            Some(p) => Client::Inet(p.ip()),
            None => Client::Unix,
        }
    }

    /// Evaluates a template with the request's variables.
    pub fn eval(&self, t: &Template) -> String {
        self.r.vars_rw(self.rw, self.lc).eval(t)
    }

    /// Writes a module's error-log line with the request's context.
    pub fn log(&self, level: Level, line: &dyn std::fmt::Display) {
        crate::conn_log!(level, self.r.info.number, "{line}{}", self.r.log_ctx());
    }
}

/// What an access module said, and the header a refusal sends with it (`WWW-Authenticate`).
pub struct Access {
    pub answer: Answer,
    pub header: Option<(&'static str, String)>,
}

impl Access {
    /// Nothing to say: the next module decides.
    pub const DECLINED: Access = Access {
        answer: Answer::Declined,
        header: None,
    };
}

/// A module's part in a request's way; every hook does nothing unless the module says.
#[allow(async_fn_in_trait)] // One worker thread: futures are never sent across threads.
pub trait HttpModule {
    /// The module's location-level configuration (`lc.NAME`).
    type Loc: Default + Clone + std::fmt::Debug;
    /// Its directives.
    const DIRECTIVES: &'static [Command];
    /// Its variables' names; a name ending in `*` is a family (`proxy_protocol_tlv_*`). Each
    /// is valued by [`HttpModule::variable`], else through the request's
    /// [`super::request::Extras`].
    const VARIABLES: &'static [&'static str] = &[];

    /// Fills what a level left unset from its parent.
    fn merge(loc: &mut Self::Loc, parent: &Self::Loc);

    /// Computes one of the module's variables from the request (`loc`: the configuration of
    /// the location the template is evaluated in, when known); `None` leaves it to the value
    /// the module set in the request's extras.
    fn variable(
        _loc: Option<&Self::Loc>,
        _name: &str,
        _vars: &Vars<'_>,
        _out: &mut String,
    ) -> Option<bool> {
        None
    }

    /// nginx's post-read phase, once per request before the server's rewrites, with the
    /// server's configuration (`realip`).
    fn post_read(_loc: &Self::Loc, _cx: &Cx<'_, '_, '_>) {}

    /// Whether the module has a preaccess handler (set with [`HttpModule::preaccess`]): the
    /// phase awaits only theirs, so a module without one costs nothing there.
    const PREACCESS: bool = false;

    /// Whether the module has an access handler (set with [`HttpModule::access`]).
    const ACCESS: bool = false;

    /// Whether the module's preaccess or access handler has work in a location with `loc` (a
    /// test of its configuration, no more): a request in a location where no module has any
    /// skips both phases, and their futures.
    fn in_use(_loc: &Self::Loc) -> bool {
        Self::PREACCESS || Self::ACCESS
    }

    /// nginx's preaccess phase, once per request (`limit_req`, `limit_conn`): an answer ends
    /// the request there (`error_page` applies). A module that has one says
    /// `const PREACCESS: bool = true`.
    async fn preaccess(_loc: &Self::Loc, _cx: &Cx<'_, '_, '_>) -> Option<Box<Reply>> {
        None
    }

    /// nginx's access phase (`allow`/`deny`, `auth_basic`): the answers of all modules are
    /// combined by `satisfy`. A module that has one says `const ACCESS: bool = true`.
    async fn access(_loc: &Self::Loc, _cx: &Cx<'_, '_, '_>) -> Access {
        Access::DECLINED
    }

    /// nginx's header filter: changes the answer before its head is written.
    fn header_filter(_loc: &Self::Loc, _cx: &Cx<'_, '_, '_>, _reply: &mut Box<Reply>) {}
}

/// Declares the module list: the configuration struct, the directive tables, the phase
/// handlers and the header filters, all in the list's order.
macro_rules! http_modules {
    ($( $(#[$doc:meta])* $field:ident: $module:ty, )*) => {
        /// Every module's location-level configuration, one field each (reached as
        /// `lc.NAME`: `LocConf` dereferences to it).
        #[derive(Clone, Debug, Default)]
        pub struct Modules {
            $( $(#[$doc])* pub $field: <$module as HttpModule>::Loc, )*
        }

        impl Modules {
            /// Fills what a level left unset from its parent, module by module.
            pub fn merge(&mut self, parent: &Modules) {
                $( <$module as HttpModule>::merge(&mut self.$field, &parent.$field); )*
            }
        }

        /// The modules' directive tables, for the registry.
        pub static DIRECTIVE_TABLES: &[&[Command]] = &[
            $( <$module as HttpModule>::DIRECTIVES, )*
        ];

        /// Whether a module provides the variable `name` (a family's member is kept for the
        /// process's life, as configured names are).
        pub fn has_variable(name: &str) -> Option<&'static str> {
            $(
                for v in <$module as HttpModule>::VARIABLES {
                    if *v == name {
                        return Some(v);
                    }
                    if let Some(family) = v.strip_suffix('*') {
                        if name.starts_with(family) {
                            return Some(crate::conf::intern(name));
                        }
                    }
                }
            )*
            None
        }

        /// A module's variable computed by its module: `None` when no module computes it.
        pub fn variable(name: &str, vars: &Vars<'_>, out: &mut String) -> Option<bool> {
            $(
                if provides(<$module as HttpModule>::VARIABLES, name) {
                    let loc = vars.lc.map(|lc| &lc.$field);
                    return <$module as HttpModule>::variable(loc, name, vars, out);
                }
            )*
            None
        }

        /// nginx's post-read phase, in the server's configuration.
        pub fn post_read_phase(cx: &Cx<'_, '_, '_>) {
            let lc = cx.lc;
            $( <$module as HttpModule>::post_read(&lc.$field, cx); )*
        }

        /// nginx's preaccess phase: the first module that answers ends it.
        async fn preaccess_phase(cx: &Cx<'_, '_, '_>) -> Option<Box<Reply>> {
            let lc = cx.lc;
            $(
                if <$module as HttpModule>::PREACCESS {
                    if let Some(reply) = <$module as HttpModule>::preaccess(&lc.$field, cx).await {
                        return Some(reply);
                    }
                }
            )*
            None
        }

        /// Whether any module's preaccess or access handler has work in `lc`.
        fn access_in_use(lc: &LocConf) -> bool {
            false $(
                || ((<$module as HttpModule>::PREACCESS || <$module as HttpModule>::ACCESS)
                    && <$module as HttpModule>::in_use(&lc.$field))
            )*
        }

        /// nginx's access phase: each module's answer fed to the `satisfy` gate, in order.
        async fn access_phase(
            cx: &Cx<'_, '_, '_>,
            headers: &mut Vec<(&'static str, String)>,
        ) -> Decision {
            let lc = cx.lc;
            let mut gate = Gate::new(lc.access.satisfy());
            $(
                if <$module as HttpModule>::ACCESS {
                    let said = <$module as HttpModule>::access(&lc.$field, cx).await;
                    if let Some(h) = said.header {
                        headers.push(h);
                    }
                    if let Some(d) = gate.feed(said.answer) {
                        return d;
                    }
                }
            )*
            gate.end()
        }

        /// The header filters, in the list's order (nginx's).
        pub fn header_filters(cx: &Cx<'_, '_, '_>, reply: &mut Box<Reply>) {
            let lc = cx.lc;
            $( <$module as HttpModule>::header_filter(&lc.$field, cx, reply); )*
        }
    };
}

/// Whether a module's variable list has `name` (itself, or as a member of a family).
fn provides(list: &[&str], name: &str) -> bool {
    list.iter().any(|v| match v.strip_suffix('*') {
        Some(family) => name.starts_with(family),
        None => *v == name,
    })
}

http_modules! {
    /// `msie_padding`, `msie_refresh`: nginx's own special answers, as its special-response
    /// handler shapes them before any header filter.
    msie: super::msie::Module,
    /// `set_real_ip_from`, `real_ip_header`, `real_ip_recursive` (post-read, preaccess).
    realip: super::realip::Module,
    /// `$proxy_protocol_*`: what a `listen ... proxy_protocol` connection's header said.
    proxy_protocol: super::proxy_protocol::Module,
    /// `valid_referers`, `$invalid_referer`.
    referer: super::referer::Module,
    /// `modern_browser`, `ancient_browser`, their values; `$modern_browser`,
    /// `$ancient_browser`, `$msie`.
    browser: super::browser::Module,
    /// `secure_link*`, `$secure_link`, `$secure_link_expires`.
    secure_link: super::secure_link::Module,
    /// `limit_req_zone`, `limit_req` (preaccess).
    limit_req: super::limit_req::Module,
    /// `limit_conn_zone`, `limit_conn` (preaccess).
    limit_conn: super::limit_conn::Module,
    /// `limit_except` (the location's configuration for the methods it does not list).
    limit_except: super::limit_except::Module,
    /// `allow`, `deny`, `satisfy` (access).
    access: super::access::Module,
    /// `auth_basic`, `auth_basic_user_file` (access).
    auth_basic: super::auth_basic::Module,
    /// `auth_request`, `auth_request_set` (access: a subrequest decides).
    auth_request: super::auth_request::Module,
    /// `auth_delay`.
    auth_delay: super::auth_delay::Module,
    /// `http2`, `http2_*`, `$http2` (the HTTP/2 connection reads them).
    http2: super::h2::conf::Module,
    /// `limit_rate`, `limit_rate_after`.
    limit_rate: super::limit_rate::Module,
    /// `client_body_temp_path`, `client_body_in_file_only`, `client_body_in_single_buffer`.
    client_body: super::client_body::Module,
    /// `postpone_output`, `chunked_transfer_encoding`, `send_lowat`, `proxy_send_lowat`,
    /// `fastcgi_send_lowat`.
    framing: super::framing::Module,
    /// `*_hash_max_size`, `*_hash_bucket_size`, `connection_pool_size`, `request_pool_size`
    /// (checked; they size nothing here).
    hash_sizes: super::hash_sizes::Module,
    /// `resolver`, `resolver_timeout` (the proxy's run-time lookups).
    resolver: crate::resolver::conf::Module,
    /// `post_action` (run by the HTTP/1 connection once the answer is out).
    post_action: super::post_action::Module,
    /// `subrequest_output_buffer_size` (checked and kept for the subrequests' modules).
    subrequest: super::subrequest::Module,
    /// `mirror`, `mirror_request_body` (precontent: background subrequests).
    mirror: super::mirror::Module,
    /// `autoindex*` (a content handler, reached from the index module's).
    autoindex: super::autoindex::Module,
    /// `random_index` (a content handler, before the index module's).
    random_index: super::random_index::Module,
    /// `dav_methods`, `dav_access`, `create_full_put_path`, `min_delete_depth` (a content
    /// handler for PUT, DELETE, MKCOL, COPY and MOVE, before the static module).
    dav: super::dav::Module,
    /// `flv` (the location's content handler).
    flv: super::flv::Module,
    /// `slice`'s first header filter, first of all as nginx's: a first slice's 206 made a
    /// 200 of the whole, which the filters after it see.
    slice_first: super::slice::First,
    /// The not-modified filter: 304 and 412 for `If-*` on a 200.
    not_modified: super::not_modified::Module,
    /// `expires`, `add_header` (the headers filter).
    headers: super::headers::Module,
    /// `userid*`, `$uid_got`, `$uid_set`, `$uid_reset`: the cookie after `add_header`'s.
    userid: super::userid::Module,
    /// `gunzip`, `gunzip_buffers`: a gzip answer inflated for a client that takes no gzip.
    gunzip: super::gzip::gunzip::Module,
    /// `add_before_body`, `add_after_body`, `addition_types`: subrequests' bodies around
    /// the answer's.
    addition: super::addition::Module,
    /// `sub_filter*`: the sub filter (rewrites the body before it is recoded and compressed).
    sub: super::sub::Module,
    /// `charset*`: the charset filter (recodes before gzip compresses).
    charset: super::charset::Module,
    /// `ssi*`: the SSI filter (after charset, before gzip, as nginx's).
    ssi: super::ssi::Module,
    /// `gzip*`: the filter's decision.
    gzip_filter: super::gzip::Module,
    /// `slice`, `$slice_range`: the client's range of a sliced answer (before the range
    /// filter, which it does for itself), and the body filter that fetches the next slices.
    slice: super::slice::Module,
    /// The range filter: 206, multipart, 416 (`max_ranges`).
    range: super::range_filter::Module,
    /// `add_trailer`: the answer goes chunked, the fields after its last chunk.
    trailers: super::trailers::Module,
    /// `fastcgi_*`: FastCGI upstreams (a content handler, on the upstream layer).
    fastcgi: super::fastcgi::Module,
    /// `uwsgi_*`: uwsgi upstreams.
    uwsgi: super::uwsgi::Module,
    /// `scgi_*`: SCGI upstreams.
    scgi: super::scgi::Module,
    /// `memcached_*`: memcached as an upstream.
    memcached: super::memcached::Module,
    /// `grpc_*`: gRPC upstreams (an HTTP/2 client).
    grpc: super::grpc::Module,
}

/// Whether the preaccess and access phases have work for a request in `cx`'s location. When
/// they have none, they are done (an internal redirect later does not run preaccess again, as
/// if they had run) and the request is allowed.
pub fn access_needed(cx: &Cx<'_, '_, '_>) -> bool {
    if access_in_use(cx.lc) {
        return true;
    }
    cx.r.extras.set_preaccess_done();
    false
}

/// The preaccess and access phases of a request in `cx`'s location: `Some(answer)` when they
/// end it (a limit's refusal or delay's end, a 401 or 403; `error_page` may take over).
///
/// Called only where some module has work ([`access_needed`]); elsewhere the request is
/// allowed without awaiting anything.
pub async fn access_phases(cx: &Cx<'_, '_, '_>) -> Option<Box<Reply>> {
    // Once per request: an internal redirect (an `error_page`, `try_files`) does not count a
    // request twice against a limit.
    if !cx.r.extras.preaccess_done() {
        cx.r.extras.set_preaccess_done();
        if let Some(reply) = preaccess_phase(cx).await {
            return Some(reply);
        }
    }
    let mut headers = Vec::new();
    match access_phase(cx, &mut headers).await {
        Decision::Allow => None,
        Decision::Refuse {
            status,
            forbidden_by_rule,
        } => {
            if forbidden_by_rule {
                cx.log(Level::Error, &super::access::FORBIDDEN_BY_RULE);
            }
            if let Some(d) = cx.lc.auth_delay.delay_for(status) {
                cx.log(Level::Info, &super::auth_delay::DELAYING);
                if !super::auth_delay::wait(d, cx.r.client).await {
                    cx.log(Level::Info, &super::auth_delay::CLIENT_CLOSED);
                    return Some(Box::new(Reply::new(499)));
                }
            }
            let mut reply = Box::new(super::reply::error_reply(status, cx.lc));
            // A `WWW-Authenticate` an access module set stays on whatever refusal ends the
            // phase (nginx keeps it in the answer's headers: a 500 of `auth_request` after
            // `auth_basic`'s 401 under `satisfy any` has it too).
            for (name, value) in headers {
                reply.headers.push((name, value.into()));
            }
            Some(reply)
        }
    }
}
