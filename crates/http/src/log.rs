//! nginx's error-log levels, for the messages this crate words, and how an upstream's bytes are
//! written into such a message.
//!
//! The codecs only word a message and say its level; writing it (with nginx's `*N` connection
//! number, the ` while reading response header from upstream` action and the `client: ...`
//! tail) is the server's job. Nothing here does I/O.

use std::fmt;

/// An nginx error-log level, as nginx names it in a log line (`[error]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// `alert`: something is wrong with the configuration or the server, not the peer.
    Alert,
    /// `error`: the peer did something wrong; the request fails or is cut short.
    Error,
    /// `warn`: the peer did something odd that nginx works around.
    Warn,
    /// `info`: worth knowing, nothing is wrong.
    Info,
}

impl Level {
    /// The name inside the brackets of a log line.
    pub const fn as_str(self) -> &'static str {
        match self {
            Level::Alert => "alert",
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Writes an upstream's bytes into a message as nginx does (the bytes as they are: a PHP
/// warning's newlines stay newlines), except that what is not UTF-8 is written `\xNN`, because
/// a message here is text.
pub(crate) fn write_bytes(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    for piece in bytes.utf8_chunks() {
        f.write_str(piece.valid())?;
        for b in piece.invalid() {
            write!(f, "\\x{b:02x}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Shown<'a>(&'a [u8]);

    impl fmt::Display for Shown<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write_bytes(f, self.0)
        }
    }

    #[test]
    fn utf8_as_is_the_rest_escaped() {
        assert_eq!(Shown(b"a\nb\"c").to_string(), "a\nb\"c");
        assert_eq!(Shown("caf\u{e9}".as_bytes()).to_string(), "caf\u{e9}");
        assert_eq!(Shown(b"a\xffb\xc3").to_string(), "a\\xffb\\xc3");
        assert_eq!(Level::Warn.to_string(), "warn");
        assert!(Level::Alert < Level::Info);
    }
}
