//! The `shoal` binary: nginx's command line, then the master (`shoal_server::master`).
//!
//! With no `-c` and no file at the default path, shoal runs a built-in configuration that
//! serves this repository's `html/` on port 8080 in the foreground.

use std::path::{Path, PathBuf};
use std::process::exit;

use shoal_server::log::Target;
use shoal_server::master::{self, Options};

mod allocator;

#[global_allocator]
static ALLOCATOR: allocator::Mimalloc = allocator::Mimalloc;

/// Compiled-in defaults, as nginx's `configure` sets them.
const DEFAULT_PREFIX: &str = "/usr/share/shoal/";
const DEFAULT_CONF: &str = "/etc/shoal/shoal.conf";

/// The configuration used when there is no file at the default path.
fn builtin_conf() -> &'static str {
    let repo = env!("CARGO_MANIFEST_DIR");
    let user = owner_as_user(&format!("{repo}/html"));
    let text = format!(
        "# shoal's built-in configuration, used when {DEFAULT_CONF} does not exist.\n\
         {user}\
         daemon off;\n\
         error_log stderr notice;\n\
         pid /tmp/shoal.pid;\n\
         events {{ }}\n\
         http {{\n    \
             access_log /dev/stdout;\n    \
             include {repo}/conf/mime.types;\n    \
             default_type application/octet-stream;\n    \
             sendfile on;\n    \
             keepalive_timeout 65;\n    \
             server {{\n        \
                 listen 8080;\n        \
                 server_name localhost;\n        \
                 root {repo}/html;\n        \
                 index index.html;\n    \
             }}\n\
         }}\n"
    );
    Box::leak(text.into_boxed_str())
}

/// As root, `user OWNER GROUP;` of the checkout's `html/`: started as root, shoal serves as
/// nginx's default `nobody`, which cannot read a checkout in a 0700 home (`/root`); the files'
/// owner can. Not as root: nothing (the line would be ignored with a warning).
fn owner_as_user(dir: &str) -> String {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return String::new();
    }
    let Ok(meta) = std::fs::metadata(dir) else {
        return String::new();
    };
    // SAFETY: getpwuid/getgrgid return libc's static records or null, each read (copied)
    // before the next such call; the process has no other thread yet.
    let names = unsafe {
        let pw = libc::getpwuid(meta.uid());
        let user = (!pw.is_null()).then(|| {
            std::ffi::CStr::from_ptr((*pw).pw_name)
                .to_string_lossy()
                .into_owned()
        });
        let gr = libc::getgrgid(meta.gid());
        let group = (!gr.is_null()).then(|| {
            std::ffi::CStr::from_ptr((*gr).gr_name)
                .to_string_lossy()
                .into_owned()
        });
        user.zip(group)
    };
    let Some((user, group)) = names else {
        return String::new();
    };
    format!("user {user} {group};\n")
}

const USAGE: &str = "Usage: shoal [-?hvVtTq] [-s signal] [-p prefix]
             [-e filename] [-c filename] [-g directives]

Options:
  -?,-h         : this help
  -v            : show version and exit
  -V            : show version and configure options then exit
  -t            : test configuration and exit
  -T            : test configuration, dump it and exit
  -q            : suppress non-error messages during configuration testing
  -s signal     : send signal to a master process: stop, quit, reopen, reload
  -p prefix     : set prefix path (default: /usr/share/shoal/)
  -e filename   : set error log file (default: logs/error.log under the prefix)
  -c filename   : set configuration file (default: /etc/shoal/shoal.conf)
  -g directives : set global directives out of configuration file
";

#[derive(Default)]
struct Cli {
    help: bool,
    version: bool,
    version_full: bool,
    test: bool,
    dump: bool,
    quiet: bool,
    signal: Option<String>,
    prefix: Option<String>,
    error_log: Option<String>,
    conf: Option<String>,
    globals: Option<String>,
}

/// nginx's option parsing: flags may be grouped (`-tq`), a value may be attached (`-cFILE`)
/// or be the next argument.
fn parse_cli(args: &[String]) -> Result<Cli, String> {
    let mut cli = Cli::default();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let Some(flags) = arg.strip_prefix('-') else {
            return Err(format!("invalid option: \"{arg}\""));
        };
        for (pos, c) in flags.char_indices() {
            let slot = match c {
                '?' | 'h' => {
                    cli.help = true;
                    continue;
                }
                'v' => {
                    cli.version = true;
                    continue;
                }
                'V' => {
                    cli.version = true;
                    cli.version_full = true;
                    continue;
                }
                't' => {
                    cli.test = true;
                    continue;
                }
                'T' => {
                    cli.test = true;
                    cli.dump = true;
                    continue;
                }
                'q' => {
                    cli.quiet = true;
                    continue;
                }
                's' => (&mut cli.signal, "signal"),
                'p' => (&mut cli.prefix, "prefix"),
                'e' => (&mut cli.error_log, "file name"),
                'c' => (&mut cli.conf, "file name"),
                'g' => (&mut cli.globals, "parameters"),
                other => return Err(format!("invalid option: \"{other}\"")),
            };
            let rest = &flags[pos + c.len_utf8()..];
            let value = if !rest.is_empty() {
                rest.to_string()
            } else if i + 1 < args.len() {
                i += 1;
                args[i].clone()
            } else {
                return Err(format!("option \"-{c}\" requires {}", slot.1));
            };
            if c == 's' && !matches!(value.as_str(), "stop" | "quit" | "reopen" | "reload") {
                return Err(format!("invalid option: \"-s {value}\""));
            }
            *slot.0 = Some(value);
            break;
        }
        if flags.is_empty() {
            return Err("invalid option: \"-\"".to_string());
        }
        i += 1;
    }
    Ok(cli)
}

fn absolute(p: &str) -> PathBuf {
    let path = Path::new(p);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

fn print_version(full: bool) {
    eprintln!("shoal version: shoal/{}", shoal_server::VERSION);
    if full {
        eprintln!(
            "built with {} ({} profile)",
            option_env!("RUSTC_VERSION").unwrap_or("rustc"),
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
        );
        eprintln!(
            "features: epoll, reuseport, EPOLLEXCLUSIVE, threads (one tokio current_thread \
             runtime per worker), thread pools, sendfile, preadv2 RWF_NOWAIT, cachestat"
        );
        eprintln!(
            "configure arguments: --prefix={DEFAULT_PREFIX} --conf-path={DEFAULT_CONF} \
             --pid-path=logs/shoal.pid --error-log-path=logs/error.log"
        );
    }
}

fn main() {
    shoal_server::spare::set_release_freed(allocator::release_freed);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cli = match parse_cli(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("shoal: {e}");
            exit(1);
        }
    };
    if cli.version {
        print_version(cli.version_full);
    }
    if cli.help {
        eprint!("{USAGE}");
    }
    if cli.version || cli.help {
        exit(0);
    }

    let mut prefix = absolute(cli.prefix.as_deref().unwrap_or(DEFAULT_PREFIX));
    if prefix.as_os_str().is_empty() {
        prefix = PathBuf::from("/");
    }
    let (conf_file, builtin) = match &cli.conf {
        Some(c) => {
            let p = Path::new(c);
            let file = if p.is_absolute() {
                p.to_path_buf()
            } else {
                prefix.join(p)
            };
            (file, None)
        }
        None if Path::new(DEFAULT_CONF).exists() => (PathBuf::from(DEFAULT_CONF), None),
        None => (
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/built-in.conf")),
            Some(builtin_conf()),
        ),
    };
    let opts = Options {
        prefix,
        conf_file,
        builtin,
        globals: cli.globals.clone(),
        error_log: cli.error_log.as_deref().map(|e| {
            if e == "stderr" {
                Target::Stderr
            } else {
                Target::File(absolute(e))
            }
        }),
    };

    if let Some(sig) = &cli.signal {
        exit(shoal_server::signal_process::send_signal(&opts, sig));
    }
    if cli.test {
        exit(test_config(&opts, cli.quiet, cli.dump));
    }
    exit(master::run(opts));
}

/// `-t` / `-T`: nginx's wording on stderr; `-T` also prints every file read to stdout.
fn test_config(opts: &Options, quiet: bool, dump: bool) -> i32 {
    let name = opts.conf_file.display();
    let checked = match opts.load() {
        Ok(conf) => {
            // Read: its warnings come before what the test finds after (pid file, logs).
            master::report_warnings(&conf);
            master::check_for_test(&conf).map(|()| conf)
        }
        Err(e) => Err(e),
    };
    match checked {
        Ok(conf) => {
            if !quiet {
                eprintln!("shoal: the configuration file {name} syntax is ok");
                eprintln!("shoal: configuration file {name} test is successful");
            }
            if dump {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                for f in &conf.files {
                    let _ = writeln!(out, "# configuration file {}:", f.path.display());
                    let _ = out.write_all(f.text.as_bytes());
                    let _ = writeln!(out);
                }
            }
            0
        }
        Err(e) => {
            master::report_refused(&e);
            eprintln!("shoal: configuration file {name} test failed");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> Result<Cli, String> {
        parse_cli(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn grouped_and_attached() {
        let c = cli(&["-tq", "-c/etc/x.conf", "-p", "/srv/", "-g", "daemon off;"]).unwrap();
        assert!(c.test && c.quiet && !c.dump);
        assert_eq!(c.conf.as_deref(), Some("/etc/x.conf"));
        assert_eq!(c.prefix.as_deref(), Some("/srv/"));
        assert_eq!(c.globals.as_deref(), Some("daemon off;"));
    }

    #[test]
    fn errors() {
        assert_eq!(cli(&["-x"]).err().unwrap(), "invalid option: \"x\"");
        assert_eq!(
            cli(&["-c"]).err().unwrap(),
            "option \"-c\" requires file name"
        );
        assert_eq!(cli(&["-s"]).err().unwrap(), "option \"-s\" requires signal");
        assert_eq!(cli(&["foo"]).err().unwrap(), "invalid option: \"foo\"");
        assert_eq!(
            cli(&["-s", "halt"]).err().unwrap(),
            "invalid option: \"-s halt\""
        );
        assert!(cli(&["-sreload"]).is_ok());
    }
}
