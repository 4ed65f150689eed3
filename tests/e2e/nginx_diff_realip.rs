//! Real client addresses against real nginx: realip by `X-Real-IP`, `X-Forwarded-For` (trusted
//! and untrusted hops, recursive or not) and other headers, at the server's level (post-read:
//! `return` sees it) and a location's (preaccess: `return` does not, the file and the access
//! phase do); `allow`/`deny` and `limit_req` keyed by `$binary_remote_addr` seeing the real
//! address; PROXY protocol v1 and v2 headers (malformed ones close the connection); `geo` with
//! CIDRs and ranges, `proxy`, `delete`, `default`, `include`; `valid_referers` with every kind
//! of entry. Same configuration, same requests, same answers (see `diff/mod.rs`).

use crate::diff::{Conf, Pair};

/// `$port`: `$remote_port` when realip changed the address (from a header: the same on both
/// servers), `-` when it is the connection's own (each server sees its own client port).
const PORT: &str = "map $remote_addr $port { 127.0.0.1 -; default $remote_port; }";

/// `GET path` from 127.0.0.1 with extra header lines (each ending `\r\n`), on both servers.
fn get(p: &Pair, path: &str, headers: &str) -> String {
    p.check(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n{headers}\r\n").as_bytes())
}

/// Forwarding chains, each sent as `X-Forwarded-For` lines, to locations that read them
/// differently.
const CHAINS: &[&str] = &[
    "",
    "X-Forwarded-For: 1.1.1.1\r\n",
    "X-Forwarded-For: 1.1.1.1, 10.0.0.1\r\n",
    "X-Forwarded-For: 1.1.1.1, 10.0.0.1, 10.2.2.2\r\n",
    "X-Forwarded-For: 10.0.0.1, 10.0.0.2\r\n",
    "X-Forwarded-For: 1.1.1.1, 2.2.2.2, 10.0.0.1\r\n",
    "X-Forwarded-For: bogus, 10.0.0.1\r\n",
    "X-Forwarded-For: 1.1.1.1, bogus\r\n",
    "X-Forwarded-For: 1.1.1.1\r\nX-Forwarded-For: 10.0.0.1\r\n",
    "X-Forwarded-For: 1.1.1.1, 10.0.0.1\r\nX-Forwarded-For: 10.0.0.2\r\n",
    "X-Forwarded-For: 10.0.0.3\r\nX-Forwarded-For: 2.2.2.2\r\n",
    "X-Forwarded-For: 5.5.5.5\r\nX-Forwarded-For: ,\r\nX-Forwarded-For: 10.0.0.2\r\n",
    "X-Forwarded-For: 10.0.0.1:80, 10.0.0.2\r\n",
    "X-Forwarded-For: [2001:db8::1]:443, 10.0.0.2\r\n",
    "X-Forwarded-For: 3.3.3.3, ::ffff:10.0.0.1\r\n",
    "X-Forwarded-For: ,1.1.1.1\r\n",
    "X-Forwarded-For: ,,1.1.1.1\r\n",
    "X-Forwarded-For: 1.1.1.1 2.2.2.2\r\n",
    "X-Forwarded-For: 1..2.3\r\n",
    "X-Forwarded-For: 255.255.255.255\r\n",
    "X-Client: 1.1.1.1, 10.0.0.1\r\nX-Client: 2.2.2.2\r\n",
];

#[test]
fn forwarded_for_chains_in_locations() {
    let p = Pair::with(Conf {
        http: PORT,
        server: "set_real_ip_from 127.0.0.1;\n\
         set_real_ip_from 10.0.0.0/8;\n\
         add_header X-Addr \"$remote_addr|$port|$realip_remote_addr\" always;\n\
         location /xff/ { alias {HTML}/; real_ip_header X-Forwarded-For; }\n\
         location /rec/ { alias {HTML}/; real_ip_header X-Forwarded-For; real_ip_recursive on; }\n\
         location /lower/ { alias {HTML}/; real_ip_header x-forwarded-for; real_ip_recursive on; }\n\
         location /client/ { alias {HTML}/; real_ip_header X-Client; real_ip_recursive on; }\n\
         location /strict/ { alias {HTML}/; set_real_ip_from 10.0.0.0/8; \
             real_ip_header X-Forwarded-For; }\n\
         location /ret/ { real_ip_header X-Forwarded-For; \
             return 200 \"$remote_addr|$realip_remote_addr\\n\"; }",
        ..Default::default()
    });
    for chain in CHAINS {
        for loc in ["/xff/", "/rec/", "/lower/", "/client/", "/strict/", "/ret/"] {
            // A location's realip does not change what its `return` sees; everything else
            // shows the port only when realip took one from the header.
            let r = get(&p, &format!("{loc}a.txt"), chain);
            assert!(r.starts_with("HTTP/1.1 200"), "{loc} {chain}: {r}");
        }
    }
}

#[test]
fn real_ip_header_at_the_server_level() {
    let p = Pair::with(Conf {
        http: PORT,
        server: "set_real_ip_from 127.0.0.1;\n\
         if ($remote_addr = 6.6.6.6) { return 403; }\n\
         location / { return 200 \"$remote_addr|$port|$realip_remote_addr\\n\"; }",
        ..Default::default()
    });
    for h in [
        "",
        "X-Real-IP: 9.9.9.9\r\n",
        "X-Real-IP: 9.9.9.9:555\r\n",
        "X-Real-IP: [::1]:555\r\n",
        "X-Real-IP: ::1\r\n",
        "X-Real-IP: 9.9.9.9, 8.8.8.8\r\n",
        "X-Real-IP: 1.1.1.1\r\nX-Real-IP: 2.2.2.2\r\n",
        "X-Real-IP: 01.2.3.4\r\n",
        "X-Real-IP: 1.2.3.4:0\r\n",
        "X-Real-IP: 1.2.3.4:99999\r\n",
        "X-Real-IP: [::1]\r\n",
        "X-Real-IP: bogus\r\n",
        "X-Real-IP: 6.6.6.6\r\n",
        "X-Forwarded-For: 7.7.7.7\r\n",
    ] {
        get(&p, "/", h);
    }
}

#[test]
fn access_and_limits_see_the_real_address() {
    let p = Pair::with(Conf {
        http: "limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;",
        server: "set_real_ip_from 127.0.0.1;\n\
                 real_ip_header X-Forwarded-For;\n\
                 location /deny/ { alias {HTML}/; deny 1.1.1.1; allow all; }\n\
                 location /allow/ { alias {HTML}/; allow 2.2.2.0/24; deny all; }\n\
                 location /lim/ { alias {HTML}/; limit_req zone=one; }\n\
                 location /locdeny/ { alias {HTML}/; set_real_ip_from 10.0.0.0/8; \
                     real_ip_header X-Real-IP; deny 3.3.3.3; }",
        ..Default::default()
    });
    for (path, h) in [
        ("/deny/a.txt", "X-Forwarded-For: 1.1.1.1\r\n"),
        ("/deny/a.txt", "X-Forwarded-For: 2.2.2.2\r\n"),
        ("/deny/a.txt", ""),
        ("/allow/a.txt", "X-Forwarded-For: 2.2.2.9\r\n"),
        ("/allow/a.txt", "X-Forwarded-For: 1.1.1.1\r\n"),
        ("/allow/a.txt", ""),
        // Each real client has its own count.
        ("/lim/a.txt", "X-Forwarded-For: 1.1.1.1\r\n"),
        ("/lim/a.txt", "X-Forwarded-For: 1.1.1.1\r\n"),
        ("/lim/a.txt", "X-Forwarded-For: 2.2.2.2\r\n"),
        ("/lim/a.txt", "X-Forwarded-For: 2.2.2.2\r\n"),
        // The server's realip already changed the address: the location's does not again.
        (
            "/locdeny/a.txt",
            "X-Forwarded-For: 10.0.0.1\r\nX-Real-IP: 3.3.3.3\r\n",
        ),
        ("/locdeny/a.txt", "X-Forwarded-For: 3.3.3.3\r\n"),
    ] {
        get(&p, path, h);
    }
    assert!(p.shoal_log().contains("client: 1.1.1.1"));
    assert!(p.shoal_log().contains("limiting requests, excess:"));
}

/// A PROXY protocol v2 header: TCP over IPv4, `1.2.3.4:1111` to `5.6.7.8:2222`.
fn v2(tlvs: &[u8]) -> Vec<u8> {
    let mut body = vec![1, 2, 3, 4, 5, 6, 7, 8, 0x04, 0x57, 0x08, 0xae];
    body.extend_from_slice(tlvs);
    let mut h = b"\r\n\r\n\0\r\nQUIT\n\x21\x11".to_vec();
    h.extend_from_slice(&(body.len() as u16).to_be_bytes());
    h.extend_from_slice(&body);
    h
}

#[test]
fn proxy_protocol_headers() {
    let p = Pair::with(Conf {
        listen: " proxy_protocol",
        http: PORT,
        server: "location / { return 200 \"$proxy_protocol_addr|$proxy_protocol_port|\
                 $proxy_protocol_server_addr|$proxy_protocol_server_port|$remote_addr\\n\"; }\n\
                 location /real/ { alias {HTML}/; set_real_ip_from 127.0.0.1; \
                     real_ip_header proxy_protocol; add_header X-Addr \"$remote_addr|$port\"; }",
        ..Default::default()
    });
    let req = |head: &[u8], path: &str| {
        let mut r = head.to_vec();
        r.extend_from_slice(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes());
        p.check(&r)
    };
    for head in [
        &b"PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\r\n"[..],
        b"PROXY TCP6 2001:db8::1 ::2 1111 2222\r\n",
        b"PROXY TCP4 999.1.1.1 5.6.7.8 0 2222\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 01111 2222\r\n",
        b"PROXY UNKNOWN\r\n",
        b"PROXY UNKNOWN whatever\r\n",
        &v2(&[]),
        &v2(&[0x01, 0x00, 0x02, b'h', b'2']),
    ] {
        let r = req(head, "/");
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        req(head, "/real/a.txt");
    }
    // Malformed: both close without answering.
    let mut v3 = v2(&[]);
    v3[12] = 0x31;
    let mut short = v2(&[]);
    short[15] = 4;
    for head in [
        &b"PROXY TCP5 1.2.3.4 5.6.7.8 1111 2222\r\n"[..],
        b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2222\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222 extra\r\n",
        b"proxy TCP4 1.2.3.4 5.6.7.8 1111 2222\r\n",
        b"GET / HTTP/1.0\r\n",
        &v3,
        &short[..20],
    ] {
        let r = req(head, "/");
        assert_eq!(r, "[closed]");
    }
    for log in [p.nginx_log(), p.shoal_log()] {
        assert!(
            log.contains(
                "broken header: \"PROXY TCP5 1.2.3.4 5.6.7.8 1111 2222\r\nGET / HTTP/1.0\r\n\r\n\" \
                 while reading PROXY protocol, client: 127.0.0.1, server: 127.0.0.1:"
            ),
            "{log}"
        );
        assert!(log.contains("unknown PROXY protocol version: 3 while reading PROXY protocol"));
    }
}

#[test]
fn geo_cidr_and_ranges() {
    let p = Pair::with(Conf {
        files: &[("geo.inc", "10.2.0.0/16 INC;\n192.168.2.0/24 INC2;\n")],
        http: "geo $arg_ip $cidr {\n\
                   default        dflt;\n\
                   include        {HTML}/geo.inc;\n\
                   127.0.0.0/24   US;\n\
                   127.0.0.1/32   RU;\n\
                   10.1.0.0/16    TEN;\n\
                   192.168.1.0/24 UK;\n\
                   ::1            V6ONE;\n\
                   2001:db8::/32  DOC;\n\
                   255.255.255.0/24 NONE;\n\
                   delete 10.1.0.0/16;\n\
               }\n\
               geo $arg_ip $rng {\n\
                   ranges;\n\
                   default                   ZZ;\n\
                   127.0.0.0-127.0.0.0       US;\n\
                   127.0.0.1-127.0.0.1       RU;\n\
                   10.0.0.0-10.255.255.255   TEN;\n\
                   10.1.0.0-10.1.255.255     TENSUB;\n\
                   1.2.3.0-1.2.3.255         A;\n\
                   1.2.3.10-1.2.3.20         B;\n\
                   20.0.0.0-20.0.0.255       TWENTY;\n\
                   delete 20.0.0.0-20.0.0.255;\n\
               }\n\
               geo $nodefault { 1.0.0.0/8 one; }\n\
               geo $cli {\n\
                   default nope;\n\
                   proxy 127.0.0.1;\n\
                   proxy 10.0.0.0/8;\n\
                   1.1.1.0/24 one;\n\
                   10.0.0.0/8 ten;\n\
                   127.0.0.1 local;\n\
               }\n\
               geo $clir {\n\
                   default nope;\n\
                   proxy_recursive;\n\
                   proxy 127.0.0.1;\n\
                   proxy 10.0.0.0/8;\n\
                   1.1.1.0/24 one;\n\
                   10.0.0.0/8 ten;\n\
                   127.0.0.1 local;\n\
               }\n\
               geo $rngp { ranges; default nope; proxy 127.0.0.1; 1.1.1.0-1.1.1.255 one; }",
        // realip at the server's level: geo's address is realip's when it changed it.
        server: "set_real_ip_from 127.0.0.1;\n\
                 location / { return 200 \"cidr=$cidr rng=$rng nd=$nodefault cli=$cli \
                 clir=$clir rngp=$rngp\\n\"; }",
        ..Default::default()
    });
    for ip in [
        "127.0.0.1",
        "127.0.0.2",
        "127.0.0.0",
        "10.1.2.3",
        "10.2.0.1",
        "10.1.255.255",
        "192.168.1.9",
        "192.168.2.9",
        "1.2.3.9",
        "1.2.3.10",
        "1.2.3.20",
        "1.2.3.21",
        "20.0.0.5",
        "::1",
        "::2",
        "2001:db8::5",
        "::ffff:127.0.0.1",
        "::ffff:10.1.0.1",
        "bogus",
        "",
        "255.255.255.255",
        "1.2.3.4:80",
        "1..2.3",
    ] {
        get(&p, &format!("/?ip={ip}"), "");
    }
    for h in [
        "X-Forwarded-For: 1.1.1.5\r\n",
        "X-Forwarded-For: 1.1.1.5, 10.0.0.1\r\n",
        "X-Forwarded-For: 10.0.0.2, 10.0.0.1\r\n",
        "X-Forwarded-For: 1.1.1.5, 10.0.0.1, 8.8.8.8\r\n",
        "X-Forwarded-For: bogus\r\n",
        "X-Forwarded-For: bogus, 10.0.0.1\r\n",
        "X-Forwarded-For: 1.1.1.5:80\r\n",
        "X-Forwarded-For: 1.1.1.5\r\nX-Forwarded-For: 10.0.0.1\r\n",
        "X-Real-IP: 1.1.1.5\r\n",
    ] {
        get(&p, "/", h);
        get(&p, "/", &format!("{h}X-Real-IP: 1.9.9.9\r\n"));
        get(&p, "/", &format!("{h}X-Real-IP: 10.9.9.9\r\n"));
    }
}

#[test]
fn valid_referers_of_every_kind() {
    let p = Pair::new(
        "server_name www.myhost.com *.wild.com ~^re\\d+\\.rx\\.com$;\n\
         location /all { valid_referers none blocked server_names *.example.com example.* \
             www.site.org/galleries/ ~\\.google\\. ; return 200 \"inv=$invalid_referer\\n\"; }\n\
         location /sn { valid_referers server_names; return 200 \"inv=$invalid_referer\\n\"; }\n\
         location /noneonly { valid_referers none server_names; \
             return 200 \"inv=$invalid_referer\\n\"; }\n\
         location /nothing { return 200 \"inv=$invalid_referer\\n\"; }\n\
         location /uri { valid_referers site.org/a b.org/b/ *.w.org/x/; \
             return 200 \"inv=$invalid_referer\\n\"; }\n\
         location /re { valid_referers ~^x\\.com/p ~Y\\.COM; return 200 \"inv=$invalid_referer\\n\"; }\n\
         location /mixed { valid_referers site.org/a ~site\\.org/z; \
             return 200 \"inv=$invalid_referer\\n\"; }\n\
         location /if { valid_referers example.com; \
             if ($invalid_referer) { return 403; } return 200 ok; }",
    );
    let long = format!("http://{}.example.com/", "a".repeat(250));
    let fits = format!("http://{}.example.com/", "a".repeat(240));
    let referers = [
        None,
        Some(""),
        Some("http://a.example.com/x"),
        Some("http://example.com/x"),
        Some("http://example.org"),
        Some("http://example.co.uk/"),
        Some("https://www.site.org/galleries/x"),
        Some("http://www.site.org/other"),
        Some("http://www.site.org"),
        Some("http://www.google.com/search"),
        Some("ftp://x"),
        Some("blah"),
        Some("http://localhost/"),
        Some("HTTP://LOCALHOST/"),
        Some("http://localhost:8080/"),
        Some("http://www.myhost.com"),
        Some("http://a.wild.com/"),
        Some("http://re12.rx.com/"),
        Some("http://"),
        Some("https://"),
        Some("http://localhost."),
        Some("http://i.ru"),
        Some("http://localhost?x"),
        Some("http://site.org/abc"),
        Some("http://site.org/"),
        Some("http://site.org:80/a"),
        Some("http://site.org/z"),
        Some("http://b.org/b/c"),
        Some("http://b.org/b"),
        Some("http://q.w.org/x/1"),
        Some("http://w.org/x/1"),
        Some("http://x.com/p"),
        Some("http://X.COM/P"),
        Some("http://y.com/"),
        Some("http://a.x.com/p"),
        Some("http://x.com:99/p"),
        Some(long.as_str()),
        Some(fits.as_str()),
    ];
    for referer in referers {
        let h = referer.map_or(String::new(), |r| format!("Referer: {r}\r\n"));
        for loc in [
            "/all",
            "/sn",
            "/noneonly",
            "/nothing",
            "/uri",
            "/re",
            "/mixed",
            "/if",
        ] {
            get(&p, loc, &h);
        }
    }
    // Only the first line counts.
    get(
        &p,
        "/sn",
        "Referer: http://localhost/\r\nReferer: http://bad/\r\n",
    );
    get(
        &p,
        "/sn",
        "Referer: http://bad/\r\nReferer: http://localhost/\r\n",
    );
}
