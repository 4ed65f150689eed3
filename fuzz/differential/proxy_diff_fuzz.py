#!/usr/bin/env python3
"""Differential fuzzer for proxy_pass: shoal against real nginx in front of a recording upstream.

Each of nginx and shoal gets its own small Python upstream (127.0.0.1, ports 20300-20399) that
records exactly what it received (request line, headers in order, body, whether the connection
was reused) and answers with a generated response: status lines (1xx before the answer, 204,
304, 404, 500, 502, odd ones), header sets (duplicates, hop-by-hop headers, Set-Cookie, Location
for proxy_redirect, charsets, X-Accel-*, odd spacing, very long values) and framings
(Content-Length, chunked with extensions and trailers, close-delimited, and broken ones: a short
body then a close, a bad chunk size, both Content-Length and Transfer-Encoding). Both servers run
the same configuration (plain proxy_pass, one with a URI part, an upstream block with keepalive,
proxy_set_header/hide/pass/redirect, intercepted errors, unbuffered) and get the same generated
client request; the fuzzer compares (a) what each upstream received and (b) what each client got
back, as nginx_diff_fuzz.py does (status line, headers without Date and Server, body, closed or
kept open). Ports are normalised (UP for the upstream's, PORT for the server's own).

Run (from the repository root, after `cargo build --release`):

    python3 fuzz/differential/proxy_diff_fuzz.py --time 120 --seed 1
    python3 fuzz/differential/proxy_diff_fuzz.py --count 300 -v
    python3 fuzz/differential/proxy_diff_fuzz.py --replay /tmp/shoal-proxyfuzz/findings.jsonl

Only 127.0.0.1 is used; every socket read has a deadline; every server is stopped by its pid.
"""

import argparse
import base64
import collections
import json
import os
import random
import shutil
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nginx_diff_fuzz as base  # noqa: E402

PORT_BASE = 20300
READ_TIMEOUT = 2.0

# ---- the upstream ---------------------------------------------------------------------------


class Upstream:
    """A recording HTTP/1.x upstream. `answer` (set before each exchange) is a function of the
    received request returning (bytes to send, close afterwards)."""

    def __init__(self, port):
        self.port = port
        self.lock = threading.Lock()
        self.records = []
        self.answer = lambda req: (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", False)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.stopped = False
        self.conns = []
        self.thread = threading.Thread(target=self.accept_loop, daemon=True)
        self.thread.start()

    def stop(self):
        self.stopped = True
        self.thread.join()
        self.sock.close()
        for c in list(self.conns):
            try:
                c.close()
            except OSError:
                pass

    def take(self):
        with self.lock:
            r, self.records = self.records, []
        return r

    def accept_loop(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        c.settimeout(READ_TIMEOUT)
        buf = bytearray()
        nreq = 0
        try:
            while not self.stopped:
                he = buf.find(b"\r\n\r\n")
                while he < 0:
                    chunk = c.recv(65536)
                    if not chunk:
                        if buf:
                            self.record({"head": "[cut head] %r" % bytes(buf[:300])})
                        return
                    buf += chunk
                    he = buf.find(b"\r\n\r\n")
                head = bytes(buf[:he]).decode("latin-1")
                del buf[:he + 4]
                lines = head.split("\r\n")
                headers = [tuple(x.strip() for x in l.split(":", 1)) if ":" in l
                           else ("[bad line] " + l, "") for l in lines[1:]]
                hmap = {n.lower(): v for n, v in headers}
                body, framing = b"", ""
                try:
                    if "chunked" in hmap.get("transfer-encoding", "").lower():
                        framing = "chunked"
                        while True:
                            d = base.dechunk(bytes(buf))
                            if d is not None:
                                body, n = d
                                del buf[:n]
                                break
                            chunk = c.recv(65536)
                            if not chunk:
                                body, framing = bytes(buf), "chunked [cut]"
                                break
                            buf += chunk
                    elif "content-length" in hmap:
                        framing = "length"
                        try:
                            want = int(hmap["content-length"])
                        except ValueError:
                            want = 0
                            framing = "bad length"
                        while len(buf) < want:
                            chunk = c.recv(65536)
                            if not chunk:
                                break
                            buf += chunk
                        body = bytes(buf[:want])
                        del buf[:want]
                        if len(body) < want:
                            framing += " [cut]"
                except socket.timeout:
                    body, framing = bytes(buf), framing + " [stalled]"
                    buf.clear()
                nreq += 1
                req = {"line": lines[0], "headers": headers, "body": body, "framing": framing,
                       "reused": nreq > 1}
                self.record(req)
                data, close = self.answer(req)
                c.sendall(data)
                if close or "[" in framing:
                    c.shutdown(socket.SHUT_WR)
                    # Let the peer read everything before the socket goes.
                    try:
                        while c.recv(65536):
                            pass
                    except OSError:
                        pass
                    return
        except (socket.timeout, OSError):
            return
        finally:
            try:
                c.close()
            except OSError:
                pass
            if c in self.conns:
                self.conns.remove(c)

    def record(self, r):
        with self.lock:
            self.records.append(r)


# ---- generated upstream answers -------------------------------------------------------------

STATUSES = ["200 OK"] * 10 + [
    "204 No Content", "304 Not Modified", "404 Not Found", "500 Internal Server Error",
    "502 Bad Gateway", "201 Created", "301 Moved Permanently", "302 Found", "401 Unauthorized",
    "403 Forbidden", "503 Service Unavailable", "206 Partial Content", "200", "200 ", "299 Odd",
    "418 I'm a teapot", "599 x", "600 Too Big", "099 x", "2000 x", "20 x", "abc x",
    "200 reason with  spaces",
]
VERSIONS = ["HTTP/1.1"] * 8 + ["HTTP/1.0"] * 2 + ["HTTP/2.0", "HTTP/1.2", "http/1.1", "HTTP/1",
                                                    "HTTP/0.9", "ICY", "HTTP/1.1 "]


def gen_answer(rnd):
    """A recipe for one answer; rendered per upstream (its own address) and request."""
    status = rnd.choice(STATUSES)
    version = rnd.choice(VERSIONS) if rnd.random() < 0.15 else "HTTP/1.1"
    pre = ""
    if rnd.random() < 0.06:
        pre = rnd.choice(["HTTP/1.1 100 Continue\r\n\r\n", "HTTP/1.1 103 Early Hints\r\n"
                          "Link: </s.css>; rel=preload\r\n\r\n", "HTTP/1.1 102 Processing\r\n\r\n"])
    hs = []
    pool = [
        lambda: ["Connection: " + rnd.choice(["close", "keep-alive", "X-Conn-Listed",
                                              "Keep-Alive, X-Conn-Listed", "upgrade", "Close"]),
                 "X-Conn-Listed: 1"],
        lambda: ["Keep-Alive: timeout=5, max=100"],
        lambda: ["Upgrade: " + rnd.choice(["h2c", "websocket"])],
        lambda: ["TE: trailers"],
        lambda: ["Trailer: X-Trail"],
        lambda: ["Proxy-Connection: keep-alive"],
        lambda: ["Proxy-Authenticate: Basic realm=x"],
        lambda: ["Set-Cookie: a=1; Path=/", "Set-Cookie: b=2; Domain=127.0.0.1"],
        lambda: ["X-Dup: 1", "X-Dup: 2", "x-dup: 3"],
        lambda: ["Location: " + rnd.choice([
            "http://{UPHOST}/base/x?y=1", "http://{UPHOST}/x", "http://{UPHOST}/", "/rel/x",
            "rel", "http://other.example/x", "https://{UPHOST}/base/", "http://{UPHOST}/hdr/a",
            "", "//{UPHOST}/x"])],
        lambda: ["Refresh: 5; url=http://{UPHOST}/base/r"],
        lambda: ["Content-Type: " + rnd.choice([
            "text/html; charset=utf-8", "text/plain;charset=UTF-8", "application/json",
            "text/html", "TEXT/HTML; Charset=\"iso-8859-1\"", "", "multipart/byteranges; "
            "boundary=abc"])],
        lambda: ["X-Accel-" + rnd.choice([
            "Expires: 10", "Buffering: no", "Buffering: yes", "Charset: koi8-r",
            "Limit-Rate: 100000", "Redirect: /errpage", "Redirect: @named", "Foo: bar"])],
        lambda: [rnd.choice(["X-Sp:   v  ", "X-Tab:\tv\t", "X-NoSp:v", "X-Sp-Before : v",
                             "X-Empty:", "X-Obs: a\r\n folded", "X_Under: 1", "NoColon",
                             "X-Hi: \xe9\xe9", "X-Ctl: a\x01b", ": empty-name", "X-Nul: a\x00b",
                             "X-Cr: a\rb", "x-lower: 1", "X-UPPER: 1"])],
        lambda: ["X-Long: " + "v" * rnd.choice([1000, 3000, 5000, 9000])],
        lambda: ["Server: upstream/1.0", "Date: Thu, 01 Jan 1970 00:00:00 GMT",
                 "X-Powered-By: py"],
        lambda: ["X-Secret: s3cret"],
        lambda: ["Cache-Control: " + rnd.choice(["no-cache", "max-age=60", "private"])],
        lambda: ["Expires: Thu, 01 Jan 2037 00:00:00 GMT"],
        lambda: ["ETag: \"e1\"", "Last-Modified: Sun, 01 Jan 2023 00:00:00 GMT"],
        lambda: ["Accept-Ranges: bytes"],
        lambda: ["Content-Encoding: gzip"],
        lambda: ["Vary: Accept-Encoding"],
        lambda: ["WWW-Authenticate: Basic realm=\"x\""],
        lambda: ["Content-Range: bytes 0-3/10"],
    ]
    for _ in range(rnd.choice([0, 1, 1, 2, 3, 4])):
        hs += rnd.choice(pool)()
    body = rnd.choice([b"", b"hello upstream\n", b"x" * 5000, bytes(range(256)) * 40,
                       b"<html>page</html>\n"])
    framing = rnd.choice(["length"] * 6 + ["chunked"] * 3 + ["close"] * 2 + [
        "short", "badchunk", "cl+te", "chunked-ext", "chunked-trailer", "two-cl", "bad-cl",
        "cut-chunked", "te-gzip", "none-keep", "cl-extra"])
    return {"status": status, "version": version, "pre": pre, "headers": hs, "body": body,
            "framing": framing, "badcl": rnd.choice(["-1", "abc", "+5", " 5 5", "0x10"])}


def render_answer(a, req, uphost):
    """Bytes to send for recipe `a` to request `req`, and whether to close afterwards."""
    method = req["line"].split(" ")[0]
    code = a["status"].split(" ")[0]
    nobody = method == "HEAD" or code in ("204", "304") or code.startswith("1")
    body = b"" if nobody else a["body"]
    hs = [h.replace("{UPHOST}", uphost) for h in a["headers"]]
    f = a["framing"]
    close = False
    tail = b""
    if f in ("length", "short", "cl-extra"):
        n = len(a["body"])
        hs.append("Content-Length: %d" % (n + (50 if f == "short" else 0)))
        if f == "short" and not nobody:
            close = True
        if f == "cl-extra" and not nobody:
            tail = b"EXTRA BYTES"
    elif f.startswith("chunked") or f in ("badchunk", "cl+te", "cut-chunked"):
        hs.append("Transfer-Encoding: chunked")
        if f == "cl+te":
            hs.append("Content-Length: 3")
        if not nobody:
            parts = [body[i:i + 1000] for i in range(0, len(body), 1000)]
            ext = ";name=val" if f == "chunked-ext" else ""
            out = b"".join(b"%x%s\r\n%s\r\n" % (len(p), ext.encode(), p) for p in parts)
            if f == "badchunk":
                out += b"zz\r\nbad\r\n"
                close = True
            elif f == "cut-chunked":
                out += b"100\r\nshort"
                close = True
            elif f == "chunked-trailer":
                out += b"0\r\nX-Trail: t\r\nX-Other: o\r\n\r\n"
            else:
                out += b"0\r\n\r\n"
            body = out
    elif f == "close":
        close = True
    elif f == "two-cl":
        hs += ["Content-Length: %d" % len(body), "Content-Length: %d" % (len(body) + 1)]
        close = True
    elif f == "bad-cl":
        hs.append("Content-Length: " + a["badcl"])
        close = True
    elif f == "te-gzip":
        hs.append("Transfer-Encoding: gzip")
        close = True
    elif f == "none-keep":
        pass  # no framing, but the connection stays: the body ends nowhere
    if a["version"] == "HTTP/0.9":
        data = body  # no status line at all
        close = True
    else:
        head = "%s %s\r\n" % (a["version"], a["status"]) + "".join(h + "\r\n" for h in hs)
        data = a["pre"].encode("latin-1") + head.encode("latin-1") + b"\r\n" + body + tail
    return data, close


# ---- the configuration ----------------------------------------------------------------------

CONF = """
    proxy_connect_timeout 1s;
    proxy_read_timeout 1500ms;
    proxy_send_timeout 1500ms;
    upstream backend { server 127.0.0.1:{UP}; keepalive 4; }
    server {
        listen 127.0.0.1:{PORT};
        server_name localhost;
        location / { proxy_pass http://127.0.0.1:{UP}; }
        location /u/ { proxy_pass http://127.0.0.1:{UP}/base/; }
        location /ka/ {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
        location /hdr/ {
            proxy_pass http://127.0.0.1:{UP};
            proxy_set_header Host $host;
            proxy_set_header X-Real-IP $remote_addr;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Uri "$uri|$args";
            proxy_set_header Accept-Encoding "";
            proxy_hide_header X-Secret;
            proxy_hide_header Set-Cookie;
            proxy_pass_header Server;
            proxy_pass_header X-Accel-Expires;
            proxy_redirect http://127.0.0.1:{UP}/ /redirected/;
        }
        location /ie/ {
            proxy_pass http://127.0.0.1:{UP};
            proxy_intercept_errors on;
            error_page 404 500 502 /errpage;
        }
        location = /errpage { internal; return 200 "error page $status\\n"; }
        location /nobuf/ { proxy_pass http://127.0.0.1:{UP}; proxy_buffering off; }
    }
"""
PATHS = ["/", "/a", "/a/b.txt?x=1", "/u/", "/u/x", "/u/a/b?c=d", "/ka/", "/ka/x?y",
         "/hdr/x", "/hdr/", "/ie/x", "/nobuf/x", "/errpage", "/u"]


def render(port, up, nginx):
    return base.render(CONF.replace("{UP}", str(up)), "/nonexistent", port, nginx)


# ---- client requests ------------------------------------------------------------------------

def gen_request(rnd, port):
    method = rnd.choice(["GET"] * 8 + ["HEAD"] * 3 + ["POST"] * 3 + [
        "PUT", "DELETE", "OPTIONS", "PATCH", "PROPFIND", "get"])
    path = rnd.choice(PATHS)
    if rnd.random() < 0.6:
        ops = rnd.randint(1, 3)
        for _ in range(ops):
            i = rnd.randint(1, len(path))
            path = path[:i] + rnd.choice([
                "%20", "%2F", "%2f", "%25", "%41", "%3F", "%23", "%00", "%zz", "+", "%C3%A9",
                "\xe9", "/../", "/./", "//", ";p=1", "?", "?a=%20b", "&", "#", "%2e%2e/",
                "a b", "\"", "<", "{", "|", "~", "*", "'", "!", "$", "@", ":"]) + path[i:]
    version = rnd.choice(["HTTP/1.1"] * 8 + ["HTTP/1.0"] * 2)
    hs = []
    hv = rnd.random()
    if hv < 0.8:
        hs.append("Host: " + rnd.choice([
            "localhost", "localhost", "localhost:%d" % port, "LocalHost", "127.0.0.1",
            "example.com", "localhost.", "[::1]:80", "x" * 200]))
    elif hv < 0.85 and version == "HTTP/1.1":
        hs.append("Host: localhost")
        hs.append("Host: other")
    elif version == "HTTP/1.1":
        hs.append("Host: localhost")
    pool = [
        lambda: "Connection: " + rnd.choice(["close", "keep-alive", "Upgrade", "TE",
                                             "X-Listed", "keep-alive, X-Listed", "close, TE"]),
        lambda: "X-Listed: 1",
        lambda: "Upgrade: " + rnd.choice(["websocket", "h2c"]),
        lambda: "TE: " + rnd.choice(["trailers", "gzip", "trailers, deflate"]),
        lambda: "Keep-Alive: 300",
        lambda: "Expect: " + rnd.choice(["100-continue", "foo"]),
        lambda: "X-Forwarded-For: " + rnd.choice(["10.0.0.1", "10.0.0.1, 10.0.0.2", ""]),
        lambda: "X-Real-IP: 1.2.3.4",
        lambda: "Accept: */*",
        lambda: "Accept-Encoding: gzip, deflate",
        lambda: "Cookie: a=b; c=d",
        lambda: "User-Agent: fuzz/1.0",
        lambda: "Proxy-Connection: keep-alive",
        lambda: "Proxy-Authorization: Basic eDp5",
        lambda: "If-None-Match: \"e1\"",
        lambda: "If-Modified-Since: Sun, 01 Jan 2023 00:00:00 GMT",
        lambda: "Range: bytes=0-3",
        lambda: "X-Dup: 1",
        lambda: "Trailer: X-T",
        lambda: "X-Sp:   spaced   ",
        lambda: "x-lower: 1",
        lambda: "X-Long: " + "l" * rnd.choice([100, 3000]),
        lambda: "X_Under: 1",
        lambda: "Content-Type: text/plain",
    ]
    for _ in range(rnd.choice([0, 1, 1, 2, 3, 4])):
        hs.append(rnd.choice(pool)())
    body = b""
    b = rnd.randrange(6) if method in ("POST", "PUT", "PATCH") else rnd.randrange(30)
    if b in (0, 1):
        body = rnd.choice([b"hello", b"", b"q" * 20000])
        hs.append("Content-Length: %d" % len(body))
    elif b == 2:
        hs.append("Transfer-Encoding: chunked")
        body = rnd.choice([b"5\r\nhello\r\n0\r\n\r\n", b"5;ext=1\r\nhello\r\n0\r\n\r\n",
                           b"5\r\nhello\r\n0\r\nX-Trail: x\r\n\r\n", b"0\r\n\r\n",
                           b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"])
    elif b == 3:
        hs += ["Expect: 100-continue", "Content-Length: 5"]
        body = b"hello"
    conn_close = any(h.lower().startswith("connection:") and "close" in h.lower() for h in hs)
    head = "%s %s %s\r\n" % (method, path, version) + "".join(h + "\r\n" for h in hs) + "\r\n"
    req = head.encode("latin-1") + body
    return req, method, conn_close


# ---- comparing ------------------------------------------------------------------------------

def norm_records(recs, up, port):
    out = []
    for r in recs:
        if "line" not in r:
            out.append(r["head"])
            continue
        hs = []
        for n, v in r["headers"]:
            v = v.replace("127.0.0.1:%d" % up, "UPHOST").replace(":%d" % port, ":PORT")
            hs.append("%s: %s" % (n, v))
        out.append("%s\n%s\n[%s%s] %r" % (
            r["line"], "\n".join(hs), r["framing"], " reused" if r["reused"] else "",
            r["body"][:400]))
    return out


def norm_answer(raw, end, port, up, method):
    raw = raw.replace(b"127.0.0.1:%d" % up, b"UPHOST")
    return base.normalise(raw, end, port, [method])


def classify(nu, su, nc, sc):
    if nu != su:
        if len(nu) != len(su):
            return "upstream got %d vs %d requests" % (len(nu), len(su))
        for a, b in zip(nu, su):
            if a.split("\n")[0] != b.split("\n")[0]:
                return "upstream request line"
            ha, hb = set(a.split("\n")[1:-1]), set(b.split("\n")[1:-1])
            if ha != hb:
                return "upstream headers nginx:%s shoal:%s" % (
                    sorted(x.split(":")[0] for x in ha - hb),
                    sorted(x.split(":")[0] for x in hb - ha))
            if a.split("\n")[1:-1] != b.split("\n")[1:-1]:
                return "upstream header order"
            return "upstream body/framing"
    return "client: " + base.classify(nc, sc)


class Pair:
    def __init__(self, args, slot, work):
        self.np, self.sp = PORT_BASE + 4 * slot, PORT_BASE + 4 * slot + 1
        self.nup, self.sup = Upstream(PORT_BASE + 4 * slot + 2), Upstream(PORT_BASE + 4 * slot + 3)
        self.servers = []
        try:
            self.servers.append(base.Server("nginx", args.nginx, os.path.join(work, "nginx"),
                                            render(self.np, self.nup.port, True), self.np))
            self.servers.append(base.Server("shoal", args.shoal, os.path.join(work, "shoal"),
                                            render(self.sp, self.sup.port, False), self.sp))
        except Exception:
            self.stop()
            raise
        self.nginx, self.shoal = self.servers

    def stop(self):
        for s in reversed(self.servers):
            s.stop()
        self.nup.stop()
        self.sup.stop()

    def run(self, req, method, keep, recipe):
        sreq = req.replace(b":%d" % self.np, b":%d" % self.sp)
        res = {}
        for up in (self.nup, self.sup):
            uphost = "127.0.0.1:%d" % up.port
            up.answer = (lambda u: lambda r: render_answer(recipe, r, u))(uphost)
            up.take()

        def go(key, port, r):
            try:
                res[key] = base.exchange(port, r, keep, deadline=5.0)
            except OSError as e:
                res[key] = (b"", "[connect error %s]" % e)

        ts = [threading.Thread(target=go, args=("n", self.np, req)),
              threading.Thread(target=go, args=("s", self.sp, sreq))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        time.sleep(0.02)
        nu = norm_records(self.nup.take(), self.nup.port, self.np)
        su = norm_records(self.sup.take(), self.sup.port, self.sp)
        nc = norm_answer(res["n"][0], res["n"][1], self.np, self.nup.port, method)
        sc = norm_answer(res["s"][0], res["s"][1], self.sp, self.sup.port, method)
        return nu, su, nc, sc, res["s"][1]


def run(args, rnd, deadline, findings, stats):
    work = tempfile.mkdtemp(prefix="shoal-proxyfuzz-")
    os.chmod(work, 0o755)
    pair = Pair(args, 0, work)
    try:
        n_done = 0
        while n_done < args.count and time.time() < deadline:
            req, method, conn_close = gen_request(rnd, pair.np)
            recipe = gen_answer(rnd)
            # nginx aborts a proxied request when the client half-closes: keep the side open.
            nu, su, nc, sc, send = pair.run(req, method, True, recipe)
            n_done += 1
            stats["requests"] += 1
            crash = not pair.shoal.alive()
            if nu != su or nc != sc or crash:
                key = "CRASH" if crash else classify(nu, su, nc, sc)
                if send.startswith("[no answer"):
                    key = "HANG? " + key
                rec = {"class": key, "request": base64.b64encode(req).decode(),
                       "method": method, "answer": {**recipe, "body": base64.b64encode(
                           recipe["body"]).decode()},
                       "nginx_up": nu, "shoal_up": su, "nginx": nc, "shoal": sc}
                findings.append(rec)
                if args.verbose:
                    print("DIFF %s\n  req=%r" % (key, req[:300]))
                if crash:
                    print("shoal exited! stderr: %s" % pair.shoal.read("stderr.txt")[-3000:])
                    return
            if not pair.nginx.alive():
                print("nginx exited?!")
                return
    finally:
        pair.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def replay(args):
    with open(args.replay) as f:
        recs = [json.loads(l) for l in f if l.strip()]
    work = tempfile.mkdtemp(prefix="shoal-proxyfuzz-")
    os.chmod(work, 0o755)
    pair = Pair(args, 1, work)
    try:
        for r in recs:
            if args.match and args.match not in r["class"]:
                continue
            req = base64.b64decode(r["request"])
            recipe = dict(r["answer"], body=base64.b64decode(r["answer"]["body"]))
            nu, su, nc, sc, _ = pair.run(req, r["method"], True, recipe)
            same = nu == su and nc == sc
            print("%s %r\n   answer %r" % ("SAME" if same else "DIFF", req[:300],
                                           {k: v for k, v in recipe.items() if k != "body"}))
            if not same or args.verbose:
                print("--- nginx upstream\n%s\n--- shoal upstream\n%s" % (
                    "\n".join(nu), "\n".join(su)))
                print("--- nginx\n%s\n--- shoal\n%s" % ("\n".join(nc), "\n".join(sc)))
    finally:
        pair.stop()
        shutil.rmtree(work, ignore_errors=True)


def main():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(base.REPO, "target"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shoal", default=os.path.join(target, "release", "shoal"))
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--time", type=float, default=120)
    ap.add_argument("--count", type=int, default=10**9)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--out", default="/tmp/shoal-proxyfuzz")
    ap.add_argument("--replay", help="a findings.jsonl to send again")
    ap.add_argument("--match", help="with --replay: only classes containing this text")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.replay:
        return replay(args)
    rnd = random.Random(args.seed)
    random.seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    findings, stats = [], collections.Counter()
    print("seed %d, %ss" % (args.seed, args.time))
    run(args, rnd, time.time() + args.time, findings, stats)
    path = os.path.join(args.out, "findings.jsonl")
    with open(path, "w") as f:
        for r in findings:
            f.write(json.dumps(r) + "\n")
    classes = collections.Counter(r["class"] for r in findings)
    print("%d requests, %d differences in %d classes (%s)" % (
        stats["requests"], len(findings), len(classes), path))
    for key, count in classes.most_common():
        ex = next(r for r in findings if r["class"] == key)
        print("\n== %d x %s" % (count, key))
        print("   e.g. %r" % base64.b64decode(ex["request"])[:300])
        print("   answer: %r" % {k: v for k, v in ex["answer"].items() if k != "body"})
        if ex["nginx_up"] != ex["shoal_up"]:
            print("   nginx up: %s" % " | ".join(ex["nginx_up"])[:600])
            print("   shoal up: %s" % " | ".join(ex["shoal_up"])[:600])
        print("   nginx: %s" % " | ".join(ex["nginx"])[:600])
        print("   shoal: %s" % " | ".join(ex["shoal"])[:600])
    return 1 if any(r["class"].startswith(("CRASH", "HANG")) for r in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
