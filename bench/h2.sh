#!/usr/bin/env bash
# bench/h2.sh: HTTP/2 (h2load -c50 -m10, GET /) through nginx and sluice: h2c by prior knowledge, or with
# --tls h2 over TLS (ALPN). A shorthand for bench/peers.sh, which does the work; any other peers.sh option
# may follow and wins, e.g. bench/h2.sh --tls --targets "nginx haproxy h2o sluice".
scenario=h2c
args=()
for a in "$@"; do
  if [[ $a == --tls ]]; then scenario=h2-tls; else args+=("$a"); fi
done
exec "$(dirname "${BASH_SOURCE[0]}")/peers.sh" --scenarios "$scenario" --targets "nginx sluice" --duration 5 \
  "${args[@]}"
