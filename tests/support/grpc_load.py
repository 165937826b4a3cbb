#!/usr/bin/python3
"""gRPC load for a bounded time: --concurrency threads, each on a channel of its own, call
grpc.health.v1.Health/Check (tests/support/grpc_health_server.py answers it) at TARGET back to back for
--seconds (a connection each). gRPC's own client (Debian's python3-grpcio; run with /usr/bin/python3): it reconnects after a
GOAWAY and retries a call the server never began (a stream past the GOAWAY's last one), as every gRPC client
does; any call that fails is counted. The first line is "started"; the last one JSON:
{"ok": N, "failed": N, "errors": [the first few, as "CODE: details"]}."""
import argparse
import json
import sys
import threading
import time

import grpc


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    lock = threading.Lock()
    totals = {"ok": 0, "failed": 0, "errors": []}
    end = time.monotonic() + args.seconds

    def run():
        # A pool of its own: otherwise the channels share one connection.
        with grpc.insecure_channel(args.target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
            check = channel.unary_unary("/grpc.health.v1.Health/Check")
            ok = failed = 0
            errors = []
            while time.monotonic() < end:
                try:
                    check(b"", timeout=10)
                    ok += 1
                except grpc.RpcError as e:
                    failed += 1
                    if len(errors) < 5:
                        errors.append("%s: %s" % (e.code().name, e.details()))
        with lock:
            totals["ok"] += ok
            totals["failed"] += failed
            totals["errors"] += errors[:max(0, 5 - len(totals["errors"]))]

    threads = [threading.Thread(target=run) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    print("started", flush=True)
    for t in threads:
        t.join()
    print(json.dumps(totals), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
