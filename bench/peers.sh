#!/usr/bin/env bash
# bench/peers.sh: sluice against its peers (nginx, HAProxy, h2o) and the direct path, each proxy with one
# worker on the same pinned core, in front of the same backend, once per backend: sluice-demo-app (an
# app's work per request) and a static nginx (as little backend work as there can be), both HTTP/1.1
# keep-alive. Every proxy adds the same request field, X-Forwarded-For, as `sluice sidecar` does by default
# (h2o cannot leave out X-Forwarded-Proto); the fields the app receives through each are printed.
# For every scenario (HTTP/1.1 keep-alive c50/c256, h2c, h2 over TLS, HTTP/1.1 over TLS, a 1 MiB response,
# a 1 MiB upload) it runs wrk or h2load against each target in turn for --rounds rounds, then prints the
# medians of rps, p50/p99, proxy CPU per request and RSS, the connections each proxy holds to the backend
# half-way through a run, idle RSS, and every figure as a ratio to the best peer of the same run (also in
# bench/out/results.txt). Everything listens on 127.0.0.1; everything started here is stopped on exit.
# bench/run.sh and bench/h2.sh are shorthands for subsets. See bench/README.md.
set -euo pipefail
ARGS=("$@")

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
OUT=$BENCH/out
BIN_DIR=$ROOT/build/release
ROUNDS=3
DURATION=10
WARMUP=2
IDLE=2
BASE_PORT=18000
TARGETS="direct nginx haproxy h2o sluice"
PEERS="nginx haproxy h2o"  # the proxies sluice is compared with ("best peer" = best of these)
BUILD=0
PIN=1
COPIES=0
CONNECTIONS=0
MAX_CONN=4096  # each proxy's connection limit (nginx worker_connections, haproxy maxconn, ...)
BASE_DIR=
BACKENDS="demo static"

# One scenario per line: name, load generator, listener (h1 = cleartext HTTP/1.1; h2c = cleartext HTTP/2
# by prior knowledge; tls = the TLS port, ALPN h2 with h2load, HTTP/1.1 with wrk, which offers no ALPN),
# the generator's arguments (comma-separated), path. @POST_LUA@ is bench/post-1m.lua.
SCENARIO_TABLE='
h1-c50    wrk     h1   -c50                  /
h1-c256   wrk     h1   -c256                 /
h2c       h2load  h2c  -c50,-m10             /
h2-tls    h2load  tls  -c50,-m10             /
h1-tls    wrk     tls  -c50                  /
get-1m    wrk     h1   -c50                  /bytes/1048576
post-1m   wrk     h1   -c50,-s,@POST_LUA@    /sink
'
SCENARIOS=$(awk 'NF { printf "%s%s", sep, $1; sep = " " }' <<<"$SCENARIO_TABLE")

usage() {
  cat <<EOF
usage: bench/peers.sh [--rounds N] [--duration S] [--warmup S] [--idle S] [--base-port P]
                      [--targets "$TARGETS"] [--scenarios "..."] [--bin-dir DIR]
                      [--backends "demo static"] [--no-sluice] [--no-pin] [--build] [--copies N]
                      [--connections N]
  --rounds N       runs per target and scenario, alternating targets; medians reported (default $ROUNDS)
  --duration S     seconds per run, e.g. 10 or 10s (default $DURATION)
  --warmup S       unmeasured run per target before each scenario's rounds (default $WARMUP; 0 = none)
  --idle S         idle window after start-up for idle CPU and RSS (default $IDLE)
  --base-port P    backend on P; nginx P+10.., haproxy P+20.., h2o P+30.., sluice P+40.. (default $BASE_PORT)
  --targets L      any of direct nginx haproxy h2o sluice (default "$TARGETS")
  --scenarios L    any of: $SCENARIOS (default: all)
  --bin-dir DIR    where app/sluice and demo/sluice-demo-app are (default \$ROOT/build/release)
  --backends L     any of: demo (sluice-demo-app), static (nginx answering by itself); each chosen one is
                   a whole run of its own, its results under bench/out/BACKEND (default "$BACKENDS")
  --baseline DIR   add target "base": app/sluice of another build (e.g. an older commit's), in the same
                   alternating rounds, so a change is measured against it under the same conditions
  --no-sluice      drop sluice from the targets
  --no-pin         do not pin processes to CPUs
  --build          run 'cmake --preset release && cmake --build --preset release' first
  --copies N       instead of timing: count user-space copies of body bytes in each proxy (perf uprobes
                   on libc's memmove/memcpy) over N requests of 1 MiB per protocol and direction (root)
  --connections N  instead of timing: per protocol (HTTP/1.1, h2c, TLS HTTP/1.1, TLS h2), each proxy freshly
                   started, N idle client connections (bench/hold.py: one request each, then idle): RSS per
                   connection, the p99 of requests on other connections meanwhile (--duration), and RSS
                   10 s after they closed (bench/connections.sh)
Scenarios:$(sed 's/^/  /' <<<"$SCENARIO_TABLE")
EOF
}

die() { echo "peers.sh: $*" >&2; exit 1; }
seconds() { # 10, 10s or 1m -> whole seconds
  case $1 in
    *m) echo $(( ${1%m} * 60 )) ;;
    *s) echo "${1%s}" ;;
    *) echo "$1" ;;
  esac
}

while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$(seconds "$2"); shift 2 ;;
    --warmup) WARMUP=$(seconds "$2"); shift 2 ;;
    --idle) IDLE=$(seconds "$2"); shift 2 ;;
    --base-port) BASE_PORT=$2; shift 2 ;;
    --targets) TARGETS=${2//,/ }; shift 2 ;;
    --scenarios) SCENARIOS=${2//,/ }; shift 2 ;;
    --bin-dir) BIN_DIR=$(cd "$2" && pwd) || die "--bin-dir: no directory '$2'"; shift 2 ;;
    --baseline) BASE_DIR=$(cd "$2" && pwd) || die "--baseline: no directory '$2'"; shift 2 ;;
    --no-sluice) TARGETS=${TARGETS//sluice/}; shift ;;
    --no-pin) PIN=0; shift ;;
    --build) BUILD=1; shift ;;
    --copies) COPIES=$2; shift 2 ;;
    --connections) CONNECTIONS=$2; shift 2 ;;
    --backends) BACKENDS=${2//,/ }; shift 2 ;;
    --out) OUT=$2; shift 2 ;;  # a backend's own run, started by the run over several (below)
    -h|--help) usage; exit 0 ;;
    *) echo "peers.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
TARGETS=$(xargs <<<"$TARGETS")
has_target() { [[ " $TARGETS " == *" $1 "* ]]; }

[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds: '$ROUNDS' is not a positive integer"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "--duration: not like 10, 10s or 1m"
[[ $WARMUP =~ ^[0-9]+$ && $IDLE =~ ^[0-9]+$ ]] || die "--warmup / --idle: not like 2 or 2s"
[[ $COPIES =~ ^[0-9]+$ ]] || die "--copies: '$COPIES' is not a number"
[[ $BASE_PORT =~ ^[0-9]+$ && $BASE_PORT -ge 1024 && $BASE_PORT -le 65000 ]] \
  || die "--base-port: '$BASE_PORT' is not in [1024, 65000]"
for t in $TARGETS; do
  [[ " direct nginx haproxy h2o sluice " == *" $t "* ]] || die "--targets: unknown target '$t'"
done
((COPIES)) && [[ $BACKENDS == *" "* ]] && BACKENDS=demo  # copies are counted in the proxies: one backend
[[ $CONNECTIONS =~ ^[0-9]+$ ]] || die "--connections: '$CONNECTIONS' is not a number"
if ((CONNECTIONS)); then
  # Connections are held in the proxies: one backend, the direct path has none, and each proxy may take N
  # of them (and this shell's children as many descriptors as the machine allows).
  [[ $BACKENDS == *" "* ]] && BACKENDS=static
  TARGETS=${TARGETS//direct/}
  [[ " ${ARGS[*]} " == *" --scenarios "* ]] || SCENARIOS="h1-c50 h2c h1-tls h2-tls"  # the protocols measured
  MAX_CONN=$((CONNECTIONS + 1024))
  ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
  (($(ulimit -n) > MAX_CONN)) || die "--connections $CONNECTIONS: ulimit -n is $(ulimit -n); each proxy needs $MAX_CONN"
fi
BACKENDS=$(xargs <<<"$BACKENDS")
[[ -n $BACKENDS ]] || die "--backends: none given"
for b in $BACKENDS; do [[ $b == demo || $b == static ]] || die "--backends: unknown backend '$b'"; done
# Several backends: one whole run each, one after the other (their own processes and ports), then the
# tables of each together.
if [[ $BACKENDS == *" "* ]]; then
  ((BUILD)) && (cd "$ROOT" && cmake --preset release && cmake --build --preset release)
  rm -rf "$OUT"
  mkdir -p "$OUT"
  child=()
  for a in "${ARGS[@]}"; do [[ $a == --build ]] || child+=("$a"); done
  for b in $BACKENDS; do
    echo "== backend: $b"
    bash "${BASH_SOURCE[0]}" "${child[@]}" --backends "$b" --out "$OUT/$b" || exit $?
  done
  for b in $BACKENDS; do echo "== backend: $b"; cat "$OUT/$b/results.txt"; echo; done >"$OUT/results.txt"
  exit 0
fi
BACKEND=$BACKENDS
if [[ -n $BASE_DIR ]]; then
  [[ -x $BASE_DIR/app/sluice ]] || die "--baseline: missing $BASE_DIR/app/sluice"
  TARGETS+=" base"
fi
declare -A SC_TOOL SC_LISTENER SC_ARGS SC_PATH
while read -r name tool listener args path; do
  [[ -n $name ]] || continue
  SC_TOOL[$name]=$tool SC_LISTENER[$name]=$listener SC_ARGS[$name]=${args//@POST_LUA@/$BENCH/post-1m.lua}
  SC_PATH[$name]=$path
done <<<"$SCENARIO_TABLE"
for s in $SCENARIOS; do [[ -n ${SC_TOOL[$s]:-} ]] || die "--scenarios: unknown scenario '$s'"; done
uses() { # uses LISTENER-or-TOOL: does a chosen scenario use it?
  local s
  for s in $SCENARIOS; do [[ ${SC_LISTENER[$s]} == "$1" || ${SC_TOOL[$s]} == "$1" ]] && return 0; done
  return 1
}

# --- prerequisites ---------------------------------------------------------------------------------
if ((BUILD)); then (cd "$ROOT" && cmake --preset release && cmake --build --preset release); fi
DEMO_SRC=$BIN_DIR/demo/sluice-demo-app
SLUICE_SRC=$BIN_DIR/app/sluice
[[ -x $DEMO_SRC ]] || die "missing $DEMO_SRC: build it (cmake --preset release &&" \
  "cmake --build --preset release) or pass --bin-dir"
if has_target sluice; then [[ -x $SLUICE_SRC ]] || die "missing $SLUICE_SRC (or pass --no-sluice)"; fi
declare -A PACKAGE_OF=([wrk]=wrk [h2load]=nghttp2-client [nginx]=nginx-light [haproxy]=haproxy [h2o]=h2o)
missing=()
for tool in wrk h2load nginx haproxy h2o; do
  if [[ $tool == wrk || $tool == h2load ]]; then uses "$tool" || continue
  elif [[ $tool == nginx && $BACKEND == static ]]; then :
  else has_target "$tool" || continue; fi
  command -v "$tool" >/dev/null || missing+=("${PACKAGE_OF[$tool]}")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them"
  echo "peers.sh: installing ${missing[*]}" >&2
  apt-get install -y "${missing[@]}" >/dev/null
fi
for tool in curl taskset getconf openssl ss; do command -v $tool >/dev/null || die "missing $tool"; done
if ((COPIES)); then
  for tool in perf h2load; do command -v $tool >/dev/null || die "--copies needs $tool"; done
  TARGETS=${TARGETS//direct/}  # copies between two sockets: proxies only
fi
CLK_TCK=$(getconf CLK_TCK)

# Pinning, on a 2-core machine: the proxy under test (every proxy, the same core for all) gets core 0 to
# itself; the load generator and the backend share core 1. A direct run measures generator + backend on
# one core; a proxied run adds one core's worth of proxy on top, not blurred by the scheduler moving the
# proxy onto the generator's core. Command prefixes, not functions: `taskset -c N cmd &` gives the PID of
# cmd itself (taskset and env exec).
PROXY_CPU="" LOAD_CPU="" PIN_PROXY=() PIN_LOAD=()
if ((PIN)) && (($(nproc) >= 2)); then
  PROXY_CPU=0 LOAD_CPU=1 PIN_PROXY=(taskset -c 0) PIN_LOAD=(taskset -c 1)
fi

# Ports: the backend on P; proxy number i (nginx 1, haproxy 2, h2o 3, sluice 4) on P+10i (cleartext:
# HTTP/1.1, and h2c where the proxy tells them apart by the preface) and P+10i+2 (TLS). nginx 1.22 cannot
# serve both on one cleartext port, so its h2c listener is P+11.
declare -A PORT NA
PORT[direct,h1]=$BASE_PORT
NA[direct,h2c]="the backend speaks cleartext HTTP/1.1 only"
NA[direct,tls]=${NA[direct,h2c]}
i=0
for t in nginx haproxy h2o sluice base; do
  i=$((i + 1))
  PORT[$t,h1]=$((BASE_PORT + 10 * i)) PORT[$t,h2c]=$((BASE_PORT + 10 * i)) PORT[$t,tls]=$((BASE_PORT + 10 * i + 2))
done
PORT[nginx,h2c]=$((BASE_PORT + 11))

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() { # wait_port PORT PID: up to 10 s, while PID lives
  local deadline=$((SECONDS + 10))
  while ((SECONDS < deadline)); do
    kill -0 "$2" 2>/dev/null || return 1
    port_busy "$1" && return 0
    sleep 0.05
  done
  return 1
}
for key in "${!PORT[@]}"; do
  port_busy "${PORT[$key]}" && die "port ${PORT[$key]} on 127.0.0.1 is in use; pass another --base-port"
done

# --- processes ---------------------------------------------------------------------------------------
PIDS=()
PROBES=0  # uprobes defined by --copies, removed on exit
declare -A PID_OF
cleanup() {
  local pid alive
  ((PROBES)) && perf probe -q -d 'sluice_copies:*' 2>/dev/null
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 30); do
    alive=0
    for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/load" "$OUT/tls"
# Private copies: the build may be replaced while this runs; the plain and TLS starts use the same binary.
cp "$DEMO_SRC" "$OUT/bin/"
DEMO_BIN=$OUT/bin/sluice-demo-app
if has_target sluice; then cp "$SLUICE_SRC" "$OUT/bin/"; fi
SLUICE_BIN=$OUT/bin/sluice
if [[ -n $BASE_DIR ]]; then mkdir -p "$OUT/base-bin" && cp "$BASE_DIR/app/sluice" "$OUT/base-bin/"; fi

# One self-signed pair for every proxy (HAProxy wants certificate and key in one file).
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$OUT/tls/key.pem" -out "$OUT/tls/cert.pem" -days 2 \
  -subj /CN=localhost 2>/dev/null || die "openssl req failed"
cat "$OUT/tls/cert.pem" "$OUT/tls/key.pem" >"$OUT/tls/haproxy.pem"
head -c 1048576 /dev/zero | tr '\0' a >"$OUT/post-1m.bin"  # curl's check of the upload scenario

render() { # render TEMPLATE TARGET MODE: the peer's config on stdout; MODE plain drops "# tls-only" lines,
          # a user who is not root the "# root-only" ones
  local drop=()
  [[ $3 == plain ]] && drop=(-e '/# tls-only$/d')
  (($(id -u) == 0)) || drop+=(-e '/# root-only/d')
  sed "${drop[@]}" -e "s|@OUT@|$OUT/$2|g" -e "s|@BACKEND_PORT@|$BASE_PORT|g" -e "s|@H1_PORT@|${PORT[$2,h1]:-}|g" \
    -e "s|@H2C_PORT@|${PORT[$2,h2c]:-}|g" -e "s|@TLS_PORT@|${PORT[$2,tls]:-}|g" -e "s|@CERT@|$OUT/tls/cert.pem|g" \
    -e "s|@KEY@|$OUT/tls/key.pem|g" -e "s|@PEM@|$OUT/tls/haproxy.pem|g" -e "s|@USER@|$(id -un)|g" \
    -e "s|@MAX_CONN@|$MAX_CONN|g" "$BENCH/$1"
}

# The backend, on the load generator's core: the demo app, or nginx answering by itself (bench/static-backend.conf.in).
case $BACKEND in
  demo) "${PIN_LOAD[@]}" "$DEMO_BIN" --port "$BASE_PORT" >"$OUT/backend.log" 2>&1 & ;;
  static)
    mkdir -p "$OUT/static/tmp"
    head -c 1048576 /dev/zero | tr '\0' b >"$OUT/static/bytes-1048576"
    printf 1048576 >"$OUT/static/sink-answer"
    render static-backend.conf.in static plain >"$OUT/static/nginx.conf"
    "${PIN_LOAD[@]}" nginx -p "$OUT/static/" -e "$OUT/static/error.log" -c "$OUT/static/nginx.conf" \
      >"$OUT/backend.log" 2>&1 & ;;
esac
BACKEND_PID=$!
PIDS+=("$BACKEND_PID")
PID_OF[direct]=$BACKEND_PID
wait_port "$BASE_PORT" "$BACKEND_PID" || die "backend did not listen on $BASE_PORT (see $OUT/backend.log)"

start_proxy() { # start_proxy TARGET plain|tls: writes its config, starts it pinned, waits for its ports
  local t=$1 mode=$2 dir=$OUT/$1 sluice_tls=(QUEUE_SERVING_TLS_PORT=0)
  mkdir -p "$dir/tmp"
  case $t in
    nginx) render nginx.conf.in nginx "$mode" >"$dir/nginx.conf"
           set -- nginx -p "$dir/" -e "$dir/error.log" -c "$dir/nginx.conf" ;;
    haproxy) render haproxy.cfg.in haproxy "$mode" >"$dir/haproxy.cfg"
             set -- haproxy -db -f "$dir/haproxy.cfg" ;;  # -db: foreground, one process
    h2o) render h2o.conf.in h2o "$mode" >"$dir/h2o.conf"
         set -- h2o -c "$dir/h2o.conf" ;;
    sluice | base)
      local bin=$SLUICE_BIN
      [[ $t == base ]] && bin=$OUT/base-bin/sluice
      [[ $mode == tls ]] && sluice_tls=(QUEUE_SERVING_TLS_PORT="${PORT[$t,tls]}"
        SLUICE_TLS_CERT_FILE="$OUT/tls/cert.pem" SLUICE_TLS_KEY_FILE="$OUT/tls/key.pem")
      set -- env CONTAINER_CONCURRENCY=0 QUEUE_SERVING_PORT="${PORT[$t,h1]}" "${sluice_tls[@]}" \
        USER_PORT="$BASE_PORT" SLUICE_UPSTREAM_PROTOCOL=http1 REVISION_TIMEOUT_SECONDS=300 \
        SERVING_NAMESPACE=bench SERVING_CONFIGURATION=demo SERVING_REVISION=demo-00001 SERVING_POD=demo-pod \
        SERVING_POD_IP=127.0.0.1 SERVING_LOGGING_CONFIG= SERVING_LOGGING_LEVEL=warn SLUICE_ADMIN_PORT=0 \
        SLUICE_METRICS_PORT=0 SLUICE_USER_METRICS_PORT=0 SLUICE_MAX_CONNECTIONS="$MAX_CONN" "$bin" sidecar --workers 1 ;;
  esac
  "${PIN_PROXY[@]}" "$@" >>"$dir/stdout.log" 2>&1 &
  PID_OF[$t]=$!
  PIDS+=("$!")
  local p ports=("${PORT[$t,h1]}" "${PORT[$t,h2c]}")
  [[ $mode == tls ]] && ports+=("${PORT[$t,tls]}")
  for p in "${ports[@]}"; do
    wait_port "$p" "${PID_OF[$t]}" || die "$t did not listen on $p (see $dir)"
  done
}
stop_proxy() { # stop_proxy TARGET: SIGTERM, then SIGKILL after 3 s
  local pid=${PID_OF[$1]}
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# --- measurement helpers -----------------------------------------------------------------------------
cpu_ticks() { # utime + stime of PID (all threads), in clock ticks; fields counted after the ")" of comm
  local stat
  stat=$(<"/proc/$1/stat")
  stat=${stat##*) }
  awk '{ print $12 + $13 }' <<<"$stat"
}
# On-CPU time of all threads of PID in ns (scheduler accounting: precise enough for an idle process).
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ t += $1 } END { printf "%d", t }'; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
# Busy ticks of the whole machine (user nice system irq softirq steal), to see what else ran.
machine_busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
# CPU of this shell's finished children (the load generator), in ticks. `times` must run in this shell,
# not in a pipeline or $(...): a forked subshell starts with zeroed child times.
children_ticks() {
  times >"$OUT/times.txt"
  awk -v hz="$CLK_TCK" 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
    printf "%d", t * hz }' "$OUT/times.txt" >"$OUT/kids.txt"
}
# app_conns_later PID FILE: half-way through a run, the connections PID holds to the backend, into FILE.
app_conns_later() {
  sleep "$(awk -v d="$DURATION" 'BEGIN { print d / 2 }')"
  ss -Htnp state established "( dport = :$BASE_PORT )" 2>/dev/null | grep -c "pid=$1," >"$2" || true
}
alive_or_die() { kill -0 "${PID_OF[$1]}" 2>/dev/null || die "$1 (pid ${PID_OF[$1]}) died; see $OUT"; }
url() { # url TARGET SCENARIO
  local scheme=http
  [[ ${SC_LISTENER[$2]} == tls ]] && scheme=https
  echo "$scheme://127.0.0.1:${PORT[$1,${SC_LISTENER[$2]}]}${SC_PATH[$2]}"
}
supported() { [[ -z ${NA[$1,${SC_LISTENER[$2]}]:-} ]]; }

# check TARGET SCENARIO: one request as the scenario makes them, with curl; the answer must be right.
check() {
  local t=$1 s=$2 want got args=(-sS --max-time 5 -o /dev/null -w '%{http_code} %{http_version} %{size_download}')
  case ${SC_LISTENER[$s]} in
    h1) args+=(--http1.1) ;;
    h2c) args+=(--http2-prior-knowledge) ;;
    tls) args+=(-k); [[ ${SC_TOOL[$s]} == h2load ]] && args+=(--http2) || args+=(--http1.1) ;;
  esac
  [[ ${SC_TOOL[$s]} == h2load ]] && want="200 2" || want="200 1.1"
  case ${SC_PATH[$s]} in
    /) want+=" 27" ;;
    /bytes/*) want+=" ${SC_PATH[$s]#/bytes/}" ;;
    /sink) want+=" 7"; args+=(--data-binary "@$OUT/post-1m.bin") ;;
  esac
  got=$(curl "${args[@]}" "$(url "$t" "$s")" 2>&1) || true
  [[ $got == "$want" ]] || die "$s through $t: curl says '$got', expected '$want' (status, HTTP version, bytes)"
}

run_load() { # run_load TARGET SCENARIO SECONDS REPORT; the generator runs in this shell (for `times`)
  local t=$1 s=$2 args
  IFS=, read -r -a args <<<"${SC_ARGS[$s]}"
  if [[ ${SC_TOOL[$s]} == wrk ]]; then
    "${PIN_LOAD[@]}" timeout $(($3 + 30)) wrk -t1 "${args[@]}" -d"$3"s --latency --timeout 5s "$(url "$t" "$s")" \
      >"$4" 2>&1 || die "wrk against $t failed (see $4)"
  else
    "${PIN_LOAD[@]}" timeout $(($3 + 30)) h2load -t1 "${args[@]}" -D "$3" --log-file "$4.log" "$(url "$t" "$s")" \
      >"$4" 2>&1 || die "h2load against $t failed (see $4)"
  fi
}
parse_load() { # parse_load SCENARIO REPORT -> "rps p50_us p99_us requests errors"
  if [[ ${SC_TOOL[$1]} == wrk ]]; then
    awk -f "$BENCH/parse_wrk.awk" "$2"
  else  # h2load prints no percentiles: they come from its per-request log (3rd column: µs), then it goes
    local p50 p99
    read -r p50 p99 < <(cut -f3 "$2.log" | sort -n | awk '{ v[NR] = $1 }
      END { if (NR == 0) print 0, 0; else print v[int((NR * 50 + 99) / 100)], v[int((NR * 99 + 99) / 100)] }')
    rm -f "$2.log"
    awk -v p50="$p50" -v p99="$p99" -f "$BENCH/parse_h2load.awk" "$2"
  fi
}

# --- idle: RSS and CPU after start-up, before any request -------------------------------------------
# Every proxy is started twice: without a TLS port (idle CPU and RSS), then with it (idle RSS with TLS,
# and the instance that is measured). Each sample comes after --idle seconds of nothing.
PROXIES=$(tr ' ' '\n' <<<"$TARGETS" | grep -v '^direct$' | xargs || true)
declare -A IDLE_CPU IDLE_RSS
idle_window() { # idle_window: sleeps --idle seconds; sets IDLE_CPU (µs per s) and IDLE_RSS of each target
  local t
  declare -A ns
  for t in $TARGETS; do ns[$t]=$(cpu_ns "${PID_OF[$t]}"); done
  sleep "$IDLE"
  for t in $TARGETS; do
    IDLE_CPU[$t]=$(awk -v d=$(( $(cpu_ns "${PID_OF[$t]}") - ns[$t] )) -v s="$IDLE" \
      'BEGIN { if (s > 0) printf "%.0f", d / 1000 / s; else printf "-" }')
    IDLE_RSS[$t]=$(rss_kib "${PID_OF[$t]}")
  done
}
for t in $PROXIES; do start_proxy "$t" plain; done
idle_window
for t in $PROXIES; do stop_proxy "$t"; done
declare -A PLAIN_RSS PLAIN_CPU
for t in $TARGETS; do PLAIN_RSS[$t]=${IDLE_RSS[$t]} PLAIN_CPU[$t]=${IDLE_CPU[$t]}; done
for t in $PROXIES; do start_proxy "$t" tls; done
idle_window
: >"$OUT/idle.tsv"
for t in $TARGETS; do
  tls_rss=${IDLE_RSS[$t]}
  [[ $t == direct ]] && tls_rss=-
  echo "$t ${PLAIN_RSS[$t]} $tls_rss ${PLAIN_CPU[$t]}" >>"$OUT/idle.tsv"
done

# What each target can do, checked with curl before anything is timed; and which TLS each negotiates.
: >"$OUT/na.tsv"
for s in $SCENARIOS; do
  for t in $TARGETS; do
    if supported "$t" "$s"; then
      check "$t" "$s"
    else
      echo -e "$t\t$s\t${NA[$t,${SC_LISTENER[$s]}]}" >>"$OUT/na.tsv"
    fi
  done
done
{
  echo "# sluice bench/peers.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -r), $(nproc) CPUs, clk_tck=$CLK_TCK"
  echo "# sluice $(git -C "$BIN_DIR" rev-parse --short HEAD 2>/dev/null || echo '?') from $BIN_DIR; $(nginx -v 2>&1);" \
    "$(haproxy -v 2>/dev/null | head -1 | cut -d' ' -f1-3); $(h2o --version 2>/dev/null | head -1)"
  [[ -z $BASE_DIR ]] || echo "# base (baseline sluice) from $BASE_DIR/app/sluice"
  echo "# $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2); $(h2load --version 2>&1 | head -1)"
  echo "# scenarios: $SCENARIOS; $ROUNDS rounds of ${DURATION}s alternating: $TARGETS"
  case $BACKEND in
    demo) echo "# backend: demo (sluice-demo-app, HTTP/1.1 keep-alive)" ;;
    static) echo "# backend: static (nginx answering by itself: bench/static-backend.conf.in)" ;;
  esac
  # The request fields the app receives through each proxy from curl's GET (which sends host, user-agent,
  # accept): what each proxy adds or changes. The demo app lists them at /headers.
  if [[ $BACKEND == demo ]]; then
    for t in $PROXIES; do
      echo "# fields at the app through $t: $(curl -s --max-time 5 "http://127.0.0.1:${PORT[$t,h1]}/headers" \
        | sed -n '2,$s/:.*//p' | tr 'A-Z' 'a-z' | sort | xargs)"
    done
  fi
  if [[ -n $PROXY_CPU ]]; then
    echo "# pinning: proxies on cpu $PROXY_CPU, load generator + backend on cpu $LOAD_CPU"
  else
    echo "# pinning: none"
  fi
  if uses tls; then
    for t in $PROXIES; do
      echo "# tls $t: $(curl -skv --http2 -o /dev/null --max-time 5 "https://127.0.0.1:${PORT[$t,tls]}/" 2>&1 \
        | sed -n 's/^\* SSL connection using //p; s/^\* ALPN: server accepted /alpn /p' | xargs)"
    done
  fi
} >"$OUT/header.txt"
cat "$OUT/header.txt"

# --- copies of body bytes (--copies N) ------------------------------------------------------------------
# While h2load sends N requests with a 1 MiB body (GET /bytes/1048576 or POST /sink) to a proxy, once per
# downstream protocol and direction, perf records every call of libc's memmove/memcpy of >= 512 bytes in
# that proxy with its length (uprobes on each implementation glibc may pick, one per address). Bytes
# copied / body bytes relayed = copies per body byte.
# Copies the compiler inlined and the kernel's copies to and from the sockets are not seen.
COPY_PATHS="h1 h2c h1-tls h2-tls"
count_copies() { # count_copies TARGET PATH get|post: sets COPIED to the copies per body byte
  local t=$1 args=(-n "$COPIES" -c1 -m1) scheme=http listener=h1 path=/bytes/1048576 data=$OUT/copies/$1-$2-$3
  case $2 in
    h1) args+=(--h1) ;;
    h2c) listener=h2c ;;
    h1-tls) args+=(--h1); scheme=https listener=tls ;;
    h2-tls) scheme=https listener=tls ;;
  esac
  if [[ $3 == post ]]; then args+=(-d "$OUT/post-1m.bin"); path=/sink; fi
  perf record -q -o "$data.perf" -e 'sluice_copies:*' --filter 'len >= 512' -p "${PID_OF[$t]}" -- \
    "${PIN_LOAD[@]}" timeout 120 h2load "${args[@]}" "$scheme://127.0.0.1:${PORT[$t,$listener]}$path" \
    >"$data.txt" 2>&1 || die "h2load or perf failed for $t $2 $3 (see $data.txt)"
  grep -q " $COPIES succeeded, 0 failed" "$data.txt" || die "errors through $t $2 $3 (see $data.txt)"
  COPIED=$(perf script -i "$data.perf" 2>/dev/null | awk -v body=$((COPIES * 1048576)) '
    { for (i = 1; i <= NF; i++) if ($i ~ /^len=/) len = substr($i, 5) + 0
      sum += len }
    END { printf "%.2f", sum / body }')
}
if ((COPIES)); then
  mkdir -p "$OUT/copies"
  LIBC=$(awk '$6 ~ /\/libc\.so\.6$/ { print $6; exit }' "/proc/$BACKEND_PID/maps")
  for f in $(perf probe -x "$LIBC" -F '__mem*' | grep -E '^__mem(move|cpy)_' | grep -v -E '_chk|_ifunc'); do
    perf probe -q -x "$LIBC" --add "sluice_copies:p$PROBES=$f len=%dx:u64" && PROBES=$((PROBES + 1))
  done
  ((PROBES)) || die "no uprobe on $LIBC's memmove/memcpy (needs root, uprobes and libc symbols: libc6-dbg)"
  # A memcpy symbol aliased to a memmove one is the same code: keep one probe per address.
  # uprobe_events lines: "p:sluice_copies/pN /path/libc.so.6:0xOFFSET len=%dx:u64".
  for e in $(awk '$1 ~ /^p:sluice_copies\// { split($2, a, ":")
                   if (seen[a[2]]++) { sub(/^p:sluice_copies\//, "", $1); print $1 } }' \
      /sys/kernel/tracing/uprobe_events 2>/dev/null); do
    perf probe -q -d "sluice_copies:$e"
  done
  {
    echo "user-space copies per body byte (memmove/memcpy >= 512 B), $COPIES requests of 1 MiB per cell:"
    printf '%-8s' target
    for p in $COPY_PATHS; do printf ' %11s %11s' "$p-get" "$p-post"; done
    echo
  } >"$OUT/copies.txt"
  for t in $PROXIES; do
    line=$(printf '%-8s' "$t")
    for p in $COPY_PATHS; do
      for d in get post; do count_copies "$t" "$p" "$d"; line+=$(printf ' %11s' "$COPIED"); done
    done
    echo "$line" >>"$OUT/copies.txt"
  done
  cat "$OUT/header.txt" "$OUT/copies.txt" >"$OUT/results.txt"
  cat "$OUT/copies.txt"
  exit 0
fi

# --- idle connections (--connections N) ---------------------------------------------------------------
# Per protocol and proxy, on a fresh start: the scenario of that protocol for --duration s (its p99 is the
# one without the N), 2 s of rest, RSS; bench/hold.py opens N connections, each with one request answered, and holds them idle;
# 2 s later RSS again: (after - before) / N is what one idle connection costs. The same scenario's load
# then runs again on its own connections, whose p99 is set against the first run's.
# Then the N close, and RSS 10 s later is set against the RSS before they opened.
declare -A CONN_PROTOCOL=([h1-c50]=h1 [h1-c256]=h1 [h2c]=h2c [h1-tls]=tls-h1 [h2-tls]=tls-h2)
hold_ready() { # hold_ready FILE: the holder said "ready"
  grep -q '^ready ' "$1" 2>/dev/null
}
if ((CONNECTIONS)); then
  echo "# $CONNECTIONS idle connections per proxy and protocol; ulimit -n $(ulimit -n)"
  : >"$OUT/connections.tsv"
  for s in $SCENARIOS; do
    proto=${CONN_PROTOCOL[$s]:-}
    [[ -n $proto ]] || die "--connections: scenario $s has no protocol to hold (h1-c50, h2c, h1-tls, h2-tls)"
    for t in $PROXIES; do
      supported "$t" "$s" || continue
      stop_proxy "$t"
      start_proxy "$t" tls
      pid=${PID_OF[$t]}
      report=$OUT/load/conn-$t-$proto
      run_load "$t" "$s" "$DURATION" "$report-before.txt"
      read -r _ _ p99_before _ _ < <(parse_load "$s" "$report-before.txt")
      sleep 2
      rss0=$(rss_kib "$pid")
      port=$(url "$t" "$s"); port=${port#*127.0.0.1:}; port=${port%%/*}
      rm -f "$OUT/hold.fifo"; mkfifo "$OUT/hold.fifo"
      /usr/bin/python3 "$BENCH/hold.py" 127.0.0.1 "$port" "$proto" "$CONNECTIONS" <"$OUT/hold.fifo" >"$OUT/hold.txt" 2>&1 &
      holder=$!
      exec 7>"$OUT/hold.fifo"  # the holder's stdin: a line on it closes the connections
      for _ in $(seq 3000); do hold_ready "$OUT/hold.txt" && break; kill -0 "$holder" 2>/dev/null || break; sleep 0.1; done
      hold_ready "$OUT/hold.txt" || die "bench/hold.py against $t ($proto): $(cat "$OUT/hold.txt")"
      held=$(awk '/^ready / { print $2 }' "$OUT/hold.txt")
      ((held * 100 >= CONNECTIONS * 99)) || die "$t ($proto) held $held of $CONNECTIONS: $(cat "$OUT/hold.txt")"
      sleep 2
      rss1=$(rss_kib "$pid")
      run_load "$t" "$s" "$DURATION" "$report-open.txt"
      read -r _ _ p99_open _ errors < <(parse_load "$s" "$report-open.txt")
      echo close >&7
      exec 7>&-
      wait "$holder" || true
      sleep 10
      rss2=$(rss_kib "$pid")
      alive_or_die "$t"
      per=$(awk -v a="$rss0" -v b="$rss1" -v n="$held" 'BEGIN { printf "%.1f", (b - a) / n }')
      echo "$t $proto $held $rss0 $rss1 $rss2 $per $p99_before $p99_open $errors" >>"$OUT/connections.tsv"
      printf '  %-7s %-8s %6s held  %7s KiB before  %7s KiB open  %7s KiB 10 s after  %6s KiB/conn  p99 %s -> %s us  %s\n' \
        "$proto" "$t" "$held" "$rss0" "$rss1" "$rss2" "$per" "$p99_before" "$p99_open" "$(grep '^failed' "$OUT/hold.txt" || true)"
    done
  done
  # WebSocket through `sluice gateway` (the demo app's /ws echo as its one service): each idle socket is
  # a client connection and a tunnel to the instance. The gateway's RSS only (the instance is the app).
  if has_target sluice; then
    gw_port=$((BASE_PORT + 60))
    "${PIN_PROXY[@]}" "$SLUICE_BIN" gateway --listen "127.0.0.1:$gw_port" --admin 127.0.0.1:0 --workers 1 \
      --status none --request-lines off --no-throttle -- "$DEMO_BIN" >"$OUT/gateway.log" 2>&1 &
    gw=$!
    PIDS+=("$gw")
    wait_port "$gw_port" "$gw" || die "sluice gateway did not listen on $gw_port (see $OUT/gateway.log)"
    for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$gw_port/" && break; sleep 0.1; done
    sleep 2
    rss0=$(rss_kib "$gw")
    rm -f "$OUT/hold.fifo"; mkfifo "$OUT/hold.fifo"
    /usr/bin/python3 "$BENCH/hold.py" 127.0.0.1 "$gw_port" ws "$CONNECTIONS" /ws <"$OUT/hold.fifo" >"$OUT/hold.txt" 2>&1 &
    holder=$!
    exec 7>"$OUT/hold.fifo"
    for _ in $(seq 3000); do hold_ready "$OUT/hold.txt" && break; kill -0 "$holder" 2>/dev/null || break; sleep 0.1; done
    hold_ready "$OUT/hold.txt" || die "bench/hold.py against sluice gateway (ws): $(cat "$OUT/hold.txt")"
    held=$(awk '/^ready / { print $2 }' "$OUT/hold.txt")
    sleep 2
    rss1=$(rss_kib "$gw")
    echo close >&7
    exec 7>&-
    wait "$holder" || true
    sleep 10
    rss2=$(rss_kib "$gw")
    per=$(awk -v a="$rss0" -v b="$rss1" -v n="$held" 'BEGIN { printf "%.1f", (b - a) / n }')
    echo "sluice-gw ws $held $rss0 $rss1 $rss2 $per - - 0" >>"$OUT/connections.tsv"
    printf '  %-7s %-8s %6s held  %7s KiB before  %7s KiB open  %7s KiB 10 s after  %6s KiB/conn\n' \
      ws sluice-gw "$held" "$rss0" "$rss1" "$rss2" "$per"
    kill -TERM "$gw" 2>/dev/null; wait "$gw" 2>/dev/null || true
  fi
  {
    cat "$OUT/header.txt"
    echo
    echo "idle connections: $CONNECTIONS per proxy and protocol (bench/hold.py); KiB per connection = RSS growth / held;"
    echo "after = RSS 10 s after they closed / RSS before they opened; p99 of other requests, µs: without -> with them open"
    awk -v peers="$PEERS" '
      { key = $2 SUBSEP $1; per[key] = $7; after[key] = $6 / $4; p0[key] = $8; p1[key] = $9; held[key] = $3
        if (!($2 in seenp)) { seenp[$2] = 1; protos[++np] = $2 }
        if (!($1 in seent)) { seent[$1] = 1; targets[++nt] = $1 } }
      END {
        printf "%-8s", "proxy"
        for (i = 1; i <= np; i++) printf "  %-28s", protos[i] " KiB/conn after p99"
        printf "\n"
        for (j = 1; j <= nt; j++) {
          t = targets[j]; printf "%-8s", t
          for (i = 1; i <= np; i++) { k = protos[i] SUBSEP t
            if (k in per) printf "  %8s %5.2f %6s>%-6s", per[k], after[k], p0[k], p1[k]; else printf "  %-28s", "-" }
          printf "\n"
        }
        split(peers, ps, " ")
        printf "sluice / best peer, KiB per idle connection:"
        for (i = 1; i <= np; i++) { best = ""; k = protos[i] SUBSEP "sluice"
          for (q in ps) { kk = protos[i] SUBSEP ps[q]; if ((kk in per) && (best == "" || per[kk] < best)) { best = per[kk]; who = ps[q] } }
          if ((k in per) && best > 0) printf "  %s %.2f (%s)", protos[i], per[k] / best, who }
        printf "\n"
      }' "$OUT/connections.tsv"
  } | tee "$OUT/results.txt"
  exit 0
fi

# --- runs --------------------------------------------------------------------------------------------
: >"$OUT/runs.tsv"
for s in $SCENARIOS; do
  if ((WARMUP > 0)); then
    for t in $TARGETS; do supported "$t" "$s" && run_load "$t" "$s" "$WARMUP" "$OUT/load/warmup-$t-$s.txt"; done
  fi
  for round in $(seq "$ROUNDS"); do
    for t in $TARGETS; do
      supported "$t" "$s" || continue
      pid=${PID_OF[$t]}
      report=$OUT/load/$t-$s-r$round.txt
      before=$(cpu_ticks "$pid"); back_before=$(cpu_ticks "$BACKEND_PID")
      children_ticks; kids_before=$(<"$OUT/kids.txt"); busy_before=$(machine_busy)
      sampler=
      if [[ $t != direct ]]; then app_conns_later "$pid" "$OUT/conns.txt" & sampler=$!; fi
      run_load "$t" "$s" "$DURATION" "$report"
      busy_after=$(machine_busy); children_ticks; kids_after=$(<"$OUT/kids.txt")
      conns=-1
      if [[ -n $sampler ]]; then wait "$sampler" || true; conns=$(<"$OUT/conns.txt"); fi
      after=$(cpu_ticks "$pid"); back_after=$(cpu_ticks "$BACKEND_PID")
      alive_or_die "$t"
      # Interference: machine CPU not spent by the proxy, the backend or the generator, in % of one CPU.
      ours=$(( after - before + kids_after - kids_before ))
      [[ $t == direct ]] || ours=$(( ours + back_after - back_before ))
      other=$(awk -v d=$(( busy_after - busy_before - ours )) -v hz="$CLK_TCK" -v s="$DURATION" \
        'BEGIN { v = d * 100 / hz / s; printf "%.0f", (v < 0) ? 0 : v }')
      rss=$(rss_kib "$pid")
      read -r rps p50 p99 requests errors < <(parse_load "$s" "$report")
      cpu=$(awk -v d=$((after - before)) -v hz="$CLK_TCK" -v n="$requests" \
        'BEGIN { printf "%.3f", (n > 0) ? d * 1e6 / hz / n : 0 }')
      echo "$t $s $round $rps $p50 $p99 $cpu $rss $errors $other $conns" >>"$OUT/runs.tsv"
      printf '  %-8s round %s %-8s %10.0f rps  p99 %8s us  %8s cpu-us/req  errors %s  other cpu %s%%\n' \
        "$s" "$round" "$t" "$rps" "$p99" "$cpu" "$errors" "$other"
    done
  done
done

echo
{
  cat "$OUT/header.txt"
  awk -v targets="$TARGETS" -v scenarios="$SCENARIOS" -v peers="$PEERS" -f "$BENCH/summarize.awk" \
    "$OUT/idle.tsv" "$OUT/na.tsv" "$OUT/runs.tsv"
} | tee "$OUT/results.txt"
