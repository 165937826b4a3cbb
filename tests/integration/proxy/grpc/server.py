"""A real gRPC server for sluice's tests (Debian's python3-grpcio; run with /usr/bin/python3).

Methods take and return raw bytes (no generated stubs):
  /sluice.test.Echo/Unary   replies b"echo:" + request, trailing metadata x-trailer: unary
  /sluice.test.Echo/Stream  request b"N": replies N messages b"message i", trailing metadata x-count: N
  /sluice.test.Echo/Fail    ends with NOT_FOUND "no such thing" and trailing metadata x-reason: test
Listens on 127.0.0.1:$PORT (a free port when PORT is unset, as under `sluice gateway`) and prints
"listening PORT" once it serves.
"""
import os
import sys
from concurrent import futures

import grpc


def unary(request, context):
    context.set_trailing_metadata((("x-trailer", "unary"),))
    return b"echo:" + request


def stream(request, context):
    count = int(request.decode())
    for i in range(count):
        yield b"message %d" % i
    context.set_trailing_metadata((("x-count", str(count)),))


def fail(request, context):
    context.set_trailing_metadata((("x-reason", "test"),))
    context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")


def main():
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.unary_stream_rpc_method_handler(stream),
        "Fail": grpc.unary_unary_rpc_method_handler(fail),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("sluice.test.Echo", handlers),))
    port = server.add_insecure_port("127.0.0.1:%s" % os.environ.get("PORT", "0"))
    server.start()
    print("listening %d" % port, flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    sys.exit(main())
