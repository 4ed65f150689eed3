//! Names from the configuration that answers carry (`add_header`'s header names), kept for
//! the life of the process so that an answer holds them as `&'static str` instead of a copy
//! per answer. Each distinct name is kept once: a reload that names them again keeps nothing
//! new, so what is kept is bounded by the names ever configured.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

/// The one kept copy of `name`.
pub fn intern(name: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(kept) = names.get(name) {
        return kept;
    }
    let kept: &'static str = Box::leak(name.into());
    names.insert(kept);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_kept_once() {
        let a = intern("X-Cache-Status");
        let b = intern(&String::from("X-Cache-Status"));
        assert_eq!(a, "X-Cache-Status");
        assert!(std::ptr::eq(a, b));
        assert!(!std::ptr::eq(a, intern("X-Other")));
    }
}
