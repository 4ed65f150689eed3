//! The Debian package (`pkg/build-deb.sh`) installed on this machine: its files, its systemd
//! unit checked by `systemd-analyze verify` and run by its own command lines (systemd is not
//! PID 1 here), log rotation by its logrotate rule, an upgrade in place that replaces the
//! running binary without stopping it, and a purge that leaves nothing behind.
//!
//! It needs root (it says so and does nothing without), dpkg, logrotate, systemd-analyze and
//! port 80.

use std::path::Path;
use std::process::Command;

use crate::common::{self, wait_for};

/// Runs `cmd` through the shell; its status and output.
fn sh(cmd: &str) -> (bool, String) {
    let out = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[track_caller]
fn sh_ok(cmd: &str) -> String {
    let (ok, text) = sh(cmd);
    assert!(ok, "`{cmd}` failed:\n{text}");
    text
}

/// The unit's `KEY=` command line, without systemd's `-` prefix.
fn unit_command(unit: &str, key: &str) -> String {
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in the unit"));
    line.trim_start_matches('-').to_string()
}

fn master_pid() -> Option<i32> {
    std::fs::read_to_string("/run/shoal.pid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Purges the package and stops what it started, however the test ends.
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(pid) = master_pid() {
            if common::alive(pid) {
                common::signal(pid, libc::SIGKILL);
            }
        }
        if let Some(pid) = std::fs::read_to_string("/run/shoal.pid.oldbin")
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
        {
            if common::alive(pid) {
                common::signal(pid, libc::SIGKILL);
            }
        }
        let _ = sh("dpkg --purge shoal; rm -f /run/shoal.pid /run/shoal.pid.oldbin");
    }
}

#[test]
fn the_debian_package_installs_runs_rotates_upgrades_and_purges() {
    let _etc = common::ETC_SHOAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: installing a package needs root");
        return;
    }
    let tools = sh("command -v dpkg-deb && command -v logrotate && command -v systemd-analyze");
    assert!(
        tools.0,
        "dpkg-deb, logrotate and systemd-analyze are needed (.ci/run installs them)"
    );
    if Path::new("/etc/shoal").exists() || sh("dpkg -s shoal").0 {
        panic!("shoal is already installed on this machine: the test would replace it");
    }
    if std::net::TcpListener::bind("0.0.0.0:80").is_err() {
        panic!("port 80 is taken: the package's default site listens there");
    }
    let repo = env!("CARGO_MANIFEST_DIR");
    let out = tempfile::tempdir().unwrap();
    let build = |version: &str| -> String {
        let deb = out.path().join(format!("shoal_{version}_amd64.deb"));
        sh_ok(&format!(
            "SHOAL_BIN={} VERSION={version} DEB_OPTS='-Zgzip -z1' {repo}/pkg/build-deb.sh {}",
            *common::BIN,
            out.path().display()
        ));
        assert!(deb.exists(), "{} not built", deb.display());
        deb.display().to_string()
    };
    let first = build("0.1.0");
    let second = build("0.1.1");
    let _cleanup = Cleanup;

    sh_ok(&format!("dpkg -i {first}"));
    for f in [
        "/usr/sbin/shoal",
        "/etc/shoal/shoal.conf",
        "/etc/shoal/mime.types",
        "/etc/shoal/fastcgi_params",
        "/etc/shoal/snippets/fastcgi-php.conf",
        "/etc/shoal/sites-enabled/default",
        "/lib/systemd/system/shoal.service",
        "/etc/logrotate.d/shoal",
        "/var/log/shoal",
    ] {
        assert!(Path::new(f).exists(), "{f} not installed");
    }
    // A configuration that names no log takes the compiled-in ones, under /var/log/shoal.
    let bare = out.path().join("bare.conf");
    std::fs::write(
        &bare,
        "events {}\nhttp { server { listen 127.0.0.1:1; } }\n",
    )
    .unwrap();
    let t = sh(&format!("/usr/sbin/shoal -t -c {}", bare.display()));
    assert!(t.0, "shoal -t on a configuration without logs:\n{}", t.1);
    let unit = std::fs::read_to_string("/lib/systemd/system/shoal.service").unwrap();
    let verify = sh("systemd-analyze verify /lib/systemd/system/shoal.service");
    let complaints: Vec<&str> = verify
        .1
        .lines()
        .filter(|l| l.contains("shoal.service"))
        .collect();
    assert!(
        complaints.is_empty(),
        "systemd-analyze verify:\n{}",
        verify.1
    );

    // Started the way systemd starts it.
    sh_ok(&unit_command(&unit, "ExecStartPre"));
    sh_ok(&unit_command(&unit, "ExecStart"));
    let first_pid = wait_for("/run/shoal.pid", master_pid);
    assert!(common::alive(first_pid));
    let r = common::get(80, "/").unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body,
        std::fs::read(format!("{repo}/html/index.html")).unwrap()
    );

    // The logs rotate with the shipped rule: USR1 makes shoal write a new file.
    wait_for("the access log line", || {
        std::fs::read_to_string("/var/log/shoal/access.log")
            .ok()
            .filter(|t| t.contains("GET / HTTP/1.1"))
    });
    let state = out.path().join("logrotate.state");
    sh_ok(&format!(
        "logrotate -f -s {} /etc/logrotate.d/shoal",
        state.display()
    ));
    assert!(Path::new("/var/log/shoal/access.log.1").exists());
    // logrotate `create`s the new file itself, then signals: shoal has taken the rotation
    // once its process holds the new file and no longer the renamed one.
    wait_for("shoal to reopen access.log", || {
        let pid = std::fs::read_to_string("/run/shoal.pid").ok()?;
        let fds = std::fs::read_dir(format!("/proc/{}/fd", pid.trim())).ok()?;
        let held: Vec<_> = fds
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .collect();
        let holds = |p: &str| held.iter().any(|l| l == Path::new(p));
        (holds("/var/log/shoal/access.log") && !holds("/var/log/shoal/access.log.1")).then_some(())
    });
    common::get(80, "/?after-rotation").unwrap();
    wait_for("the line in the new access.log", || {
        std::fs::read_to_string("/var/log/shoal/access.log")
            .ok()
            .filter(|t| t.contains("after-rotation"))
    });
    let rotated = std::fs::read_to_string("/var/log/shoal/access.log.1").unwrap();
    assert!(!rotated.contains("after-rotation"), "{rotated}");

    // Reloaded the way systemd reloads it: a snippet in conf.d takes effect.
    std::fs::write(
        "/etc/shoal/conf.d/package-test.conf",
        "add_header X-Package-Test reloaded;\n",
    )
    .unwrap();
    sh_ok(&unit_command(&unit, "ExecReload"));
    wait_for("the reload", || {
        let r = common::get(80, "/").ok()?;
        (r.header("x-package-test") == Some("reloaded")).then_some(())
    });
    assert_eq!(master_pid(), Some(first_pid));

    // Upgraded in place: the running master hands its sockets to the new binary.
    sh_ok(&format!("dpkg -i {second}"));
    let second_pid = wait_for("the new master", || {
        master_pid().filter(|&p| p != first_pid)
    });
    wait_for("the old master to exit", || {
        (!common::alive(first_pid)).then_some(())
    });
    assert!(!Path::new("/run/shoal.pid.oldbin").exists());
    assert_eq!(common::get(80, "/").unwrap().status, 200);
    assert!(sh_ok("dpkg -s shoal").contains("Version: 0.1.1"));

    // Stopped the way systemd stops it, then purged.
    sh_ok(&unit_command(&unit, "ExecStop"));
    wait_for("the master to exit", || {
        (!common::alive(second_pid)).then_some(())
    });
    sh_ok("dpkg --purge shoal");
    for f in [
        "/usr/sbin/shoal",
        "/etc/shoal",
        "/var/log/shoal",
        "/lib/systemd/system/shoal.service",
    ] {
        assert!(!Path::new(f).exists(), "{f} left after the purge");
    }
}
