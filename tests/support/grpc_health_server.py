#!/usr/bin/python3
"""A gRPC server with grpc.health.v1.Health/Check, for readiness probe tests (Debian's python3-grpcio; run
with /usr/bin/python3). No generated stubs: the two messages are encoded by hand (one field each).

Knows the server as a whole ("") and the services named by --service; any other name is NOT_FOUND, as in
grpc's own health servicer. All known names share one status, SERVING at start (--status sets another):
SIGUSR1 makes it NOT_SERVING, SIGUSR2 SERVING, and each change is confirmed by a line "status NAME".
Every Check prints one JSON line as it answers:
{"check": service, "answer": "SERVING"|"NOT_SERVING"|...|"NOT_FOUND", "user_agent": ..., "grpc_timeout": bool}.
The first line is "listening PORT" (a free port on 127.0.0.1 unless --port)."""
import argparse
import json
import signal
import sys
import threading
from concurrent import futures

# Blocked before grpc starts any thread, so every thread inherits the mask and the main thread takes the
# signals with sigwait (a handler could run on a grpc thread and leave the main thread asleep).
SWITCHES = {signal.SIGUSR1: "NOT_SERVING", signal.SIGUSR2: "SERVING"}
signal.pthread_sigmask(signal.SIG_BLOCK, SWITCHES)

import grpc  # noqa: E402

STATUSES = {"UNKNOWN": 0, "SERVING": 1, "NOT_SERVING": 2, "SERVICE_UNKNOWN": 3}


def read_varint(data, i):
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def decode_service(request):
    """HealthCheckRequest{string service = 1}."""
    i, service = 0, ""
    while i < len(request):
        key, i = read_varint(request, i)
        if key & 7 == 2:
            n, i = read_varint(request, i)
            if key >> 3 == 1:
                service = request[i:i + n].decode()
            i += n
        elif key & 7 == 0:
            _, i = read_varint(request, i)
        else:
            raise ValueError("unexpected wire type")
    return service


def encode_status(status):
    """HealthCheckResponse{ServingStatus status = 1}; proto3 leaves out UNKNOWN (0)."""
    return bytes([0x08, status]) if status else b""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--service", action="append", default=[])
    parser.add_argument("--status", choices=sorted(STATUSES), default="SERVING")
    args = parser.parse_args()
    known = set([""] + args.service)
    state = {"status": STATUSES[args.status]}
    lock = threading.Lock()

    def check(request, context):
        service = decode_service(request)
        with lock:
            status = state["status"] if service in known else None
        metadata = dict(context.invocation_metadata())
        names = {v: k for k, v in STATUSES.items()}
        print(json.dumps({"check": service, "answer": names.get(status, "NOT_FOUND"),
                          "user_agent": metadata.get("user-agent", ""),
                          "grpc_timeout": context.time_remaining() is not None}), flush=True)
        if status is None:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
        return encode_status(status)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health", {"Check": grpc.unary_unary_rpc_method_handler(check)}),))
    port = server.add_insecure_port("127.0.0.1:%d" % args.port)
    server.start()
    print("listening %d" % port, flush=True)
    while True:
        name = SWITCHES[signal.sigwait(SWITCHES)]
        with lock:
            state["status"] = STATUSES[name]
        print("status %s" % name, flush=True)


if __name__ == "__main__":
    sys.exit(main())
