//! nginx's FastCGI module: `fastcgi_pass` and the `fastcgi_*` directives. The exchange is the
//! upstream layer's ([`crate::http::upstream`]); this module says where a request goes, the
//! params it sends ([`codec`]), and values `$fastcgi_script_name` and `$fastcgi_path_info`
//! (`fastcgi_split_path_info`, `fastcgi_index`).

pub mod codec;

use std::sync::Arc;

use shoal_conf::{Directive, Error};

use crate::conf::{err, flag_arg, merge, set_once, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;
use crate::http::modules::HttpModule;
use crate::http::upstream::cgi_like::Pass;
use crate::http::upstream::params::{self, Param};
use crate::http::upstream::UpstreamLoc;
use crate::variables::Vars;

crate::conf::conf_slots! {
    /// The FastCGI module's location-level settings; the shared ones are in `up`.
    #[derive(Clone, Debug, Default)]
    pub struct FastcgiLoc {
        keep_conn: bool = false,
    }
    others {
        pub up: UpstreamLoc,
        /// Not inherited by nested locations; `if` blocks take their location's.
        pub pass: Option<Arc<Pass>>,
        pub params: Option<Arc<Vec<Param>>>,
        pub index: Option<String>,
        /// `fastcgi_split_path_info REGEX` (two captures: the script, the path info).
        pub split_path_info: Option<shoal_pcre::Regex>,
        /// `fastcgi_catch_stderr TEXT` lines.
        pub catch_stderr: Option<Arc<Vec<String>>>,
    }
}

impl FastcgiLoc {
    fn merge(&mut self, parent: &FastcgiLoc) {
        self.merge_slots(parent);
        self.up.merge(&parent.up);
        merge(&mut self.params, &parent.params);
        merge(&mut self.index, &parent.index);
        merge(&mut self.split_path_info, &parent.split_path_info);
        merge(&mut self.catch_stderr, &parent.catch_stderr);
    }

    /// `$fastcgi_script_name` and `$fastcgi_path_info` of `uri`: split by
    /// `fastcgi_split_path_info` when it matches, and `fastcgi_index` appended to a script
    /// name ending with `/`.
    pub fn split(&self, uri: &str) -> (String, String) {
        let (mut script, info) = match &self.split_path_info {
            Some(re) => match crate::variables::capture(re, uri) {
                Some(c) => (
                    c.numbered.get(1).cloned().flatten().unwrap_or_default(),
                    c.numbered.get(2).cloned().flatten().unwrap_or_default(),
                ),
                None => (uri.to_string(), String::new()),
            },
            None => (uri.to_string(), String::new()),
        };
        if script.ends_with('/') {
            if let Some(index) = &self.index {
                script.push_str(index);
            }
        }
        (script, info)
    }
}

/// The module in the list ([`crate::http::modules`]).
pub struct Module;

impl HttpModule for Module {
    type Loc = FastcgiLoc;
    const DIRECTIVES: &'static [Command] = crate::http::upstream::conf::upstream_directives!(
        "fastcgi",
        cache,
        [
            Command::new(
                "fastcgi_pass",
                Ctx::LOCATION.or(Ctx::LIF),
                Args::ONE,
                set_pass
            ),
            Command::new("fastcgi_param", Ctx::HSL, Args::Take(2, 3), set_param),
            Command::new("fastcgi_index", Ctx::HSL, Args::ONE, set_index),
            Command::new(
                "fastcgi_split_path_info",
                Ctx::LOCATION,
                Args::ONE,
                set_split_path_info
            ),
            Command::new("fastcgi_keep_conn", Ctx::HSL, Args::Flag, set_keep_conn),
            Command::new(
                "fastcgi_catch_stderr",
                Ctx::HSL,
                Args::ONE,
                set_catch_stderr
            ),
        ]
    );
    const VARIABLES: &'static [&'static str] = &["fastcgi_script_name", "fastcgi_path_info"];

    fn merge(loc: &mut FastcgiLoc, parent: &FastcgiLoc) {
        loc.merge(parent);
    }

    fn variable(
        loc: Option<&FastcgiLoc>,
        name: &str,
        vars: &Vars<'_>,
        out: &mut String,
    ) -> Option<bool> {
        let mut uri = String::new();
        if !vars.value(&crate::variables::Var::Uri, &mut uri) {
            return Some(false);
        }
        let (script, info) = match loc {
            Some(l) => l.split(&uri),
            None => (uri, String::new()),
        };
        out.push_str(if name == "fastcgi_path_info" {
            &info
        } else {
            &script
        });
        Some(true)
    }
}

fn fastcgi<'a>(s: &'a mut Scope<'_>) -> &'a mut FastcgiLoc {
    &mut loc_conf(s).m.fastcgi
}

fn set_pass(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let f = fastcgi(s);
    if f.pass.is_some() {
        return Err(crate::conf::duplicate(d));
    }
    f.pass = Some(Arc::new(Pass::parse(d, None, None)?));
    Ok(())
}

fn set_param(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    params::push(&mut fastcgi(s).params, d)
}

fn set_index(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut fastcgi(s).index, d.args[0].value.clone(), d)
}

fn set_split_path_info(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let re = shoal_pcre::Regex::new(&d.args[0].value).map_err(|e| err(d, e.to_string()))?;
    set_once(&mut fastcgi(s).split_path_info, re, d)
}

fn set_keep_conn(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    set_once(&mut fastcgi(s).keep_conn, flag_arg(d), d)
}

fn set_catch_stderr(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let list = fastcgi(s).catch_stderr.get_or_insert_with(Default::default);
    Arc::make_mut(list).push(d.args[0].value.clone());
    Ok(())
}
