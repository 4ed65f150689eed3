//! nginx's `limit_except METHOD ... { ... }`: a request whose method is not listed (`GET`
//! lists `HEAD` too; a method nginx does not know is never listed) is served with the block's
//! configuration: the location's, merged, plus what the block says (`allow`, `deny`,
//! `auth_basic`, `access_log`, `proxy_pass`).
//!
//! As in nginx, the switch is made when the location is found, so for such a request the
//! location's rewrite directives (`return`, `rewrite`, `if`) do not run: they are not the
//! block's. The block is not inherited by nested locations.

use std::sync::Arc;

use shoal_conf::{Directive, Error};

use super::location::{LocationConf, Match};
use super::LocConf;
use crate::conf::{err, Args, Builder, Command, Ctx, Scope};

pub static DIRECTIVES: &[Command] = &[Command::block(
    "limit_except",
    Ctx::LOCATION,
    Args::ONE_OR_MORE,
    set_limit_except,
)];

/// The methods `limit_except` may name (nginx 1.22's list).
const METHODS: &[&str] = &[
    "GET",
    "HEAD",
    "POST",
    "PUT",
    "DELETE",
    "MKCOL",
    "COPY",
    "MOVE",
    "OPTIONS",
    "PROPFIND",
    "PROPPATCH",
    "LOCK",
    "UNLOCK",
    "PATCH",
];

/// A location's `limit_except` block.
#[derive(Clone, Debug)]
pub struct LimitExcept {
    /// The methods served with the location's own configuration (upper case; `HEAD` added
    /// with `GET`).
    pub methods: Vec<&'static str>,
    /// The block's configuration, merged with the location's once that is.
    pub loc: LocConf,
}

/// The module's setting at one level: a location's block (never inherited).
#[derive(Clone, Debug, Default)]
pub struct LimitExceptLoc {
    pub block: Option<Arc<LimitExcept>>,
}

fn set_limit_except(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let Scope::Location(l) = s else {
        unreachable!("limit_except is allowed in location only")
    };
    if l.loc.limit_except.block.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    let mut methods = Vec::new();
    for a in &d.args {
        let Some(&m) = METHODS.iter().find(|m| m.eq_ignore_ascii_case(&a.value)) else {
            return Err(err(d, format!("invalid method \"{}\"", a.value)));
        };
        methods.push(m);
        if m == "GET" {
            methods.push("HEAD");
        }
    }
    // The block reads as a nameless location (nginx's): `proxy_pass` refuses a URI there.
    let mut block = LocationConf {
        kind: Match::If,
        name: String::new(),
        regex: None,
        loc: LocConf::default(),
        nested: Vec::new(),
        internal: false,
        rewrite: Vec::new(),
        if_blocks: Vec::new(),
    };
    let body = d.block.as_deref().unwrap_or_default();
    b.walk(body, Ctx::LMT, &mut Scope::Location(&mut block))?;
    l.loc.limit_except.block = Some(Arc::new(LimitExcept {
        methods,
        loc: block.loc,
    }));
    Ok(())
}

/// Merges a location's block with the location's merged configuration (called once the
/// location is merged). The block answers with the location's proxy, as nginx's nameless
/// locations do.
pub fn finish(loc: &mut LocConf) {
    let Some(mut block) = loc.limit_except.block.take() else {
        return;
    };
    let le = Arc::make_mut(&mut block);
    le.loc.merge(loc);
    super::Content::inherit(&mut le.loc, loc);
    loc.limit_except.block = Some(block);
}

/// The configuration a request with `method` is served with in a location configured as
/// `lc`: its `limit_except` block's when the method is not listed.
pub fn limited<'a>(lc: &'a LocConf, method: &str) -> Option<&'a LocConf> {
    let block = lc.limit_except.block.as_deref()?;
    (!block.methods.contains(&method)).then_some(&block.loc)
}

/// `limit_except`'s place in the module list.
pub struct Module;

impl super::modules::HttpModule for Module {
    type Loc = LimitExceptLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    /// Not inherited: a nested location has no block unless it writes one.
    fn merge(_: &mut LimitExceptLoc, _: &LimitExceptLoc) {}
}
