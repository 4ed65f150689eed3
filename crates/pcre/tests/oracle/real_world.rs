//! Patterns from real configurations, compared on a list of subjects: the regexes of well-known
//! nginx configurations (WordPress, Nextcloud, h5bp, Magento, Drupal, the nginx documentation)
//! and every regex in the configurations under `tests/confs/`.

use std::path::Path;

use super::{compare, Outcome};

/// Subjects for the real-world patterns: URIs, hosts, user agents, arguments.
const SUBJECTS: &[&str] = &[
    "",
    "/",
    "\n",
    "a\nb",
    "/index.php",
    "/index.php\n",
    "/index.php/apps/files",
    "/a.PHP",
    "/wp-admin/",
    "/wp-admin/admin-ajax.php",
    "/wp-login.php",
    "/wp-content/uploads/2020/01/x.php",
    "/wp-content/themes/t/style.css",
    "/wp-json/wp/v2/posts",
    "/xmlrpc.php",
    "/img/a.JPG",
    "/img/photo.jpeg",
    "/css/site.1234.css",
    "/js/app.20200101.min.js",
    "/static/version1234/frontend/a.css",
    "/static/frontend/a.js",
    "/media/catalog/product/x.jpg",
    "/app/etc/env.php",
    "/private/x",
    "/privateer",
    "/public/x",
    "/api/v2/users/7",
    "/api/",
    "/.git/config",
    "/.well-known/acme-challenge/x",
    "/.well-known/carddav",
    "/.htaccess",
    "/remote.php/dav/files/u",
    "/ocs/v1.php/cloud",
    "/status.php",
    "/updater/index.php",
    "/core/ajax/update.php",
    "/build/x",
    "/data/x",
    "/blog/2020/01/title",
    "/en/page",
    "/fr/",
    "/users/bob/",
    "/users/bob",
    "/download/x/media/y.mp3",
    "/download/a/audio/b.wav",
    "/phpmyadmin/index.php",
    "/phpmyadmin/themes/a.png",
    "/update.php",
    "/sites/default/files/a.php",
    "/sites/default/files/styles/thumb/a.jpg",
    "/sites/x/private/y",
    "/system/files/a.pdf",
    "/fr/system/files/a.pdf",
    "/composer.json",
    "/vendor/bin/x.php",
    "/x.sql",
    "/dump.sql.bak",
    "/x.php~",
    "/x.module",
    "/#x#",
    "/old/page",
    "/OLD/Page",
    "/café",
    "/é",
    "/x.woff2",
    "/a/b/c.html",
    "/feed.rss",
    "/manifest.appcache",
    "foo.example.com",
    "FOO.Example.COM",
    "www.example.org",
    "example.org",
    "a1.example.net",
    "ab1234.example.net",
    "a.b.example.com",
    "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)",
    "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)",
    "Mozilla/4.0 (compatible; MSIE 5.5; Windows 98)",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 16_0 like Mac OS X) Mobile",
    "Mozilla/5.0 (Linux; Android 13) Mobile",
    "curl/8.0",
    "id=42&x=1",
    "x=<script>alert(1)</script>",
    "x=%3Cscript%3E",
    "GET",
    "DELETE",
    "wordpress_logged_in_abc=1",
    "http://backend:8080/path/x",
    "http://localhost/user/bob/profile",
];

/// Regexes of well-known configurations and of nginx's documentation, with whether nginx
/// compiles them caseless (`~*`, `server_name`, `gzip_disable`).
const REAL_WORLD: &[(&str, bool)] = &[
    // nginx documentation
    (r"\.(gif|jpg|jpeg)$", true),
    (r"^/images/", false),
    (r"^(?<user>.+)\.example\.net$", true),
    (r"^(www\.)?(?<domain>.+)$", true),
    (r"^(?<name>\w\d{1,3}+)\.example\.net$", true),
    (r"^(www\.)?(.+)$", true),
    (r"MSIE [4-6]\.", true),
    (r"MSIE [1-6]\.(?!.*SV1)", true),
    (r"^(/download/.*)/media/(.*)\..*$", false),
    (r"^(/download/.*)/audio/(.*)\..*$", false),
    (r"^/users/(.+?)/?$", false),
    (r"^(GET|HEAD|POST)$", false),
    (r"^/old/(.*)$", true),
    // shoal's issue #21
    (r"^/(?!private)", false),
    (r"^(?<sub>\w+)\.example\.com$", true),
    (r"^/api/", false),
    (r"\.php$", false),
    (r"\.(jpg|jpeg|png|gif|css|js)$", false),
    // WordPress
    (r"^/wp-content/uploads/.*\.php$", false),
    (r"/(?:uploads|files)/.*\.php$", true),
    (
        r"(?:\.(?:bak|conf|dist|fla|in[ci]|log|psd|sh|sql|sw[op])|~)$",
        false,
    ),
    (r"^(.+\.php)(/.+)$", false),
    (r"^/(wp-admin|wp-login\.php)", false),
    (r"^/wp-json/", false),
    (r"xmlrpc\.php", false),
    (r"\.(js|css|png|jpg|jpeg|gif|ico)$", true),
    (r"^/(?!wp-admin)", false),
    // Nextcloud
    (r"^/\.well-known/(?:carddav|caldav)$", false),
    (
        r"^/(?:build|tests|config|lib|3rdparty|templates|data)(?:$|/)",
        false,
    ),
    (r"^/(?:\.|autotest|occ|issue|indie|db_|console)", false),
    (r"\.php(?:$|/)", false),
    (r"^/(?:updater|ocs-provider)(?:$|/)", false),
    (
        r"\.(?:css|js|mjs|svg|gif|png|jpg|ico|wasm|tflite|map|ogg|flac)$",
        false,
    ),
    (r"\.woff2?$", false),
    (r"^/remote\.php/dav", false),
    (r"^((?U).+\.php)(/?.+)$", false),
    (
        r"^/(?!index|remote|public|cron|core\/ajax\/update|status|ocs\/v[12]|updater\/.+|oc[ms]-provider\/.+|.+\/richdocumentscode\/proxy)",
        false,
    ),
    (
        r"^/(?:index|remote|public|cron|core\/ajax\/update|status|ocs\/v[12]|updater\/.+|oc[ms]-provider\/.+)\.php(?:$|\/)",
        false,
    ),
    // h5bp
    (r"(?:manifest.appcache|html?|xml|json)$", true),
    (r"(?:rss|atom)$", true),
    (
        r"\.(?:jpg|jpeg|gif|png|ico|cur|gz|svg|svgz|mp4|ogg|ogv|webm|htc)$",
        true,
    ),
    (r"/\.(?!well-known)", false),
    (
        r"(?:\.(?:bak|conf|dist|fla|in[ci]|log|orig|psd|sh|sql|sw[op])|~)$",
        true,
    ),
    (
        r"^(.+)\.\d+\.(bmp|css|cur|gif|ico|jpe?g|m?js|png|svgz?|webp|webmanifest)$",
        false,
    ),
    // Magento
    (
        r"^/(app|includes|lib|media/downloadable|pkginfo|report/config.xml|var)/",
        false,
    ),
    (r"^/(?:pub/)?(?:static|media)/", false),
    (r"^/static/(version\d*/)?(.*)$", false),
    (
        r"^/(index|get|static|errors/report|errors/404|errors/503|health_check)\.php$",
        false,
    ),
    // Drupal
    (r"\..*/.*\.php$", false),
    (r"^/sites/.*/private/", false),
    (r"^/sites/[^/]+/files/.*\.php$", false),
    (r"/vendor/.*\.php$", false),
    (r"^(/[a-z\-]+)?/system/files/", false),
    (r"^/sites/.*/files/styles/", false),
    (
        r"\.(engine|inc|install|make|module|profile|po|sh|.*sql|theme|twig|tpl(\.php)?|xtmpl|yml)(~|\.sw[op]|\.bak|\.orig|\.save)?$|/(\.(?!well-known).*|Entries.*|Repository|Root|Tag|Template|composer\.(json|lock)|web\.config)$|/#.*#$|\.php(~|\.sw[op]|\.bak|\.orig|\.save)$",
        false,
    ),
    (r"\.php$|^/update.php", false),
    // Laravel, Symfony, phpMyAdmin
    (r"/\.(?!well-known).*", false),
    (r"^/index\.php(/|$)", false),
    (r"^/phpmyadmin/(.+\.php)$", false),
    (
        r"^/phpmyadmin/(.+\.(jpg|jpeg|gif|css|png|js|ico|html|xml|txt))$",
        false,
    ),
    // `if`, `map`, `valid_referers`, `proxy_redirect`
    (r"(googlebot|bingbot|yandex)", true),
    (r"(<|%3C).*script.*(>|%3E)", true),
    (r"^id=(\d+)", false),
    (r"wordpress_logged_in", true),
    (r"^/api/v(?<version>\d+)/", false),
    (r"(?i)mobile", false),
    (r"(android|iphone|ipad|ipod|blackberry|windows phone)", true),
    (r"\.google\.", false),
    (r"^http://([^:]+):\d+(/.+)$", false),
    (r"/user/([^/]+)/(.+)$", true),
    // More of PCRE's syntax as configurations use it
    (r"^/(?<lang>en|fr|de)/(.*)$", false),
    (r"^/blog/(\d{4})/(\d{2})/(.+)$", false),
    (r"(?<=\.)php$", false),
    (r"(?<!/wp-admin)/admin", false),
    (r"^/\Q.well-known\E/", false),
    (r"^/(?P<first>[^/]+)/(?'second'[^/]+)", false),
    (r"^/(\w)\w*\1/", false),
    (r"^/(?>[a-z]+)/", false),
    (r"^/[a-z]++\d", false),
    (r"\.PHP\Z", true),
    (r"\Apublic\z", false),
    (r"^[[:alpha:]]+\.[[:alnum:]]+$", false),
    (r"^/x\/y\-z", false),
    (r"^(?x) / (?: api | v \d+ ) / # comment", false),
    (r"^/a{,2}", false),
    (r"\x{2f}\o{141}\101", false),
    (r"^\h*\S+\s", false),
];

#[test]
fn real_world_patterns_match_as_pcre2() {
    let subjects: Vec<&[u8]> = SUBJECTS.iter().map(|s| s.as_bytes()).collect();
    let mut failures = Vec::new();
    for &(p, caseless) in REAL_WORLD {
        for c in [caseless, !caseless] {
            match compare(p, c, &subjects) {
                Ok(Outcome::Compared) => {}
                Ok(other) => failures.push(format!("{p:?}: {other:?}")),
                Err(e) => failures.push(e),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The regexes in the configurations under `tests/confs/`: locations, server names, rewrites,
/// `if`, `map`, `gzip_disable`, `proxy_redirect`, `valid_referers`.
fn conf_regexes() -> Vec<(String, bool)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/confs");
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/confs exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "conf"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no configurations in {}", dir.display());
    for f in files {
        let text = std::fs::read_to_string(&f).expect("readable");
        let parsed = shoal_conf::parse_str(&text, Some(&f), &dir)
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        collect(&parsed.directives, &mut out);
    }
    out
}

fn collect(ds: &[shoal_conf::Directive], out: &mut Vec<(String, bool)>) {
    for d in ds {
        let args: Vec<&str> = d.values().collect();
        match (d.name.as_str(), args.as_slice()) {
            ("location", ["~", re, ..]) => out.push((re.to_string(), false)),
            ("location", ["~*", re, ..]) => out.push((re.to_string(), true)),
            ("location", [re, ..]) if re.starts_with("~*") => out.push((re[2..].into(), true)),
            ("location", [re, ..]) if re.starts_with('~') => out.push((re[1..].into(), false)),
            ("server_name" | "valid_referers", names) => {
                for n in names.iter().filter_map(|n| n.strip_prefix('~')) {
                    out.push((n.to_string(), true));
                }
            }
            ("rewrite", [re, ..]) => out.push((re.to_string(), false)),
            ("if", cond) => {
                if let Some(i) = cond
                    .iter()
                    .position(|a| a.trim_end_matches('*').ends_with('~'))
                {
                    if let Some(re) = cond.get(i + 1) {
                        let re = re.trim_end_matches(')');
                        out.push((re.to_string(), cond[i].ends_with('*')));
                    }
                }
            }
            ("gzip_disable", res) => {
                for re in res.iter().filter(|r| **r != "msie6") {
                    out.push((re.to_string(), true));
                }
            }
            ("proxy_redirect", [from, ..]) if from.starts_with('~') => {
                let caseless = from.starts_with("~*");
                out.push((from.trim_start_matches(['~', '*']).to_string(), caseless));
            }
            _ => {}
        }
        if d.name == "map" {
            for e in d.block.iter().flatten() {
                if let Some(re) = e.name.strip_prefix("~*") {
                    out.push((re.to_string(), true));
                } else if let Some(re) = e.name.strip_prefix('~') {
                    out.push((re.to_string(), false));
                }
            }
            continue;
        }
        if let Some(b) = &d.block {
            collect(b, out);
        }
    }
}

#[test]
fn conf_patterns_match_as_pcre2() {
    let subjects: Vec<&[u8]> = SUBJECTS.iter().map(|s| s.as_bytes()).collect();
    let regexes = conf_regexes();
    let mut failures = Vec::new();
    for (p, caseless) in &regexes {
        match compare(p, *caseless, &subjects) {
            Ok(Outcome::Compared) => {}
            Ok(other) => failures.push(format!("{p:?}: {other:?}")),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!("{} regexes in tests/confs compared", regexes.len());
}
