//! A directory listing as nginx's autoindex writes it, in its four formats, to the byte:
//! every line ends in CRLF (but JSON's last); HTML pads names to 50 columns and cuts longer ones to 47 with
//! `..>`; XML and JSON give times in UTC whatever `autoindex_localtime` says.
//!
//! Pure: entries in, bytes out; the handler (`mod.rs`) reads the directory.

use std::fs::Metadata;
use std::io::Write;
use std::os::unix::fs::MetadataExt;

/// `autoindex_format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Html,
    Xml,
    Json,
    Jsonp,
}

impl Format {
    /// The answer's type (XML says its charset; nginx sets it).
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Html => "text/html",
            Format::Xml => "text/xml; charset=utf-8",
            Format::Json => "application/json",
            Format::Jsonp => "application/javascript",
        }
    }
}

/// What an entry is, once links are followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Directory,
    File,
    /// Anything else: a link to nowhere, a socket, a device.
    Other,
}

/// One directory entry.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The name's bytes, as the file system has them.
    pub name: Vec<u8>,
    pub kind: Kind,
    pub mtime: i64,
    pub size: u64,
}

impl Entry {
    pub fn new(name: Vec<u8>, meta: &Metadata) -> Entry {
        let kind = if meta.is_dir() {
            Kind::Directory
        } else if meta.is_file() {
            Kind::File
        } else {
            Kind::Other
        };
        Entry {
            name,
            kind,
            mtime: meta.mtime(),
            size: meta.len(),
        }
    }
}

/// How to write a listing.
pub struct Options<'a> {
    pub format: Format,
    /// JSONP's callback (not empty for [`Format::Jsonp`]).
    pub callback: &'a str,
    /// The request's URI (`$uri`), for HTML's title.
    pub uri: &'a str,
    pub exact_size: bool,
    pub localtime: bool,
    /// The answer's charset is UTF-8: HTML measures names in characters.
    pub utf8: bool,
}

/// Names longer than this many columns are cut in HTML.
const NAME_LEN: usize = 50;

/// The listing's bytes: directories first, then by name (as bytes).
pub fn render(o: &Options<'_>, mut entries: Vec<Entry>) -> Vec<u8> {
    entries.sort_unstable_by(|a, b| {
        let dirs = (b.kind == Kind::Directory).cmp(&(a.kind == Kind::Directory));
        dirs.then_with(|| a.name.cmp(&b.name))
    });
    let mut out = Vec::with_capacity(256 + entries.len() * 160);
    match o.format {
        Format::Html => html(o, &entries, &mut out),
        Format::Xml => xml(&entries, &mut out),
        // JSON's last line has no line end.
        Format::Json => json(&entries, &mut out),
        Format::Jsonp => {
            out.extend_from_slice(b"/* callback */\r\n");
            out.extend_from_slice(o.callback.as_bytes());
            out.push(b'(');
            json(&entries, &mut out);
            out.extend_from_slice(b");");
        }
    }
    out
}

fn html(o: &Options<'_>, entries: &[Entry], out: &mut Vec<u8>) {
    out.extend_from_slice(b"<html>\r\n<head><title>Index of ");
    escape_html(o.uri.as_bytes(), out);
    out.extend_from_slice(b"</title></head>\r\n<body>\r\n<h1>Index of ");
    escape_html(o.uri.as_bytes(), out);
    out.extend_from_slice(b"</h1><hr><pre><a href=\"../\">../</a>\r\n");
    for e in entries {
        let dir = e.kind == Kind::Directory;
        out.extend_from_slice(b"<a href=\"");
        escape_uri(&e.name, out);
        if dir {
            out.push(b'/');
        }
        out.extend_from_slice(b"\">");
        let mut len = if o.utf8 {
            utf8_len(&e.name)
        } else {
            e.name.len()
        };
        if len > NAME_LEN {
            let shown = if o.utf8 && len != e.name.len() {
                utf8_prefix(&e.name, NAME_LEN - 3)
            } else {
                &e.name[..NAME_LEN - 3]
            };
            escape_html(shown, out);
            out.extend_from_slice(b"..&gt;</a>");
        } else {
            escape_html(&e.name, out);
            // A directory's `/` only while it fits in the column.
            if dir && len < NAME_LEN {
                out.push(b'/');
                len += 1;
            }
            out.extend_from_slice(b"</a>");
            out.resize(out.len() + (NAME_LEN - len), b' ');
        }
        out.push(b' ');
        let date = date(
            e.mtime,
            if o.localtime {
                local_offset(e.mtime)
            } else {
                0
            },
        );
        // "01-Jan-2023 00:00" from "Sun, 01 Jan 2023 00:00:00 GMT".
        out.extend_from_slice(&date[5..7]);
        out.push(b'-');
        out.extend_from_slice(&date[8..11]);
        out.push(b'-');
        out.extend_from_slice(&date[12..16]);
        out.push(b' ');
        out.extend_from_slice(&date[17..22]);
        out.push(b' ');
        match (dir, o.exact_size) {
            (true, true) => out.extend_from_slice(b"                  -"),
            (true, false) => out.extend_from_slice(b"      -"),
            (false, true) => {
                let _ = write!(out, "{:>19}", e.size);
            }
            (false, false) => human_size(e.size, out),
        }
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"</pre><hr></body>\r\n</html>\r\n");
}

/// nginx's `autoindex_exact_size off`: up to 9999 as it is, then K, M, G (1024s) rounded to
/// the nearest, in 7 columns.
fn human_size(n: u64, out: &mut Vec<u8>) {
    const K: u64 = 1024;
    let scaled = |unit: u64| n / unit + u64::from(n % unit > unit / 2 - 1);
    let _ = match n {
        _ if n >= K * K * K => write!(out, "{:>6}G", scaled(K * K * K)),
        _ if n >= K * K => write!(out, "{:>6}M", scaled(K * K)),
        10_000.. => write!(out, "{:>6}K", scaled(K)),
        _ => write!(out, " {n:>6}"),
    };
}

fn xml(entries: &[Entry], out: &mut Vec<u8>) {
    out.extend_from_slice(b"<?xml version=\"1.0\"?>\r\n<list>\r\n");
    for e in entries {
        let tag: &[u8] = match e.kind {
            Kind::Directory => b"directory",
            Kind::File => b"file",
            Kind::Other => b"other",
        };
        out.push(b'<');
        out.extend_from_slice(tag);
        let d = date(e.mtime, 0);
        // "2023-01-01T00:00:00Z" from "Sun, 01 Jan 2023 00:00:00 GMT".
        let month = MONTHS
            .iter()
            .position(|m| *m == &d[8..11])
            .map_or(1, |i| i + 1);
        out.extend_from_slice(b" mtime=\"");
        out.extend_from_slice(&d[12..16]);
        let _ = write!(out, "-{month:02}-");
        out.extend_from_slice(&d[5..7]);
        out.push(b'T');
        out.extend_from_slice(&d[17..25]);
        out.extend_from_slice(b"Z\"");
        if e.kind == Kind::File {
            let _ = write!(out, " size=\"{}\"", e.size);
        }
        out.push(b'>');
        escape_html(&e.name, out);
        out.extend_from_slice(b"</");
        out.extend_from_slice(tag);
        out.extend_from_slice(b">\r\n");
    }
    out.extend_from_slice(b"</list>\r\n");
}

/// The JSON array.
fn json(entries: &[Entry], out: &mut Vec<u8>) {
    out.extend_from_slice(b"[\r\n");
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b",\r\n");
        }
        out.extend_from_slice(b"{ \"name\":\"");
        escape_json(&e.name, out);
        out.extend_from_slice(match e.kind {
            Kind::Directory => b"\", \"type\":\"directory\", \"mtime\":\"",
            Kind::File => b"\", \"type\":\"file\", \"mtime\":\"",
            Kind::Other => b"\", \"type\":\"other\", \"mtime\":\"",
        });
        out.extend_from_slice(&date(e.mtime, 0));
        out.push(b'"');
        if e.kind == Kind::File {
            let _ = write!(out, ", \"size\":{}", e.size);
        }
        out.extend_from_slice(b" }");
    }
    if !entries.is_empty() {
        out.extend_from_slice(b"\r\n");
    }
    out.push(b']');
}

const MONTHS: [&[u8]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// `secs` moved by `offset` seconds, as an HTTP date (times before 1970 as the epoch).
fn date(secs: i64, offset: i64) -> [u8; shoal_http::date::DATE_LEN] {
    shoal_http::date::format_unix(secs.saturating_add(offset).max(0) as u64)
}

/// The local time zone's offset from UTC at `secs`.
fn local_offset(secs: i64) -> i64 {
    crate::variables::local_tm(secs.max(0) as u64).1
}

/// nginx's HTML escaping (`ngx_escape_html`): `<`, `>`, `&` and `"`.
fn escape_html(s: &[u8], out: &mut Vec<u8>) {
    for &c in s {
        match c {
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'&' => out.extend_from_slice(b"&amp;"),
            b'"' => out.extend_from_slice(b"&quot;"),
            _ => out.push(c),
        }
    }
}

/// A name in a URI: every byte but letters, digits, `-`, `.`, `_` and `~` as `%XX`.
fn escape_uri(s: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &c in s {
        if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~') {
            out.push(c);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(c >> 4)], HEX[usize::from(c & 15)]]);
        }
    }
}

/// nginx's JSON escaping: `"` and `\`, the usual control escapes, other bytes under 0x20 as
/// `\u00XX`; anything else as it is (a name that is not UTF-8 stays so).
fn escape_json(s: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..0x20 => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(c >> 4)],
                HEX[usize::from(c & 15)],
            ]),
            _ => out.push(c),
        }
    }
}

/// The length of a name in characters, or in bytes if it is not UTF-8 as nginx reads it.
fn utf8_len(s: &[u8]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < s.len() {
        if s[i] < 0x80 {
            i += 1;
        } else {
            match crate::http::charset::recode::decode(&s[i..]) {
                crate::http::charset::recode::Decoded::Char(c, len) if c <= 0x10_ffff => {
                    i += len;
                }
                _ => return s.len(),
            }
        }
        n += 1;
    }
    n
}

/// The first `chars` characters of a name, stopping early at a sequence that is not UTF-8.
fn utf8_prefix(s: &[u8], chars: usize) -> &[u8] {
    let mut i = 0;
    for _ in 0..chars {
        if i >= s.len() {
            break;
        }
        if s[i] < 0x80 {
            i += 1;
            continue;
        }
        match crate::http::charset::recode::decode(&s[i..]) {
            crate::http::charset::recode::Decoded::Char(c, len) if c <= 0x10_ffff => i += len,
            _ => break,
        }
    }
    &s[..i]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, kind: Kind, size: u64) -> Entry {
        Entry {
            name: name.as_bytes().to_vec(),
            kind,
            mtime: 1_672_531_200,
            size,
        }
    }

    fn opts(format: Format) -> Options<'static> {
        Options {
            format,
            callback: "cb",
            uri: "/d&<x>/",
            exact_size: true,
            localtime: false,
            utf8: false,
        }
    }

    #[test]
    fn html_as_nginx_writes_it() {
        let list = vec![
            entry("b c.txt", Kind::File, 7),
            entry("sub", Kind::Directory, 0),
            entry(&"z".repeat(51), Kind::File, 51),
            entry(&"d".repeat(50), Kind::Directory, 0),
        ];
        let out = String::from_utf8(render(&opts(Format::Html), list)).unwrap();
        let want = format!(
            "<html>\r\n<head><title>Index of /d&amp;&lt;x&gt;/</title></head>\r\n<body>\r\n\
             <h1>Index of /d&amp;&lt;x&gt;/</h1><hr><pre><a href=\"../\">../</a>\r\n\
             <a href=\"{d}/\">{d}</a> 01-Jan-2023 00:00                   -\r\n\
             <a href=\"sub/\">sub/</a>{p4} 01-Jan-2023 00:00                   -\r\n\
             <a href=\"b%20c.txt\">b c.txt</a>{p7} 01-Jan-2023 00:00                   7\r\n\
             <a href=\"{z}\">{z47}..&gt;</a> 01-Jan-2023 00:00                  51\r\n\
             </pre><hr></body>\r\n</html>\r\n",
            d = "d".repeat(50),
            z = "z".repeat(51),
            z47 = "z".repeat(47),
            p4 = " ".repeat(46),
            p7 = " ".repeat(43),
        );
        assert_eq!(out, want);
    }

    #[test]
    fn human_sizes() {
        let s = |n| {
            let mut v = Vec::new();
            human_size(n, &mut v);
            String::from_utf8(v).unwrap()
        };
        assert_eq!(s(0), "      0");
        assert_eq!(s(9999), "   9999");
        assert_eq!(s(10_000), "    10K");
        assert_eq!(s(10_751), "    10K");
        assert_eq!(s(10_752), "    11K");
        assert_eq!(s(1_048_575), "  1024K");
        assert_eq!(s(1_048_576), "     1M");
        assert_eq!(s(1_572_864), "     2M");
        assert_eq!(s(1_073_741_823), "  1024M");
        assert_eq!(s(1_610_612_736), "     2G");
        assert_eq!(s(5 * 1024u64.pow(4) + 7), "  5120G");
    }

    #[test]
    fn xml_json_and_jsonp() {
        let list = || {
            vec![
                entry("q\"<&>\\\t\u{1}", Kind::File, 3),
                entry("d", Kind::Directory, 0),
                entry("l", Kind::Other, 7),
            ]
        };
        let xml = String::from_utf8(render(&opts(Format::Xml), list())).unwrap();
        assert_eq!(
            xml,
            "<?xml version=\"1.0\"?>\r\n<list>\r\n\
             <directory mtime=\"2023-01-01T00:00:00Z\">d</directory>\r\n\
             <other mtime=\"2023-01-01T00:00:00Z\">l</other>\r\n\
             <file mtime=\"2023-01-01T00:00:00Z\" size=\"3\">q&quot;&lt;&amp;&gt;\\\t\u{1}</file>\r\n\
             </list>\r\n"
        );
        let json = String::from_utf8(render(&opts(Format::Json), list())).unwrap();
        assert_eq!(
            json,
            "[\r\n\
             { \"name\":\"d\", \"type\":\"directory\", \"mtime\":\"Sun, 01 Jan 2023 00:00:00 GMT\" },\r\n\
             { \"name\":\"l\", \"type\":\"other\", \"mtime\":\"Sun, 01 Jan 2023 00:00:00 GMT\" },\r\n\
             { \"name\":\"q\\\"<&>\\\\\\t\\u0001\", \"type\":\"file\", \"mtime\":\"Sun, 01 Jan 2023 00:00:00 GMT\", \"size\":3 }\r\n\
             ]"
        );
        let empty = String::from_utf8(render(&opts(Format::Jsonp), Vec::new())).unwrap();
        assert_eq!(empty, "/* callback */\r\ncb([\r\n]);");
    }

    #[test]
    fn names_in_characters_when_utf8() {
        let mut o = opts(Format::Html);
        o.utf8 = true;
        let name = "ж".repeat(51);
        let out = render(&o, vec![entry(&name, Kind::File, 1)]);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(&format!(">{}..&gt;</a> ", "ж".repeat(47))),
            "{text}"
        );
        // Not UTF-8: measured and cut in bytes.
        assert_eq!(utf8_len(b"ab\xd0"), 3);
        assert_eq!(utf8_len("жж".as_bytes()), 2);
        assert_eq!(utf8_prefix("жжж".as_bytes(), 2), "жж".as_bytes());
        assert_eq!(utf8_prefix(b"a\xffb", 3), b"a");
    }
}
