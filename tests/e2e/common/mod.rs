//! Shared helpers for the end-to-end tests: a temporary prefix, the real `shoal` binary started
//! in it (and always killed, by pid, when the test ends), free ports, signals, bounded polling,
//! counts of a process's open descriptors; the one HTTP/1.1 client (in [`client`]) and real
//! upstream servers for the proxy tests (in [`upstream`]).
//!
//! Nothing here sleeps for a fixed time to "let the server settle": every wait polls a condition
//! with a deadline ([`WAIT`]), so a slow machine makes a test slower, never flaky.

pub mod backends;
pub mod client;
pub mod dns;
pub mod tls;
pub mod upstream;

/// The client's everyday pieces, used by nearly every test.
pub use client::{get, Client, Response};

use std::fs;
use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test: cargo's build of this checkout, or the one `SHOAL_TEST_BIN` names
/// (bench/pgo.sh runs the suite against its profile-optimized binary that way). Every start of
/// shoal goes through it, so its first use also runs [`setup_process`].
/// Held by the tests that read or write the system's /etc/shoal (the package test installs
/// it; the built-in configuration is used only while it is absent).
pub static ETC_SHOAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub static BIN: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    setup_process();
    std::env::var("SHOAL_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_shoal").to_owned())
});

/// The open files this process needs: ten thousand idle connections of one test
/// (`bad_input::ten_thousand_idle_keepalive_connections_do_not_stop_an_active_client`) and
/// what the test running beside it holds.
pub const NOFILE: u64 = 12_000;

/// Sets, once, what this process shares with every test and every server it starts: its soft
/// `RLIMIT_NOFILE`, raised to [`NOFILE`] as far as the hard limit allows. A server inherits the
/// limit (shoal sizes its cache of open files by it), so it is set before the first server
/// starts, not by whichever test needs it first: what a server sees does not depend on which
/// tests ran before it in this process. Nothing else process-wide is changed by any test (the
/// environment, the current directory and the signal mask are left alone; a server's
/// environment is given to it, see [`Shoal::start_in_env`]).
pub fn setup_process() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        try_raise_nofile(NOFILE);
    });
}

/// This process's (soft, hard) `RLIMIT_NOFILE`.
fn nofile() -> (u64, u64) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) fills the struct we own.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    assert_eq!(rc, 0, "getrlimit: {}", io::Error::last_os_error());
    (r.rlim_cur, r.rlim_max)
}

/// Raises this process's soft `RLIMIT_NOFILE` to at least `want`, the hard limit with it when
/// allowed, else the soft one as far as the hard one. Returns the soft limit it leaves.
fn try_raise_nofile(want: u64) -> u64 {
    let (soft, hard) = nofile();
    if soft >= want {
        return soft;
    }
    for (cur, max) in [(want, hard.max(want)), (want.min(hard), hard)] {
        let r = libc::rlimit {
            rlim_cur: cur,
            rlim_max: max,
        };
        // SAFETY: setrlimit(2) reads the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } == 0 {
            return cur;
        }
    }
    soft
}

/// Raises this process's `RLIMIT_NOFILE` to at least `want` (the hard limit too, when allowed);
/// fails the test when it cannot.
pub fn raise_nofile(want: u64) {
    let got = try_raise_nofile(want);
    assert!(
        got >= want,
        "this test needs {want} open files; the hard limit is {}",
        hard_nofile()
    );
}

/// This process's hard `RLIMIT_NOFILE` (what an unprivileged shoal may raise its own to).
pub fn hard_nofile() -> u64 {
    nofile().1
}

/// How long any wait may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// Polls `f` until it returns `Some`, or panics after [`WAIT`] with `what`.
pub fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A door that threads (an upstream's handler) wait at until the test opens it: how a test
/// holds an exchange in the middle for as long as it needs, instead of hoping that a delay is
/// longer than the steps it takes meanwhile. A wait gives up after three times [`WAIT`], so a
/// failed test that never opens it does not leave a thread behind forever; that is longer than
/// any client of a test waits, so giving up cannot pass for the test opening it.
#[derive(Clone, Default)]
pub struct Gate(std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    pub fn new() -> Gate {
        Gate::default()
    }

    /// Blocks until [`Gate::open`] (or three times [`WAIT`]).
    pub fn wait(&self) {
        let (open, cond) = &*self.0;
        let deadline = Instant::now() + 3 * WAIT;
        let mut is_open = open.lock().unwrap_or_else(|e| e.into_inner());
        while !*is_open {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            is_open = cond
                .wait_timeout(is_open, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    pub fn open(&self) {
        let (open, cond) = &*self.0;
        *open.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cond.notify_all();
    }
}

/// A port on 127.0.0.1 that was free a moment ago (TCP and UDP), for a server the test starts.
///
/// Taken below the kernel's ephemeral range (`ip_local_port_range`, 32768 and up by default):
/// a port from `bind(0)`, once closed, could be taken by any client's `connect()` before the
/// server binds it, and then the server fails to start (`Address already in use`). Ports below
/// that range are never handed out by the kernel on its own, so only a listener can hold one,
/// which the check below sees. Each test process starts at its own place (from its pid), so
/// two suites running at once on one machine rarely try the same ports, and never hands a port
/// out twice itself. Ports go out four apart: a test may take the next ones beside the one it
/// was given (`listen 127.0.0.1:P-P+2`), and those are never given to another test.
pub fn free_port() -> u16 {
    use std::net::UdpSocket;
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 10_000;
    const SPAN: u32 = 22_000; // up to 31,999
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(7_919) % SPAN,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    const STEP: u32 = 4;
    for _ in 0..SPAN / STEP {
        let port = (LOW + NEXT.fetch_add(STEP, Ordering::Relaxed) % SPAN) as u16;
        let tcp = TcpListener::bind(("127.0.0.1", port));
        let udp = UdpSocket::bind(("127.0.0.1", port));
        if tcp.is_ok() && udp.is_ok() {
            return port;
        }
    }
    panic!(
        "no free port on 127.0.0.1 between {LOW} and {}",
        LOW + SPAN - 1
    )
}

/// A temporary prefix: `logs/`, `conf/` (with `mime.types`) and `html/` (with `index.html`).
pub struct Prefix {
    pub dir: tempfile::TempDir,
    /// [`Prefix::write_conf`] adds `user root;` as root (see there).
    user_root: bool,
}

impl Prefix {
    pub fn new() -> Prefix {
        let dir = tempfile::Builder::new()
            .prefix("shoal-e2e-")
            .tempdir()
            .expect("a temporary directory");
        for d in ["logs", "conf", "html"] {
            fs::create_dir(dir.path().join(d)).expect("creating a prefix directory");
        }
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        fs::copy(
            repo.join("conf/mime.types"),
            dir.path().join("conf/mime.types"),
        )
        .expect("copying mime.types");
        fs::write(dir.path().join("html/index.html"), INDEX).expect("writing index.html");
        Prefix {
            dir,
            user_root: true,
        }
    }

    /// A prefix whose configurations are written as given: as root without `user`, shoal
    /// serves as nginx's default `nobody` (the prefix must be readable by it).
    pub fn without_user_root(mut self) -> Prefix {
        self.user_root = false;
        self
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A path inside the prefix.
    pub fn join(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// Writes `conf/shoal.conf` (what [`Prefix::args`] points `-c` at). As root, a text without
    /// a `user` line gets `user root;` at the start of its first line (no line moves): as
    /// nginx's, shoal run as root without `user` serves as `nobody`, who could read nothing in
    /// this prefix (0700, root's files); with `user root` it is one process, root.
    pub fn write_conf(&self, text: &str) -> PathBuf {
        let p = self.join("conf/shoal.conf");
        let names_user = text
            .split([';', '\n', '{', '}'])
            .any(|d| d.trim_start().starts_with("user "));
        let text = if self.user_root && backends::is_root() && !names_user {
            format!("user root; {text}")
        } else {
            text.to_string()
        };
        fs::write(&p, text).expect("writing the configuration");
        p
    }

    /// `-p PREFIX -c conf/shoal.conf` (relative, resolved against the prefix as nginx does).
    pub fn args(&self) -> Vec<String> {
        vec![
            "-p".into(),
            self.path().display().to_string(),
            "-c".into(),
            "conf/shoal.conf".into(),
        ]
    }

    /// Runs `shoal -p PREFIX -c conf/shoal.conf EXTRA...` to completion (for `-t`, `-s`, ...).
    pub fn run(&self, extra: &[&str]) -> Output {
        let mut args = self.args();
        args.extend(extra.iter().map(|s| s.to_string()));
        run(&args)
    }

    /// The text of a file in the prefix, or "" if it does not exist (a log holds a request's
    /// bytes as they came: what is not UTF-8 is read as U+FFFD).
    pub fn read(&self, p: &str) -> String {
        String::from_utf8_lossy(&fs::read(self.join(p)).unwrap_or_default()).into_owned()
    }

    pub fn pid_file(&self) -> PathBuf {
        self.join("logs/shoal.pid")
    }

    /// The pid in `logs/shoal.pid`, if the file exists and holds one.
    pub fn pid_in_file(&self) -> Option<i32> {
        fs::read_to_string(self.pid_file())
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

impl Default for Prefix {
    fn default() -> Self {
        Prefix::new()
    }
}

/// The body of the test `index.html`.
pub const INDEX: &str = "<html><body>shoal e2e</body></html>\n";

/// Runs the binary with `args`, bounded by [`WAIT`]: fails if it runs longer, or if something
/// it started keeps its stdout/stderr open after it exited.
pub fn run(args: &[String]) -> Output {
    let mut child = Command::new(&*BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning shoal");
    let guard = KillOnDrop(child.id() as i32);
    let drain = |mut r: Box<dyn Read + Send>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            let _ = tx.send(v);
        });
        rx
    };
    let out = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let err = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let status = wait_child(&mut child, "shoal to exit");
    std::mem::forget(guard);
    let collect = |rx: std::sync::mpsc::Receiver<Vec<u8>>| {
        rx.recv_timeout(WAIT)
            .expect("shoal exited but its output pipe is still held open")
    };
    Output {
        status,
        stdout: collect(out),
        stderr: collect(err),
    }
}

/// Runs `shoal ARGS` and returns (exit code, stderr).
pub fn run_str(args: &[&str]) -> (i32, String) {
    let out = run(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn wait_child(child: &mut Child, what: &str) -> ExitStatus {
    wait_for(what, || child.try_wait().expect("waiting for a child"))
}

/// Sends SIGKILL to a pid when dropped (for processes that must not outlive a failed test).
pub struct KillOnDrop(pub i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.0 > 0 && alive(self.0) {
            signal(self.0, libc::SIGKILL);
        }
    }
}

/// Sends `sig` to `pid`.
pub fn signal(pid: i32, sig: i32) {
    assert!(pid > 0, "refusing to signal pid {pid}");
    // SAFETY: kill(2) with a positive pid of a process this test started.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig}): {}", io::Error::last_os_error());
}

/// Whether `pid` exists (and is not a zombie).
pub fn alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesized command name.
        Ok(s) => s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// A running `shoal` in the foreground (`daemon off;` in its configuration), killed by pid
/// when dropped. Its stderr goes to `PREFIX/stderr.txt`.
pub struct Shoal {
    pub prefix: Prefix,
    child: Option<Child>,
    pub pid: i32,
    /// The first port of the configuration (the one waited for).
    pub port: u16,
}

impl Shoal {
    /// Sends `-s NAME` through the command line, as an operator would; it must succeed.
    pub fn dash_s(&self, name: &str) {
        let out = self.prefix.run(&["-s", name]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "-s {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts shoal with `conf` in a new prefix and waits until `port` accepts connections.
    pub fn start(conf: &str, port: u16) -> Shoal {
        Shoal::start_in(Prefix::new(), conf, port, &[])
    }

    /// Starts shoal in `prefix` with `conf` and extra arguments, and waits until `port` answers
    /// and, unless `conf` moves it, the pid file names it (the port answers as soon as it is
    /// bound, a moment before the pid file is written: `-s` needs the file).
    pub fn start_in(prefix: Prefix, conf: &str, port: u16, extra: &[&str]) -> Shoal {
        Shoal::start_in_env(prefix, conf, port, extra, &[])
    }

    /// [`Shoal::start_in`] with variables added to shoal's environment (this process's is
    /// shared by the tests running beside it, so it is not changed).
    pub fn start_in_env(
        prefix: Prefix,
        conf: &str,
        port: u16,
        extra: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Shoal {
        let mut s = Shoal::spawn_env(prefix, conf, extra, env);
        s.port = port;
        s.wait_port(port);
        if !conf.lines().any(|l| l.trim_start().starts_with("pid ")) {
            wait_for("the pid file", || {
                (s.prefix.pid_in_file() == Some(s.pid)).then_some(())
            });
        }
        s
    }

    /// Starts shoal without waiting for anything.
    pub fn spawn(prefix: Prefix, conf: &str, extra: &[&str]) -> Shoal {
        Shoal::spawn_env(prefix, conf, extra, &[])
    }

    /// [`Shoal::spawn`] with variables added to shoal's environment.
    pub fn spawn_env(
        prefix: Prefix,
        conf: &str,
        extra: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Shoal {
        prefix.write_conf(conf);
        let stderr = fs::File::create(prefix.join("stderr.txt")).expect("creating stderr.txt");
        let child = Command::new(&*BIN)
            .envs(env.iter().copied())
            .args(prefix.args())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawning shoal");
        let pid = child.id() as i32;
        Shoal {
            prefix,
            child: Some(child),
            pid,
            port: 0,
        }
    }

    /// Waits until 127.0.0.1:`port` accepts a connection; panics (with shoal's stderr) if shoal
    /// exits first.
    pub fn wait_port(&self, port: u16) {
        let deadline = Instant::now() + WAIT;
        loop {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return;
            }
            if !alive(self.pid) {
                panic!(
                    "shoal exited before listening on {port}; stderr:\n{}",
                    self.stderr()
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "shoal does not listen on {port}; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until 127.0.0.1:`port` refuses connections.
    pub fn wait_port_closed(&self, port: u16) {
        wait_for(&format!("port {port} to close"), || {
            TcpStream::connect(("127.0.0.1", port))
                .is_err()
                .then_some(())
        })
    }

    pub fn stderr(&self) -> String {
        self.prefix.read("stderr.txt")
    }

    pub fn error_log(&self) -> String {
        self.prefix.read("logs/error.log")
    }

    /// Waits until `logs/error.log` contains `needle` `count` times.
    pub fn wait_log(&self, needle: &str, count: usize) {
        wait_for(&format!("{count}× {needle:?} in the error log"), || {
            (self.error_log().matches(needle).count() >= count).then_some(())
        })
    }

    pub fn signal(&self, sig: i32) {
        signal(self.pid, sig);
    }

    /// Waits for the process to exit and returns its status.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let child = self.child.as_mut().expect("a child");
        let status = wait_child(child, "shoal to exit");
        self.child = None;
        status
    }

    /// Whether the process has exited (without waiting).
    pub fn exited(&mut self) -> bool {
        match self.child.as_mut() {
            None => true,
            Some(c) => c.try_wait().expect("try_wait").is_some(),
        }
    }

    /// A new keep-alive client on `port`.
    pub fn client(&self, port: u16) -> client::Client {
        client::Client::connect(port)
    }

    /// The names of the process's threads (`/proc/PID/task/*/comm`).
    pub fn thread_names(&self) -> Vec<String> {
        thread_names(self.pid)
    }

    /// The number of threads named `shoal-worker-*`.
    pub fn worker_threads(&self) -> usize {
        self.thread_names()
            .iter()
            .filter(|n| n.starts_with("shoal-worker-"))
            .count()
    }
}

impl Drop for Shoal {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            if c.try_wait().ok().flatten().is_none() {
                signal(self.pid, libc::SIGKILL);
            }
            let _ = c.wait();
        }
    }
}

/// Waits until 127.0.0.1:`port` accepts connections while process `pid` lives.
pub fn wait_port_of(pid: i32, port: u16) {
    wait_for(&format!("process {pid} to listen on {port}"), || {
        assert!(
            alive(pid),
            "process {pid} exited before listening on {port}"
        );
        TcpStream::connect(("127.0.0.1", port))
            .is_ok()
            .then_some(())
    })
}

/// The names of a process's threads.
pub fn thread_names(pid: i32) -> Vec<String> {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| fs::read_to_string(e.path().join("comm")).ok())
        .map(|s| s.trim_end().to_string())
        .collect()
}

/// The usual test configuration: foreground, errors to `logs/error.log` at `notice`, one
/// server on 127.0.0.1:`port` serving `PREFIX/html`.
pub fn basic_conf(port: u16) -> String {
    conf_with(port, "", "")
}

/// [`basic_conf`] with extra main-context and server-context lines.
pub fn conf_with(port: u16, main: &str, server: &str) -> String {
    format!(
        "daemon off;\n\
         error_log logs/error.log notice;\n\
         {main}\n\
         events {{ worker_connections 256; }}\n\
         http {{\n\
         \x20   include mime.types;\n\
         \x20   default_type application/octet-stream;\n\
         \x20   keepalive_timeout 65;\n\
         \x20   server {{\n\
         \x20       listen 127.0.0.1:{port};\n\
         \x20       server_name localhost;\n\
         \x20       root html;\n\
         {server}\n\
         \x20   }}\n\
         }}\n"
    )
}

/// Listening TCP sockets on `port` in /proc/net/tcp and /proc/net/tcp6.
pub fn listening_sockets(port: u16) -> usize {
    let want = format!(":{port:04X}");
    let mut n = 0;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = fs::read_to_string(table).unwrap_or_default();
        for l in text.lines().skip(1) {
            let f: Vec<&str> = l.split_whitespace().collect();
            // sl local_address rem_address st ...; st 0A is LISTEN.
            if f.len() > 3 && f[1].ends_with(&want) && f[3] == "0A" {
                n += 1;
            }
        }
    }
    n
}

/// Checks that `line` starts like nginx's error log lines, `YYYY/MM/DD HH:MM:SS [level] PID#TID: `,
/// and returns (level, pid, tid, message).
pub fn parse_log_line(line: &str) -> Option<(String, u32, u32, String)> {
    let b = line.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    let shape = b.len() > 21
        && digits(0..4)
        && b[4] == b'/'
        && digits(5..7)
        && b[7] == b'/'
        && digits(8..10)
        && b[10] == b' '
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b' '
        && b[20] == b'[';
    if !shape {
        return None;
    }
    let rest = &line[21..];
    let (level, rest) = rest.split_once("] ")?;
    let (ids, msg) = rest.split_once(": ")?;
    let (pid, tid) = ids.split_once('#')?;
    Some((
        level.to_string(),
        pid.parse().ok()?,
        tid.parse().ok()?,
        msg.to_string(),
    ))
}

/// How many descriptors the process `pid` has open (entries of /proc/PID/fd; 0 if it is gone).
/// For leak tests: compare before and after a load, after the connections had time to close.
pub fn open_fds(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// What each open descriptor of `pid` points at (`socket:[123]`, a path, `pipe:[45]`, ...),
/// sorted: the message to print when [`open_fds`] says something leaked.
pub fn fd_targets(pid: u32) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| fs::read_link(e.path()).ok())
        .map(|p| p.display().to_string())
        .collect();
    v.sort();
    v
}

/// Every file under `dir` and its subdirectories (a cache's objects), sorted; none when `dir`
/// does not exist.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// The children of process `pid` (a root master's serving children, with `user` as root).
pub fn children_of(pid: i32) -> Vec<i32> {
    fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// A field of `/proc/PID/status` (`Uid:`, `CapEff:`, `Threads:`), its value trimmed.
pub fn proc_status(pid: i32, field: &str) -> Option<String> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let value = status.lines().find_map(|l| l.strip_prefix(field))?;
    Some(value.trim().to_string())
}

/// The serving child of root master `pid` (`user nobody` as root), once it is the only one
/// and runs as `nobody` (65534).
pub fn serving_child(pid: i32) -> i32 {
    wait_for("the master's one child, serving as nobody", || {
        let [child] = children_of(pid)[..] else {
            return None;
        };
        let uid = proc_status(child, "Uid:")?;
        uid.split_whitespace()
            .all(|u| u == "65534")
            .then_some(child)
    })
}

/// The effective capabilities of every thread of `pid`.
pub fn thread_caps(pid: i32) -> Vec<u64> {
    fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|t| {
                let status = fs::read_to_string(t.ok()?.path().join("status")).ok()?;
                let eff = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
                u64::from_str_radix(eff.trim(), 16).ok()
            })
            .collect()
        })
        .unwrap_or_default()
}
