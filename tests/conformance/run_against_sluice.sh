#!/usr/bin/env bash
# The conformance suite against `sluice sidecar` (what ctest runs): run_against_sluice.sh SLUICE_BIN DEMO_APP_BIN.
# Every case in private network namespaces, on queue-proxy's real ports, with the environment Knative injects.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/run.sh" "$1" sluice "$2"
