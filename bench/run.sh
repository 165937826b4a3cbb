#!/usr/bin/env bash
# bench/run.sh: HTTP/1.1 keep-alive throughput and latency of sluice vs nginx vs the backend directly.
# Starts sluice-demo-app (backend), `sluice sidecar --workers 1` and a one-process nginx in front of it,
# runs wrk against each target in alternation, prints medians and ratios (also to bench/out/results.txt).
# Everything listens on 127.0.0.1; everything started here is stopped on exit. See bench/README.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
OUT=$BENCH/out
SLUICE_BIN=$ROOT/build/release/app/sluice
DEMO_BIN=$ROOT/build/release/demo/sluice-demo-app

ROUNDS=3
DURATION=10s
WARMUP=2s
BASE_PORT=18000
CONNECTIONS="50 256"
TARGETS="direct nginx sluice"
BUILD=0
PIN=1

usage() {
  cat <<EOF
usage: bench/run.sh [--rounds N] [--duration D] [--warmup D] [--base-port P] [--connections "50 256"]
                    [--targets "direct nginx sluice"] [--no-sluice] [--no-pin] [--build]
  --rounds N        wrk runs per target and scenario; the median is reported (default $ROUNDS)
  --duration D      length of each wrk run, e.g. 10s, 1m (default $DURATION)
  --warmup D        unmeasured wrk run per target before the rounds (default $WARMUP, 0 = none)
  --base-port P     backend on P, nginx on P+1, sluice on P+2 (default $BASE_PORT)
  --connections L   wrk -c values, one scenario each (default "$CONNECTIONS")
  --targets L       any of direct, nginx, sluice (default "$TARGETS")
  --no-sluice       same as --targets "direct nginx" (while the sidecar is unfinished)
  --no-pin          do not pin processes to CPUs
  --build           run 'cmake --preset release && cmake --build --preset release' first
EOF
}

while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --base-port) BASE_PORT=$2; shift 2 ;;
    --connections) CONNECTIONS=$2; shift 2 ;;
    --targets) TARGETS=${2//,/ }; shift 2 ;;
    --no-sluice) TARGETS="direct nginx"; shift ;;
    --no-pin) PIN=0; shift ;;
    --build) BUILD=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

die() { echo "run.sh: $*" >&2; exit 1; }
has_target() { [[ " $TARGETS " == *" $1 "* ]]; }

# Durations as whole seconds, for the time bounds around every wrk run.
seconds() {
  case $1 in
    *ms) echo 1 ;;
    *m) echo $(( ${1%m} * 60 )) ;;
    *s) echo "${1%s}" ;;
    *) echo "$1" ;;
  esac
}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds: '$ROUNDS' is not a positive integer"
[[ $BASE_PORT =~ ^[0-9]+$ && $BASE_PORT -ge 1024 && $BASE_PORT -le 65000 ]] \
  || die "--base-port: '$BASE_PORT' is not in [1024, 65000]"
[[ $(seconds "$DURATION") =~ ^[0-9]+$ ]] || die "--duration: '$DURATION' is not like 10s or 1m"
for t in $TARGETS; do
  [[ $t == direct || $t == nginx || $t == sluice ]] || die "--targets: unknown target '$t'"
done

# --- prerequisites ---------------------------------------------------------------------------------
if [[ $BUILD == 1 ]]; then
  (cd "$ROOT" && cmake --preset release && cmake --build --preset release)
fi
[[ -x $DEMO_BIN ]] || die "missing $DEMO_BIN: build it (cmake --preset release && cmake --build --preset release) or pass --build"
if has_target sluice; then
  [[ -x $SLUICE_BIN ]] || die "missing $SLUICE_BIN: build it or pass --build (or --no-sluice)"
fi
missing=()
command -v wrk >/dev/null || missing+=(wrk)
if has_target nginx; then command -v nginx >/dev/null || missing+=(nginx-light); fi
if [[ ${#missing[@]} -gt 0 ]]; then
  command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them"
  echo "run.sh: installing ${missing[*]}" >&2
  apt-get install -y "${missing[@]}" >/dev/null
fi
for tool in curl taskset getconf; do command -v $tool >/dev/null || die "missing $tool"; done

CLK_TCK=$(getconf CLK_TCK)
BACKEND_PORT=$BASE_PORT
NGINX_PORT=$((BASE_PORT + 1))
SLUICE_PORT=$((BASE_PORT + 2))

# Pinning, on this 2-core machine: the proxy under test (nginx or sluice, the same core for both) gets
# core 0 to itself; wrk and the backend share core 1. The direct run then measures wrk + backend on one
# core, and a proxied run adds exactly one core's worth of proxy on top, so proxy CPU and latency are
# not blurred by the scheduler moving the proxy onto the load generator's core.
# Command prefixes, not functions: a backgrounded function would be a subshell and $! its PID, while
# `taskset -c N cmd &` gives the PID of cmd itself (taskset and env exec).
PROXY_CPU=""
LOAD_CPU=""
PIN_PROXY=()
PIN_LOAD=()
if [[ $PIN == 1 && $(nproc) -ge 2 ]]; then
  PROXY_CPU=0
  LOAD_CPU=1
  PIN_PROXY=(taskset -c $PROXY_CPU)
  PIN_LOAD=(taskset -c $LOAD_CPU)
fi

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() { # wait_port PORT PID SECONDS
  local deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    kill -0 "$2" 2>/dev/null || return 1
    port_busy "$1" && return 0
    sleep 0.05
  done
  return 1
}
for p in $BACKEND_PORT $NGINX_PORT $SLUICE_PORT; do
  port_busy "$p" && die "port $p on 127.0.0.1 is in use; pass another --base-port"
done

# --- processes ---------------------------------------------------------------------------------------
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 30); do
    local alive=0
    for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rm -rf "$OUT"
mkdir -p "$OUT/nginx/tmp" "$OUT/wrk"

"${PIN_LOAD[@]}" "$DEMO_BIN" --port "$BACKEND_PORT" >"$OUT/backend.log" 2>&1 &
BACKEND_PID=$!
PIDS+=("$BACKEND_PID")
wait_port "$BACKEND_PORT" "$BACKEND_PID" 10 || die "backend did not listen on $BACKEND_PORT (see $OUT/backend.log)"

declare -A PID_OF=([direct]=$BACKEND_PID)
declare -A URL_OF=([direct]="http://127.0.0.1:$BACKEND_PORT/")

if has_target nginx; then
  sed -e "s|@OUT@|$OUT/nginx|g" -e "s|@BACKEND_PORT@|$BACKEND_PORT|g" -e "s|@NGINX_PORT@|$NGINX_PORT|g" \
    "$BENCH/nginx.conf.in" >"$OUT/nginx/nginx.conf"
  "${PIN_PROXY[@]}" nginx -p "$OUT/nginx/" -e "$OUT/nginx/error.log" -c "$OUT/nginx/nginx.conf" \
    >"$OUT/nginx/stdout.log" 2>&1 &
  PID_OF[nginx]=$!
  PIDS+=("${PID_OF[nginx]}")
  URL_OF[nginx]="http://127.0.0.1:$NGINX_PORT/"
  wait_port "$NGINX_PORT" "${PID_OF[nginx]}" 10 || die "nginx did not listen on $NGINX_PORT (see $OUT/nginx/error.log)"
fi

if has_target sluice; then
  "${PIN_PROXY[@]}" env CONTAINER_CONCURRENCY=0 QUEUE_SERVING_PORT=$SLUICE_PORT QUEUE_SERVING_TLS_PORT=0 \
    USER_PORT=$BACKEND_PORT REVISION_TIMEOUT_SECONDS=300 SERVING_NAMESPACE=bench \
    SERVING_CONFIGURATION=demo SERVING_REVISION=demo-00001 SERVING_POD=demo-pod \
    SERVING_POD_IP=127.0.0.1 SERVING_LOGGING_CONFIG= SERVING_LOGGING_LEVEL=warn \
    "$SLUICE_BIN" sidecar --workers 1 >"$OUT/sluice.log" 2>&1 &
  PID_OF[sluice]=$!
  PIDS+=("${PID_OF[sluice]}")
  URL_OF[sluice]="http://127.0.0.1:$SLUICE_PORT/"
  # Readiness by connecting: at SERVING_LOGGING_LEVEL=warn the "listening" info line is not printed.
  wait_port "$SLUICE_PORT" "${PID_OF[sluice]}" 10 || die "sluice did not listen on $SLUICE_PORT (see $OUT/sluice.log)"
fi

# --- measurement helpers -----------------------------------------------------------------------------
cpu_ticks() { # utime + stime of PID (all threads), in clock ticks; fields counted after the ")" of comm
  local stat
  stat=$(<"/proc/$1/stat")
  stat=${stat##*) }
  awk '{ print $12 + $13 }' <<<"$stat"
}
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
# Busy ticks of the whole machine (user nice system irq softirq steal), to see what else ran.
machine_busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
# CPU of this shell's finished children (i.e. wrk), in ticks. `times` must run in this shell, not in
# a pipeline or $(...): a forked subshell starts with zeroed child times.
children_ticks() {
  times >"$OUT/times.txt"
  awk -v hz="$CLK_TCK" 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
    printf "%d", t * hz }' "$OUT/times.txt"
}
alive_or_die() { kill -0 "${PID_OF[$1]}" 2>/dev/null || die "$1 (pid ${PID_OF[$1]}) died; see $OUT"; }

run_wrk() { # run_wrk TARGET CONNS DURATION REPORT
  local limit=$(( $(seconds "$3") + 30 ))
  "${PIN_LOAD[@]}" timeout "$limit" wrk -t1 -c"$2" -d"$3" --latency --timeout 5s "${URL_OF[$1]}" >"$4" 2>&1 \
    || die "wrk against $1 failed (see $4)"
}

: >"$OUT/idle.tsv"
for t in $TARGETS; do
  echo "$t $(rss_kib "${PID_OF[$t]}")" >>"$OUT/idle.tsv"
done
for t in $TARGETS; do
  body=$(curl -fsS --max-time 5 "${URL_OF[$t]}") || die "GET / through $t failed"
  [[ $body == "Hello from sluice-demo-app" ]] || die "GET / through $t returned '$body'"
done

{
  echo "# sluice bench $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -r), $(nproc) CPUs, clk_tck=$CLK_TCK"
  echo "# sluice $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), $(nginx -v 2>&1 || true), $(wrk --version 2>&1 | head -1 || true)"
  echo "# wrk -t1 -c{$CONNECTIONS} -d$DURATION --latency, path /, $ROUNDS rounds alternating: $TARGETS"
  if [[ -n $PROXY_CPU ]]; then
    echo "# pinning: proxy on cpu $PROXY_CPU, wrk + backend on cpu $LOAD_CPU"
  else
    echo "# pinning: none"
  fi
} >"$OUT/header.txt"
cat "$OUT/header.txt"

# --- runs --------------------------------------------------------------------------------------------
: >"$OUT/runs.tsv"
for conns in $CONNECTIONS; do
  if [[ $WARMUP != 0 && $WARMUP != 0s ]]; then
    for t in $TARGETS; do run_wrk "$t" "$conns" "$WARMUP" "$OUT/wrk/warmup-$t-c$conns.txt"; done
  fi
  for round in $(seq "$ROUNDS"); do
    for t in $TARGETS; do
      pid=${PID_OF[$t]}
      report=$OUT/wrk/$t-c$conns-r$round.txt
      before=$(cpu_ticks "$pid"); back_before=$(cpu_ticks "$BACKEND_PID")
      children_ticks >"$OUT/kids.txt"; kids_before=$(<"$OUT/kids.txt"); busy_before=$(machine_busy)
      run_wrk "$t" "$conns" "$DURATION" "$report"
      busy_after=$(machine_busy); children_ticks >"$OUT/kids.txt"; kids_after=$(<"$OUT/kids.txt")
      after=$(cpu_ticks "$pid"); back_after=$(cpu_ticks "$BACKEND_PID")
      alive_or_die "$t"
      # Interference: machine CPU not spent by the proxy, the backend or wrk, in % of one CPU.
      ours=$(( after - before + kids_after - kids_before ))
      [[ $t == direct ]] || ours=$(( ours + back_after - back_before ))
      other=$(awk -v d=$(( busy_after - busy_before - ours )) -v hz="$CLK_TCK" -v s="$(seconds "$DURATION")" \
        'BEGIN { v = d * 100 / hz / s; printf "%.0f", (v < 0) ? 0 : v }')
      rss=$(rss_kib "$pid")
      read -r rps p50 p99 requests errors < <(awk -f "$BENCH/parse_wrk.awk" "$report")
      cpu=$(awk -v d=$((after - before)) -v hz="$CLK_TCK" -v n="$requests" \
        'BEGIN { printf "%.3f", (n > 0) ? d * 1e6 / hz / n : 0 }')
      printf '%s %s %s %s %s %s %s %s %s %s\n' "$t" "$conns" "$round" "$rps" "$p50" "$p99" "$cpu" "$rss" \
        "$errors" "$other" >>"$OUT/runs.tsv"
      printf '  c%-4s round %s %-7s %10.0f rps  p99 %7s us  %7s cpu-us/req  other cpu %s%%\n' "$conns" \
        "$round" "$t" "$rps" "$p99" "$cpu" "$other"
    done
  done
done

echo
{
  cat "$OUT/header.txt"
  echo "# cpu_us/req and rss: the proxy process; for direct, the backend itself"
  awk -v targets="$TARGETS" -v scenarios="$CONNECTIONS" -f "$BENCH/summarize.awk" "$OUT/idle.tsv" "$OUT/runs.tsv"
} | tee "$OUT/results.txt"
