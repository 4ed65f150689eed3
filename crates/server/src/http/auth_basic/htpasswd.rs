//! An htpasswd file as nginx reads it, kept parsed until it changes.
//!
//! nginx reads the file at every request and scans it for the first line that starts with
//! `USER:`; the password field ends at CR, LF, `:` or the end of the file. A line starting
//! with `#` or CR is skipped, and so are blank ones. Its scan has one odd turn, kept here: a
//! line without `:` whose text is the start of the user's name (or the name itself) makes the
//! scan skip the line after it. Lines are indexed once per version of the file, so a lookup
//! costs a hash lookup, not a scan.
//!
//! **The cache** is per worker thread (no lock): a file is read again when its device, inode,
//! size, modification or change time differ from what a `stat` says, which is one syscall per
//! request on the worker (nginx makes an `open`, a `read` and a `close`). A user name with a
//! line feed, which nginx's scan would match across lines, matches nothing.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// One line of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Line {
    /// `LOGIN:PASSWORD...`: the password's bytes.
    Entry(Range<usize>),
    /// Text without `:` (its bytes).
    Bare(Range<usize>),
    /// Blank, a comment or starting with CR.
    Skipped,
}

/// A parsed htpasswd file.
#[derive(Debug, Default)]
pub struct Htpasswd {
    data: Vec<u8>,
    lines: Vec<Line>,
    /// Each login's lines, in order.
    logins: HashMap<Box<[u8]>, Vec<u32>>,
}

impl Htpasswd {
    pub fn parse(data: Vec<u8>) -> Htpasswd {
        let mut lines = Vec::new();
        let mut logins: HashMap<Box<[u8]>, Vec<u32>> = HashMap::new();
        let mut start = 0;
        while start < data.len() {
            let end = memchr::memchr(b'\n', &data[start..]).map_or(data.len(), |p| start + p);
            let line = &data[start..end];
            let kind = match line.first() {
                None | Some(b'#' | b'\r') => Line::Skipped,
                Some(_) => match memchr::memchr(b':', line) {
                    Some(colon) => {
                        let from = start + colon + 1;
                        let len = data[from..end]
                            .iter()
                            .position(|&c| c == b'\r' || c == b':')
                            .unwrap_or(end - from);
                        logins
                            .entry(line[..colon].into())
                            .or_default()
                            .push(lines.len() as u32);
                        Line::Entry(from..from + len)
                    }
                    None => Line::Bare(start..end),
                },
            };
            lines.push(kind);
            start = end + 1;
        }
        Htpasswd {
            data,
            lines,
            logins,
        }
    }

    /// The password field of `user`'s line, as nginx's scan finds it.
    pub fn lookup(&self, user: &[u8]) -> Option<&[u8]> {
        if user.is_empty() || memchr::memchr(b'\n', user).is_some() {
            return None;
        }
        for &i in self.logins.get(user)? {
            let i = i as usize;
            // Lines right before it that the scan reads as the start of `user` and leaves at
            // their line feed: every other one of them makes the next line skipped.
            let prefixes = self.lines[..i]
                .iter()
                .rev()
                .take_while(|l| match l {
                    Line::Bare(r) => user.starts_with(&self.data[r.clone()]),
                    _ => false,
                })
                .count();
            if prefixes % 2 == 1 {
                continue;
            }
            if let Line::Entry(r) = &self.lines[i] {
                return Some(&self.data[r.clone()]);
            }
        }
        None
    }
}

/// Why a file gave no answer: nginx's log line and status for it.
#[derive(Debug)]
pub enum FileError {
    /// `open() "PATH" failed (...)`: 403 for a missing file, 500 otherwise.
    Open(io::Error),
    /// `pread() "PATH" failed (...)`: 500.
    Read(io::Error),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Version {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Version {
    fn of(m: &std::fs::Metadata) -> Version {
        Version {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// Files kept per worker before the cache is emptied (a bound for paths with variables).
const KEPT: usize = 64;

thread_local! {
    static CACHE: RefCell<HashMap<PathBuf, (Version, Rc<Htpasswd>)>> = RefCell::new(HashMap::new());
}

/// The file at `path`, parsed: from this worker's cache when it has not changed.
pub fn load(path: &Path) -> Result<Rc<Htpasswd>, FileError> {
    let meta = std::fs::metadata(path).map_err(FileError::Open)?;
    let version = Version::of(&meta);
    let hit = CACHE.with(|c| {
        c.borrow()
            .get(path)
            .filter(|(v, _)| *v == version)
            .map(|(_, h)| h.clone())
    });
    if let Some(h) = hit {
        return Ok(h);
    }
    let mut file = std::fs::File::open(path).map_err(FileError::Open)?;
    let mut data = Vec::with_capacity(meta.len().min(1 << 20) as usize);
    io::Read::read_to_end(&mut file, &mut data).map_err(FileError::Read)?;
    let parsed = Rc::new(Htpasswd::parse(data));
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= KEPT {
            c.clear();
        }
        c.insert(path.to_path_buf(), (version, parsed.clone()));
    });
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(h: &'a Htpasswd, user: &str) -> Option<&'a str> {
        h.lookup(user.as_bytes())
            .map(|p| std::str::from_utf8(p).unwrap())
    }

    #[test]
    fn lines_as_nginx_reads_them() {
        let h = Htpasswd::parse(
            b"# comment:x\n\nalice:{PLAIN}one\n trail:{PLAIN}x\ncolon:{PLAIN}sec:ret\n\
              crlf:{PLAIN}secret\r\nalice:{PLAIN}second\n\rcr:{PLAIN}x\nempty:\nlast:{PLAIN}end"
                .to_vec(),
        );
        assert_eq!(find(&h, "alice"), Some("{PLAIN}one"), "the first line wins");
        assert_eq!(find(&h, "trail"), None);
        assert_eq!(find(&h, " trail"), Some("{PLAIN}x"));
        assert_eq!(find(&h, "colon"), Some("{PLAIN}sec"));
        assert_eq!(find(&h, "crlf"), Some("{PLAIN}secret"));
        assert_eq!(find(&h, "# comment"), None);
        assert_eq!(find(&h, "\rcr"), None);
        assert_eq!(find(&h, "empty"), Some(""));
        assert_eq!(find(&h, "last"), Some("{PLAIN}end"));
        assert_eq!(find(&h, "nobody"), None);
        assert_eq!(find(&h, ""), None);
        assert_eq!(find(&h, "ali"), None);
    }

    #[test]
    fn a_bare_prefix_line_hides_the_next_one() {
        let h = Htpasswd::parse(b"alice\nalice:{PLAIN}a\nalice:{PLAIN}b\n".to_vec());
        assert_eq!(find(&h, "alice"), Some("{PLAIN}b"));
        let h = Htpasswd::parse(b"ali\nalice:{PLAIN}a\n".to_vec());
        assert_eq!(find(&h, "alice"), None);
        // Two such lines: the second is the one skipped, and the entry is read.
        let h = Htpasswd::parse(b"a\nal\nalice:{PLAIN}a\n".to_vec());
        assert_eq!(find(&h, "alice"), Some("{PLAIN}a"));
        // Not a prefix (or ended by CR): no effect.
        let h = Htpasswd::parse(b"bob\nalice:{PLAIN}a\nali\r\nalice:{PLAIN}b\n".to_vec());
        assert_eq!(find(&h, "alice"), Some("{PLAIN}a"));
        assert_eq!(find(&h, "ali\nce"), None);
    }

    #[test]
    fn the_cache_follows_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("htpasswd");
        std::fs::write(&path, "alice:{PLAIN}one\n").unwrap();
        let a = load(&path).unwrap();
        let b = load(&path).unwrap();
        assert!(Rc::ptr_eq(&a, &b), "an unchanged file is not parsed again");
        std::fs::write(&path, "alice:{PLAIN}two-longer\n").unwrap();
        let c = load(&path).unwrap();
        assert_eq!(c.lookup(b"alice"), Some(&b"{PLAIN}two-longer"[..]));
        // A new file renamed over it (same size): a new inode.
        let tmp = dir.path().join("new");
        std::fs::write(&tmp, "alice:{PLAIN}333-longer\n").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert_eq!(
            load(&path).unwrap().lookup(b"alice"),
            Some(&b"{PLAIN}333-longer"[..])
        );
        assert!(matches!(
            load(&dir.path().join("missing")),
            Err(FileError::Open(e)) if e.kind() == io::ErrorKind::NotFound
        ));
        assert!(matches!(load(dir.path()), Err(FileError::Read(_))));
    }
}
