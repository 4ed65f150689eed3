#!/usr/bin/env python3
"""The echo ends of bench/stream.sh.

  stream_echo.py server PORT             echo every byte back on each connection (a thread each)
  stream_echo.py client PORT SECONDS SIZE CONNS
                                         CONNS threads, each on one connection: send SIZE bytes,
                                         read SIZE bytes back, again, for SECONDS; prints the
                                         bytes echoed and the round trips made, as
                                         "bytes=N trips=N errors=N"
  stream_echo.py sessions PORT SECONDS CONNS
                                         CONNS threads, each: a new connection, 16 bytes out and
                                         back, close, again, for SECONDS; prints
                                         "sessions=N errors=N"

Python's own speed bounds the load, not what is measured: bench/stream.sh reports the proxy's CPU
time per byte and per session, read from /proc.
"""
import socket
import sys
import threading
import time


def serve(port):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(1024)

    def echo(c):
        with c:
            while True:
                try:
                    b = c.recv(262144)
                except OSError:
                    return
                if not b:
                    return
                try:
                    c.sendall(b)
                except OSError:
                    return

    while True:
        c, _ = ls.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=echo, args=(c,), daemon=True).start()


def client(port, seconds, size, conns):
    payload = b"e" * size
    totals = {"bytes": 0, "trips": 0, "errors": 0}
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def run():
        done = trips = errors = 0
        try:
            c = socket.create_connection(("127.0.0.1", port), timeout=10)
            while time.monotonic() < end:
                c.sendall(payload)
                got = 0
                while got < size:
                    b = c.recv(262144)
                    if not b:
                        raise OSError("closed")
                    got += len(b)
                done += size
                trips += 1
            c.close()
        except OSError:
            errors += 1
        with lock:
            totals["bytes"] += done
            totals["trips"] += trips
            totals["errors"] += errors

    ts = [threading.Thread(target=run) for _ in range(conns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("bytes=%d trips=%d errors=%d" % (totals["bytes"], totals["trips"], totals["errors"]))


def sessions(port, seconds, conns):
    totals = {"sessions": 0, "errors": 0}
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def run():
        n = errors = 0
        while time.monotonic() < end:
            try:
                c = socket.create_connection(("127.0.0.1", port), timeout=10)
                c.sendall(b"0123456789abcdef")
                got = b""
                while len(got) < 16:
                    b = c.recv(64)
                    if not b:
                        raise OSError("closed")
                    got += b
                c.close()
                n += 1
            except OSError:
                errors += 1
        with lock:
            totals["sessions"] += n
            totals["errors"] += errors

    ts = [threading.Thread(target=run) for _ in range(conns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("sessions=%d errors=%d" % (totals["sessions"], totals["errors"]))


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "server":
        serve(int(sys.argv[2]))
    elif mode == "client":
        client(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif mode == "sessions":
        sessions(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit("usage: stream_echo.py server|client|sessions ...")
