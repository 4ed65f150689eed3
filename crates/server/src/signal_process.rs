//! `-s SIGNAL` (nginx's `ngx_signal_process`): `stop`, `quit`, `reopen` or `reload` sent to the
//! running master, found through the pid file of the configuration given.

use crate::error::Error;
use crate::log::{report, Level};
use crate::master::{report_refused, Options};

/// `-s SIGNAL`: sends a signal to the running master through its pid file.
pub fn send_signal(opts: &Options, name: &str) -> i32 {
    let sig = match name {
        "stop" => libc::SIGTERM,
        "quit" => libc::SIGQUIT,
        "reopen" => libc::SIGUSR1,
        "reload" => libc::SIGHUP,
        _ => {
            report(Level::Emerg, &format!("invalid option: \"-s {name}\""));
            return 1;
        }
    };
    let conf = match opts.load() {
        Ok(c) => c,
        Err(e) => {
            report_refused(&e);
            return 1;
        }
    };
    let path = conf.pid_path();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            report(
                Level::Error,
                &Error::failed(format_args!("open() \"{}\"", path.display()), e),
            );
            return 1;
        }
    };
    let pid: libc::pid_t = match text.trim().parse() {
        Ok(p) if p > 0 => p,
        _ => {
            report(
                Level::Error,
                &format!(
                    "invalid PID number \"{}\" in \"{}\"",
                    text.trim(),
                    path.display()
                ),
            );
            return 1;
        }
    };
    // SAFETY: kill with a pid read from the pid file and a valid signal number.
    if unsafe { libc::kill(pid, sig) } != 0 {
        report(
            Level::Alert,
            &Error::failed(
                format_args!("kill({pid}, {sig})"),
                std::io::Error::last_os_error(),
            ),
        );
        return 1;
    }
    0
}
