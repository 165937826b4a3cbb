#!/usr/bin/env bash
# bench/tracing.sh: what tracing export costs the data path. HTTP/1.1 keep-alive load (wrk -c50, GET /)
# through one sluice worker (pinned) in front of sluice-demo-app, with tracing
#   off      no tracing
#   up       every request sampled (samplingRate 1), OTLP gRPC to a running collector (tests/support/otlp_receiver.py)
#   down     every request sampled (samplingRate 1), OTLP gRPC to a port nobody listens on
#   stalled  every request sampled, to a collector that accepts connections and never answers
# alternating for --rounds rounds; prints median rps and p99 of each, and the ratios down/up and stalled/up
# (the issue's bar: a stopped collector costs less than 2 % of throughput, and nothing blocks: no errors,
# p99 unchanged) and up/off (what sampling every request costs), plus the spans sluice dropped and
# counted (beside the request metrics, on the user-metrics port: every mode serves them, so all pay the same). Pinning: sluice CPU 0, app CPU 1, collector the last CPU, wrk the rest (4+ CPUs). Needs a quiet
# machine: run it alone. Everything listens on 127.0.0.1 and is stopped on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN_DIR=$ROOT/build/release
ROUNDS=5
WARMUP=2
DURATION=10
CONNECTIONS=50
BASE_PORT=18500
PIN=1

usage() {
  echo "usage: bench/tracing.sh [--rounds N] [--duration S] [--connections N] [--warmup S] [--base-port P] [--bin-dir DIR] [--no-pin]"
  echo "  defaults: --rounds $ROUNDS --duration $DURATION --connections $CONNECTIONS --base-port $BASE_PORT"
  echo "  ports: app P, sluice P+1 (admin P+2, metrics P+3), stalled collector P+4, nothing on P+5; the running collector's are free ones"
}
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=${2%s}; shift 2 ;;
    --connections) CONNECTIONS=$2; shift 2 ;;
    --warmup) WARMUP=${2%s}; shift 2 ;;
    --base-port) BASE_PORT=$2; shift 2 ;;
    --bin-dir) BIN_DIR=$2; shift 2 ;;
    --no-pin) PIN=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
for tool in wrk curl taskset /usr/bin/python3; do command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }; done
SLUICE=$BIN_DIR/app/sluice
APP=$BIN_DIR/demo/sluice-demo-app
[ -x "$SLUICE" ] && [ -x "$APP" ] || { echo "build first: cmake --build build/release --target sluice sluice_demo_app" >&2; exit 1; }

APP_PORT=$BASE_PORT PROXY_PORT=$((BASE_PORT + 1)) ADMIN_PORT=$((BASE_PORT + 2)) METRICS_PORT=$((BASE_PORT + 3))
STALLED_PORT=$((BASE_PORT + 4)) DOWN_PORT=$((BASE_PORT + 5)) USER_METRICS_PORT=$((BASE_PORT + 6))
CPUS=$(nproc)
pin() { # pin CPUS CMD...: CPU 0 for sluice, 1 for the app, the rest for wrk (unpinned below 3 CPUs)
  local cpu=$1; shift
  if [ "$PIN" = 1 ] && [ "$CPUS" -ge 3 ]; then taskset -c "$cpu" "$@"; else "$@"; fi
}
WORK=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
wait_port() { for _ in $(seq 200); do curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0; sleep 0.05; done; echo "nothing on $1" >&2; exit 1; }

app_prefix=()
if [ "$PIN" = 1 ] && [ "$CPUS" -ge 3 ]; then app_prefix=(taskset -c 1); fi
"${app_prefix[@]}" "$APP" --port "$APP_PORT" >/dev/null &  # not through pin(): $! must be the app itself
pids+=($!)
wait_port "$APP_PORT"
# The stalled collector: accepts, reads nothing, answers nothing.
/usr/bin/python3 -c "
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $STALLED_PORT)); s.listen(64); held = []
while True: held.append(s.accept()[0])" &
pids+=($!)
# The running collector, on the last CPU.
collector_prefix=()
if [ "$PIN" = 1 ] && [ "$CPUS" -ge 4 ]; then collector_prefix=(taskset -c $((CPUS - 1))); fi
"${collector_prefix[@]}" /usr/bin/python3 "$ROOT/tests/support/otlp_receiver.py" --proto-dir "$ROOT/proxy/telemetry/proto" \
    >"$WORK/collector.out" 2>&1 &
pids+=($!)
for _ in $(seq 200); do grep -q '"listening"' "$WORK/collector.out" && break; sleep 0.05; done
UP_PORT=$(sed -nE 's/.*"grpc_port": ([0-9]+).*/\1/p' "$WORK/collector.out" | head -1)
[ -n "$UP_PORT" ] || { echo "the collector did not start" >&2; cat "$WORK/collector.out" >&2; exit 1; }

start_sidecar() { # start_sidecar MODE
  local obs='{"requestMetrics":{"protocol":"prometheus"}}' prefix=()
  local metrics='"requestMetrics":{"protocol":"prometheus"}'
  if [ "$PIN" = 1 ] && [ "$CPUS" -ge 3 ]; then prefix=(taskset -c 0); fi
  case $1 in
    up) obs='{'$metrics',"tracing":{"protocol":"grpc","endpoint":"http://127.0.0.1:'$UP_PORT'","samplingRate":1}}' ;;
    down) obs='{'$metrics',"tracing":{"protocol":"grpc","endpoint":"http://127.0.0.1:'$DOWN_PORT'","samplingRate":1}}' ;;
    stalled) obs='{'$metrics',"tracing":{"protocol":"grpc","endpoint":"http://127.0.0.1:'$STALLED_PORT'","samplingRate":1}}' ;;
  esac
  env CONTAINER_CONCURRENCY=0 QUEUE_SERVING_PORT=$PROXY_PORT QUEUE_SERVING_TLS_PORT=0 USER_PORT=$APP_PORT \
      REVISION_TIMEOUT_SECONDS=300 SERVING_NAMESPACE=bench SERVING_CONFIGURATION=bench SERVING_REVISION=bench-1 \
      SERVING_POD=bench-pod SERVING_POD_IP=127.0.0.1 SERVING_LOGGING_CONFIG= SERVING_LOGGING_LEVEL=warn \
      SLUICE_WORKERS=1 SLUICE_LISTEN_ADDRESS=127.0.0.1 SLUICE_ADMIN_PORT=$ADMIN_PORT SLUICE_METRICS_PORT=$METRICS_PORT \
      SLUICE_USER_METRICS_PORT=$USER_METRICS_PORT \
      SLUICE_DRAIN_QUIET_PERIOD_MS=0 OBSERVABILITY_CONFIG="$obs" \
      "${prefix[@]}" "$SLUICE" sidecar >"$WORK/sidecar-$1.log" 2>&1 &
  sidecar=$!
  wait_port "$PROXY_PORT"
}
stop_sidecar() { kill -TERM "$sidecar"; wait "$sidecar" 2>/dev/null || true; }

: >"$WORK/runs"  # mode round rps p50_us p99_us requests errors dropped
load_cpus="2-$((CPUS - 1))"
for round in $(seq "$ROUNDS"); do
  for mode in off up down stalled; do
    start_sidecar "$mode"
    pin "$load_cpus" wrk -t1 -c"$CONNECTIONS" -d"${WARMUP}s" "http://127.0.0.1:$PROXY_PORT/" >/dev/null  # warm-up
    report=$(pin "$load_cpus" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency "http://127.0.0.1:$PROXY_PORT/")
    dropped=$(curl -s "http://127.0.0.1:$USER_METRICS_PORT/metrics" |
              awk '/^sluice_tracing_spans_dropped_total/ { n += $2 } END { print n + 0 }')
    read -r rps p50 p99 requests errors < <(awk -f "$ROOT/bench/parse_wrk.awk" <<<"$report")
    echo "$mode $round $rps $p50 $p99 $requests $errors $dropped" >>"$WORK/runs"
    printf '%-8s round %s %10.0f rps  p99 %6s us  errors %s  spans dropped %s\n' "$mode" "$round" "$rps" "$p99" "$errors" "$dropped"
    stop_sidecar
  done
done

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
declare -A med_rps
for mode in off up down stalled; do
  med_rps[$mode]=$(awk -v m=$mode '$1 == m { print $3 }' "$WORK/runs" | median)
  p99=$(awk -v m=$mode '$1 == m { print $5 }' "$WORK/runs" | median)
  printf 'median %-8s %10.0f rps  p99 %6.0f us\n' "$mode" "${med_rps[$mode]}" "$p99"
done
awk -v off="${med_rps[off]}" -v up="${med_rps[up]}" -v down="${med_rps[down]}" -v stalled="${med_rps[stalled]}" '
  function ratio(name, a, b) { printf "%-11s %.3f (%+.1f %%)\n", name, a / b, 100 * (a / b - 1) }
  BEGIN { ratio("down/up", down, up); ratio("stalled/up", stalled, up); ratio("up/off", up, off) }'
