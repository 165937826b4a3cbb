#!/usr/bin/env bash
# Runs the conformance suite against `sluice sidecar` in front of sluice-demo-app, twice: one sidecar with a
# breaker (CONTAINER_CONCURRENCY=1) and Prometheus request metrics, one with short timeouts whose run ends
# with the drain case. Usage: run_against_sluice.sh SLUICE_BIN DEMO_APP_BIN. Bounded: about 30 s.
set -euo pipefail
sluice=$1 demo=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done  # the drain case already drained one
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Waits (10 s at most) for a line matching $2 in file $1 and prints the value of "port" in it.
port_in() {
  local line
  for _ in $(seq 100); do
    line=$(grep -m1 -e "$2" "$1" 2>/dev/null || true)
    if [ -n "$line" ]; then sed -E 's/.*"port":([0-9]+).*/\1/' <<<"$line"; return; fi
    sleep 0.1
  done
  echo "no line matching $2 in $1:" >&2; cat "$1" >&2; exit 1
}

"$demo" --port 0 >"$work/app.out" 2>&1 &
pids+=($!)
app=$(port_in "$work/app.out" '"listening"')

# Starts a sidecar (extra env as arguments) and sets the globals queue admin metrics user_metrics sidecar_pid.
start_sidecar() {
  local out="$work/sidecar-$1.out"
  shift
  env CONTAINER_CONCURRENCY=0 QUEUE_SERVING_PORT=0 QUEUE_SERVING_TLS_PORT=0 USER_PORT="$app" \
      REVISION_TIMEOUT_SECONDS=300 SERVING_NAMESPACE=conformance SERVING_CONFIGURATION=app \
      SERVING_REVISION=app-00001 SERVING_POD=app-00001-pod SERVING_POD_IP=127.0.0.1 SERVING_LOGGING_CONFIG= \
      SERVING_LOGGING_LEVEL=info SLUICE_LISTEN_ADDRESS=127.0.0.1 SLUICE_ADMIN_PORT=0 SLUICE_METRICS_PORT=0 \
      SLUICE_USER_METRICS_PORT=0 "$@" "$sluice" sidecar >"$out" 2>&1 &
  sidecar_pid=$!
  pids+=("$sidecar_pid")
  queue=$(port_in "$out" '"listener":"proxy"')
  admin=$(port_in "$out" '"listener":"admin"')
  metrics=$(port_in "$out" '"listener":"metrics"')
  user_metrics=""
  if grep -q '"listener":"user-metrics"' "$out"; then user_metrics=$(port_in "$out" '"listener":"user-metrics"'); fi
}

suite() { /usr/bin/python3 "$here/qp_conformance.py" --app "127.0.0.1:$app" --pod app-00001-pod "$@"; }

echo "== a breaker (CONTAINER_CONCURRENCY=1) and Prometheus request metrics"
start_sidecar breaker CONTAINER_CONCURRENCY=1 OBSERVABILITY_CONFIG='{"requestMetrics":{"protocol":"prometheus"}}'
suite --queue "127.0.0.1:$queue" --admin "127.0.0.1:$admin" --metrics "127.0.0.1:$metrics" \
      --user-metrics "127.0.0.1:$user_metrics" --container-concurrency 1

echo "== short timeouts, then drain"
start_sidecar timeouts REVISION_TIMEOUT_SECONDS=2 REVISION_RESPONSE_START_TIMEOUT_SECONDS=1 SLUICE_DRAIN_QUIET_PERIOD_MS=1000
suite --queue "127.0.0.1:$queue" --admin "127.0.0.1:$admin" --metrics "127.0.0.1:$metrics" \
      --revision-timeout 2 --response-start-timeout 1 --pid "$sidecar_pid" --quiet-period 1
