#!/usr/bin/env bash
# bench/h2.sh: HTTP/2 cleartext (prior knowledge) through sluice and through nginx, with h2load.
# Same shape as bench/run.sh: the demo app as backend (HTTP/1.1, keep-alive), nginx with one worker and
# `listen ... http2`, `sluice sidecar --workers 1`; the proxy pinned to CPU 0, h2load and the backend to
# CPU 1; rounds alternate between the targets and the medians are compared.
#   bench/h2.sh [--rounds N] [--duration S] [--clients C] [--streams M] [--base-port P]
set -euo pipefail
BENCH=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$BENCH")
OUT=$BENCH/out/h2
ROUNDS=3 DURATION=5 CLIENTS=50 STREAMS=10 BASE_PORT=18100 TLS=0
while (($#)); do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=${2%s}; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --streams) STREAMS=$2; shift 2 ;;
    --base-port) BASE_PORT=$2; shift 2 ;;
    --tls) TLS=1; shift ;;
    *) echo "usage: bench/h2.sh [--rounds N] [--duration S] [--clients C] [--streams M] [--base-port P] [--tls]" >&2; exit 2 ;;
  esac
done
DEMO_BIN=$ROOT/build/release/demo/sluice-demo-app
SLUICE_BIN=$ROOT/build/release/app/sluice
[[ -x $DEMO_BIN && -x $SLUICE_BIN ]] || { echo "build first: cmake --preset release && cmake --build --preset release" >&2; exit 2; }
for tool in h2load nginx; do command -v $tool >/dev/null || { echo "missing $tool (apt-get install -y nghttp2-client nginx-light)" >&2; exit 2; }; done

BACKEND_PORT=$BASE_PORT NGINX_PORT=$((BASE_PORT + 1)) SLUICE_PORT=$((BASE_PORT + 2))
PIN_PROXY=() PIN_LOAD=()
if (( $(nproc) >= 2 )); then PIN_PROXY=(taskset -c 0); PIN_LOAD=(taskset -c 1); fi
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_port() { for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; return 1; }

rm -rf "$OUT"; mkdir -p "$OUT/nginx/tmp"
"${PIN_LOAD[@]}" "$DEMO_BIN" --port "$BACKEND_PORT" >"$OUT/backend.log" 2>&1 & PIDS+=($!)
wait_port "$BACKEND_PORT" || { echo "backend did not start" >&2; exit 1; }
SCHEME=http TLS_WORD= TLS_FILES= SLUICE_TLS=(QUEUE_SERVING_TLS_PORT=0)
if ((TLS)); then
  # One self-signed pair for both proxies; both then negotiate the same TLS 1.3 suite with h2load.
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$OUT/tls.key" -out "$OUT/tls.crt" -days 2 -subj /CN=localhost 2>/dev/null
  SCHEME=https TLS_WORD=ssl TLS_FILES="ssl_certificate $OUT/tls.crt; ssl_certificate_key $OUT/tls.key;"
  SLUICE_TLS=(QUEUE_SERVING_TLS_PORT=$((BASE_PORT + 3)) SLUICE_TLS_CERT_FILE=$OUT/tls.crt SLUICE_TLS_KEY_FILE=$OUT/tls.key)
fi
sed -e "s|@OUT@|$OUT/nginx|g" -e "s|@BACKEND_PORT@|$BACKEND_PORT|g" -e "s|@NGINX_PORT@|$NGINX_PORT|g" \
  -e "s|@TLS@|$TLS_WORD|g" -e "s|@TLS_FILES@|$TLS_FILES|g" "$BENCH/nginx-h2.conf.in" >"$OUT/nginx/nginx.conf"
"${PIN_PROXY[@]}" nginx -p "$OUT/nginx/" -e "$OUT/nginx/error.log" -c "$OUT/nginx/nginx.conf" >"$OUT/nginx/stdout.log" 2>&1 & PIDS+=($!)
"${PIN_PROXY[@]}" env CONTAINER_CONCURRENCY=0 QUEUE_SERVING_PORT=$SLUICE_PORT "${SLUICE_TLS[@]}" \
  USER_PORT=$BACKEND_PORT REVISION_TIMEOUT_SECONDS=300 SERVING_NAMESPACE=bench SERVING_CONFIGURATION=demo \
  SERVING_REVISION=demo-00001 SERVING_POD=demo-pod SERVING_POD_IP=127.0.0.1 SERVING_LOGGING_CONFIG= \
  SERVING_LOGGING_LEVEL=warn SLUICE_ADMIN_PORT=0 SLUICE_METRICS_PORT=0 \
  "$SLUICE_BIN" sidecar --workers 1 >"$OUT/sluice.log" 2>&1 & PIDS+=($!)
wait_port "$NGINX_PORT" && wait_port "$SLUICE_PORT" || { echo "a proxy did not start (see $OUT)" >&2; exit 1; }

declare -A PORT_OF=([nginx]=$NGINX_PORT [sluice]=$SLUICE_PORT)
((TLS)) && PORT_OF[sluice]=$((BASE_PORT + 3)) && { wait_port "${PORT_OF[sluice]}" || exit 1; }
run() { # run TARGET ROUND -> rps
  local report=$OUT/$1-r$2.txt
  "${PIN_LOAD[@]}" timeout $((DURATION + 30)) h2load -c"$CLIENTS" -m"$STREAMS" -D "$DURATION" \
    "$SCHEME://127.0.0.1:${PORT_OF[$1]}/" >"$report" 2>&1 || { echo "h2load against $1 failed (see $report)" >&2; exit 1; }
  grep -q " 0 failed, 0 errored" "$report" || { echo "errors through $1 (see $report)" >&2; exit 1; }
  awk '/^finished in/ { gsub(",", "", $4); print $4 }' "$report"
}
echo "# sluice bench/h2.sh $(date -u +%Y-%m-%dT%H:%M:%SZ): h2load -c$CLIENTS -m$STREAMS -D ${DURATION}s, $( ((TLS)) && echo "h2 over TLS (ALPN)" || echo "h2c prior knowledge"), $ROUNDS rounds"
for t in nginx sluice; do run "$t" 0 >/dev/null; done  # warm-up
declare -A RPS
for r in $(seq "$ROUNDS"); do
  for t in nginx sluice; do
    v=$(run "$t" "$r"); RPS[$t]+="$v "
    printf '  round %s %-7s %10.0f rps\n' "$r" "$t" "$v"
  done
done
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
n=$(median "${RPS[nginx]}") s=$(median "${RPS[sluice]}")
printf 'target  median_rps\nnginx   %.0f\nsluice  %.0f\nrps sluice/nginx %.3f\n' "$n" "$s" "$(awk -v a="$s" -v b="$n" 'BEGIN { print a / b }')" | tee "$OUT/results.txt"
