//! The server crate's one error type: what failed ([`Kind`]) and the whole message as it is
//! logged (nginx's wording, with its context: the path, the address, the directive's value),
//! with the system error under it when there is one.
//!
//! The message is the text the error log and the `[emerg]` lines print, so an [`Error`]
//! derefs to it (`&*e`, `format!("{e}")`), and a caller adding context wraps it with
//! [`Error::context`] (the kind and source stay).

use std::fmt;
use std::io;

/// What kind of failure an [`Error`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A system call failed (open, bind, write, setuid, ...): the source is the `io::Error`.
    Io,
    /// A value is not what it must be: a directive's argument, a file's contents, a header,
    /// or a state the code does not expect (a file that shrank while being sent).
    Invalid,
    /// TLS: a certificate, a key, a configuration rustls refuses, a handshake.
    Tls,
    /// A name that could not be resolved to an address.
    Resolve,
    /// A peer broke a protocol's rules, or a protocol library failed (HTTP/2 streams).
    Protocol,
}

/// An error with its kind, its message (context included) and its system error, if any.
pub struct Error {
    kind: Kind,
    msg: Box<str>,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// A result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind` worded `msg`.
    pub fn new(kind: Kind, msg: impl Into<String>) -> Error {
        Error {
            kind,
            msg: msg.into().into_boxed_str(),
            source: None,
        }
    }

    /// A value that is not what it must be.
    pub fn invalid(msg: impl Into<String>) -> Error {
        Error::new(Kind::Invalid, msg)
    }

    /// A TLS failure.
    pub fn tls(msg: impl Into<String>) -> Error {
        Error::new(Kind::Tls, msg)
    }

    /// A name that could not be resolved.
    pub fn resolve(msg: impl Into<String>) -> Error {
        Error::new(Kind::Resolve, msg)
    }

    /// A failed system call `e`, worded `msg` (which names what was tried and usually ends
    /// with nginx's `(errno: text)`).
    pub fn io(e: io::Error, msg: impl Into<String>) -> Error {
        Error {
            kind: Kind::Io,
            msg: msg.into().into_boxed_str(),
            source: Some(Box::new(e)),
        }
    }

    /// A protocol library's error `e` (its text is the message, `e` the source).
    pub fn protocol(e: impl std::error::Error + Send + Sync + 'static) -> Error {
        Error {
            kind: Kind::Protocol,
            msg: e.to_string().into_boxed_str(),
            source: Some(Box::new(e)),
        }
    }

    /// A system call, `what` (`open() "/path"`, `fork()`), that failed with `e`: nginx's
    /// `WHAT failed (ERRNO: TEXT)`.
    pub fn failed(what: impl fmt::Display, e: io::Error) -> Error {
        let msg = format!("{what} failed {}", shoal_conf::os_error(&e));
        Error::io(e, msg)
    }

    /// The same error, its message rewritten by `f` (given the message so far): context
    /// added by a caller that knows more (the directive, the file and line).
    pub fn context(mut self, f: impl FnOnce(&str) -> String) -> Error {
        self.msg = f(&self.msg).into_boxed_str();
        self
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The system error under this one, if a system call failed.
    pub fn io_error(&self) -> Option<&io::Error> {
        self.source.as_ref()?.downcast_ref()
    }

    /// The message, as logged.
    pub fn as_str(&self) -> &str {
        &self.msg
    }
}

impl std::ops::Deref for Error {
    type Target = str;
    fn deref(&self) -> &str {
        &self.msg
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.msg)?;
        if let Some(e) = &self.source {
            write!(f, " ({e:?})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| &**e as &(dyn std::error::Error + 'static))
    }
}

impl PartialEq<str> for Error {
    fn eq(&self, other: &str) -> bool {
        *self.msg == *other
    }
}

impl PartialEq<String> for Error {
    fn eq(&self, other: &String) -> bool {
        *self.msg == **other
    }
}

impl PartialEq<&str> for Error {
    fn eq(&self, other: &&str) -> bool {
        *self.msg == **other
    }
}

/// For the callers that keep a message (a configuration error's text, a status line).
impl From<Error> for String {
    fn from(e: Error) -> String {
        e.msg.into()
    }
}

/// For the I/O paths that return `io::Result`: the system error itself when there is one
/// and no message of its own (its kind and errno intact), else an `Other` error whose text is
/// the message (what `io::Error::other` made before).
impl From<Error> for io::Error {
    fn from(mut e: Error) -> io::Error {
        if e.kind == Kind::Io && e.msg.is_empty() {
            match e.source.take().map(|s| s.downcast::<io::Error>()) {
                Some(Ok(io)) => return *io,
                Some(Err(other)) => e.source = Some(other),
                None => {}
            }
        }
        io::Error::other(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_what_is_logged_and_context_keeps_the_kind() {
        let e = Error::io(
            io::Error::from_raw_os_error(libc::ENOENT),
            "open() \"/x\" failed (2: No such file or directory)",
        );
        assert_eq!(e.to_string(), &*e);
        assert_eq!(e.kind(), Kind::Io);
        assert_eq!(e.io_error().and_then(io::Error::raw_os_error), Some(2));
        let e = e.context(|m| format!("{m} in /etc/shoal.conf:3"));
        assert_eq!(
            e,
            "open() \"/x\" failed (2: No such file or directory) in /etc/shoal.conf:3"
        );
        assert_eq!(e.kind(), Kind::Io);
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(String::from(Error::tls("bad key")), "bad key");
    }

    #[test]
    fn failed_is_nginx_wording() {
        let e = Error::failed("open() \"/x\"", io::Error::from_raw_os_error(libc::EACCES));
        assert_eq!(e, "open() \"/x\" failed (13: Permission denied)");
    }

    #[test]
    fn as_an_io_error_the_text_and_the_errno_stay() {
        let e: io::Error = Error::invalid("file shrank while being sent").into();
        assert_eq!(e.kind(), io::ErrorKind::Other);
        assert_eq!(e.to_string(), "file shrank while being sent");
        let e: io::Error = Error::io(io::Error::from_raw_os_error(libc::EPIPE), "").into();
        assert_eq!(e.raw_os_error(), Some(libc::EPIPE));
        let e: io::Error = Error::resolve("host not found").into();
        assert_eq!(e.to_string(), "host not found");
    }
}
