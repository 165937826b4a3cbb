#!/usr/bin/python3
"""gRPC load for a bounded time: --concurrency threads, each on a channel of its own, call
grpc.health.v1.Health/Check (tests/support/grpc_health_server.py answers it) at TARGET back to back for
--seconds (a connection each). gRPC's own client (Debian's python3-grpcio; run with /usr/bin/python3): it reconnects after a
GOAWAY and retries a call the server never began (a stream past the GOAWAY's last one), as every gRPC client
does; any call that fails is counted. The first line is "started"; the last one JSON:
{"ok": N, "failed": N, "errors": [the first few, as "CODE: details"]}.

Calls wait for a connection (wait_for_ready) instead of failing while their channel reconnects: Debian's
gRPC 1.51 can report a connect still in progress as failed (it reads errno after other calls have changed
it, grpc/grpc#35064, fixed in 1.61: "UNAVAILABLE: ... ipv4:ADDR: No such file or directory"), and a
fail-fast call would then fail for the whole reconnect backoff (a second). A call the server began and
then dropped, or reset, still fails."""
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
                    check(b"", timeout=10, wait_for_ready=True)
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
