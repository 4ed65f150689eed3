#!/usr/bin/env python3
"""Differential fuzzer: shoal against real nginx on generated raw HTTP/1.x requests.

It writes a few realistic configurations (static files, locations of every kind, rewrite, if,
error_page, try_files, add_header, expires, etag, conditionals, ranges, merge_slashes,
disable_symlinks, types), starts nginx and shoal on each with the same text (but nginx's temp
paths) on 127.0.0.1 ports 20200-20299, sends both the same randomly generated request bytes and
compares, as tests/e2e/diff/mod.rs does: per answer the status line, the headers as a set without
Date and Server, the body (server token in error pages normalised, multipart boundary, port,
relative Expires dates), and how the connection ended (closed, or kept open). A request that
makes shoal exit, or that nginx answers and shoal does not, is reported first.

Run (from the repository root, after `cargo build --release`):

    python3 fuzz/differential/nginx_diff_fuzz.py --time 300 --seed 1
    python3 fuzz/differential/nginx_diff_fuzz.py --conf static --count 2000 -v
    python3 fuzz/differential/nginx_diff_fuzz.py --replay /tmp/shoal-difffuzz/findings.jsonl

Options: --shoal BIN (default target/release/shoal, or $CARGO_TARGET_DIR/release/shoal),
--nginx BIN (default nginx on PATH), --time SECONDS for the whole run (default 300), --count N
requests per configuration, --seed, --conf NAME (repeatable), --out DIR (default
/tmp/shoal-difffuzz): findings.jsonl has every difference (request in base64 and both
normalised answers); the summary groups them by class (what differs, not the values).

Only 127.0.0.1 is used; every socket read has a deadline and every server is stopped (by its
own pid) at the end of its configuration.
"""

import argparse
import base64
import collections
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

MTIME = 1672531200  # Sun, 01 Jan 2023 00:00:00 GMT, as in tests/e2e/diff/mod.rs
MTIME_HTTP = "Sun, 01 Jan 2023 00:00:00 GMT"
PORT_BASE = 20200
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# ---- fixtures -------------------------------------------------------------------------------

FILES = {
    "index.html": b"<html>root index</html>\n",
    "a.txt": b"hello from a.txt\n",
    "page.html": b"<p>page</p>\n",
    "custom404.html": b"<h1>custom not found</h1>\n",
    "err50x.html": b"<h1>custom 50x</h1>\n",
    "file.foo": b"foo\n",
    "noext": b"no extension\n",
    "dir/index.html": b"<html>dir index</html>\n",
    "dir/b.txt": b"b in dir\n",
    "dir2/index.htm": b"<html>dir2 htm</html>\n",
    "emptydir/.keep": b"",
    "int/page.html": b"<p>internal page</p>\n",
    "secret.txt": b"secret\n",
    "sub/deep/c.txt": b"c deep\n",
    "static/s.css": b"body{}\n",
    "static/a.txt": b"static a\n",
    "sp ace.txt": b"space\n",
    "semi;colon.txt": b"semicolon\n",
    "pct%41.txt": b"percent\n",
    "caf\u00e9.txt": b"utf8 name\n",
    "trail.": b"trailing dot\n",
    ".hidden": b"dot file\n",
    "UPPER.TXT": b"upper\n",
    "range.txt": b"0123456789" * 100,
    "big.bin": bytes(range(256)) * 400,
    "q?x.txt": b"question\n",
}


def write_fixtures(html):
    for name, body in FILES.items():
        p = os.path.join(html, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(body)
    os.symlink("a.txt", os.path.join(html, "link.txt"))
    os.symlink("dir", os.path.join(html, "linkdir"))
    os.symlink("nowhere", os.path.join(html, "dangling"))
    for root, dirs, files in os.walk(html):
        for n in files + dirs:
            os.utime(os.path.join(root, n), (MTIME, MTIME), follow_symlinks=False)
    os.chmod(os.path.join(html, "secret.txt"), 0)


# ---- configurations -------------------------------------------------------------------------

# {HTML} is the shared html tree, {PORT} the server's own port. Each names the paths its
# locations answer, so the generator asks mostly for things that exist.
CONFS = {
    "static": (
        """
    etag on;
    max_ranges 3;
    server {
        listen 127.0.0.1:{PORT};
        server_name localhost;
        root {HTML};
        index index.html index.htm;
        error_page 404 /custom404.html;
        error_page 500 502 503 504 /err50x.html;
        add_header X-Any "any" always;
        add_header X-Ok "ok";
        location = /exact { return 200 "exact\\n"; }
        location = / { index index.html; }
        location ^~ /static/ { expires 1h; add_header X-Static 1; }
        location ~ \\.txt$ {
            add_header X-Txt 1;
            location ~ ^/dir/ { add_header X-Nested 1; }
        }
        location ~* \\.TXT$ { default_type text/x-upper; }
        location /al/ { alias {HTML}/dir/; }
        location ~ ^/re/(.+)$ { alias {HTML}/$1; }
        location /try/ { try_files $uri $uri/ /a.txt; }
        location /tryn/ { try_files /nope @fallback; }
        location @fallback { return 203 "fallback $uri\\n"; }
        location /ret { return 302 /a.txt; }
        location /ret301 { return 301 http://example.com$request_uri; }
        location /text { return 200 "text $uri $args\\n"; }
        location /rw/ { rewrite ^/rw/(.*)$ /$1 last; }
        location /rwb/ { rewrite ^/rwb/(.*)$ /$1 break; root {HTML}; }
        location /redir/ { rewrite ^/redir/(.*)$ /$1?from=redir redirect; }
        location /iff/ {
            if ($arg_x = 1) { return 418; }
            if ($request_method = POST) { return 405; }
            if ($http_x_h ~* ^(ab+)c$) { return 200 "cap $1\\n"; }
            alias {HTML}/;
        }
        location /int/ { internal; }
        location /exp/ { alias {HTML}/; expires epoch; }
        location /expm/ { alias {HTML}/; expires modified +1d; }
        location /etoff/ { alias {HTML}/; etag off; }
        location /ims/ { alias {HTML}/; if_modified_since before; }
        location /err/ { error_page 404 =200 /a.txt; }
        location /errn/ { error_page 404 @fallback; }
    }
""",
        [
            "/", "/a.txt", "/index.html", "/dir/", "/dir", "/dir/b.txt", "/dir2/", "/emptydir/",
            "/sub/deep/c.txt", "/range.txt", "/big.bin", "/link.txt", "/linkdir/b.txt",
            "/dangling", "/exact", "/static/a.txt", "/static/s.css", "/al/b.txt", "/al/",
            "/re/a.txt", "/try/a.txt", "/try/dir", "/try/nope", "/tryn/x", "/ret", "/ret301",
            "/text", "/rw/a.txt", "/rwb/a.txt", "/redir/a.txt", "/iff/a.txt", "/int/page.html",
            "/exp/a.txt", "/expm/a.txt", "/etoff/a.txt", "/ims/a.txt", "/err/nope",
            "/errn/nope", "/nope", "/UPPER.TXT", "/.hidden", "/secret.txt", "/sp%20ace.txt",
            "/semi;colon.txt", "/pct%2541.txt", "/caf%C3%A9.txt", "/trail.", "/q%3Fx.txt",
            "/page.html", "/file.foo", "/noext",
        ],
    ),
    "strict": (
        """
    merge_slashes off;
    server_tokens off;
    etag off;
    if_modified_since exact;
    max_ranges 1;
    server {
        listen 127.0.0.1:{PORT};
        server_name localhost;
        root {HTML};
        types { text/html html; text/plain txt; image/x-foo foo; }
        default_type text/x-default;
        disable_symlinks on;
        location / { }
        location /ifnm/ { alias {HTML}/; add_header X-Last $sent_http_last_modified always; }
        location ~ /sub/ { return 200 "sub $uri\\n"; }
        location = /exact/ { return 204; }
        location ^~ /dir/ { index b.txt; }
        location /ranges/ { alias {HTML}/; max_ranges 0; }
        location /mr/ { alias {HTML}/; max_ranges 2; }
        location /slink/ { alias {HTML}/; disable_symlinks off; }
    }
""",
        [
            "/", "/a.txt", "/dir/", "/dir", "/dir/b.txt", "/link.txt", "/linkdir/b.txt",
            "/dangling", "/range.txt", "/big.bin", "/file.foo", "/noext", "/page.html",
            "/sub/deep/c.txt", "/exact/", "/ranges/range.txt", "/mr/range.txt", "/UPPER.TXT",
            "/ifnm/a.txt", "/nope", "//a.txt", "/dir//b.txt", "/slink/link.txt",
        ],
    ),
    "vars": (
        """
    server {
        listen 127.0.0.1:{PORT} default_server;
        server_name localhost;
        root {HTML};
        add_header X-Uri "$uri" always;
        add_header X-Args "$args" always;
        add_header X-Ruri "$request_uri" always;
        add_header X-Host "$host" always;
        location /echo {
            return 200 "m=$request_method u=$uri a=$args h=$host hh=$http_host p=$server_protocol i=$is_args r=$request_uri d=$document_uri n=$server_name x=$arg_x c=$content_length t=$content_type\\n";
        }
        location / { }
    }
    server {
        listen 127.0.0.1:{PORT};
        server_name example.com *.wild.test ~^(?<sub>[a-z]+)\\.re\\.test$;
        location / { return 200 "named $host sub=$sub uri=$uri\\n"; }
    }
    server {
        listen 127.0.0.1:{PORT};
        server_name "";
        return 200 "empty-name server $host\\n";
    }
""",
        [
            "/echo", "/echo/x", "/echo?x=1", "/a.txt", "/", "/dir", "/dir/", "/nope",
            "/echo/%2e%2e/a", "/echo?x=%20&y",
        ],
    ),
}

NGINX_ONLY = (
    "    client_body_temp_path tmp/body;\n    proxy_temp_path tmp/proxy;\n"
    "    fastcgi_temp_path tmp/fastcgi;\n    uwsgi_temp_path tmp/uwsgi;\n"
    "    scgi_temp_path tmp/scgi;\n"
)


def user_line():
    if os.geteuid() != 0:
        return ""
    import grp
    import pwd

    nobody = pwd.getpwnam("nobody")
    return "user nobody %s;\n" % grp.getgrgid(nobody.pw_gid).gr_name


def render(body, html, port, nginx):
    text = (
        "%sdaemon off;\nmaster_process on;\nworker_processes 1;\npid logs/test.pid;\n"
        "error_log logs/error.log info;\nevents { worker_connections 64; }\n"
        "http {\n%s    access_log off;\n    include mime.types;\n"
        "    default_type application/octet-stream;\n    keepalive_timeout 5s;\n"
        "    client_body_timeout 2s;\n    client_header_timeout 2s;\n%s}\n"
    ) % (user_line(), NGINX_ONLY if nginx else "", body)
    return text.replace("{HTML}", html).replace("{PORT}", str(port))


class Server:
    def __init__(self, name, binary, prefix, conf, port):
        self.name, self.port, self.prefix = name, port, prefix
        for d in ("conf", "logs", "tmp"):
            os.makedirs(os.path.join(prefix, d), exist_ok=True)
        shutil.copy(os.path.join(REPO, "conf", "mime.types"), os.path.join(prefix, "conf"))
        with open(os.path.join(prefix, "conf", "test.conf"), "w") as f:
            f.write(conf)
        self.stderr = open(os.path.join(prefix, "stderr.txt"), "wb")
        self.proc = subprocess.Popen(
            [binary, "-p", prefix + "/", "-c", "conf/test.conf", "-e", "logs/error.log"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr,
        )
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                raise RuntimeError(
                    "%s did not start on %d: %s %s" % (name, port, self.read("stderr.txt"),
                                                       self.read("logs/error.log")[-2000:]))
            time.sleep(0.02)

    def read(self, p):
        try:
            with open(os.path.join(self.prefix, p), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()


# ---- exchanges ------------------------------------------------------------------------------

def exchange(port, req, keep_open, quiet=0.3, deadline=4.0):
    """Sends req; reads until the server closes, or (keep_open) is quiet for `quiet` seconds
    after answering, or the deadline. Returns (bytes, end)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    out = bytearray()
    end = None
    try:
        try:
            s.sendall(req)
            if not keep_open:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        stop = time.time() + deadline
        while True:
            left = stop - time.time()
            if left <= 0:
                end = "[kept open]" if keep_open and out else "[no answer, no close]"
                break
            s.settimeout(min(left, quiet) if (keep_open and out) else left)
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                if keep_open and out:
                    end = "[kept open]"
                    break
                continue
            except ConnectionResetError:
                end = "[closed]"
                break
            if not chunk:
                end = "[closed]"
                break
            out += chunk
    finally:
        s.close()
    return bytes(out), end


def header(headers, name):
    for n, v in headers:
        if n.lower() == name:
            return v
    return None


def token_norm(body):
    body = re.sub(rb"(nginx|shoal)/[0-9.]+", b"SERVER/VERSION", body)
    return re.sub(rb"<center>(nginx|shoal)</center>", b"<center>SERVER</center>", body)


def expires_norm(v):
    if v in ("Thu, 01 Jan 1970 00:00:01 GMT", "Thu, 31 Dec 2037 23:55:55 GMT"):
        return v
    if re.fullmatch(r"[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT", v):
        return "<date>"
    return "<bad date %r>" % v


def dechunk(rest):
    """Returns (body, consumed) of a chunked body at the start of rest, or None if cut."""
    body, i = bytearray(), 0
    while True:
        j = rest.find(b"\r\n", i)
        if j < 0:
            return None
        try:
            size = int(rest[i:j].split(b";")[0], 16)
        except ValueError:
            return None
        i = j + 2
        if size == 0:
            k = rest.find(b"\r\n\r\n", i - 2)
            return (bytes(body), k + 4) if k >= 0 else None
        body += rest[i:i + size]
        i += size + 2


def normalise(raw, end, port, methods):
    out = []
    rest = raw
    idx = 0
    while rest:
        he = rest.find(b"\r\n\r\n")
        if he < 0 or not rest.startswith(b"HTTP/"):
            out.append("[garbage %d bytes] %r" % (len(rest), token_norm(rest[:300])))
            break
        head = rest[:he].decode("latin-1")
        rest = rest[he + 4:]
        lines = head.split("\r\n")
        status = lines[0]
        headers = []
        for l in lines[1:]:
            n, sep, v = l.partition(":")
            headers.append((n, v.strip()) if sep else ("[bad line] " + l, ""))
        code = status.split(" ")[1] if len(status.split(" ")) > 1 else ""
        method = methods[idx] if idx < len(methods) else "GET"
        if not code.startswith("1"):
            idx += 1
        te = (header(headers, "transfer-encoding") or "").lower()
        cl = header(headers, "content-length")
        if code.startswith("1") or code in ("204", "304") or method == "HEAD":
            body = b""
        elif te == "chunked":
            d = dechunk(rest)
            if d is None:
                body, rest = b"[cut chunked] " + rest, b""
            else:
                body, n = d
                rest = rest[n:]
                headers = [(n_, v) for n_, v in headers if n_.lower() != "transfer-encoding"]
                headers.append(("[chunked]", ""))
        elif cl is not None and cl.isdigit():
            n = int(cl)
            body, rest = rest[:n], rest[n:]
        else:
            body, rest = rest, b""
        ctype = header(headers, "content-type") or ""
        if "boundary=" in ctype:
            b = ctype.split("boundary=", 1)[1].encode("latin-1")
            body = body.replace(b, b"BOUNDARY")
            headers = [(n_, v.replace(b.decode("latin-1"), "BOUNDARY")) for n_, v in headers]
        nb = token_norm(body)
        own_page = (not body and code >= "300" and ctype == "text/html"
                    and header(headers, "etag") is None)
        token = header(headers, "server") or ""
        norm = []
        for n_, v in headers:
            ln = n_.lower()
            if ln in ("date", "server"):
                continue
            v = v.replace(":%d" % port, ":PORT")
            if ln == "content-length":
                if nb != body:
                    v = str(len(nb))
                elif own_page and v.isdigit():
                    tok = "SERVER/VERSION" if "/" in token else "SERVER"
                    v = "%d (HEAD)" % (int(v) + len(tok) - len(token))
            if ln == "expires":
                v = expires_norm(v)
            norm.append("%s: %s" % (n_, v))
        norm.sort()
        nb = nb.replace(b":%d" % port, b":PORT")
        out.append(status + "\n" + "\n".join(norm) + "\n\n" + repr(nb[:2000]))
    out.append(end)
    return out


# ---- generation -----------------------------------------------------------------------------

METHODS = ["GET"] * 12 + ["HEAD"] * 4 + ["POST"] * 2 + [
    "PUT", "DELETE", "OPTIONS", "TRACE", "PATCH", "CONNECT", "get", "Get", "head", "PROPFIND",
    "MKCOL", "LOCK", "G@T", "GE T", "FOOBAR", "X" * 40, "", "GET\t", "M-SEARCH", "_GET",
]
VERSIONS = ["HTTP/1.1"] * 10 + ["HTTP/1.0"] * 4 + [
    None, "HTTP/2.0", "HTTP/1.2", "HTTP/1.10", "HTTP/01.1", "http/1.1", "HTTP/1.1x", "HTTP/9.9",
    "HTTP/1", "HTTP/1.", "HTTP/1000.0", "HTTP/0.9", "HTTP/3", "HTTPS/1.1", "HTTP/1.1 ",
    "HTTP /1.1", "HTTP/1.01", "HTTP/2",
]


def pct(c):
    return "%%%02X" % ord(c) if random.random() < 0.5 else "%%%02x" % ord(c)


def mutate_path(p, rnd):
    ops = rnd.randint(0, 3)
    for _ in range(ops):
        op = rnd.randrange(20)
        i = rnd.randint(0, len(p))
        if op == 0 and len(p) > 1:  # percent-encode one char
            j = rnd.randrange(1, len(p))
            if p[j] != "%":
                p = p[:j] + pct(p[j]) + p[j + 1:]
        elif op == 1:
            p = p[:i] + rnd.choice(["%2F", "%2f", "%00", "%2e", "%2E", "%2e%2e", "%25", "%zz",
                                    "%4", "%", "%C3%A9", "%FF", "%0a", "%20", "%3F", "%23"]) + p[i:]
        elif op == 2:
            p = p[:i] + rnd.choice(["/../", "/./", "/..", "/.", "..", "//", "///", "/%2e%2e/",
                                    "/.%2e/", "/%2e/", "/../../../../etc/passwd"]) + p[i:]
        elif op == 3:
            p = p + rnd.choice([";x", ";", ";a=b", "/", ".", "..", "/.", "/..", "%20", "~",
                                ".bak", "#frag", "?", "??", "?x=1", "?x=1&y=%41", "?a=b#f",
                                "?x=1;y", "&x=1"])
        elif op == 4:
            p = p[:i] + "/" + "a" * rnd.choice([255, 256, 1000, 5000, 9000]) + p[i:]
        elif op == 5:
            p = p[:i] + rnd.choice(["\u00e9", "\x80", "\xff", "\u00a0", "\x7f", "\t", "\\",
                                    "\"", "<", "{", "|", "^", "`", "*", "\x01", " "]) + p[i:]
        elif op == 6:
            p = rnd.choice(["", "*", "a.txt", "http://localhost" , "http://localhost:80",
                            "http://example.com", "HTTP://LOCALHOST", "https://localhost",
                            "http://[::1]", "http://local host", "http://:80", "ftp://x",
                            "http://localhost:99999", "http://user@localhost",
                            "http://localhost?x", "//localhost"]) + p
        elif op == 7:
            p = p.replace("/", "//")
        elif op == 8:
            p = p.upper()
        elif op == 9 and "?" not in p:
            p = p + "?" + rnd.choice(["x=1", "x=%zz", "x=\u00e9", "x", "=", "&&", "x=1&x=2",
                                      "x=" + "b" * 3000, "arg=%00"])
        # else: unchanged
    return p


def gen_host(rnd, port):
    return rnd.choice([
        "localhost", "localhost", "localhost:%d" % port, "localhost:80", "LOCALHOST",
        "localhost.", "127.0.0.1", "127.0.0.1:%d" % port, "[::1]", "[::1]:80", "[::1",
        "::1", "example.com", "EXAMPLE.com.", "a.wild.test", "x.y.wild.test", "wild.test",
        "abc.re.test", "ABC.re.test", "1.re.test", "", " ", "bad host", "a..b", "a/b", "a\\b",
        ".", "..", "-", "a:b:c", "localhost:", "localhost:abc", ":80", "[]", "[::1]x",
        "h\u00e9st", "_under_score", "x" * 300, "localhost:%d:%d" % (port, port),
        "example.com:%d" % port, "\"quoted\"",
    ])


def gen_headers(rnd, port, method, with_host):
    hs = []
    if with_host:
        hs.append("Host: " + gen_host(rnd, port))
        if rnd.random() < 0.05:
            hs.append("Host: " + gen_host(rnd, port))
    body = b""
    etags = ['"%x-%x"' % (MTIME, n) for n in (17, 1000, 102400, 24)]
    pool = [
        lambda: "Range: " + rnd.choice([
            "bytes=0-4", "bytes=-5", "bytes=990-", "bytes=0-0,5-9", "bytes=0-1,2-3,4-5,6-7",
            "bytes=5-1", "bytes=2000-", "bytes=0-99999", "bytes=", "bytes=a-b", "bytes= 1-2",
            "bytes=1-2 ", "bytes=-0", "bytes=0-", "BYTES=0-1", "items=0-1", "bytes=1-2,",
            "bytes=,1-2", "bytes=0-1,0-1", "bytes=-1000", "bytes=99999999999999999999-",
            "bytes=1-2, 3-4", "bytes=0-0,-1", "bytes=10-5,20-30"]),
        lambda: "If-Range: " + rnd.choice(etags + [MTIME_HTTP, "W/" + etags[0], "garbage",
                                                   "Sun, 01 Jan 2023 00:00:01 GMT", ""]),
        lambda: "If-Modified-Since: " + rnd.choice([
            MTIME_HTTP, "Sat, 31 Dec 2022 23:59:59 GMT", "Sun, 01 Jan 2023 00:00:01 GMT",
            "Sunday, 01-Jan-23 00:00:00 GMT", "Sun Jan  1 00:00:00 2023", "garbage", "",
            "Sun, 01 Jan 2023 00:00:00 GMT; length=17", "Mon, 01 Jan 2035 00:00:00 GMT",
            "Thu, 01 Jan 1970 00:00:00 GMT", "Sun, 01 Jan 2023 00:00:00"]),
        lambda: "If-Unmodified-Since: " + rnd.choice([
            MTIME_HTTP, "Sat, 31 Dec 2022 23:59:59 GMT", "Mon, 01 Jan 2035 00:00:00 GMT",
            "garbage", ""]),
        lambda: "If-None-Match: " + rnd.choice(etags + [
            "*", "W/" + etags[0], "\"x\", " + etags[0], etags[0] + ",\"x\"", "garbage", "",
            "\"x\"", etags[0][:-1], " " + etags[0] + " ", etags[0] + etags[1]]),
        lambda: "If-Match: " + rnd.choice(etags + ["*", "W/" + etags[0], "\"x\"", "", "bad",
                                                   "\"x\"," + etags[0]]),
        lambda: "Connection: " + rnd.choice(["close", "keep-alive", "Close", "upgrade",
                                             "keep-alive, close", "garbage", "", "TE"]),
        lambda: "Expect: " + rnd.choice(["100-continue", "100-Continue", "200-ok", ""]),
        lambda: "Accept-Encoding: gzip",
        lambda: "X-H: " + rnd.choice(["abbbc", "ac", "ABC", ""]),
        lambda: rnd.choice(["X_Under: 1", "X Space: 1", "X-Sp : 1", "X-Obs: a\r\n folded",
                            "NoColon", ": empty-name", "X-Nul: a\x00b", "X-Hi: \u00e9\u00e9",
                            "X-Long: " + "v" * 9000, "X-Ctl: a\x01b", "X-Tab:\tv",
                            "\u00e9: v", "Content-Type: text/plain", "Cookie: a=b",
                            "Transfer-Encoding: chunked", "Content-Length: 0",
                            "Upgrade: websocket", "Host:", "X-Cr: a\rb"]),
    ]
    for _ in range(rnd.choice([0, 0, 1, 1, 2, 3])):
        hs.append(rnd.choice(pool)())
    # Request bodies and their framing.
    b = rnd.randrange(10) if method in ("POST", "PUT") else rnd.randrange(40)
    if b == 0:
        body = b"hello"
        hs.append("Content-Length: 5")
    elif b == 1:
        hs.append("Transfer-Encoding: chunked")
        body = rnd.choice([b"5\r\nhello\r\n0\r\n\r\n", b"5;ext=1\r\nhello\r\n0\r\n\r\n",
                           b"5\r\nhello\r\n0\r\nTrailer: x\r\n\r\n", b"zz\r\n", b"5\r\nhel",
                           b"ffffffffffffffffff\r\n", b"0\r\n\r\n", b"-1\r\n"])
    elif b == 2:
        hs.append("Content-Length: " + rnd.choice([
            "-1", "+5", "05", " 5", "5 ", "0x5", "99999999999999999999", "5, 5", "5,6", "",
            "1e3", "5\t"]))
        body = b"hello"
    elif b == 3:
        hs += ["Content-Length: 5", "Content-Length: " + rnd.choice(["5", "6"])]
        body = b"hello"
    elif b == 4:
        hs += ["Content-Length: 5", "Transfer-Encoding: chunked"]
        body = b"0\r\n\r\n"
    elif b == 5:
        hs.append("Transfer-Encoding: " + rnd.choice([
            "gzip", "gzip, chunked", "chunked, gzip", "identity", "chunked, chunked", "Chunked",
            " chunked", "chunked ", "xchunked", ""]))
        body = b"0\r\n\r\n"
    elif b == 6:
        hs.append("Content-Length: 100")
        body = b"short"
    elif b == 7:
        hs += ["Expect: 100-continue", "Content-Length: 5"]
        body = b"hello"
    return hs, body


def gen_request(rnd, paths, port):
    """Returns (bytes, [method per expected answer])."""
    method = rnd.choice(METHODS)
    path = mutate_path(rnd.choice(paths), rnd)
    version = rnd.choice(VERSIONS)
    sep = rnd.choice([" "] * 20 + ["  ", "\t", " \t"])
    eol = rnd.choice(["\r\n"] * 12 + ["\n", "\r\n\r\n"[0:2]])
    line = method + sep + path + ((sep + version) if version else "")
    hs, body = gen_headers(rnd, port, method.strip(),
                           with_host=version not in (None,) and rnd.random() < 0.93)
    head = ("\r\n" if rnd.random() < 0.03 else "") + line + eol
    if version or rnd.random() < 0.2:  # HTTP/0.9 has no headers, mostly
        head += "".join(h + eol for h in hs) + eol
    # Every generated character is below U+0100: as latin-1 a raw byte, as UTF-8 two.
    req = head.encode("latin-1" if rnd.random() < 0.3 else "utf-8") + body
    methods = [method.strip()]
    if rnd.random() < 0.12:  # a pipelined second request
        m2 = rnd.choice(["GET", "HEAD"])
        req += ("%s %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % (m2, rnd.choice(paths))).encode()
        methods.append(m2)
    return req, methods


# ---- running --------------------------------------------------------------------------------

def classify(n, s):
    """A short key for the kind of difference (not its values)."""
    def status(x):
        return [a.split("\n")[0][:40] for a in x]

    if status(n) != status(s):
        return "status %s vs %s" % (status(n), status(s))
    for a, b in zip(n, s):
        if a == b:
            continue
        ha = set(a.split("\n\n")[0].split("\n")[1:])
        hb = set(b.split("\n\n")[0].split("\n")[1:])
        if ha != hb:
            only_n = sorted(x.split(":")[0] for x in ha - hb)
            only_s = sorted(x.split(":")[0] for x in hb - ha)
            return "%s headers nginx:%s shoal:%s" % (status(n)[0], only_n, only_s)
        return "%s body" % status(n)[0]
    return "other"


def known(req, n, s):
    """Differences shoal keeps on purpose (see fuzz/differential/README.md): a name, or None."""
    line = req.lstrip(b"\r\n").split(b"\n", 1)[0].rstrip(b"\r")
    if not re.search(rb" HTTP/[^ ]*\s*$", line) and len(line.split()) <= 2:
        return "HTTP/0.9 request (shoal does not serve 0.9)"
    if any(a.startswith("HTTP/1.1 408 ") for a in s) and not any(" 408 " in a for a in n):
        return "408 page where nginx closes silently"
    return None


def run_conf(name, args, rnd, slot, deadline, findings, stats):
    body, paths = CONFS[name]
    work = tempfile.mkdtemp(prefix="shoal-difffuzz-")
    os.chmod(work, 0o755)
    html = os.path.join(work, "html")
    write_fixtures(html)
    np, sp = PORT_BASE + 2 * slot, PORT_BASE + 2 * slot + 1
    servers = []
    try:
        servers.append(Server("nginx", args.nginx, os.path.join(work, "nginx"),
                              render(body, html, np, True), np))
        servers.append(Server("shoal", args.shoal, os.path.join(work, "shoal"),
                              render(body, html, sp, False), sp))
        nginx, shoal = servers
        n_done = 0
        while n_done < args.count and time.time() < deadline:
            req, methods = gen_request(rnd, paths, np)
            # Both get the same bytes: the Host port names nginx's; swap for shoal's.
            sreq = req.replace(b":%d" % np, b":%d" % sp)
            keep = rnd.random() < 0.5
            res = {}

            def go(key, port, r):
                try:
                    res[key] = exchange(port, r, keep)
                except OSError as e:
                    res[key] = (b"", "[connect error %s]" % e)

            ts = [threading.Thread(target=go, args=("n", np, req)),
                  threading.Thread(target=go, args=("s", sp, sreq))]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            n_done += 1
            stats["requests"] += 1
            nn = normalise(res["n"][0], res["n"][1], np, methods)
            sn = normalise(res["s"][0], res["s"][1], sp, methods)
            crash = not shoal.alive()
            if nn != sn or crash:
                key = "CRASH" if crash else classify(nn, sn)
                why = known(req, nn, sn)
                if why and not crash:
                    key = "known: " + why
                if res["s"][1].startswith("[no answer"):
                    key = "HANG? " + key
                rec = {"conf": name, "class": key, "keep_open": keep,
                       "request": base64.b64encode(req).decode(), "nginx": nn, "shoal": sn}
                findings.append(rec)
                if args.verbose:
                    print("DIFF [%s] %s\n  req=%r" % (name, key, req[:300]))
                if crash:
                    print("shoal exited! stderr: %s" % shoal.read("stderr.txt")[-3000:])
                    return
            if not nginx.alive():
                print("nginx exited?!")
                return
    finally:
        for s in reversed(servers):
            s.stop()
        if not args.keep:
            subprocess.run(["chmod", "-R", "u+rwX", work], check=False)
            shutil.rmtree(work, ignore_errors=True)


def replay(args):
    with open(args.replay) as f:
        if args.replay.endswith(".jsonl"):
            recs = [json.loads(l) for l in f]
        else:  # one Python bytes literal a line, sent to every --conf (keep-open)
            import ast
            recs = [{"conf": c, "keep_open": True,
                     "request": base64.b64encode(ast.literal_eval(l)).decode()}
                    for l in f if l.strip() and not l.startswith("#")
                    for c in (args.conf or ["static"])]
    by_conf = collections.defaultdict(list)
    for r in recs:
        by_conf[r["conf"]].append(r)
    for name, rs in by_conf.items():
        body, _ = CONFS[name]
        work = tempfile.mkdtemp(prefix="shoal-difffuzz-")
        os.chmod(work, 0o755)
        html = os.path.join(work, "html")
        write_fixtures(html)
        np, sp = PORT_BASE, PORT_BASE + 1
        n = Server("nginx", args.nginx, os.path.join(work, "nginx"), render(body, html, np, True),
                   np)
        s = Server("shoal", args.shoal, os.path.join(work, "shoal"), render(body, html, sp, False),
                   sp)
        try:
            for r in rs:
                req = base64.b64decode(r["request"])
                methods = [m.split(b" ")[0].decode("latin-1")
                           for m in req.split(b"\r\n\r\n") if m]
                a = normalise(*exchange(np, req, r["keep_open"]), np, methods)
                b = normalise(*exchange(sp, req.replace(b":%d" % np, b":%d" % sp),
                                        r["keep_open"]), sp, methods)
                print("%s %s %r" % ("SAME" if a == b else "DIFF", name, req[:200]))
                if a != b or args.verbose:
                    print("--- nginx\n%s\n--- shoal\n%s" % ("\n".join(a), "\n".join(b)))
        finally:
            s.stop()
            n.stop()
            shutil.rmtree(work, ignore_errors=True)


def main():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shoal", default=os.path.join(target, "release", "shoal"))
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--time", type=float, default=300)
    ap.add_argument("--count", type=int, default=10**9)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--conf", action="append", choices=sorted(CONFS))
    ap.add_argument("--out", default="/tmp/shoal-difffuzz")
    ap.add_argument("--replay", help="findings.jsonl, or a file of Python bytes literals")
    ap.add_argument("--keep", action="store_true", help="keep the work directories")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.replay:
        return replay(args)
    confs = args.conf or sorted(CONFS)
    rnd = random.Random(args.seed)
    random.seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    start = time.time()
    findings, stats = [], collections.Counter()
    print("seed %d, confs %s, %ss" % (args.seed, confs, args.time))
    for i, name in enumerate(confs):
        deadline = start + args.time * (i + 1) / len(confs)
        run_conf(name, args, rnd, i, deadline, findings, stats)
    path = os.path.join(args.out, "findings.jsonl")
    with open(path, "w") as f:
        for r in findings:
            f.write(json.dumps(r) + "\n")
    classes = collections.Counter((r["conf"], r["class"]) for r in findings)
    print("%d requests, %d differences in %d classes (%s)" % (
        stats["requests"], len(findings), len(classes), path))
    for (conf, key), count in classes.most_common():
        ex = next(r for r in findings if r["conf"] == conf and r["class"] == key)
        print("\n== %d x [%s] %s" % (count, conf, key))
        print("   e.g. %r" % base64.b64decode(ex["request"])[:400])
        print("   nginx: %s" % " | ".join(ex["nginx"])[:600])
        print("   shoal: %s" % " | ".join(ex["shoal"])[:600])
    return 1 if any(r["class"].startswith(("CRASH", "HANG")) for r in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
