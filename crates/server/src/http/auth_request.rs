//! nginx's ngx_http_auth_request_module: `auth_request URI|off` and `auth_request_set $var
//! VALUE`.
//!
//! In the access phase, a [`subrequest`](crate::http::phases::subrequest) to `URI` (commonly a
//! proxied location: the oauth2-proxy pattern) decides: a 2xx allows, a 401 or 403 is the
//! answer (a 401 with the subrequest's `WWW-Authenticate`), anything else is 500, logged
//! `auth request unexpected status: N` at `error`. Whatever the status, `auth_request_set`'s
//! values are evaluated in the subrequest's context (`$upstream_http_x_user` is the auth
//! server's header) and set for the rest of the request: `proxy_set_header`, `add_header` and
//! the access log see them. The answer is combined with `allow`/`deny` and `auth_basic` by
//! `satisfy`, as nginx's access handlers are.

use shoal_conf::{Directive, Error};

use crate::conf::{err, Args, Builder, Command, Ctx, Scope};
use crate::http::access::Answer;
use crate::http::loc_conf;
use crate::http::modules::{Access, Cx};
use crate::log::Level;
use crate::variables::Template;

pub static DIRECTIVES: &[Command] = &[
    Command::new("auth_request", Ctx::HSL, Args::ONE, set_auth_request),
    Command::new(
        "auth_request_set",
        Ctx::HSL,
        Args::TWO,
        set_auth_request_set,
    ),
];

/// The module's location-level configuration.
#[derive(Clone, Debug, Default)]
pub struct AuthRequestLoc {
    /// `auth_request`: `Some(None)` is `off`.
    uri: Option<Option<String>>,
    /// `auth_request_set`s of this level (inherited only by a level that has none).
    vars: Option<Vec<(String, Template)>>,
}

fn set_auth_request(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let lc = &mut loc_conf(s).auth_request;
    if lc.uri.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let v = &d.args[0].value;
    lc.uri = Some((v != "off").then(|| v.clone()));
    Ok(())
}

fn set_auth_request_set(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let raw = &d.args[0].value;
    let name = match raw.strip_prefix('$') {
        Some(n) if !n.is_empty() => n,
        _ => return Err(err(d, format!("invalid variable name \"{raw}\""))),
    };
    // nginx adds the variable as changeable: a built-in one that is not is a duplicate.
    if crate::variables::is_builtin(name) && name != "limit_rate" {
        return Err(err(d, format!("the duplicate \"{name}\" variable")));
    }
    crate::variables::declare(name);
    let value = Template::compile(&d.args[1].value).map_err(|m| err(d, m))?;
    loc_conf(s)
        .auth_request
        .vars
        .get_or_insert_with(Vec::new)
        .push((name.to_string(), value));
    Ok(())
}

/// `auth_request`'s place in the module list (an access handler after `auth_basic`).
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = AuthRequestLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut AuthRequestLoc, parent: &AuthRequestLoc) {
        crate::conf::merge(&mut loc.uri, &parent.uri);
        crate::conf::merge(&mut loc.vars, &parent.vars);
    }

    const ACCESS: bool = true;

    fn in_use(loc: &AuthRequestLoc) -> bool {
        matches!(loc.uri, Some(Some(_)))
    }

    async fn access(loc: &AuthRequestLoc, cx: &Cx<'_, '_, '_>) -> Access {
        let Some(Some(uri)) = &loc.uri else {
            return Access::DECLINED;
        };
        let sub = crate::http::phases::subrequest(cx.r, uri).await;
        let status = sub.reply.status;
        if let Some(vars) = &loc.vars {
            let rec = sub.upstream.as_ref().map(|u| u.borrow());
            let mut v = cx.r.vars(&sub.uri, sub.lc, &[]);
            v.user = Some(&sub.user_vars);
            v.upstream = rec.as_deref();
            for (name, value) in vars {
                let text = v.eval(value);
                cx.r.extras.set_user_var(name, text);
            }
        }
        let answer = match status {
            403 => Answer::Status(403),
            401 => {
                let header = www_authenticate(&sub.reply).map(|v| ("WWW-Authenticate", v));
                return Access {
                    answer: Answer::Status(401),
                    header,
                };
            }
            200..=299 => Answer::Ok,
            // The client went away while the subrequest was proxied: the request ends as
            // nginx's does, closed without an answer.
            499 => Answer::Status(499),
            other => {
                cx.log(
                    Level::Error,
                    &format_args!(
                        "auth request unexpected status: {other} while sending to client"
                    ),
                );
                Answer::Status(500)
            }
        };
        Access {
            answer,
            header: None,
        }
    }
}

/// The subrequest's `WWW-Authenticate` (its own header, or the upstream's it passes on).
fn www_authenticate(reply: &crate::http::reply::Reply) -> Option<String> {
    let own = reply
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("www-authenticate"))
        .map(|(_, v)| v.to_string());
    own.or_else(|| {
        reply
            .extra
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("www-authenticate"))
            .map(|(_, v)| v.to_string())
    })
}
