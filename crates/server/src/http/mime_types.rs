//! nginx's `ngx_http_types_slot`: a filter's list of MIME types (`charset_types`,
//! `sub_filter_types`), and the test of an answer's type against it
//! (`ngx_http_test_content_type`).
//!
//! Each directive adds to its level's list, which starts with `text/html`; a type already
//! listed is warned about; `*` is any type. A level without the directive inherits its
//! parent's list whole.

use std::sync::Arc;

use shoal_conf::{Directive, Error};

use crate::conf::Builder;

/// A `*_types` list.
#[derive(Clone, Debug)]
pub enum Types {
    /// `*`.
    Any,
    /// Lowercase, `text/html` first.
    List(Arc<Vec<String>>),
}

impl Types {
    /// Whether `content_type` (the type without its charset) is listed; `defaults` stand for
    /// a list no level set.
    pub fn matches(types: Option<&Types>, defaults: &[&str], content_type: &str) -> bool {
        match types {
            Some(Types::Any) => true,
            Some(Types::List(list)) => list.iter().any(|t| t.eq_ignore_ascii_case(content_type)),
            None => defaults
                .iter()
                .any(|t| t.eq_ignore_ascii_case(content_type)),
        }
    }
}

impl Types {
    /// nginx's `ngx_http_test_content_type` for an answer's type (`None`: it has none): `*`
    /// takes any answer, one without a type too; a list, a listed type.
    pub fn matches_answer(types: Option<&Types>, defaults: &[&str], tested: Option<&str>) -> bool {
        match (types, tested) {
            (Some(Types::Any), _) => true,
            (_, Some(t)) => Types::matches(types, defaults, t),
            (_, None) => false,
        }
    }
}

/// Reads one `*_types` directive into its level's `slot`.
pub fn types_slot(b: &mut Builder, d: &Directive, slot: &mut Option<Types>) -> Result<(), Error> {
    let mut list = match slot {
        Some(Types::Any) => return Ok(()),
        Some(Types::List(l)) => (**l).clone(),
        None => vec!["text/html".to_string()],
    };
    for a in &d.args {
        if a.value == "*" {
            *slot = Some(Types::Any);
            return Ok(());
        }
        let t = a.value.to_ascii_lowercase();
        if list.contains(&t) {
            b.warn(format!("duplicate MIME type \"{t}\""), &d.span);
            continue;
        }
        list.push(t);
    }
    *slot = Some(Types::List(Arc::new(list)));
    Ok(())
}
