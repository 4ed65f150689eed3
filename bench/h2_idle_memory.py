#!/usr/bin/env python3
"""Memory per idle HTTP/2 connection: opens N HTTP/2 connections to 127.0.0.1:PORT (h2c with
prior knowledge, or TLS with ALPN `h2` when TLS=1), answers the server's SETTINGS, asks `GET /`
on stream 1 of each and reads its answer to the end of the stream, keeps the connections open,
and prints how much the resident memory (VmRSS) of process PID grew, per connection.

    ulimit -n 20000; [TLS=1] [BATCHES=K] bench/h2_idle_memory.py PORT N PID

The frames are written here (no HTTP/2 library needed): the preface, an empty SETTINGS, the
SETTINGS acknowledgement, and a HEADERS frame whose fields use HPACK's static table and one
literal (`:authority: localhost`). With BATCHES=K the connections are opened in K batches a
second apart, each batch's growth printed too. PID is the process that holds the connections
(shoal's; nginx's worker, or nginx itself with `master_process off`). Bounded: every socket has
a 10 s timeout, all are closed when the script exits.
"""
import os
import socket
import ssl
import struct
import sys
import time

from idle_memory import hold_idle, rss_kib

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, GOAWAY = 0, 1, 3, 4, 7
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def request_block(tls):
    # :method GET (2), :scheme http (6) or https (7), :path / (4): indexed; :authority (1):
    # literal without indexing, indexed name.
    authority = b"localhost"
    return bytes([0x82, 0x87 if tls else 0x86, 0x84, 0x01, len(authority)]) + authority


def read_exact(s, n):
    got = b""
    while len(got) < n:
        d = s.recv(n - len(got))
        if not d:
            raise SystemExit("the server closed a connection")
        got += d
    return got


def ask(s, tls):
    s.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_STREAM | END_HEADERS, 1, request_block(tls)))
    acked = False
    while True:
        head = read_exact(s, 9)
        length = int.from_bytes(head[:3], "big")
        kind, flags = head[3], head[4]
        stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
        payload = read_exact(s, length) if length else b""
        if kind == SETTINGS and not flags & ACK and not acked:
            s.sendall(frame(SETTINGS, ACK, 0))
            acked = True
        elif kind in (RST_STREAM, GOAWAY):
            raise SystemExit(f"the server sent frame type {kind}: {payload!r}")
        elif kind in (DATA, HEADERS) and stream == 1 and flags & END_STREAM:
            return


def main():
    port, n, pid = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    batches = int(os.environ.get("BATCHES", "1"))
    tls = os.environ.get("TLS") == "1"
    ctx = None
    if tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])

    def open_one():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        if ctx is not None:
            s = ctx.wrap_socket(s, server_hostname="localhost")
            if s.selected_alpn_protocol() != "h2":
                raise SystemExit("ALPN did not choose h2")
        ask(s, tls)
        return s

    start, _socks = hold_idle(pid, n, batches, open_one)
    time.sleep(1.0)
    after = rss_kib(pid)
    kind = "TLS" if tls else "h2c"
    print(f"{n} idle HTTP/2 ({kind}) connections after one request each: RSS {start} -> {after} KiB, "
          f"{(after - start) * 1024 / n:.0f} bytes per connection")


if __name__ == "__main__":
    main()
