#!/usr/bin/env bash
# Runs the queue-proxy conformance suite against a binary: run.sh BINARY FLAVOR APP_BINARY [driver options]
#   BINARY      the binary under test: sluice (started as `BINARY sidecar`) or Knative's queue-proxy
#   FLAVOR      sluice | queue-proxy (with queue-proxy the deliberate differences are expected to fail)
#   APP_BINARY  sluice-demo-app, the user container
# Needs root (it makes private network namespaces) and /usr/bin/python3. See README.md here.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 BINARY sluice|queue-proxy APP_BINARY [--only NAME] [--keep]" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
binary=$1 flavor=$2 app=$3
shift 3
exec /usr/bin/python3 "$here/conformance.py" --binary "$binary" --flavor "$flavor" --app-binary "$app" "$@"
