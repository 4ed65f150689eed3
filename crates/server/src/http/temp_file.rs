//! nginx's temporary files: `client_body_temp_path` and `proxy_temp_path` (`PATH [L1 [L2
//! [L3]]]`). A file is named by a 10-digit number, one counter for the whole process counting
//! from 1 as nginx's does, and put in directories named by the number's last digits
//! (`levels` 1 2: `PATH/3/12/0000000123`), made as they are needed (mode 0700, as nginx makes
//! them). A file nobody is to see again is unlinked as soon as it is open; a persistent one
//! (`client_body_in_file_only on|clean`) stays until its owner removes it.
//!
//! Opening happens on the worker: one `open` (and, the first time, a `mkdir` per level).

use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use shoal_conf::{Directive, Error};

use crate::conf::{directive_err, parse_number, Builder};

/// A temporary files' directory and its levels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TempPath {
    pub path: PathBuf,
    /// Digits per directory level, from the end of the name.
    pub levels: Vec<usize>,
}

/// The process's temporary file counter (nginx's `ngx_temp_number`).
static NUMBER: AtomicU32 = AtomicU32::new(0);

/// The next number of the process's counter (nginx's `ngx_next_temp_number(0)`), for a
/// file named beside another.
pub fn next_number() -> u32 {
    NUMBER.fetch_add(1, Ordering::Relaxed).wrapping_add(1)
}

impl TempPath {
    /// `NAME PATH [L1 [L2 [L3]]]` as nginx's `ngx_conf_set_path_slot` reads it: each level a
    /// positive number, at most 10 digits in all; anything else is `invalid value`. A path
    /// another temporary path names with other levels is refused, as nginx's `ngx_add_path`
    /// refuses it.
    pub fn parse(b: &mut Builder, d: &Directive) -> Result<TempPath, Error> {
        let mut levels = Vec::new();
        for a in &d.args[1..] {
            let n = parse_number(&a.value)
                .filter(|n| *n > 0)
                .ok_or_else(|| directive_err(d, "invalid value"))?;
            levels.push(n as usize);
        }
        if levels.iter().sum::<usize>() > 10 {
            return Err(directive_err(d, "invalid value"));
        }
        let path = b.full_path(&d.args[0].value);
        if let Some((_, _, at)) = b
            .temp_paths
            .iter()
            .find(|(p, l, _)| *p == path && *l != levels)
        {
            return Err(Error::new(
                format!(
                    "the same path name \"{}\" in {at} has the different levels than in {}",
                    path.display(),
                    d.span
                ),
                None,
            ));
        }
        b.temp_paths
            .push((path.clone(), levels.clone(), d.span.clone()));
        Ok(TempPath { path, levels })
    }

    /// A new file here: its name, and the file open for reading and writing; unlinked at once
    /// unless `persistent`.
    pub fn create(&self, persistent: bool) -> io::Result<(File, PathBuf)> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let mut collisions = 0;
        loop {
            let n = next_number();
            let name = format!("{n:010}");
            let mut dir = self.path.clone();
            let mut end = name.len();
            for &l in &self.levels {
                dir.push(&name[end - l..end]);
                end -= l;
            }
            let file = dir.join(&name);
            let open = || {
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&file)
            };
            let opened = match open() {
                Err(e) if e.kind() == io::ErrorKind::NotFound && !self.levels.is_empty() => {
                    std::fs::DirBuilder::new()
                        .recursive(true)
                        .mode(0o700)
                        .create(&dir)?;
                    open()
                }
                other => other,
            };
            match opened {
                Ok(f) => {
                    if !persistent {
                        std::fs::remove_file(&file)?;
                    }
                    return Ok((f, file));
                }
                // Another process's file of the same number: the next one.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && collisions < 1000 => {
                    collisions += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Once the configuration is read: each configured temporary directory is made if missing
/// (mode 0700, given to `user` when running as root), as nginx's `ngx_create_paths` makes
/// them at start and in `-t`, so a path that cannot be made fails there rather than on the
/// first large request body. Its parent must exist (nginx makes one level too).
pub fn create_paths(b: &Builder) -> Result<(), Error> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let owner = match &b.main.user {
        Some((user, group)) if crate::privileges::is_root() => {
            crate::privileges::lookup(user, group.as_deref())
                .ok()
                .map(|(uid, _)| uid)
        }
        _ => None,
    };
    let mut done: Vec<&PathBuf> = Vec::new();
    for (path, _, _) in &b.temp_paths {
        if done.contains(&path) {
            continue;
        }
        done.push(path);
        match std::fs::DirBuilder::new().mode(0o700).create(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                let e =
                    crate::error::Error::failed(format_args!("mkdir() \"{}\"", path.display()), e);
                return Err(Error::new(e.to_string(), None));
            }
        }
        let Some(uid) = owner else { continue };
        let meta = std::fs::metadata(path)
            .map_err(|e| Error::new(format!("stat() \"{}\" failed ({e})", path.display()), None))?;
        if meta.uid() != uid {
            std::os::unix::fs::chown(path, Some(uid), None).map_err(|e| {
                let e =
                    crate::error::Error::failed(format_args!("chown() \"{}\"", path.display()), e);
                Error::new(e.to_string(), None)
            })?;
        }
        // The owner may read, write and enter it, whatever it was made with.
        let mode = meta.permissions().mode();
        if mode & 0o700 != 0o700 {
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | 0o700));
        }
    }
    Ok(())
}

/// A temporary file in `path` if one is configured, else an unnamed one (`O_TMPFILE`) in the
/// system's temporary directory. Returns the file and, for a named one, its name.
pub fn create_in(path: Option<&TempPath>, persistent: bool) -> io::Result<(File, Option<PathBuf>)> {
    match path {
        Some(p) => p.create(persistent).map(|(f, n)| (f, Some(n))),
        None if persistent => {
            let p = TempPath {
                path: std::env::temp_dir(),
                levels: Vec::new(),
            };
            p.create(true).map(|(f, n)| (f, Some(n)))
        }
        None => shoal_io::file::unlinked_temp_file(&std::env::temp_dir()).map(|f| (f, None)),
    }
}

/// Removes a persistent temporary file when its owner is done (`client_body_in_file_only
/// clean`).
pub struct RemoveOnDrop(pub PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_in_levels_and_unlinked_unless_persistent() {
        let dir = tempfile::tempdir().unwrap();
        let t = TempPath {
            path: dir.path().to_path_buf(),
            levels: vec![1, 2],
        };
        let (_, kept) = t.create(true).unwrap();
        let name = kept.file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(name.len(), 10);
        let l1 = &name[9..];
        let l2 = &name[7..9];
        assert_eq!(kept, dir.path().join(l1).join(l2).join(&name));
        assert!(kept.exists());
        let (mut f, gone) = t.create(false).unwrap();
        assert!(!gone.exists());
        use std::io::{Read, Seek, Write};
        f.write_all(b"still readable").unwrap();
        f.rewind().unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!(s, "still readable");
    }
}
