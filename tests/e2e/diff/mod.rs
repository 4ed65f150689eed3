//! The differential harness: one configuration, served by real nginx and by shoal side by side,
//! the same raw requests sent to both, and their answers compared after normalising only what
//! must differ (the `Server`/`Date` headers, the server token in error pages, the port each one
//! listens on, a multipart boundary, a relative `Expires` date).
//!
//! Both servers read byte-identical configurations but for one injected block: nginx's temp
//! paths (see [`NGINX_ONLY`]). Both serve the same `html/` directory (by absolute path), so a
//! file's ETag and Last-Modified are the same on both and are compared as they are.
//!
//! If nginx is not installed the tests fail, loudly: a differential suite that passes without
//! its reference proves nothing.

use std::fs;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::common::client::request;
use crate::common::free_port;

/// The binary under test (`SHOAL_TEST_BIN` may name another build, see `common::BIN`).
pub use crate::common::BIN as SHOAL;

mod wire;
use wire::{exchange, exchange_tls, find, normalise, Mode};

/// How long a server may take to start, or an answer to arrive.
const WAIT: Duration = Duration::from_secs(10);

/// Modification time of every fixture file: Sun, 01 Jan 2023 00:00:00 GMT.
pub const MTIME: u64 = 1_672_531_200;
pub const MTIME_HTTP: &str = "Sun, 01 Jan 2023 00:00:00 GMT";

/// `a.txt`, the plain file most scenarios ask for.
pub const A_TXT: &str = "hello from a.txt\n";

/// nginx's `ETag` for a fixture file of `len` bytes: `"<mtime hex>-<size hex>"`.
pub fn etag(len: usize) -> String {
    format!("\"{MTIME:x}-{len:x}\"")
}

/// `range.txt`: 1000 bytes, `0123456789` repeated, for byte-range scenarios.
pub fn range_body() -> String {
    "0123456789".repeat(100)
}

/// Lines only nginx gets, inside `http {}`. nginx wants writable temp directories at start
/// (its compiled-in ones are under /var/lib/nginx, not writable for a normal user); shoal's
/// default is the system's temporary directory, and the fastcgi, uwsgi and scgi ones would be
/// warned about. Everything else in the two files is the same text.
const NGINX_ONLY: &str = "    client_body_temp_path tmp/body;\n    proxy_temp_path tmp/proxy;\n    \
     fastcgi_temp_path tmp/fastcgi;\n    uwsgi_temp_path tmp/uwsgi;\n    scgi_temp_path tmp/scgi;\n";

/// The nginx binary: `$NGINX_BIN`, else `nginx` in the usual places.
fn nginx_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("NGINX_BIN") {
        return PathBuf::from(p);
    }
    for p in [
        "/usr/sbin/nginx",
        "/usr/local/sbin/nginx",
        "/usr/local/nginx/sbin/nginx",
        "/usr/bin/nginx",
    ] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    panic!(
        "nginx is not installed: the differential tests compare shoal with real nginx and cannot \
         run without it (apt-get install nginx-light, or set NGINX_BIN=/path/to/nginx)"
    );
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// As root, nginx's workers and shoal's serving child run as `nobody` (and the group nginx's
/// configure found); the configuration names them for both anyway, so that file permissions
/// (a `chmod 000` file) mean the same on both whatever the defaults. Returns the `user` line,
/// empty when not root.
fn user_line() -> String {
    if euid() != 0 {
        return String::new();
    }
    let passwd = fs::read_to_string("/etc/passwd").unwrap_or_default();
    let gid = passwd
        .lines()
        .find(|l| l.starts_with("nobody:"))
        .and_then(|l| l.split(':').nth(3))
        .expect("running as root needs a `nobody` user to drop to");
    let groups = fs::read_to_string("/etc/group").unwrap_or_default();
    let group = groups
        .lines()
        .find(|l| l.split(':').nth(2) == Some(gid))
        .and_then(|l| l.split(':').next())
        .expect("the group of `nobody`");
    format!("user nobody {group};\n")
}

/// The html tree both servers serve.
fn write_fixtures(html: &Path) {
    let files: &[(&str, &str)] = &[
        ("index.html", "<html>root index</html>\n"),
        ("a.txt", A_TXT),
        ("page.html", "<p>page</p>\n"),
        ("custom404.html", "<h1>custom not found</h1>\n"),
        ("file.foo", "foo\n"),
        ("file.unknownext", "unknown\n"),
        ("noext", "no extension\n"),
        ("dir/index.html", "<html>dir index</html>\n"),
        ("dir/b.txt", "b in dir\n"),
        ("dir2/index.htm", "<html>dir2 htm</html>\n"),
        ("dir3/index.txt", "dir3 txt index\n"),
        ("emptydir/.keep", ""),
        ("int/page.html", "<p>internal page</p>\n"),
        ("secret.txt", "secret\n"),
        ("locked/inner.txt", "inside a directory without x\n"),
        ("sub/deep/c.txt", "c deep\n"),
        (
            "dirindex/index.html/x.txt",
            "an index.html that is a directory\n",
        ),
        (".hidden", "dot file\n"),
        ("UPPER.TXT", "upper-case extension\n"),
    ];
    for (name, body) in files {
        let p = html.join(name);
        fs::create_dir_all(p.parent().expect("a parent")).expect("creating a fixture directory");
        fs::write(&p, body).expect("writing a fixture");
    }
    fs::write(html.join("range.txt"), range_body()).expect("writing range.txt");
    let when = SystemTime::UNIX_EPOCH + Duration::from_secs(MTIME);
    for e in walk(html) {
        if e.is_file() {
            let f = fs::File::options()
                .write(true)
                .open(&e)
                .expect("opening a fixture");
            f.set_modified(when).expect("setting a fixture's mtime");
        }
    }
    fs::set_permissions(html.join("secret.txt"), fs::Permissions::from_mode(0o000))
        .expect("chmod 000 secret.txt");
    fs::set_permissions(html.join("locked"), fs::Permissions::from_mode(0o644))
        .expect("chmod 644 locked/");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir)
        .expect("reading a fixture directory")
        .flatten()
    {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

/// Whether file permissions are enforced on the servers (not root, or root dropping to
/// `nobody`): then `chmod 000` means 403.
pub fn permissions_enforced() -> bool {
    euid() != 0 || !user_line().is_empty()
}

/// One running server (nginx or shoal) in its own prefix.
struct Server {
    name: &'static str,
    child: Child,
    port: u16,
    prefix: PathBuf,
}

impl Server {
    fn start(
        name: &'static str,
        bin: &Path,
        prefix: PathBuf,
        conf: &str,
        port: u16,
        env: &[(&str, &str)],
    ) -> Server {
        crate::common::setup_process();
        for d in ["conf", "logs", "tmp"] {
            fs::create_dir_all(prefix.join(d)).expect("creating a prefix directory");
        }
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        // shoal's files beside mime.types, the same for both: `include koi-utf;` reads them.
        // The upstream protocols' params too (`include fastcgi.conf;`).
        for f in [
            "mime.types",
            "koi-win",
            "koi-utf",
            "win-utf",
            "fastcgi.conf",
            "fastcgi_params",
            "uwsgi_params",
            "scgi_params",
        ] {
            fs::copy(repo.join("conf").join(f), prefix.join("conf").join(f))
                .unwrap_or_else(|e| panic!("copying conf/{f}: {e}"));
        }
        fs::write(prefix.join("conf/test.conf"), conf).expect("writing the configuration");
        let stderr = fs::File::create(prefix.join("stderr.txt")).expect("creating stderr.txt");
        let mut cmd = Command::new(bin);
        cmd.envs(env.iter().copied());
        cmd.arg("-p").arg(format!("{}/", prefix.display()));
        cmd.args(["-c", "conf/test.conf", "-e", "logs/error.log"]);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {name} ({}): {e}", bin.display()));
        let mut s = Server {
            name,
            child,
            port,
            prefix,
        };
        s.wait_listening();
        s
    }

    fn wait_listening(&mut self) {
        let deadline = Instant::now() + WAIT;
        loop {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!(
                    "{} exited ({st}) before listening on {}:\nstderr: {}\nerror.log: {}",
                    self.name,
                    self.port,
                    self.read("stderr.txt"),
                    self.read("logs/error.log")
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "{} does not listen on {}: {}",
                    self.name,
                    self.port,
                    self.read("logs/error.log")
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A file in the prefix as text (a log holds a request's bytes as they came: what is not
    /// UTF-8 is read as U+FFFD).
    fn read(&self, p: &str) -> String {
        String::from_utf8_lossy(&fs::read(self.prefix.join(p)).unwrap_or_default()).into_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// Stops a server this harness spawned: TERM, then KILL after 3 s. An nginx master's workers
/// are found before the master is stopped and killed if they outlived it, so none is left
/// holding a port (nginx forks them; KILL to the master alone orphans them).
pub(crate) fn stop(child: &mut std::process::Child) {
    let pid = child.id() as i32;
    let kids: Vec<i32> = fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    if child.try_wait().ok().flatten().is_none() {
        // SAFETY: kill(2) on the pid of a child this harness spawned and has not reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(3);
        while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if child.try_wait().ok().flatten().is_none() {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = child.wait();
        }
    }
    for k in kids {
        // Only the master's own workers, and only if they outlived it.
        let stat = fs::read_to_string(format!("/proc/{k}/stat")).unwrap_or_default();
        let ppid_ok = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().nth(1))
            .is_some_and(|pp| pp == "1" || pp == pid.to_string());
        if ppid_ok && stat.contains("(nginx)") {
            // SAFETY: kill(2) on a worker of the nginx this harness started.
            unsafe { libc::kill(k, libc::SIGKILL) };
        }
    }
}

/// The parts of a test configuration.
#[derive(Default, Clone, Copy)]
pub struct Conf<'a> {
    /// Main-context lines.
    pub main: &'a str,
    /// `http {}` lines.
    pub http: &'a str,
    /// `server {}` lines (after `listen`, `server_name` and `root`).
    pub server: &'a str,
    /// Variables added to both servers' environment (nginx keeps `TZ` from it).
    pub env: &'a [(&'a str, &'a str)],
    /// The server listens with `ssl`, both on the same certificate (`localhost`, 127.0.0.1)
    /// from a CA the pair makes; `{CA}` in the text is that CA's file.
    pub tls: bool,
    /// Parameters of the server's `listen` (` proxy_protocol`).
    pub listen: &'a str,
    /// Files written into the html tree before the servers start (`include`d by the
    /// configuration), as (relative path, contents).
    pub files: &'a [(&'a str, &'a str)],
}

/// `{HTML}` in a configuration is the shared html directory; `{PORT}` the server's own port;
/// `{PKI}` the directory of the certificates (with `tls`).
fn render(c: &Conf<'_>, html: &Path, port: u16, nginx: bool, pki: Option<&Path>) -> String {
    let tls = match pki {
        Some(_) => {
            " ssl;\n        ssl_certificate {PKI}/localhost.crt;\n        \
                    ssl_certificate_key {PKI}/localhost.key"
        }
        None => "",
    };
    let text = format!(
        "{user}daemon off;\nmaster_process on;\nworker_processes 1;\npid logs/test.pid;\n\
         error_log logs/error.log info;\n{main}\nevents {{ worker_connections 64; }}\n\
         http {{\n{only}    access_log off;\n    include mime.types;\n    \
         default_type application/octet-stream;\n{http}\n    server {{\n        \
         listen 127.0.0.1:{{PORT}}{listen}{tls};\n        server_name localhost;\n        \
         root {{HTML}};\n{server}\n    }}\n}}\n",
        user = user_line(),
        main = c.main,
        only = if nginx { NGINX_ONLY } else { "" },
        http = c.http,
        server = c.server,
        listen = c.listen,
    );
    let text = text
        .replace("{HTML}", &html.display().to_string())
        .replace("{PORT}", &port.to_string());
    match pki {
        Some(p) => text
            .replace("{PKI}", &p.display().to_string())
            .replace("{CA}", &p.join("ca.crt").display().to_string()),
        None => text,
    }
}

/// nginx and shoal serving one configuration.
pub struct Pair {
    // Declared first: the servers stop before the directory goes.
    nginx: Server,
    shoal: Server,
    dir: tempfile::TempDir,
    /// With `Conf::tls`: the CA and the servers' certificate.
    pki: Option<crate::common::tls::Pki>,
}

impl Pair {
    /// A pair whose server block has `server` lines.
    pub fn new(server: &str) -> Pair {
        Pair::with(Conf {
            server,
            ..Default::default()
        })
    }

    pub fn with(c: Conf<'_>) -> Pair {
        let nginx_bin = nginx_bin();
        let dir = tempfile::Builder::new()
            .prefix("shoal-diff-")
            .tempdir()
            .expect("a temporary directory");
        // Workers running as `nobody` must reach the html tree.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod 755");
        let html = dir.path().join("html");
        write_fixtures(&html);
        let pki = c.tls.then(|| {
            let mut pki = crate::common::tls::Pki::new();
            pki.issue("localhost", &["localhost", "127.0.0.1"], false);
            pki.issue("client", &[], true);
            pki
        });
        let pki_dir = pki.as_ref().map(|p| p.dir().to_path_buf());
        for (name, text) in c.files {
            if let Some(dir) = html.join(name).parent() {
                fs::create_dir_all(dir).expect("a scenario file's directory");
            }
            fs::write(
                html.join(name),
                text.replace("{HTML}", &html.display().to_string()),
            )
            .expect("writing a scenario's file");
        }
        let (np, sp) = (free_port(), free_port());
        let nginx = Server::start(
            "nginx",
            &nginx_bin,
            dir.path().join("nginx"),
            &render(&c, &html, np, true, pki_dir.as_deref()),
            np,
            c.env,
        );
        let shoal = Server::start(
            "shoal",
            Path::new(SHOAL.as_str()),
            dir.path().join("shoal"),
            &render(&c, &html, sp, false, pki_dir.as_deref()),
            sp,
            c.env,
        );
        Pair {
            nginx,
            shoal,
            dir,
            pki,
        }
    }

    /// Sends `req` to both over TLS (SNI `localhost`; with `client_cert`, the PKI's client
    /// certificate), reads until the server closes or says nothing more for a moment, and
    /// asserts the normalised answers are the same. Returns nginx's (normalised).
    pub fn check_tls(&self, req: &[u8], client_cert: bool) -> String {
        let pki = self.pki.as_ref().expect("a pair made with Conf::tls");
        let n = exchange_tls(self.nginx.port, req, pki, client_cert);
        let s = exchange_tls(self.shoal.port, req, pki, client_cert);
        let nn = normalise(&n, self.nginx.port, false);
        let sn = normalise(&s, self.shoal.port, false);
        if nn != sn {
            panic!(
                "shoal differs from nginx over TLS for request:\n{}\n--- nginx\n{nn}\n--- shoal\n{sn}\n\
                 --- shoal's error.log tail\n{}\n--- nginx's error.log tail\n{}",
                String::from_utf8_lossy(req).escape_debug(),
                tail(&self.shoal.read("logs/error.log"), 5),
                tail(&self.nginx.read("logs/error.log"), 5),
            );
        }
        nn
    }

    /// The ports nginx and shoal listen on (for exchanges the pair's checks do not make).
    pub fn ports(&self) -> (u16, u16) {
        (self.nginx.port, self.shoal.port)
    }

    /// nginx's and shoal's prefixes: a relative `root` is under each, for files one server
    /// writes that the other must not see (DAV).
    pub fn prefixes(&self) -> (PathBuf, PathBuf) {
        (self.nginx.prefix.clone(), self.shoal.prefix.clone())
    }

    /// The shared html directory (to add files a scenario needs).
    pub fn html(&self) -> PathBuf {
        self.dir.path().join("html")
    }

    /// Sends `req` to both on a new connection, half-closes, reads everything until the server
    /// closes, and asserts the normalised answers are the same. Returns nginx's (normalised).
    pub fn check(&self, req: &[u8]) -> String {
        self.compare(req, Mode::HalfClose)
    }

    /// Like [`Pair::check`] but keeps our side open: the transcript ends with whether the
    /// server closed the connection by itself (within a short wait) or kept it open.
    pub fn check_open(&self, req: &[u8]) -> String {
        self.compare(req, Mode::KeepOpen)
    }

    /// Like [`Pair::check`], with bodies compared byte for byte: a byte that is not UTF-8 is
    /// written `\xNN`, not replaced (recoded 8-bit text, binary answers).
    pub fn check_bytes(&self, req: &[u8]) -> String {
        self.compare(req, Mode::Bytes)
    }

    /// Like [`Pair::check_open`], bodies compared byte for byte.
    pub fn check_open_bytes(&self, req: &[u8]) -> String {
        self.compare(req, Mode::KeepOpenBytes)
    }

    fn compare(&self, req: &[u8], mode: Mode) -> String {
        let n = exchange(self.nginx.port, req, mode);
        let s = exchange(self.shoal.port, req, mode);
        let exact = matches!(mode, Mode::Bytes | Mode::KeepOpenBytes);
        let nn = normalise(&n, self.nginx.port, exact);
        let sn = normalise(&s, self.shoal.port, exact);
        if nn != sn {
            panic!(
                "shoal differs from nginx for request:\n{}\n--- nginx\n{nn}\n--- shoal\n{sn}\n\
                 --- shoal's error.log tail\n{}\n--- nginx's error.log tail\n{}",
                String::from_utf8_lossy(req).escape_debug(),
                tail(&self.shoal.read("logs/error.log"), 5),
                tail(&self.nginx.read("logs/error.log"), 5),
            );
        }
        nn
    }

    /// `GET path HTTP/1.1` with `Host: localhost` and extra header lines (each ending `\r\n`),
    /// through [`Pair::check`].
    pub fn get(&self, path: &str, headers: &str) -> String {
        self.check(request("GET", path, headers).as_bytes())
    }

    /// [`Pair::get`] for `HEAD`.
    pub fn head(&self, path: &str, headers: &str) -> String {
        self.check(request("HEAD", path, headers).as_bytes())
    }

    /// [`Pair::get`] with our side kept open ([`Pair::check_open`]): nginx aborts a proxied
    /// request when the client half-closes (`proxy_ignore_client_abort off`).
    pub fn get_open(&self, path: &str, headers: &str) -> String {
        self.check_open(request("GET", path, headers).as_bytes())
    }

    /// [`Pair::get_open`] for `HEAD`.
    pub fn head_open(&self, path: &str, headers: &str) -> String {
        self.check_open(request("HEAD", path, headers).as_bytes())
    }

    /// The header names of both answers to `GET path` (extra header lines each ending
    /// `\r\n`), in the order each server wrote them, nginx's first.
    pub fn header_order(&self, path: &str, headers: &str) -> (Vec<String>, Vec<String>) {
        let req = request("GET", path, headers);
        let names = |port: u16| {
            let t = exchange(port, req.as_bytes(), Mode::KeepOpen);
            let end = find(&t.bytes, b"\r\n\r\n").unwrap_or(t.bytes.len());
            String::from_utf8_lossy(&t.bytes[..end])
                .split("\r\n")
                .skip(1)
                .filter_map(|l| l.split_once(':').map(|(n, _)| n.to_string()))
                .collect::<Vec<_>>()
        };
        (names(self.nginx.port), names(self.shoal.port))
    }

    /// nginx's error log (to explain a surprise).
    pub fn nginx_log(&self) -> String {
        self.nginx.read("logs/error.log")
    }

    pub fn shoal_log(&self) -> String {
        self.shoal.read("logs/error.log")
    }

    /// A file each server wrote under its prefix (an access log the configuration names),
    /// nginx's first.
    pub fn read_both(&self, path: &str) -> (String, String) {
        (self.nginx.read(path), self.shoal.read(path))
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        // So that the temporary directory can be removed by a user that is not root.
        let _ = fs::set_permissions(
            self.html().join("locked"),
            fs::Permissions::from_mode(0o755),
        );
    }
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `-t` of nginx and of shoal on one configuration: whether it passed, and each one's
/// `[emerg]`/`[warn]` lines from the level on.
pub fn both_test(http: &str, server: &str) -> (String, String) {
    both_test_events("", http, server)
}

/// [`both_test`] with lines in the `events {}` block.
pub fn both_test_events(events: &str, http: &str, server: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("logs")).unwrap();
    // shoal's charset maps beside the file, for `include koi-utf;`.
    for f in ["koi-win", "koi-utf", "win-utf"] {
        fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("conf").join(f),
            dir.path().join(f),
        )
        .unwrap();
    }
    let file = dir.path().join("t.conf");
    let conf = format!(
        "error_log stderr;\npid logs/t.pid;\nevents {{ {events} }}\nhttp {{\n{http}\nserver {{\n    \
         listen 127.0.0.1:{};\n    {server}\n}}\n}}\n",
        free_port()
    );
    fs::write(&file, &conf).unwrap();
    let file_name = file.display().to_string();
    let run = |bin: &str| {
        let out = Command::new(bin)
            .args(["-t", "-p"])
            .arg(dir.path())
            .arg("-c")
            .arg(&file)
            .output()
            .unwrap_or_else(|e| panic!("running {bin}: {e}"));
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        // `[level] message`: the error log's lines (nginx's time and pid taken off) or the
        // program's own (`shoal: [emerg] ...`).
        let lines: Vec<String> = err
            .lines()
            .filter_map(|l| {
                let at = ["[emerg] ", "[warn] "].iter().find_map(|lv| l.find(lv))?;
                let (level, rest) = l[at..].split_once("] ")?;
                let msg = match rest.split_once(": ") {
                    Some((pid, m)) if pid.contains('#') => m,
                    _ => rest,
                };
                Some(format!("{level}] {}", msg.replace(&file_name, "FILE")))
            })
            .collect();
        if out.status.success() {
            format!("ok {lines:?}")
        } else {
            format!("failed {lines:?}")
        }
    };
    (run(&nginx_bin().display().to_string()), run(SHOAL.as_str()))
}
