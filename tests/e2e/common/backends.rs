//! Real application servers for the upstream protocols' tests, each started by the test in
//! its own temporary directory with its own configuration, run as the current user, and
//! stopped by its pid when dropped: PHP-FPM (FastCGI), uwsgi with its python3 plugin, a small
//! SCGI server in Python, memcached. They come from the Debian packages `.ci/run` installs; a
//! missing one fails the test and names its package.

#![allow(dead_code)]

use std::fs;
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to come up.
const START: Duration = Duration::from_secs(20);

/// Where a backend listens.
#[derive(Clone, Debug)]
pub enum Listen {
    Unix(PathBuf),
    Tcp(u16),
}

impl Listen {
    /// The address as `fastcgi_pass` (and the others) take it.
    pub fn pass(&self) -> String {
        match self {
            Listen::Unix(p) => format!("unix:{}", p.display()),
            Listen::Tcp(port) => format!("127.0.0.1:{port}"),
        }
    }

    fn ready(&self) -> bool {
        match self {
            Listen::Unix(p) => UnixStream::connect(p).is_ok(),
            Listen::Tcp(port) => TcpStream::connect(("127.0.0.1", *port)).is_ok(),
        }
    }
}

/// A running backend, stopped (by pid, and its children with SIGTERM) when dropped.
pub struct Backend {
    child: Child,
    name: &'static str,
    pub listen: Listen,
    log: PathBuf,
    /// Its directory: configuration, scripts, log.
    pub dir: tempfile::TempDir,
}

impl Backend {
    pub fn start(
        name: &'static str,
        mut cmd: Command,
        dir: tempfile::TempDir,
        listen: Listen,
    ) -> Self {
        let log = dir.path().join(format!("{name}.log"));
        let out = fs::File::create(&log).expect("creating the backend's log");
        let err = out.try_clone().expect("cloning a handle");
        let child = cmd
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        let mut b = Backend {
            child,
            name,
            listen,
            log,
            dir,
        };
        let deadline = Instant::now() + START;
        while !b.listen.ready() {
            if let Ok(Some(st)) = b.child.try_wait() {
                panic!("{name} exited ({st}) before listening:\n{}", b.log());
            }
            if Instant::now() > deadline {
                panic!("{name} did not listen within {START:?}:\n{}", b.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        b
    }

    /// The backend's own log.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its directory (scripts are written there).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        // SIGTERM lets PHP-FPM and uwsgi stop their workers too.
        // SAFETY: a signal to the pid of a child this test started and has not reaped.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A fresh directory readable by every user (nginx's workers run as `nobody` under root).
pub fn tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::Builder::new()
        .prefix("shoal-backend-")
        .tempdir()
        .expect("creating a temporary directory");
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).expect("chmod 755");
    d
}

fn program(names: &[&str], package: &str) -> PathBuf {
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
fn php_fpm() -> PathBuf {
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

/// PHP-FPM serving the scripts of `root` (the scripts name their files by
/// `SCRIPT_FILENAME`), on a unix socket in its directory or on a TCP port; `children` workers.
pub fn php_fpm_on(tcp: bool, children: u32) -> Backend {
    let dir = tempdir();
    let d = dir.path().display().to_string();
    let listen = if tcp {
        Listen::Tcp(crate::common::free_port())
    } else {
        Listen::Unix(dir.path().join("php.sock"))
    };
    let addr = match &listen {
        Listen::Unix(p) => p.display().to_string(),
        Listen::Tcp(p) => format!("127.0.0.1:{p}"),
    };
    let conf = format!(
        "[global]\npid = {d}/php-fpm.pid\nerror_log = {d}/php-fpm.error.log\ndaemonize = no\n\
         [shoal]\nlisten = {addr}\nlisten.mode = 0666\npm = static\npm.max_children = {children}\n\
         clear_env = yes\ncatch_workers_output = yes\n"
    );
    fs::write(dir.path().join("php-fpm.conf"), conf).expect("writing the pool");
    let mut cmd = Command::new(php_fpm());
    // No php.ini: PHP's defaults (error_log() to FastCGI's stderr). -R: tests may run as root.
    cmd.args(["-n", "-F", "-R", "-y", "php-fpm.conf"]);
    Backend::start("php-fpm", cmd, dir, listen)
}

/// uwsgi running `app.py` (written by the caller into the directory it gives) with its
/// python3 plugin, on a unix socket.
pub fn uwsgi_with(app: &str) -> Backend {
    let dir = tempdir();
    fs::write(dir.path().join("app.py"), app).expect("writing the app");
    let socket = dir.path().join("uwsgi.sock");
    let mut cmd = Command::new(program(&["uwsgi", "uwsgi-core"], "uwsgi"));
    cmd.args(["--plugin", "python3", "--master", "--processes", "1"])
        .arg("--uwsgi-socket")
        .arg(&socket)
        .args([
            "--chmod-socket=666",
            "--wsgi-file",
            "app.py",
            "--die-on-term",
        ]);
    Backend::start("uwsgi", cmd, dir, Listen::Unix(socket))
}

/// uwsgi running `app` with its python3 plugin on a TCP port of 127.0.0.1 that speaks the uwsgi
/// protocol over TLS (`--ssl-socket`), with the certificate and key files given.
pub fn uwsgi_tls(app: &str, cert: &Path, key: &Path) -> Backend {
    let dir = tempdir();
    fs::write(dir.path().join("app.py"), app).expect("writing the app");
    let port = crate::common::free_port();
    let mut cmd = Command::new(program(&["uwsgi", "uwsgi-core"], "uwsgi"));
    cmd.args(["--plugin", "python3", "--master", "--processes", "1"])
        .arg("--ssl-socket")
        .arg(format!(
            "127.0.0.1:{port},{},{}",
            cert.display(),
            key.display()
        ))
        .args(["--wsgi-file", "app.py", "--die-on-term"]);
    Backend::start("uwsgi", cmd, dir, Listen::Tcp(port))
}

/// A small SCGI server in Python (`server.py`, given), on a TCP port passed as its argument.
pub fn python_scgi(server: &str) -> Backend {
    let dir = tempdir();
    fs::write(dir.path().join("server.py"), server).expect("writing the server");
    let port = crate::common::free_port();
    let mut cmd = Command::new(program(&["python3"], "python3"));
    cmd.arg("server.py").arg(port.to_string());
    Backend::start("scgi", cmd, dir, Listen::Tcp(port))
}

/// memcached on a TCP port of 127.0.0.1.
pub fn memcached() -> Backend {
    let dir = tempdir();
    let port = crate::common::free_port();
    let mut cmd = Command::new(program(&["memcached"], "memcached"));
    cmd.args([
        "-l",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-U",
        "0",
        "-m",
        "16",
    ]);
    if is_root() {
        cmd.args(["-u", "root"]);
    }
    Backend::start("memcached", cmd, dir, Listen::Tcp(port))
}

/// Whether the tests run as root.
pub fn is_root() -> bool {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() == 0 }
}
