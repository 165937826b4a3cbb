#!/usr/bin/env bash
# bench/run.sh: HTTP/1.1 keep-alive (wrk -c50 and -c256, GET /) through nginx and sluice and directly.
# A shorthand for bench/peers.sh, which does the work; any peers.sh option may follow and wins, e.g.
#   bench/run.sh --targets "direct nginx haproxy h2o sluice" --rounds 5
exec "$(dirname "${BASH_SOURCE[0]}")/peers.sh" --scenarios "h1-c50 h1-c256" --targets "direct nginx sluice" "$@"
