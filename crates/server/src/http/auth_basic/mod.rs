//! nginx's ngx_http_auth_basic_module: `auth_basic` and `auth_basic_user_file`.
//!
//! [`AuthBasicLoc::check`] is the module's access-phase handler. In nginx's order: no realm or
//! no file here, or a realm that evaluates to `off`, is no answer; a request without usable
//! `Basic` credentials gets 401 with `WWW-Authenticate: Basic realm="REALM"` (logged
//! `no user/password was provided for basic authentication` at `info`); then the file (a path
//! with variables, relative to the configuration's directory) is looked up: missing is 403
//! (`open() "FILE" failed (2: ...)` at `error`), unreadable 500 (the same at `crit`, or
//! `pread()` for a read error); an unknown user is 401 (`user "U" was not found in "FILE"`), a
//! wrong password 401 (`user "U": password mismatch`), both at `error`. The file's formats are
//! in [`crypt`], its lines and the per-worker cache that re-reads it when it changes in
//! [`htpasswd`].
//!
//! **Off the worker.** A `$apr1$` check costs ~0.2 ms, sha512-crypt 1–2 ms, bcrypt 2 ms at
//! cost 5 and 60+ ms at cost 10: on the worker that is the whole worker's stall, every
//! connection on it waiting, and a stream of wrong passwords would be a cheap way to stop a
//! server. So costly schemes run on a small process-wide pool (`auth_basic`, one thread per
//! core up to 8, 1024 waiting at most) and the request awaits the result; `{PLAIN}`, `{SHA}`,
//! `{SSHA}` and DES are cheaper than the round trip and run inline. A full queue answers 503
//! with the pool's `queue overflow` line at `error`, as `aio threads` does.
//!
//! Credentials are read as nginx reads them (`Basic` in any case, spaces, base64 up to the
//! first `=`), and [`credentials`] serves `$remote_user` too, which nginx sets from the header
//! whatever the check says.

pub mod crypt;
pub mod htpasswd;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use shoal_conf::{Directive, Error};
use shoal_io::pool::ThreadPool;

use crate::conf::{err, set_once, Args, Builder, Command, Ctx, Scope};
use crate::http::access::Answer;
use crate::http::loc_conf;
use crate::log::Level;
use crate::variables::Template;

pub static DIRECTIVES: &[Command] = &[
    Command::new(
        "auth_basic",
        Ctx::HSL.or(Ctx::LMT),
        Args::ONE,
        set_auth_basic,
    ),
    Command::new(
        "auth_basic_user_file",
        Ctx::HSL.or(Ctx::LMT),
        Args::ONE,
        set_user_file,
    ),
];

/// `auth_basic_user_file`: a path, or text with variables resolved per request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserFile {
    Path(PathBuf),
    Template {
        template: Template,
        /// The configuration's directory, for a value that evaluates relative.
        conf_prefix: PathBuf,
    },
}

impl UserFile {
    fn path(&self, eval: &mut dyn FnMut(&Template) -> String) -> PathBuf {
        match self {
            UserFile::Path(p) => p.clone(),
            UserFile::Template {
                template,
                conf_prefix,
            } => {
                let p = PathBuf::from(value(template, eval));
                if p.is_absolute() {
                    p
                } else {
                    conf_prefix.join(p)
                }
            }
        }
    }
}

/// A template's value: its text when it has no variables, else what `eval` says.
fn value(t: &Template, eval: &mut dyn FnMut(&Template) -> String) -> String {
    if !t.is_static() {
        return eval(t);
    }
    t.pieces
        .iter()
        .map(|p| match p {
            crate::variables::Piece::Text(s) => s.as_str(),
            crate::variables::Piece::Var(_) => "",
        })
        .collect()
}

/// The module's location-level configuration.
#[derive(Clone, Debug, Default)]
pub struct AuthBasicLoc {
    /// `auth_basic`: the realm (text with variables; `off` disables).
    pub realm: Option<Template>,
    pub user_file: Option<UserFile>,
}

/// A request's `Basic` credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// `$remote_user`.
    pub user: Vec<u8>,
    pub password: Vec<u8>,
}

/// The credentials of an `Authorization` header, as nginx's `ngx_http_auth_basic_user` reads
/// them: `Basic` (any case) and spaces, base64, a user of at least one byte before the first
/// `:`.
pub fn credentials(authorization: Option<&[u8]>) -> Option<Credentials> {
    let value = authorization?;
    let scheme = value.get(..6)?;
    if !scheme.eq_ignore_ascii_case(b"basic ") {
        return None;
    }
    let encoded = &value[6..];
    let start = encoded.iter().position(|&c| c != b' ')?;
    let decoded = crypt::base64_decode(&encoded[start..])?;
    let colon = memchr::memchr(b':', &decoded)?;
    if colon == 0 {
        return None;
    }
    Some(Credentials {
        user: decoded[..colon].to_vec(),
        password: decoded[colon + 1..].to_vec(),
    })
}

/// The module's answer for a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub answer: Answer,
    /// For a 401: the `WWW-Authenticate` value.
    pub www_authenticate: Option<String>,
    /// Lines for the error log (the request's context follows each), at their levels.
    pub lines: Vec<(Level, String)>,
}

impl Outcome {
    fn declined() -> Outcome {
        Outcome {
            answer: Answer::Declined,
            www_authenticate: None,
            lines: Vec::new(),
        }
    }

    fn status(status: u16, level: Level, line: String) -> Outcome {
        Outcome {
            answer: Answer::Status(status),
            www_authenticate: None,
            lines: vec![(level, line)],
        }
    }

    fn challenge(realm: &str, line: Option<(Level, String)>) -> Outcome {
        Outcome {
            answer: Answer::Status(401),
            www_authenticate: Some(format!("Basic realm=\"{realm}\"")),
            lines: line.into_iter().collect(),
        }
    }
}

/// The pool password checks run on.
fn pool() -> Option<&'static ThreadPool> {
    static POOL: OnceLock<Option<ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
        ThreadPool::builder("auth_basic")
            .threads(threads)
            .max_queue(1024)
            .build()
            .ok()
    })
    .as_ref()
}

/// Why a check gave no verdict.
enum Stalled {
    /// The pool's queue is full (its message).
    Overflow(String),
    /// The check panicked (a bug).
    Failed(String),
}

/// Checks `password` against `hash`, on the pool when it is costly.
async fn verify(password: Vec<u8>, hash: Vec<u8>) -> Result<crypt::Verify, Stalled> {
    if !crypt::is_costly(&hash) {
        return Ok(crypt::verify(&password, &hash));
    }
    let Some(pool) = pool() else {
        return Ok(crypt::verify(&password, &hash));
    };
    match pool.post(move || crypt::verify(&password, &hash)) {
        Ok(done) => done.await.map_err(|e| Stalled::Failed(format!("{e:?}"))),
        Err(overflow) => Err(Stalled::Overflow(overflow.to_string())),
    }
}

impl AuthBasicLoc {
    /// Fills what this level left unset from its parent (each directive on its own, as nginx
    /// merges them).
    pub fn merge(&mut self, parent: &Self) {
        crate::conf::merge(&mut self.realm, &parent.realm);
        crate::conf::merge(&mut self.user_file, &parent.user_file);
    }

    /// The access-phase check of a request with this `Authorization` header; `eval` evaluates
    /// the realm's and the file's variables (before any wait).
    pub async fn check(
        &self,
        authorization: Option<&[u8]>,
        eval: &mut dyn FnMut(&Template) -> String,
    ) -> Outcome {
        let (Some(realm), Some(user_file)) = (&self.realm, &self.user_file) else {
            return Outcome::declined();
        };
        let realm = value(realm, eval);
        if realm == "off" {
            return Outcome::declined();
        }
        let Some(creds) = credentials(authorization) else {
            return Outcome::challenge(
                &realm,
                Some((
                    Level::Info,
                    "no user/password was provided for basic authentication".into(),
                )),
            );
        };
        let path = user_file.path(eval);
        let file = match htpasswd::load(&path) {
            Ok(f) => f,
            Err(e) => return file_error(&path, e),
        };
        let user = String::from_utf8_lossy(&creds.user).into_owned();
        let Some(hash) = file.lookup(&creds.user).map(<[u8]>::to_vec) else {
            return Outcome::challenge(
                &realm,
                Some((
                    Level::Error,
                    format!("user \"{user}\" was not found in \"{}\"", path.display()),
                )),
            );
        };
        drop(file);
        match verify(creds.password, hash).await {
            Ok(crypt::Verify::Match) => Outcome {
                answer: Answer::Ok,
                www_authenticate: None,
                lines: Vec::new(),
            },
            Ok(crypt::Verify::Mismatch) => Outcome::challenge(
                &realm,
                Some((Level::Error, format!("user \"{user}\": password mismatch"))),
            ),
            Ok(crypt::Verify::Unsupported(scheme)) => Outcome::status(
                500,
                Level::Crit,
                format!(
                    "user \"{user}\" in \"{}\" has a \"{scheme}\" password, which shoal cannot \
                     check",
                    path.display()
                ),
            ),
            Err(Stalled::Overflow(m)) => Outcome::status(503, Level::Error, m),
            Err(Stalled::Failed(m)) => {
                Outcome::status(500, Level::Alert, format!("password check failed: {m}"))
            }
        }
    }
}

fn file_error(path: &Path, e: htpasswd::FileError) -> Outcome {
    let (call, e) = match e {
        htpasswd::FileError::Open(e) => ("open()", e),
        htpasswd::FileError::Read(e) => ("pread()", e),
    };
    let line = format!(
        "{call} \"{}\" failed {}",
        path.display(),
        shoal_conf::os_error(&e)
    );
    if call == "open()" && e.kind() == std::io::ErrorKind::NotFound {
        Outcome::status(403, Level::Error, line)
    } else {
        Outcome::status(500, Level::Crit, line)
    }
}

fn set_auth_basic(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let realm = Template::compile(&d.args[0].value).map_err(|m| err(d, m))?;
    set_once(&mut loc_conf(s).auth_basic.realm, realm, d)
}

fn set_user_file(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let text = &d.args[0].value;
    let template = Template::compile(text).map_err(|m| err(d, m))?;
    let file = if template.is_static() {
        let p = Path::new(text);
        UserFile::Path(if p.is_absolute() {
            p.to_path_buf()
        } else {
            b.conf_prefix.join(p)
        })
    } else {
        UserFile::Template {
            template,
            conf_prefix: b.conf_prefix.clone(),
        }
    };
    set_once(&mut loc_conf(s).auth_basic.user_file, file, d)
}

/// `auth_basic`'s place in the module list: its access handler.
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = AuthBasicLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut AuthBasicLoc, parent: &AuthBasicLoc) {
        loc.merge(parent);
    }

    const ACCESS: bool = true;

    fn in_use(loc: &AuthBasicLoc) -> bool {
        loc.realm.is_some()
    }

    async fn access(
        loc: &AuthBasicLoc,
        cx: &crate::http::modules::Cx<'_, '_, '_>,
    ) -> crate::http::modules::Access {
        if loc.realm.is_none() {
            return crate::http::modules::Access::DECLINED;
        }
        let out = loc
            .check(cx.r.req.header("authorization"), &mut |t| cx.eval(t))
            .await;
        for (level, line) in &out.lines {
            cx.log(*level, line);
        }
        crate::http::modules::Access {
            answer: out.answer,
            header: out.www_authenticate.map(|v| ("WWW-Authenticate", v)),
        }
    }
}

#[cfg(test)]
mod tests;
