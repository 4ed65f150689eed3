//! nginx's ngx_http_browser_module: `$modern_browser`, `$ancient_browser` and `$msie`, from
//! the `User-Agent` line.
//!
//! `modern_browser NAME VERSION` (NAME one of `opera`, `msie`, `safari`, `konqueror`,
//! `gecko`) and `modern_browser unlisted`; `ancient_browser WORD...` (a substring, or
//! `netscape4`: `Mozilla/1` to `Mozilla/4`); the two variables' values
//! (`modern_browser_value`, `ancient_browser_value`, `1` by default). A request is modern or
//! ancient as nginx's `ngx_http_browser` decides: the listed browsers first, in nginx's order
//! (Opera first, since its agent may say MSIE: an unlisted Opera is listed with a version no
//! agent reaches), the first whose name is found decides by its version (numbers joined two
//! digits a part, nginx's arithmetic); then `netscape4` and the ancient words; then
//! `unlisted`. `$msie` is `1` for MSIE that is not Opera, as nginx's `msie` flag.
//!
//! nginx fails `modern_browser WORD` (one word that is not `unlisted`) without saying why;
//! shoal says `invalid value "WORD"`.

use std::sync::Arc;

use shoal_conf::{Directive, Error};

use crate::conf::{err, invalid_value, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;
use crate::variables::Vars;

pub static DIRECTIVES: &[Command] = &[
    Command::new("modern_browser", Ctx::HSL, Args::Take(1, 2), set_modern),
    Command::new("ancient_browser", Ctx::HSL, Args::ONE_OR_MORE, set_ancient),
    Command::new(
        "modern_browser_value",
        Ctx::HSL,
        Args::ONE,
        set_modern_value,
    ),
    Command::new(
        "ancient_browser_value",
        Ctx::HSL,
        Args::ONE,
        set_ancient_value,
    ),
];

/// nginx's browser masks, in the order they are checked: the name, where its search starts
/// in the agent (the bytes skipped), and the text whose end the version follows.
const MASKS: [(&str, usize, &str); 5] = [
    ("opera", 0, "Opera "),
    ("msie", "Mozilla/4.0 (compatible; ".len(), "MSIE "),
    ("safari", "Mozilla/5.0 (".len(), "Safari/"),
    ("konqueror", "Mozilla/5.0 (compatible; ".len(), "Konqueror/"),
    ("gecko", "Mozilla/5.0 (".len(), "rv:"),
];

/// What the opera mask searches for: nginx's table says `Opera` and adds the length of
/// `Opera ` to skip its version's separator.
const OPERA_NAME: &str = "Opera";

/// A listed modern browser: its mask and lowest version.
#[derive(Clone, Copy, Debug)]
struct Modern {
    mask: usize,
    version: u64,
    /// Opera added because it was not listed.
    unlisted_opera: bool,
}

/// The module's configuration of a level.
#[derive(Clone, Debug, Default)]
pub struct BrowserLoc {
    /// The listed modern browsers, in mask order once merged.
    modern: Option<Arc<Vec<Modern>>>,
    modern_unlisted: bool,
    ancient: Option<Arc<Vec<String>>>,
    netscape4: bool,
    modern_value: Option<Arc<str>>,
    ancient_value: Option<Arc<str>>,
}

/// nginx's version number: each dotted part two decimal digits further right (wrapping as its
/// unsigned arithmetic does).
fn version_of(text: &[u8]) -> Option<u64> {
    let (mut version, mut ver, mut scale) = (0u64, 0u64, 1_000_000u64);
    for &c in text {
        match c {
            b'0'..=b'9' => ver = ver.wrapping_mul(10).wrapping_add(u64::from(c - b'0')),
            b'.' => {
                version = version.wrapping_add(ver.wrapping_mul(scale));
                ver = 0;
                scale /= 100;
            }
            _ => return None,
        }
    }
    Some(version.wrapping_add(ver.wrapping_mul(scale)))
}

fn browser<'a>(s: &'a mut Scope<'_>) -> &'a mut BrowserLoc {
    &mut loc_conf(s).browser
}

fn set_modern(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let name = d.args[0].value.as_str();
    let loc = browser(s);
    if d.args.len() == 1 {
        if name == "unlisted" {
            loc.modern_unlisted = true;
            return Ok(());
        }
        return Err(invalid_value(d, name));
    }
    let Some(mask) = MASKS.iter().position(|m| m.0.eq_ignore_ascii_case(name)) else {
        return Err(err(d, format!("unknown browser name \"{name}\"")));
    };
    let v = &d.args[1].value;
    let version = version_of(v.as_bytes())
        .ok_or_else(|| err(d, format!("invalid browser version \"{v}\"")))?;
    let list = Arc::make_mut(loc.modern.get_or_insert_with(Default::default));
    list.retain(|m| !m.unlisted_opera);
    list.push(Modern {
        mask,
        version,
        unlisted_opera: false,
    });
    // Opera's agents may say MSIE: an Opera not listed is listed as never modern. Then the
    // list is in the masks' order (nginx sorts it when it merges).
    if !list.iter().any(|m| m.mask == 0) {
        list.push(Modern {
            mask: 0,
            version: 4_001_000_000,
            unlisted_opera: true,
        });
    }
    list.sort_by_key(|m| m.mask);
    Ok(())
}

fn set_ancient(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let loc = browser(s);
    for a in &d.args {
        if a.value == "netscape4" {
            loc.netscape4 = true;
        } else {
            Arc::make_mut(loc.ancient.get_or_insert_with(Default::default)).push(a.value.clone());
        }
    }
    Ok(())
}

// Neither value is checked for a repeat: the last one counts, as in nginx.
fn set_modern_value(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    browser(s).modern_value = Some(d.args[0].value.as_str().into());
    Ok(())
}

fn set_ancient_value(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    browser(s).ancient_value = Some(d.args[0].value.as_str().into());
    Ok(())
}

/// nginx's `ngx_strstr`: an empty needle is never found.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// nginx's `ngx_http_browser`: whether the agent is modern.
fn modern(loc: &BrowserLoc, ua: Option<&[u8]>) -> bool {
    let Some(ua) = ua else {
        return loc.modern_unlisted;
    };
    if let Some(list) = &loc.modern {
        for m in list.iter() {
            let (_, skip, name) = MASKS[m.mask];
            let text = if m.mask == 0 { OPERA_NAME } else { name };
            let Some(from) = ua.get(skip..).filter(|r| !r.is_empty()) else {
                continue;
            };
            let Some(at) = find(from, text.as_bytes()) else {
                continue;
            };
            let start = skip + at + name.len();
            if start >= ua.len() {
                continue;
            }
            let (mut version, mut ver, mut scale) = (0u64, 0u64, 1_000_000u64);
            for &c in &ua[start..] {
                match c {
                    b'0'..=b'9' => ver = ver.wrapping_mul(10).wrapping_add(u64::from(c - b'0')),
                    b'.' => {
                        version = version.wrapping_add(ver.wrapping_mul(scale));
                        if version > m.version {
                            return true;
                        }
                        ver = 0;
                        scale /= 100;
                    }
                    _ => break,
                }
            }
            version = version.wrapping_add(ver.wrapping_mul(scale));
            return version >= m.version;
        }
        if !loc.modern_unlisted {
            return false;
        }
    }
    if loc.netscape4
        && ua.len() > "Mozilla/4.72 ".len()
        && ua.starts_with(b"Mozilla/")
        && (b'1'..=b'4').contains(&ua[8])
    {
        return false;
    }
    if let Some(words) = &loc.ancient {
        if words
            .iter()
            .any(|w| ua.len() >= w.len() && find(ua, w.as_bytes()).is_some())
        {
            return false;
        }
    }
    loc.modern_unlisted
}

/// The module's place in the module list.
pub struct Module;

impl super::modules::HttpModule for Module {
    type Loc = BrowserLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;
    const VARIABLES: &'static [&'static str] = &["modern_browser", "ancient_browser", "msie"];

    fn merge(loc: &mut BrowserLoc, parent: &BrowserLoc) {
        if loc.modern.is_none() && !loc.modern_unlisted {
            loc.modern.clone_from(&parent.modern);
            loc.modern_unlisted = parent.modern_unlisted;
        }
        if loc.ancient.is_none() && !loc.netscape4 {
            loc.ancient.clone_from(&parent.ancient);
            loc.netscape4 = parent.netscape4;
        }
        if loc.modern_value.is_none() {
            loc.modern_value.clone_from(&parent.modern_value);
        }
        if loc.ancient_value.is_none() {
            loc.ancient_value.clone_from(&parent.ancient_value);
        }
    }

    fn variable(
        loc: Option<&BrowserLoc>,
        name: &str,
        vars: &Vars<'_>,
        out: &mut String,
    ) -> Option<bool> {
        let ua = vars.req.and_then(|r| r.header("user-agent"));
        if name == "msie" {
            if ua.is_some_and(super::msie::is_msie) {
                out.push('1');
            }
            return Some(true);
        }
        let default = BrowserLoc::default();
        let loc = loc.unwrap_or(&default);
        let is_modern = modern(loc, ua);
        let value = match (name, is_modern) {
            ("modern_browser", true) => loc.modern_value.as_deref().unwrap_or("1"),
            ("ancient_browser", false) => loc.ancient_value.as_deref().unwrap_or("1"),
            _ => "",
        };
        out.push_str(value);
        Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(modern_list: &[(usize, &str)], unlisted: bool, ancient: &[&str]) -> BrowserLoc {
        let mut list: Vec<Modern> = modern_list
            .iter()
            .map(|&(mask, v)| Modern {
                mask,
                version: version_of(v.as_bytes()).unwrap(),
                unlisted_opera: false,
            })
            .collect();
        list.push(Modern {
            mask: 0,
            version: 4_001_000_000,
            unlisted_opera: true,
        });
        list.sort_by_key(|m| m.mask);
        BrowserLoc {
            modern: Some(Arc::new(list)),
            modern_unlisted: unlisted,
            ancient: (!ancient.is_empty())
                .then(|| Arc::new(ancient.iter().map(|s| s.to_string()).collect())),
            ..Default::default()
        }
    }

    #[test]
    fn versions_as_nginx_counts_them() {
        assert_eq!(version_of(b"5.5"), Some(5_050_000));
        assert_eq!(version_of(b"1.7.5"), Some(1_070_500));
        assert_eq!(version_of(b"125"), Some(125_000_000));
        assert_eq!(version_of(b"5.x"), None);
    }

    #[test]
    fn the_first_listed_browser_found_decides() {
        let l = loc(&[(1, "6.0"), (4, "1.7")], false, &[]);
        let msie6 = b"Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)";
        let msie5 = b"Mozilla/4.0 (compatible; MSIE 5.5; Windows 98)";
        assert!(modern(&l, Some(msie6)));
        assert!(!modern(&l, Some(msie5)));
        // Opera saying MSIE is listed as never modern.
        assert!(!modern(
            &l,
            Some(b"Mozilla/4.0 (compatible; MSIE 6.0; X11) Opera 7.50  [en]")
        ));
        assert!(modern(
            &l,
            Some(b"Mozilla/5.0 (Windows; U; rv:1.7.5) Gecko/20041107")
        ));
        assert!(!modern(&l, Some(b"curl/8.0")));
        assert!(!modern(&l, None));
        let l = loc(&[(1, "6.0")], true, &["curl"]);
        assert!(!modern(&l, Some(b"curl/8.0")));
        assert!(modern(&l, Some(b"Wget/1.0")));
        assert!(modern(&l, None));
    }
}
