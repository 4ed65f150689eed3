//! The ssl module's configuration messages, each checked against what `nginx -t` (1.22.1 on
//! OpenSSL 3.0, Debian 12) prints for the same configuration.

use std::fs;
use std::path::Path;

use crate::config::{load, Source};

/// Certificates for the tests: `rsa`, `rsa2`, `ec` (`.crt`, `.key`), garbage and an empty file.
fn files(dir: &Path) {
    // Made once (RSA keys are slow to make), written into each test's directory.
    static PAIRS: std::sync::OnceLock<Vec<(&'static str, String, String)>> =
        std::sync::OnceLock::new();
    let pairs = PAIRS.get_or_init(|| {
        [("rsa", true), ("rsa2", true), ("ec", false)]
            .into_iter()
            .map(|(name, rsa)| {
                let key = if rsa {
                    rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).unwrap()
                } else {
                    rcgen::KeyPair::generate().unwrap()
                };
                let p = rcgen::CertificateParams::new(vec![format!("{name}.test")]).unwrap();
                let cert = p.self_signed(&key).unwrap();
                (name, cert.pem(), key.serialize_pem())
            })
            .collect()
    });
    for (name, cert, key) in pairs {
        fs::write(dir.join(format!("{name}.crt")), cert).unwrap();
        fs::write(dir.join(format!("{name}.key")), key).unwrap();
    }
    fs::write(dir.join("bad.pem"), "garbage\n").unwrap();
    fs::write(dir.join("empty.pem"), "").unwrap();
    fs::write(dir.join("t48.key"), [1u8; 48]).unwrap();
    fs::write(dir.join("t50.key"), [1u8; 50]).unwrap();
}

/// Loads `http { ... }` (the server line is line 5, `extra` on line 6); `Ok(warnings)` or
/// `Err("MESSAGE" or "MESSAGE:LINE")`. `D` in the text is the files' directory.
fn conf(server: &str, extra: &str) -> Result<Vec<String>, String> {
    let dir = tempfile::tempdir().unwrap();
    files(dir.path());
    let d = dir.path().display().to_string();
    let text = format!(
        "events {{}}\nhttp {{\naccess_log off;\n\n{}\n{}\n}}\n",
        server.replace("D/", &format!("{d}/")),
        extra.replace("D/", &format!("{d}/"))
    );
    let file = dir.path().join("nginx.conf");
    fs::write(&file, &text).unwrap();
    let r = load(&Source {
        file: &file,
        builtin: None,
        prefix: dir.path(),
        globals: None,
    });
    match r {
        Ok(c) => Ok(c
            .warnings
            .iter()
            .map(|w| match &w.span {
                Some(s) => format!("{}:{}", w.message.replace(&d, "D"), s.line),
                None => w.message.replace(&d, "D"),
            })
            .collect()),
        Err(e) => Err(match e.span {
            Some(s) => format!("{}:{}", e.message.replace(&d, "D"), s.line),
            None => e.message.replace(&d, "D"),
        }),
    }
}

const CERT: &str = "ssl_certificate D/rsa.crt; ssl_certificate_key D/rsa.key;";

/// A server on `listen 8443 ssl` with the rsa pair and `directives` (on line 6).
fn with(directives: &str) -> Result<Vec<String>, String> {
    conf(
        &format!("server {{ listen 8443 ssl; {CERT}"),
        &format!("{directives} }}"),
    )
}

#[track_caller]
fn fails(directives: &str, message: &str) {
    assert_eq!(with(directives), Err(message.to_string()), "{directives}");
}

#[test]
fn a_tls_address_needs_a_certificate_in_its_default_server() {
    let e = conf("server {", "listen 127.0.0.1:8443 ssl; }");
    assert_eq!(
        e,
        Err("no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive:5".into())
    );
    // The default server without TLS of its own still makes the address need one.
    let e = conf(
        "server { listen 8443; server_name a; }",
        &format!("server {{ listen 8443 ssl; {CERT} }}"),
    );
    assert_eq!(
        e,
        Err("no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive:5".into())
    );
    // Another server without one is fine (it answers with the default server's).
    assert!(conf(
        &format!("server {{ listen 8443 ssl; server_name a; {CERT} }}"),
        "server { listen 8443 ssl; server_name b; }"
    )
    .is_ok());
    // A server that rejects handshakes needs none.
    assert!(conf("server { listen 8443 ssl; ssl_reject_handshake on; }", "").is_ok());
}

#[test]
fn obsolete_ssl_on() {
    assert_eq!(
        conf("server { listen 8443; ssl on; }", ""),
        Err("no \"ssl_certificate\" is defined for the \"ssl\" directive:5".into())
    );
    assert_eq!(
        conf(&format!("server {{ listen 8443; ssl on; {CERT} }}"), ""),
        Ok(vec![
            "the \"ssl\" directive is deprecated, use the \"listen ... ssl\" directive instead:5"
                .into()
        ])
    );
    fails(
        "ssl maybe;",
        "invalid value \"maybe\" in \"ssl\" directive, it must be \"on\" or \"off\":6",
    );
}

#[test]
fn certificates_and_keys() {
    let c = |cert: &str, key: &str| {
        conf(
            &format!(
                "server {{ listen 8443 ssl; ssl_certificate {cert}; ssl_certificate_key {key}; }}"
            ),
            "",
        )
    };
    assert_eq!(
        conf("server { listen 8443 ssl; ssl_certificate D/rsa.crt; }", ""),
        Err("no \"ssl_certificate_key\" is defined for certificate \"D/rsa.crt\"".into())
    );
    assert_eq!(
        c("D/rsa.crt", "D/rsa2.key"),
        Err("SSL_CTX_use_PrivateKey(\"D/rsa2.key\") failed (SSL: error:05800074:x509 certificate routines::key values mismatch)".into())
    );
    assert_eq!(
        c("D/nope.crt", "D/rsa.key"),
        Err("cannot load certificate \"D/nope.crt\": BIO_new_file() failed (SSL: error:80000002:system library::No such file or directory:calling fopen(D/nope.crt, r) error:10000080:BIO routines::no such file)".into())
    );
    assert_eq!(
        c("D/rsa.crt", "D/nope.key"),
        Err("cannot load certificate key \"D/nope.key\": BIO_new_file() failed (SSL: error:80000002:system library::No such file or directory:calling fopen(D/nope.key, r) error:10000080:BIO routines::no such file)".into())
    );
    for bad in ["D/bad.pem", "D/empty.pem", "D/rsa.key", "data:garbage"] {
        assert_eq!(
            c(bad, "D/rsa.key"),
            Err(format!("cannot load certificate \"{bad}\": PEM_read_bio_X509_AUX() failed (SSL: error:0480006C:PEM routines::no start line:Expecting: TRUSTED CERTIFICATE)"))
        );
    }
    assert_eq!(
        c("D/rsa.crt", "D/rsa.crt"),
        Err("cannot load certificate key \"D/rsa.crt\": PEM_read_bio_PrivateKey() failed (SSL: error:1E08010C:DECODER routines::unsupported:No supported data to decode. Input type: PEM)".into())
    );
    // Relative names are resolved against the configuration file's directory.
    assert!(c("rsa.crt", "rsa.key").is_ok());
    let e = c("nope.crt", "D/rsa.key").unwrap_err();
    assert!(
        e.starts_with("cannot load certificate \"D/nope.crt\""),
        "{e}"
    );
    // Two pairs; a certificate beyond the keys is named.
    assert!(conf(
        &format!("server {{ listen 8443 ssl; {CERT} ssl_certificate D/ec.crt; ssl_certificate_key D/ec.key; }}"),
        ""
    )
    .is_ok());
    assert_eq!(
        conf("server { listen 8443 ssl; ssl_certificate D/rsa.crt; ssl_certificate D/ec.crt; ssl_certificate_key D/rsa.key; }", ""),
        Err("no \"ssl_certificate_key\" is defined for certificate \"D/ec.crt\"".into())
    );
    // Any server with certificates reads them, TLS address or not.
    assert_eq!(
        conf("ssl_certificate D/nope.crt; ssl_certificate_key D/rsa.key;", "server { listen 8443; }"),
        Err("cannot load certificate \"D/nope.crt\": BIO_new_file() failed (SSL: error:80000002:system library::No such file or directory:calling fopen(D/nope.crt, r) error:10000080:BIO routines::no such file)".into())
    );
    // Variables: read at the handshake; an unknown one is an error now.
    assert!(conf("server { listen 8443 ssl; ssl_certificate D/$ssl_server_name.crt; ssl_certificate_key D/rsa.key; }", "").is_ok());
    assert_eq!(
        conf("server { listen 8443 ssl; ssl_certificate D/$foo.crt; ssl_certificate_key D/rsa.key; }", ""),
        Err("unknown \"foo\" variable".into())
    );
}

#[test]
fn directive_values() {
    fails(
        "ssl_password_file /nonexistent;",
        "open() \"/nonexistent\" failed (2: No such file or directory):6",
    );
    fails("ssl_protocols TLSv1.2 TLSv9;", "invalid value \"TLSv9\":6");
    fails(
        "ssl_protocols;",
        "invalid number of arguments in \"ssl_protocols\" directive:6",
    );
    fails(
        "ssl_ciphers FOO;",
        "SSL_CTX_set_cipher_list(\"FOO\") failed (SSL: error:0A0000B9:SSL routines::no cipher match)",
    );
    fails(
        "ssl_ciphers \"\";",
        "SSL_CTX_set_cipher_list(\"\") failed (SSL: error:0A0000B9:SSL routines::no cipher match)",
    );
    fails(
        "ssl_ecdh_curve foo;",
        "SSL_CTX_set1_curves_list(\"foo\") failed (SSL: error:0A080106:SSL routines::passed invalid argument:group 'foo' cannot be set)",
    );
    fails("ssl_session_cache foo;", "invalid session cache \"foo\":6");
    fails(
        "ssl_session_cache builtin:x;",
        "invalid session cache \"builtin:x\":6",
    );
    fails(
        "ssl_session_cache shared:A;",
        "invalid session cache \"shared:A\":6",
    );
    fails(
        "ssl_session_cache shared:A:1k;",
        "session cache \"shared:A:1k\" is too small:6",
    );
    fails(
        "ssl_session_timeout x;",
        "\"ssl_session_timeout\" directive invalid value:6",
    );
    fails(
        "ssl_buffer_size x;",
        "\"ssl_buffer_size\" directive invalid value:6",
    );
    fails("ssl_verify_client maybe;", "invalid value \"maybe\":6");
    fails(
        "ssl_verify_client on;",
        "no ssl_client_certificate for ssl_verify_client",
    );
    fails(
        "ssl_verify_depth x;",
        "\"ssl_verify_depth\" directive invalid number:6",
    );
    fails(
        "ssl_dhparam /nonexistent;",
        "BIO_new_file(\"/nonexistent\") failed (SSL: error:80000002:system library::No such file or directory:calling fopen(/nonexistent, r) error:10000080:BIO routines::no such file)",
    );
    fails(
        "ssl_dhparam D/bad.pem;",
        "PEM_read_bio_DHparams(\"D/bad.pem\") failed (SSL: error:0480006C:PEM routines::no start line:Expecting: DH PARAMETERS)",
    );
    fails(
        "ssl_conf_command Foo bar;",
        "SSL_CONF_cmd(\"Foo\", \"bar\") failed (SSL: error:0A000182:SSL routines::unknown cmd name:cmd=Foo)",
    );
    fails(
        "ssl_conf_command Ciphersuites TLS_FOO;",
        "SSL_CONF_cmd(\"Ciphersuites\", \"TLS_FOO\") failed (SSL: error:0A0000B9:SSL routines::no cipher match error:0A000180:SSL routines::bad value:cmd=Ciphersuites, value=TLS_FOO)",
    );
    fails(
        "ssl_conf_command Foo;",
        "invalid number of arguments in \"ssl_conf_command\" directive:6",
    );
    fails(
        "ssl_conf_command SignatureAlgorithms ECDSA+SHA256;",
        "\"ssl_conf_command SignatureAlgorithms\" is not supported by shoal:6",
    );
    fails(
        "ssl_crl /nonexistent;",
        "X509_LOOKUP_load_file(\"/nonexistent\") failed (SSL: error:80000002:system library::No such file or directory:calling fopen(/nonexistent, r) error:10000080:BIO routines::no such file error:05880002:x509 certificate routines::system lib)",
    );
    fails(
        "ssl_crl D/bad.pem;",
        "X509_LOOKUP_load_file(\"D/bad.pem\") failed (SSL: error:05800088:x509 certificate routines::no certificate or crl found)",
    );
    fails(
        "ssl_trusted_certificate /nonexistent;",
        "SSL_CTX_load_verify_locations(\"/nonexistent\") failed (SSL: error:80000002:system library::No such file or directory:calling fopen(/nonexistent, r) error:10000080:BIO routines::no such file error:05880002:x509 certificate routines::system lib)",
    );
    fails(
        "ssl_verify_client on; ssl_client_certificate D/bad.pem;",
        "SSL_CTX_load_verify_locations(\"D/bad.pem\") failed (SSL: error:05800088:x509 certificate routines::no certificate or crl found)",
    );
    fails("ssl_ocsp_cache x;", "invalid OCSP cache \"x\":6");
    fails("ssl_ocsp maybe;", "invalid value \"maybe\":6");
    fails(
        "ssl_prefer_server_ciphers x;",
        "invalid value \"x\" in \"ssl_prefer_server_ciphers\" directive, it must be \"on\" or \"off\":6",
    );
    fails(
        "ssl_stapling on; ssl_stapling_file /nonexistent;",
        "BIO_new_file(\"/nonexistent\") failed (SSL: error:80000002:system library::No such file or directory:calling fopen(/nonexistent, rb) error:10000080:BIO routines::no such file)",
    );
    fails(
        "ssl_stapling on; ssl_stapling_file D/bad.pem;",
        "d2i_OCSP_RESPONSE_bio(\"D/bad.pem\") failed (SSL: error:0680008E:asn1 encoding routines::not enough data)",
    );
    fails(
        "ssl_session_ticket_key D/t50.key;",
        "\"D/t50.key\" must be 48 or 80 bytes:6",
    );
    fails(
        "ssl_buffer_size 1k; ssl_buffer_size 2k;",
        "\"ssl_buffer_size\" directive is duplicate:6",
    );
}

#[test]
fn accepted_values() {
    for ok in [
        "ssl_protocols TLSv1 TLSv1.1 TLSv1.2 TLSv1.3;",
        "ssl_prefer_server_ciphers on;",
        "ssl_ciphers AES128-SHA;",
        "ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES128-GCM-SHA256;",
        "ssl_ecdh_curve X25519:prime256v1:secp384r1;",
        "ssl_ecdh_curve X25519MLKEM768:X25519;",
        "ssl_session_cache builtin:0;",
        "ssl_session_cache shared:A:10m builtin:1000;",
        "ssl_session_cache off builtin;",
        "ssl_session_cache none;",
        "ssl_session_cache none shared:A:1m;",
        "ssl_session_cache builtin none;",
        "ssl_session_ticket_key D/t48.key;",
        "ssl_verify_client optional_no_ca;",
        "ssl_conf_command Protocol -TLSv1.2;",
        "ssl_conf_command Options -SessionTicket;",
        "ssl_conf_command Groups P-256;",
        "ssl_early_data on;",
        "ssl_buffer_size 4k;",
        "ssl_certificate_cache max=100 inactive=20s valid=1m;",
        "ssl_stapling_verify on; ssl_stapling_responder http://ocsp.test/;",
    ] {
        assert!(with(ok).is_ok(), "{ok}: {:?}", with(ok));
    }
}

#[test]
fn warnings() {
    // No DHE in rustls: ssl_dhparam is read and ignored, once said.
    let dh = "-----BEGIN DH PARAMETERS-----\nMAYCAQI=\n-----END DH PARAMETERS-----\n";
    let w = with(&format!("ssl_dhparam \"data:{dh}\";")).unwrap();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].starts_with("\"ssl_dhparam\" is ignored"), "{w:?}");
    // The X9.42 form (`openssl dhparam -dsaparam`) is read too, as OpenSSL reads it for nginx.
    let x942 = "-----BEGIN X9.42 DH PARAMETERS-----\nMAYCAQI=\n-----END X9.42 DH PARAMETERS-----\n";
    let w = with(&format!("ssl_dhparam \"data:{x942}\";")).unwrap();
    assert!(w[0].starts_with("\"ssl_dhparam\" is ignored"), "{w:?}");
    // Stapling without a file: nginx's warning for a certificate without an issuer.
    let w = with("ssl_stapling on;").unwrap();
    assert_eq!(
        w,
        vec![
            "\"ssl_stapling\" ignored, issuer certificate not found for certificate \"D/rsa.crt\""
        ]
    );
    // A cipher string with nothing rustls has for TLSv1.2.
    let w = with("ssl_ciphers AES128-SHA;").unwrap();
    assert!(w[0].contains("TLSv1.2 is off"), "{w:?}");
}

#[test]
fn debian_stock_http_block() {
    assert!(conf(
        "ssl_protocols TLSv1 TLSv1.1 TLSv1.2 TLSv1.3; ssl_prefer_server_ciphers on;",
        "server { listen 8080; }"
    )
    .is_ok());
}
