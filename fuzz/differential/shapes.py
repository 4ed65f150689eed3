"""Request shapes for nginx_diff_fuzz.py that need more than a mutated path: absolute-form
targets, chunked bodies of every size-line shape, heads of about a thousand header lines, tabs
around the values that frame a request, HTTP/0.9 simple requests and TLS bytes on a plain port.

Each generator takes a random.Random, the configuration's paths and nginx's port, and returns
(request bytes, [method of each answer expected]) like gen_request. Standard library only.
"""

import struct

# ---- absolute-form targets ------------------------------------------------------------------

SCHEMES = [
    "http", "http", "https", "HTTP", "HtTp", "ftp", "h2", "a+b-c.d", "x-y", "2h", "h_t", "",
    "http:", "ht%74p",
]
SEPARATORS = ["://"] * 12 + [":/", ":", ":///", ":\\\\", "//"]
HOSTS = [
    "localhost", "localhost", "LOCALHOST", "LocalHost.", "example.com", "EXAMPLE.COM",
    "a.wild.test", "abc.re.test", "127.0.0.1", "[::1]", "[::FFFF:127.0.0.1]", "[v1.x]",
    "[a_b~!$&'()*+,;=]", "[]", "[::1", "::1", "a..b", ".a", "-a", "a-", "localhost.",
    "a_b", "%6c%6f", "", "x" * 300, "h\u00e9st", "local host", "a@b",
]
PORTS = ["", "", "", ":80", ":{PORT}", ":", ":0", ":99999999999", ":abc", ":1:2", ":-1"]
USERINFO = [""] * 10 + ["u@", "u:p@", "@", "u%40@", "a@b@"]
AFTER = [
    "", "/", "/", "?x=1", "?", "?#", "#f", "/a.txt", "/a.txt?x=1#f", "/echo?x=1",
    "/echo/%2e%2e/a", "/dir//b.txt", "/../a.txt", "/%2e%2e/a.txt", "/a.txt#frag", "?x=/a",
    "/sp ace.txt", "/%41.txt", "/a.txt?", "//a.txt", "/echo;p", "?x=%00", "/./a.txt",
]


def gen_absolute(rnd, paths, port):
    after = rnd.choice(AFTER + paths)
    target = "%s%s%s%s%s%s" % (
        rnd.choice(SCHEMES), rnd.choice(SEPARATORS), rnd.choice(USERINFO), rnd.choice(HOSTS),
        rnd.choice(PORTS).replace("{PORT}", str(port)), after)
    method = rnd.choice(["GET"] * 6 + ["HEAD", "POST", "OPTIONS", "CONNECT"])
    version = rnd.choice(["HTTP/1.1"] * 4 + ["HTTP/1.0", None])
    line = "%s %s%s" % (method, target, " " + version if version else "")
    host = rnd.choice(["localhost", "example.com", "other.test", "a.wild.test", None, "[::1]"])
    head = line + "\r\n"
    if version:
        if host is not None or rnd.random() < 0.3:
            head += "Host: %s\r\n" % (host or "")
        head += "\r\n"
    return head.encode("latin-1", "replace"), [method]


# ---- chunked bodies -------------------------------------------------------------------------

SIZE_FORMS = [
    "{x}", "{x}", "{x}", "{X}", "0{x}", "0000{x}", "0" * 40 + "{x}", "{x} ", "{x}\t", "{x} \t",
    "{x} ;e", "{x};e=v", "{x};e=\"q v\"", "{x};e;f=g", "{x};", "{x} ; a = b", "+{x}", "0x{x}",
    " {x}", "-{x}", "{x} 1", "{x}\x00", "{x};\x01",
]
HUGE = ["7fffffffffffffff", "7ffffffffffffffe", "8000000000000000", "ffffffffffffffff",
        "1" + "0" * 16, "f" * 20, "FFFFFFFF"]
EOLS = ["\r\n"] * 6 + ["\n"] * 3 + ["\r", "", "\r\r\n", " \r\n"]


def chunked_body(rnd):
    """A chunked body of some shape; bytes."""
    out = []
    for _ in range(rnd.choice([0, 1, 1, 2, 3, 4, 6])):
        if rnd.random() < 0.06:
            out.append(rnd.choice(HUGE) + rnd.choice(EOLS) + "x" * rnd.randrange(4))
            return "".join(out).encode("latin-1")
        n = rnd.choice([1, 5, 16, 20, 30, 33, 40, 64, 65, 100])
        form = rnd.choice(SIZE_FORMS)
        out.append(form.format(x="%x" % n, X="%X" % n))
        out.append(rnd.choice(EOLS))
        data = rnd.choice("abcdef") * n
        if rnd.random() < 0.05:
            data = data[:-1] if rnd.random() < 0.5 else data + "z"
        out.append(data)
        out.append(rnd.choice(EOLS))
    if rnd.random() < 0.1:
        return "".join(out).encode("latin-1")  # cut: no last chunk
    out.append(rnd.choice(["0", "0", "00", "000", "0;e=1", "0 ", "0\t"]))
    out.append(rnd.choice(EOLS))
    for _ in range(rnd.choice([0, 0, 0, 1, 2])):
        out.append(rnd.choice(["T: v", "X-Trailer: 1", "T:\tv", "T: a\x01b", "Bad Line", ""]))
        out.append(rnd.choice(EOLS))
    out.append(rnd.choice(["\r\n"] * 4 + ["\n", "\r", ""]))
    return "".join(out).encode("latin-1")


def gen_chunked(rnd, paths, port):
    method = rnd.choice(["POST"] * 4 + ["PUT", "GET"])
    path = rnd.choice(["/up/x", "/up/x", "/echo"] + paths)
    hs = ["Host: localhost", rnd.choice(["Transfer-Encoding: chunked"] * 6 + [
        "Transfer-Encoding:\tchunked", "Transfer-Encoding: chunked\t", "transfer-encoding: CHUNKED",
        "Transfer-Encoding: chunked, chunked", "Transfer-Encoding:  chunked  "])]
    if rnd.random() < 0.15:
        hs.append("Connection: close")
    if rnd.random() < 0.05:
        hs.append("Expect: 100-continue")
    head = "%s %s HTTP/1.1\r\n%s\r\n\r\n" % (method, path, "\r\n".join(hs))
    req = head.encode("latin-1") + chunked_body(rnd)
    methods = [method]
    if rnd.random() < 0.3:
        req += b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n"
        methods.append("GET")
    return req, methods


# ---- header counts --------------------------------------------------------------------------

def gen_header_count(rnd, paths, port):
    """998 to 1002 kept header lines (Host included), with lines ignore_invalid_headers drops
    (which do not count) among them, and now and then a wrong line after them."""
    kept = rnd.choice([998, 999, 1000, 1000, 1001, 1001, 1002])
    ignored = rnd.choice([0, 0, 1, 5, 50])
    lines = ["Host: localhost"]
    lines += ["X-H%d: %d" % (i, i) for i in range(kept - 1)]
    for _ in range(ignored):
        lines.insert(rnd.randrange(1, len(lines) + 1),
                     rnd.choice(["X_U: 1", "X.D: 1", "X@A: 1", "\u00e9: 1"]))
    if rnd.random() < 0.2:
        lines.append(rnd.choice(["X-Nul: a\x00b", " folded", "NoColon", "Host: again",
                                 "Content-Length: 1", "Content-Length: x"]))
    if rnd.random() < 0.2:
        lines.insert(rnd.randrange(1, len(lines)), "Content-Length: 2")
        body = b"ab"
    else:
        body = b""
    method = rnd.choice(["GET", "GET", "HEAD", "POST"])
    head = "%s %s HTTP/1.1\r\n%s\r\n\r\n" % (method, rnd.choice(paths), "\r\n".join(lines))
    return head.encode("latin-1") + body, [method]


# ---- tabs around framing values --------------------------------------------------------------

def gen_tabs(rnd, paths, port):
    name = rnd.choice(["Content-Length", "Transfer-Encoding", "Host"])
    value = {"Content-Length": "5", "Transfer-Encoding": "chunked", "Host": "localhost"}[name]
    pad = ["", "", " ", "\t", " \t", "\t ", "\t\t"]
    line = "%s:%s%s%s" % (name, rnd.choice(pad), value, rnd.choice(pad))
    hs = [line]
    if name != "Host":
        hs.insert(0, "Host: localhost")
    body = {"Content-Length": b"hello", "Transfer-Encoding": b"5\r\nhello\r\n0\r\n\r\n",
            "Host": b""}[name]
    method = rnd.choice(["POST", "GET", "PUT"]) if body else rnd.choice(["GET", "HEAD"])
    path = rnd.choice(paths + ["/up/x"])
    head = "%s %s HTTP/1.1\r\n%s\r\n\r\n" % (method, path, "\r\n".join(hs))
    req = head.encode("latin-1") + body
    methods = [method]
    if rnd.random() < 0.3:
        req += b"GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n"
        methods.append("GET")
    return req, methods


# ---- HTTP/0.9 -------------------------------------------------------------------------------

def gen_http09(rnd, paths, port):
    method = rnd.choice(["GET"] * 6 + ["HEAD", "POST", "PUT", "OPTIONS", "FOO", "get", "G@T"])
    target = rnd.choice(paths + ["http://localhost/a.txt", "http://localhost", "/nope",
                                 "/a.txt?x=1", "a.txt", "*"])
    sp = rnd.choice([" "] * 5 + ["  "])
    tail = rnd.choice(["", "", " ", "  "])
    eol = rnd.choice(["\r\n"] * 4 + ["\n"])
    lead = rnd.choice([""] * 8 + ["\r\n", "\n", "\r", "\r\r\n"])
    req = "%s%s%s%s%s%s" % (lead, method, sp, target, tail, eol)
    if rnd.random() < 0.2:
        req += rnd.choice(["Host: localhost\r\n\r\n", "GET / HTTP/1.1\r\nHost: a\r\n\r\n"])
    return req.encode("latin-1"), [method]


# ---- TLS on a plain port ---------------------------------------------------------------------

def client_hello(rnd):
    """A TLS record holding a ClientHello (SNI localhost), possibly cut short."""
    sni = b"localhost"
    ext_sni = struct.pack("!HHHBH", 0, len(sni) + 5, len(sni) + 3, 0, len(sni)) + sni
    ext_versions = struct.pack("!HHB", 43, 5, 4) + b"\x03\x04\x03\x03"
    exts = ext_sni + ext_versions
    suites = b"\x13\x01\x13\x02\xc0\x2f\xc0\x30\x00\xff"
    body = (b"\x03\x03" + bytes(rnd.randrange(256) for _ in range(32)) + b"\x20"
            + bytes(rnd.randrange(256) for _ in range(32))
            + struct.pack("!H", len(suites)) + suites + b"\x01\x00"
            + struct.pack("!H", len(exts)) + exts)
    hs = b"\x01" + struct.pack("!I", len(body))[1:] + body
    record = b"\x16" + rnd.choice([b"\x03\x01", b"\x03\x03", b"\x03\x00"]) \
        + struct.pack("!H", len(hs)) + hs
    cut = rnd.choice([len(record)] * 4 + [1, 3, 5, 6, 11])
    return record[:cut]


def gen_tls(rnd, paths, port):
    if rnd.random() < 0.15:
        # An SSLv2-compatible ClientHello.
        req = b"\x80\x2e\x01\x00\x02\x00\x15\x00\x00\x00\x10" + bytes(range(0x15 + 0x10))
    else:
        req = client_hello(rnd)
    return req, ["GET"]


# (generator, weight) for gen_request: the rest of the requests are the mutated ones.
SHAPES = [
    (gen_absolute, 10),
    (gen_chunked, 10),
    (gen_header_count, 3),
    (gen_tabs, 5),
    (gen_http09, 5),
    (gen_tls, 2),
]


def pick(rnd):
    """A shape generator, or None (one time in two) for the mutated requests."""
    if rnd.random() < 0.5:
        return None
    total = sum(w for _, w in SHAPES)
    x = rnd.uniform(0, total)
    for gen, w in SHAPES:
        x -= w
        if x <= 0:
            return gen
    return SHAPES[-1][0]
