//! Where a URI's file is: `root`, `alias` and `index`.

use super::*;

/// `root PATH` or `alias PATH`: where a URI's file is.
#[derive(Clone, Debug)]
pub struct DocRoot {
    pub alias: bool,
    /// The path when it has no variables (resolved against the prefix).
    pub path: PathBuf,
    /// The path with variables, evaluated per request.
    pub template: Option<crate::variables::Template>,
    /// For `alias` in a prefix location: how many leading bytes of the URI it replaces
    /// (the location's name); `None` in a regex location, where the alias is the whole path.
    pub alias_len: Option<usize>,
    /// The prefix, for a path with variables that evaluates relative.
    pub(super) prefix: PathBuf,
}

impl DocRoot {
    /// Reads `root`/`alias` text (nginx drops a trailing `/` of a root, keeps an alias's).
    pub fn new(b: &Builder, text: &str, alias: bool) -> Result<DocRoot, crate::error::Error> {
        let text = if !alias && text.len() > 1 {
            text.strip_suffix('/').unwrap_or(text)
        } else {
            text
        };
        let template = crate::variables::Template::compile(text)?;
        let template = (!template.is_static()).then_some(template);
        Ok(DocRoot {
            alias,
            path: b.full_path(text),
            template,
            alias_len: None,
            prefix: b.prefix.clone(),
        })
    }

    /// The file for `uri`: root + URI, or the alias in place of the location's prefix.
    pub fn map(&self, uri: &str, vars: Option<&crate::variables::Vars<'_>>) -> PathBuf {
        self.map_with_room(uri, vars, 0)
    }

    /// [`DocRoot::map`] with room for `room` more bytes after the path (an index file's name:
    /// the caller appends it without another allocation).
    pub fn map_with_room(
        &self,
        uri: &str,
        vars: Option<&crate::variables::Vars<'_>>,
        room: usize,
    ) -> PathBuf {
        let evaluated = self.evaluate(vars);
        let base: &Path = &evaluated;
        let tail = match (self.alias, self.alias_len) {
            (false, _) => uri,
            (true, Some(n)) => uri.get(n..).unwrap_or(""),
            (true, None) => return base.to_path_buf(),
        };
        // One allocation of the final size (not the root's, then grown for the URI).
        let mut s = std::ffi::OsString::with_capacity(base.as_os_str().len() + tail.len() + room);
        s.push(base.as_os_str());
        s.push(tail);
        PathBuf::from(s)
    }

    /// An alias of a regex location (the whole path, `alias_len` `None`).
    pub fn whole_alias(&self) -> bool {
        self.alias && self.alias_len.is_none()
    }

    /// The file `try_files` checks for `name`: in a regex location an alias is the whole
    /// path, and try_files adds each name to it (nginx's `add_uri_to_alias`).
    pub fn try_file(&self, name: &str, vars: &crate::variables::Vars<'_>) -> PathBuf {
        if !self.whole_alias() {
            return self.map(name, Some(vars));
        }
        let mut s = self.evaluate(Some(vars)).into_owned().into_os_string();
        s.push(name);
        PathBuf::from(s)
    }

    /// A regex location's alias as a root, for the file `try_files` found in it: nginx then
    /// maps the name it passes as the URI to the alias followed by that name.
    pub fn with_uri_added(&self, vars: &crate::variables::Vars<'_>) -> DocRoot {
        DocRoot {
            alias: false,
            path: self.evaluate(Some(vars)).into_owned(),
            template: None,
            alias_len: None,
            prefix: self.prefix.clone(),
        }
    }

    /// `$document_root` without variables.
    pub fn base(&self) -> &std::path::Path {
        &self.path
    }

    /// `$document_root`: the path with its variables evaluated for a request (relative
    /// results taken from the prefix, as nginx's `ngx_get_full_name`).
    pub fn evaluate(
        &self,
        vars: Option<&crate::variables::Vars<'_>>,
    ) -> std::borrow::Cow<'_, Path> {
        match (&self.template, vars) {
            (Some(t), Some(v)) => {
                let p = PathBuf::from(v.eval(t));
                std::borrow::Cow::Owned(if p.is_absolute() {
                    p
                } else {
                    self.prefix.join(p)
                })
            }
            _ => std::borrow::Cow::Borrowed(&self.path),
        }
    }
}

pub(super) fn set_root(b: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let lc = loc_conf(s);
    if let Some(r) = &lc.root {
        return Err(err(
            d,
            if r.alias {
                "\"root\" directive is duplicate, \"alias\" directive was specified earlier"
            } else {
                "\"root\" directive is duplicate"
            },
        ));
    }
    lc.root = Some(DocRoot::new(b, &d.args[0].value, false).map_err(|m| err(d, m))?);
    Ok(())
}

pub(super) fn set_index(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    for a in &d.args {
        if a.value.is_empty() {
            return Err(err(d, "index \"\" in \"index\" directive is invalid"));
        }
    }
    let list = loc_conf(s).index.get_or_insert_with(Vec::new);
    for a in &d.args {
        let mut name = IndexName::new(&a.value);
        let t = crate::variables::Template::compile(&a.value).map_err(|m| err(d, m))?;
        name.template = (!t.is_static()).then_some(t);
        list.push(name);
    }
    Ok(())
}

/// One name of `index`: text, or text with variables evaluated per request (`index
/// index$geo.html`).
#[derive(Clone, Debug)]
pub struct IndexName {
    pub text: String,
    pub template: Option<crate::variables::Template>,
}

impl IndexName {
    pub fn new(text: &str) -> IndexName {
        IndexName {
            text: text.to_string(),
            template: None,
        }
    }
}
