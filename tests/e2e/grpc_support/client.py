"""A gRPC client for shoal's end-to-end tests (tests/e2e/grpc.rs): runs one scenario against
`test.Echo` (see server.py) and prints what it saw, one `key=value` a line.

Usage: client.py TARGET SCENARIO [CA NAME]   (with CA and NAME: TLS, NAME the certificate's;
`GRPC_SERVICE` in the environment renames the service in the paths)
Scenarios: unary, metadata, fail, count, sum, chat, peers, all, bighead, bigsum
"""

import os
import sys

import grpc

# The service's name in the paths (`GRPC_SERVICE`): a proxy may route another name elsewhere.
SERVICE = os.environ.get("GRPC_SERVICE", "test.Echo")
IDENT = dict(request_serializer=None, response_deserializer=None)


def status_of(e):
    return "status=%s message=%s" % (e.code().name, e.details())


def run(channel, scenario):
    out = []
    try:
        if scenario in ("unary", "all"):
            echo = channel.unary_unary("/%s/Echo" % SERVICE, **IDENT)
            out.append("unary=%s" % echo(b"hello", timeout=10).decode())
        if scenario in ("metadata", "all"):
            echo = channel.unary_unary("/%s/Echo" % SERVICE, **IDENT)
            reply, call = echo.with_call(b"m", metadata=(("x-ping", "p1"),), timeout=10)
            initial = dict(call.initial_metadata())
            trailing = dict(call.trailing_metadata())
            out.append("pong=%s" % initial.get("x-pong"))
            out.append("trail=%s" % trailing.get("x-trail"))
        if scenario in ("fail", "all"):
            fail = channel.unary_unary("/%s/Fail" % SERVICE, **IDENT)
            try:
                fail(b"x", timeout=10)
                out.append("fail=ok")
            except grpc.RpcError as e:
                out.append("fail " + status_of(e))
        if scenario in ("count", "all"):
            count = channel.unary_stream("/%s/Count" % SERVICE, **IDENT)
            out.append("count=%s" % ",".join(m.decode() for m in count(b"5", timeout=10)))
        if scenario in ("sum", "all"):
            total = channel.stream_unary("/%s/Sum" % SERVICE, **IDENT)
            out.append("sum=%s" % total(iter([b"a", b"b", b"c"]), timeout=10).decode())
        if scenario in ("chat", "all"):
            # Each message waits for the answer to the one before: a proxy that held the
            # request body until its end would never answer.
            import queue

            q = queue.Queue()

            def requests():
                for i in range(3):
                    yield b"m%d" % i
                    if q.get(timeout=10) is None:
                        return

            chat = channel.stream_stream("/%s/Chat" % SERVICE, **IDENT)
            got = []
            for m in chat(requests(), timeout=10):
                got.append(m.decode())
                q.put(m)
            out.append("chat=%s" % ",".join(got))
        if scenario == "bighead":
            # An answer whose head is large: `x-pong` as long as the `x-ping` sent.
            echo = channel.unary_unary("/%s/Echo" % SERVICE, **IDENT)
            reply = echo(b"m", metadata=(("x-ping", "x" * 3000),), timeout=10)
            out.append("bighead=%s" % reply.decode())
        if scenario == "bigsum":
            # A client-streaming call whose one message is 20 bytes.
            total = channel.stream_unary("/%s/Sum" % SERVICE, **IDENT)
            out.append("sum=%s" % total(iter([b"s" * 20]), timeout=10).decode())
        if scenario == "peers":
            peer = channel.unary_unary("/%s/Peer" % SERVICE, **IDENT)
            peers = [peer(b"", timeout=10).decode() for _ in range(5)]
            out.append("peers=%d" % len(set(peers)))
    except grpc.RpcError as e:
        out.append("error " + status_of(e))
    return out


def main():
    target, scenario = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 4:
        with open(sys.argv[3], "rb") as f:
            ca = f.read()
        creds = grpc.ssl_channel_credentials(root_certificates=ca)
        opts = (("grpc.ssl_target_name_override", sys.argv[4]),)
        channel = grpc.secure_channel(target, creds, options=opts)
    else:
        channel = grpc.insecure_channel(target)
    with channel:
        for line in run(channel, scenario):
            print(line, flush=True)


if __name__ == "__main__":
    main()
