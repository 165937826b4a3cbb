#!/usr/bin/env bash
# bench/connections.sh: what an idle client connection costs sluice and its peers (nginx, HAProxy, h2o),
# per protocol (HTTP/1.1, h2c, TLS HTTP/1.1, TLS h2): N connections held idle after one request each
# (bench/hold.py), the RSS they add, the p99 of requests on other connections while they are open, and RSS
# 10 s after they closed. A shorthand for `bench/peers.sh --connections N` (see there and bench/README.md).
#   bench/connections.sh [N] [peers.sh options]     (default N 4000; this machine allows 20,000 descriptors)
set -euo pipefail
n=4000
if [[ ${1:-} =~ ^[0-9]+$ ]]; then n=$1; shift; fi
exec bash "$(dirname "$0")/peers.sh" --connections "$n" --duration 5 --warmup 2 "$@"
