//! Real backends for the codec's tests: each test starts its own server (PHP-FPM, uwsgi, a
//! Python SCGI server, memcached) in a temporary directory, listening on a unix socket there,
//! talks to it through std sockets, and stops it by its PID when the test ends, whether it
//! passed or not. Every wait is bounded: a server that does not come up in time, or an answer
//! that does not come, fails the test instead of hanging it.
//!
//! The servers come from Debian packages that `.ci/run` installs (`php-fpm`, `uwsgi`,
//! `uwsgi-plugin-python3`, `python3`, `memcached`); a missing one fails the test and says
//! which package to install.

#![allow(dead_code)]

use std::fs;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to come up, and an answer to come.
pub const WAIT: Duration = Duration::from_secs(20);

/// A running server, stopped (by PID) when dropped.
pub struct Server {
    child: Child,
    name: &'static str,
    /// The socket it listens on.
    pub socket: PathBuf,
    /// Its log, shown when it fails.
    log: PathBuf,
    /// Whether it stops with SIGTERM (its children with it) rather than SIGKILL.
    term: bool,
    /// The temporary directory with its configuration and files.
    pub dir: tempfile::TempDir,
}

impl Server {
    /// Starts `command` (already given its arguments) in `dir`, logging to `dir/NAME.log`, and
    /// waits until `socket` accepts connections.
    pub fn start(
        name: &'static str,
        mut command: Command,
        dir: tempfile::TempDir,
        socket: PathBuf,
        term: bool,
    ) -> Server {
        let log = dir.path().join(format!("{name}.log"));
        let out = fs::File::create(&log).expect("creating the server's log");
        let err = out.try_clone().expect("cloning the log's handle");
        let child = command
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        let mut server = Server {
            child,
            name,
            socket,
            log,
            term,
            dir,
        };
        let deadline = Instant::now() + WAIT;
        loop {
            if UnixStream::connect(&server.socket).is_ok() {
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "{name} exited ({status}) before listening:\n{}",
                    server.log()
                );
            }
            if Instant::now() > deadline {
                panic!("{name} did not listen within {WAIT:?}:\n{}", server.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A connection to it, with read and write timeouts.
    pub fn connect(&self) -> UnixStream {
        let s = UnixStream::connect(&self.socket)
            .unwrap_or_else(|e| panic!("connecting to {}: {e}\n{}", self.name, self.log()));
        s.set_read_timeout(Some(WAIT)).expect("read timeout");
        s.set_write_timeout(Some(WAIT)).expect("write timeout");
        s
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = self.child.id();
        if self.term {
            // SIGTERM lets a master stop its workers; SIGKILL would leave them behind.
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first of `names` found in the usual directories, or a failure naming the package.
pub fn program(names: &[&str], package: &str) -> PathBuf {
    for dir in ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"] {
        for name in names {
            let p = Path::new(dir).join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!("none of {names:?} is installed: `apt-get install {package}` (.ci/run installs it)");
}

/// PHP-FPM's binary: Debian names it after PHP's version (`php-fpm8.2`).
pub fn php_fpm() -> PathBuf {
    for dir in ["/usr/sbin", "/usr/bin"] {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("php-fpm"))
            })
            .collect();
        found.sort();
        if let Some(p) = found.pop() {
            return p;
        }
    }
    panic!("php-fpm is not installed: `apt-get install php-fpm` (.ci/run installs it)");
}

/// Whether the tests run as root (some servers then need to be told whom to run as).
pub fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().next().map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// A fresh temporary directory for a server.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("shoal-backend-")
        .tempdir()
        .expect("creating a temporary directory")
}

impl Server {
    /// Sends `request` on a new connection and reads until the server closes it (bounded by
    /// the socket's timeouts); a failure shows the server's log.
    pub fn exchange(&self, request: &[u8]) -> Vec<u8> {
        let mut stream = self.connect();
        let mut answer = Vec::new();
        let done = stream
            .write_all(request)
            .and_then(|()| stream.read_to_end(&mut answer));
        if let Err(e) = done {
            panic!("exchange with {} failed: {e}\n{}", self.name, self.log());
        }
        answer
    }
}
