//! `fastcgi_param`, `uwsgi_param`, `scgi_param`: the name-value pairs a CGI-style protocol
//! sends instead of HTTP headers, then (with `*_pass_request_headers`) the client's headers as
//! `HTTP_*` params, leaving out those a param already sets. Inherited as nginx inherits them:
//! a level with none of its own takes its parent's whole list.

use std::sync::Arc;

use shoal_conf::{Directive, Error};

use crate::conf::err;
use crate::http::request::Req;
use crate::variables::{Template, Vars};

/// Request headers not passed when the answer may be stored.
const CACHE_DROPPED: &[&str] = &[
    "If-Modified-Since",
    "If-Unmodified-Since",
    "If-None-Match",
    "If-Match",
    "Range",
    "If-Range",
];

/// One `*_param NAME VALUE [if_not_empty]`.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub value: Template,
    /// Left out when its value is empty.
    pub if_not_empty: bool,
}

/// Adds the directive's param to `list`.
pub fn push(list: &mut Option<Arc<Vec<Param>>>, d: &Directive) -> Result<(), Error> {
    let if_not_empty = match d.args.get(2) {
        None => false,
        Some(a) if a.value == "if_not_empty" => true,
        Some(a) => return Err(err(d, format!("invalid parameter \"{}\"", a.value))),
    };
    let value = Template::compile(&d.args[1].value).map_err(|m| err(d, m))?;
    Arc::make_mut(list.get_or_insert_with(Default::default)).push(Param {
        name: d.args[0].value.clone(),
        value,
        if_not_empty,
    });
    Ok(())
}

/// The params of a request, in order: the configured ones, then the client's headers as
/// `HTTP_*` (when `headers`), each one a param of the same name does not replace.
///
/// `body_len` is the length of a body read whole that came without `Content-Length`
/// (chunked): nginx's `$content_length` tells it once the body is read, so an empty
/// `CONTENT_LENGTH` takes it.
pub fn eval(
    list: Option<&[Param]>,
    r: &Req<'_, '_>,
    vars: &Vars<'_>,
    headers: bool,
    body_len: Option<u64>,
    cacheable: bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let list = list.unwrap_or(&[]);
    let mut out = Vec::with_capacity(list.len() + 16);
    let mut value = String::new();
    for p in list {
        value.clear();
        vars.eval_into(&p.value, &mut value);
        if let (true, Some(n)) = (value.is_empty() && p.name == "CONTENT_LENGTH", body_len) {
            value = n.to_string();
        }
        if p.if_not_empty && value.is_empty() {
            continue;
        }
        out.push((p.name.as_bytes().to_vec(), value.as_bytes().to_vec()));
    }
    if headers {
        // (Names as bytes: with `ignore_invalid_headers off` one may not be UTF-8.)
        for (name, v) in r.req.header_fields() {
            // An answer that may be stored is asked for whole and unconditionally (nginx's
            // `ngx_http_*_cache_headers`).
            if cacheable
                && CACHE_DROPPED
                    .iter()
                    .any(|h| h.as_bytes().eq_ignore_ascii_case(name))
            {
                continue;
            }
            let param = shoal_http::cgi::http_param_name(name);
            let set = list
                .iter()
                .any(|p| p.name.as_bytes().eq_ignore_ascii_case(&param));
            if !set {
                out.push((param, v.to_vec()));
            }
        }
    }
    // `*_cache_revalidate`: the expired object's validators ask for a 304 (nginx's
    // `HTTP_IF_MODIFIED_SINCE $upstream_cache_last_modified`, `HTTP_IF_NONE_MATCH
    // $upstream_cache_etag`).
    if cacheable {
        if let Some((lm, etag)) = vars.upstream.and_then(|u| u.cache_validators.as_ref()) {
            if let Some(lm) = lm {
                out.push((b"HTTP_IF_MODIFIED_SINCE".to_vec(), lm.as_bytes().to_vec()));
            }
            if let Some(etag) = etag {
                out.push((b"HTTP_IF_NONE_MATCH".to_vec(), etag.as_bytes().to_vec()));
            }
        }
    }
    out
}
