//! Directives from tokens, with `include`. (Implemented by the conf work item.)
use crate::{Error, Parsed};
use std::path::Path;

/// Parses `path` and every file it includes. Relative `include` paths resolve against
/// `conf_prefix` (the directory of the main configuration file, as nginx does).
pub fn parse_file(path: &Path, conf_prefix: &Path) -> Result<Parsed, Error> {
    let _ = (path, conf_prefix);
    Err(Error::new("parser not implemented yet", None))
}

/// Parses text that is not a file: `-g` directives (`file` = `None`: errors say `in command
/// line`) or the built-in default configuration.
pub fn parse_str(text: &str, file: Option<&Path>, conf_prefix: &Path) -> Result<Parsed, Error> {
    let _ = (text, file, conf_prefix);
    Err(Error::new("parser not implemented yet", None))
}
