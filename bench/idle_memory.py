#!/usr/bin/env python3
"""Memory per idle keep-alive connection: opens N connections to 127.0.0.1:PORT, sends one
`GET /` on each (or REQUESTS), reads the whole answer, keeps the sockets open, and prints how
much the resident memory (VmRSS) of process PID grew, per connection.

    ulimit -n 20000; bench/idle_memory.py PORT N PID [REQUESTS]

With BATCHES=K the N connections are opened in K batches, a second apart, all kept open, and
each batch's growth is printed as well as the whole (the allocator gives freed pages back
lazily, so one batch's figure moves; the whole is the steadier one).

With TLS_CAFILE=ca.pem in the environment the connections speak TLS (SNI `localhost`, the
server's certificate checked against that CA): memory per idle TLS connection.

PID is the process that holds the connections: shoal's (workers are threads), nginx's worker
(or the only process with `master_process off`), h2o's. Bounded: every socket has a 10 s
timeout, and all are closed when the script exits.
"""
import os
import socket
import ssl
import sys
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    raise SystemExit(f"no VmRSS for pid {pid}")


def ask(s):
    s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    got = b""
    while True:
        end = got.find(b"\r\n\r\n")
        if end >= 0:
            head = got[:end].decode("latin-1").lower()
            length = 0
            for line in head.split("\r\n"):
                if line.startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            if len(got) >= end + 4 + length:
                return
        d = s.recv(65536)
        if not d:
            raise SystemExit("the server closed a connection")
        got += d


def hold_idle(pid, n, batches, open_one):
    """Opens n connections with open_one() in `batches` batches (a second apart), keeps them
    all, prints each batch's RSS growth when there are several; returns (RSS before, the
    sockets) for the caller's whole figure."""
    start = rss_kib(pid)
    socks = []
    for b in range(batches):
        size = n // batches + (1 if b < n % batches else 0)
        before = rss_kib(pid)
        for _ in range(size):
            socks.append(open_one())
        time.sleep(0.5 if batches == 1 else 1.0)
        after = rss_kib(pid)
        if batches > 1:
            print(f"batch {b + 1}: {size} connections, RSS {before} -> {after} KiB, "
                  f"{(after - before) * 1024 / size:.0f} bytes per connection")
    return start, socks


def main():
    port, n, pid = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    requests = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    batches = int(os.environ.get("BATCHES", "1"))
    ctx = None
    if os.environ.get("TLS_CAFILE"):
        ctx = ssl.create_default_context(cafile=os.environ["TLS_CAFILE"])

    def open_one():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        if ctx is not None:
            s = ctx.wrap_socket(s, server_hostname="localhost")
        for _ in range(requests):
            ask(s)
        return s

    start, _socks = hold_idle(pid, n, batches, open_one)
    after = rss_kib(pid)
    print(f"{n} idle connections after {requests} request(s) each: RSS {start} -> {after} KiB, "
          f"{(after - start) * 1024 / n:.0f} bytes per connection")


if __name__ == "__main__":
    main()
