"""A gRPC server for shoal's end-to-end tests (tests/e2e/grpc.rs), on Debian's python3-grpcio.

Generic handlers with identity serializers: messages are raw bytes, so no protoc and no
generated code. Service `test.Echo`:

  Echo     unary: the request back; the `x-ping` metadata back as `x-pong` (initial metadata),
           `x-trail: done` in the trailers
  Peer     unary: the caller's address as grpc sees it (`ipv4:127.0.0.1:PORT`): one value per
           upstream connection
  Fail     unary: INVALID_ARGUMENT "bad thing" (a trailers-only answer)
  Count    server streaming: request b"N" gives N messages b"0".."N-1"
  Sum      client streaming: the requests joined with b"+"
  Chat     bidirectional: each request back at once, as b"re:" + request

Usage: server.py PORT|unix:PATH [CERT KEY]   (with CERT and KEY: TLS)
"""

import sys
from concurrent import futures

import grpc


def echo(request, context):
    md = dict(context.invocation_metadata())
    pong = md.get("x-ping")
    if pong is not None:
        context.send_initial_metadata((("x-pong", pong),))
    context.set_trailing_metadata((("x-trail", "done"),))
    return request


def peer(request, context):
    return context.peer().encode()


def fail(request, context):
    context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad thing")


def count(request, context):
    for i in range(int(request.decode() or "0")):
        yield str(i).encode()


def total(request_iterator, context):
    return b"+".join(request_iterator)


def chat(request_iterator, context):
    for m in request_iterator:
        yield b"re:" + m


def main():
    port = sys.argv[1]
    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(echo),
        "Peer": grpc.unary_unary_rpc_method_handler(peer),
        "Fail": grpc.unary_unary_rpc_method_handler(fail),
        "Count": grpc.unary_stream_rpc_method_handler(count),
        "Sum": grpc.stream_unary_rpc_method_handler(total),
        "Chat": grpc.stream_stream_rpc_method_handler(chat),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Echo", handlers),))
    addr = port if port.startswith("unix:") else "127.0.0.1:" + port
    if len(sys.argv) > 3:
        with open(sys.argv[2], "rb") as f:
            cert = f.read()
        with open(sys.argv[3], "rb") as f:
            key = f.read()
        server.add_secure_port(addr, grpc.ssl_server_credentials(((key, cert),)))
    else:
        server.add_insecure_port(addr)
    server.start()
    print("listening", port, flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
