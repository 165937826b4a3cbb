#!/usr/bin/env bash
# bench/node.sh: what serving N pods costs, one `sluice node` (and each pod's `sluice node-stub`) against N
# `sluice sidecar` processes (and N Knative queue-proxies with --queue-proxy). The stub is sluice-node-stub,
# the image's small binary that deploy/node runs in each pod. Each pod is a network
# namespace made here (unshare --net, its loopback up) with the demo app inside on 8080; every proxy serves
# the pod on its own 127.0.0.1:8012 as in a Knative pod, with queue-proxy's environment (10 revisions).
# For 1, 10 and 100 pods (--pods) it reports the proxies' memory idle and after every pod has served
# requests (RSS summed over processes, and PSS, which shares a library's pages among the processes that map
# it: the figure that adds up to what the node spends), idle CPU, and CPU per request under wrk in one pod.
# Proxies run on CPU 0; the apps and wrk on CPU 1. Node mode runs as in a cluster: each pod published to the
# agent as the kubelet does (its own socket), its stub as uid 65534, each mode's proxy (node: its stub) in a
# cgroup named for its pod. In node mode it then restarts the agent under wrk in one pod (a second agent
# takes every pod over) and reports how long that took and what failed meanwhile.
# Root only (namespaces); everything is stopped on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN_DIR=$ROOT/build/release
PODS="1 10 100"
DURATION=5
IDLE=5
QUEUE_PROXY=
MODES="sidecar node"
OUT=$ROOT/bench/out/node

usage() {
  cat <<EOF
usage: bench/node.sh [--pods "1 10 100"] [--modes "sidecar node"] [--duration S] [--idle S] [--bin-dir DIR]
                     [--queue-proxy PATH]
  --pods L          pod counts to measure (default "$PODS")
  --modes L         any of sidecar node (default "$MODES"; --queue-proxy adds queue-proxy)
  --duration S      seconds of wrk load in one pod (default $DURATION)
  --idle S          seconds of the idle window (default $IDLE)
  --bin-dir DIR     where app/sluice and demo/sluice-demo-app are (default \$ROOT/build/release)
  --queue-proxy P   also measure N Knative queue-proxy binaries (built from knative/serving by you)
Results: $OUT/results.txt
EOF
}
die() { echo "node.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case $1 in
    --pods) PODS=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --idle) IDLE=$2; shift 2 ;;
    --bin-dir) BIN_DIR=$2; shift 2 ;;
    --queue-proxy) QUEUE_PROXY=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
SLUICE=$BIN_DIR/app/sluice
STUB=$BIN_DIR/app/sluice-node-stub
DEMO=$BIN_DIR/demo/sluice-demo-app
[ "$(id -u)" = 0 ] || die "needs root (it makes network namespaces)"
for t in unshare nsenter ip wrk h2load taskset curl; do command -v $t >/dev/null || die "needs $t"; done
[ -x "$SLUICE" ] && [ -x "$STUB" ] && [ -x "$DEMO" ] || die "build first: cmake --preset release && cmake --build --preset release"
[ -z "$QUEUE_PROXY" ] || [ -x "$QUEUE_PROXY" ] || die "--queue-proxy $QUEUE_PROXY is not an executable"
MAX=0
for n in $PODS; do [ "$n" -gt "$MAX" ] && MAX=$n; done

WORK=$(mktemp -d /tmp/sluice-node-bench.XXXXXX)
chmod 755 "$WORK"  # the pods' stubs run as 65534 and reach their volumes and the stub's copy here
cp "$STUB" "$WORK/sluice-node-stub"
CONTROL=$WORK/control/control.sock
# Each pod's proxy (node mode: its stub) in a cgroup of its own, as the kubelet makes them (the agent checks
# the stub's, the proxy joins it).
CG2=$(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") { print $5; exit } break } }' /proc/self/mountinfo)
[ -n "$CG2" ] || die "needs a cgroup v2 hierarchy (per-node mode checks each stub's cgroup)"
CGROUPS=$CG2$(sed -n 's/^0:://p' /proc/self/cgroup)/sluice-node-bench-$$
CGROUPS=${CGROUPS//\/\//\/}
mkdir -p "$OUT"
RESULTS=$OUT/results.txt
HOLDERS=()   # per pod: the process that holds its network namespace
APPS=()      # per pod: the demo app
PROXIES=()   # what the mode under measure started (proxies, the agent, stubs)
stop_pids() { # SIGKILL, then wait (bounded) until each is gone
  [ $# -gt 0 ] || return 0
  kill -KILL "$@" 2>/dev/null || true
  local deadline=$((SECONDS + 10)) p
  for p in "$@"; do
    while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.05; done
  done
}
cleanup() {
  stop_pids "${PROXIES[@]}"
  [ -z "${AGENT:-}" ] || stop_pids "$AGENT"
  stop_pids "${APPS[@]}" "${HOLDERS[@]}"
  rm -rf "$WORK"
  [ ! -d "${CGROUPS:-}" ] || find "$CGROUPS" -depth -type d -exec rmdir {} + 2>/dev/null || true
}
trap cleanup EXIT
trap "exit 130" INT TERM  # so that cleanup runs

netns() { echo "/proc/${HOLDERS[$1]}/ns/net"; }
in_pod() { local i=$1; shift; nsenter --net="$(netns "$i")" -- "$@"; }

# queue-proxy's environment for pod I (as Knative's reconciler injects it), as env(1) arguments.
pod_env() {
  local i=$1 rev=$(( $1 % 10 ))
  echo SERVING_NAMESPACE=bench SERVING_SERVICE=svc-$rev SERVING_CONFIGURATION=svc-$rev \
    SERVING_REVISION=svc-$rev-00001 SERVING_POD=svc-$rev-00001-pod-$i SERVING_POD_IP=127.0.0.1 \
    QUEUE_SERVING_PORT=8012 QUEUE_SERVING_TLS_PORT=8112 CONTAINER_CONCURRENCY=0 REVISION_TIMEOUT_SECONDS=300 \
    REVISION_RESPONSE_START_TIMEOUT_SECONDS=0 REVISION_IDLE_TIMEOUT_SECONDS=0 USER_PORT=8080 \
    SYSTEM_NAMESPACE=knative-serving HOST_IP=127.0.0.1 ENABLE_HTTP2_AUTO_DETECTION=false \
    ENABLE_HTTP_FULL_DUPLEX=false ENABLE_MULTI_CONTAINER_PROBES=false ROOT_CA= \
    SERVING_LOGGING_LEVEL=info
}
# The JSON values (spaces and quotes) go separately.
PROBE='{"tcpSocket":{"port":8080,"host":"127.0.0.1"},"successThreshold":1}'
LOGGING='{"level":"info","outputPaths":["stdout"],"errorOutputPaths":["stderr"],"encoding":"json","encoderConfig":{"timeKey":"timestamp","levelKey":"severity","nameKey":"logger","callerKey":"caller","messageKey":"message","stacktraceKey":"stacktrace","lineEnding":"","levelEncoder":"","timeEncoder":"iso8601","durationEncoder":"","callerEncoder":""}}'
OBSERVABILITY='{"tracing":{"protocol":"none"},"metrics":{"protocol":"none"},"runtime":{"profiling":"disabled","exportInterval":15000000000},"requestMetrics":{"protocol":"none"}}'

make_pods() {
  local i own
  own=$(readlink /proc/self/ns/net)
  for ((i = 0; i < MAX; i++)); do
    unshare --net -- tail -f /dev/null &
    HOLDERS[i]=$!
    disown  # stopped by cleanup; no job notices
    local deadline=$((SECONDS + 10))
    until [ "$(readlink "$(netns "$i")" 2>/dev/null)" != "$own" ] && [ -n "$(readlink "$(netns "$i")" 2>/dev/null)" ]; do
      [ $SECONDS -lt $deadline ] || die "pod $i: unshare made no namespace"
      sleep 0.01
    done
    in_pod "$i" ip link set lo up
    taskset -c 1 nsenter --net="$(netns "$i")" -- env PORT=8080 "$DEMO" >/dev/null 2>&1 &
    APPS[i]=$!
    disown
  done
}

# start MODE N: the proxies of N pods (their pids in PROXIES; AGENT for node mode).
start() {
  local mode=$1 n=$2 i
  PROXIES=()
  AGENT=
  if [ "$mode" = node ]; then
    rm -rf "$WORK/control" "$WORK/volumes"  # no pod of an earlier row is recorded
    SLUICE_NODE_CONTROL_SOCKET=$CONTROL taskset -c 0 "$SLUICE" node >"$WORK/agent.log" 2>&1 &
    AGENT=$!
    disown
    local deadline=$((SECONDS + 10))
    until [ -S "$CONTROL" ]; do [ $SECONDS -lt $deadline ] || die "the agent did not start"; sleep 0.02; done
  fi
  for ((i = 0; i < n; i++)); do
    local -a cmd
    case $mode in
      sidecar) cmd=("$SLUICE" sidecar) ;;
      queue-proxy) cmd=("$QUEUE_PROXY") ;;
      node) cmd=("$WORK/sluice-node-stub") ;;  # a copy the pods' user can reach
    esac
    # Every mode's proxy (node: its stub, which its proxy joins) in a cgroup named for its pod, as the kubelet
    # places a pod's queue-proxy container: the same depth in the hierarchy (the kernel's accounting on each
    # context switch grows with it), the same for each mode.
    local -a as=() wrap=()
    local uid
    uid=$(printf '00000000-0000-4000-8000-%012d' "$i")
    mkdir -p "$CGROUPS/$mode-$n/pod$uid/queue-proxy"
    wrap=(sh -c "echo \$\$ > $CGROUPS/$mode-$n/pod$uid/queue-proxy/cgroup.procs && exec \"\$@\"" sh)
    if [ "$mode" = node ]; then
      # The kubelet's part: the pod's volume published (its own socket); the stub runs as a pod's user.
      SLUICE_NODE_CONTROL_SOCKET=$CONTROL "$SLUICE" node publish "vol-$i" bench "svc-$((i % 10))-00001-pod-$i" "$uid" \
        "$WORK/volumes/pod-$i" >/dev/null || die "node: pod $i not published"
      as=(-S 65534 -G 65534)
    fi
    # shellcheck disable=SC2046
    taskset -c 0 "${wrap[@]}" nsenter --net="$(netns "$i")" "${as[@]}" -- env -i PATH=/usr/bin:/bin $(pod_env "$i") \
      SERVING_READINESS_PROBE="$PROBE" SERVING_LOGGING_CONFIG="$LOGGING" OBSERVABILITY_CONFIG="$OBSERVABILITY" \
      SLUICE_NODE_SOCKET="$WORK/volumes/pod-$i/node.sock" "${cmd[@]}" >/dev/null 2>&1 &
    PROXIES+=($!)
    disown
  done
  # Ready: every pod answers the kubelet's probe on its 8012.
  local deadline=$((SECONDS + 60))
  for ((i = 0; i < n; i++)); do
    until [ "$(in_pod "$i" curl -s -o /dev/null -w '%{http_code}' -H 'K-Network-Probe: queue' \
                 -H 'User-Agent: kube-probe/1.29' http://127.0.0.1:8012/ 2>/dev/null)" = 200 ]; do
      [ $SECONDS -lt $deadline ] || die "$mode: pod $i not ready after 60 s"
      sleep 0.05
    done
  done
}

# What the mode runs: the proxies (or stubs), and the agent with the proxies it started.
measured() {
  local p
  for p in "${PROXIES[@]}"; do echo "$p"; done
  if [ -n "$AGENT" ]; then
    echo "$AGENT"
    pgrep -P "$AGENT" || true
  fi
}
sum_status() { # sum_status FIELD PIDS...: the sum of a /proc/PID/status or smaps_rollup field, KiB
  local field=$1; shift
  local p total=0 v
  for p in "$@"; do
    if [ "$field" = Pss ]; then v=$(awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null)
    else v=$(awk -v f="$field:" '$1 == f { print $2 }' "/proc/$p/status" 2>/dev/null); fi
    total=$((total + ${v:-0}))
  done
  echo "$total"
}
cpu_ns() { # CPU time of every thread of PIDS, ns
  local p
  for p in "$@"; do cat /proc/"$p"/task/*/schedstat 2>/dev/null; done | awk '{ t += $1 } END { printf "%.0f", t }'  # mawk's %d stops at 2^31
}

measure() { # measure MODE N: one row of the table
  local mode=$1 n=$2
  start "$mode" "$n"
  mapfile -t pids < <(measured)
  sleep 1  # start-up settles (the probes above were the last work)
  local idle_rss idle_pss c0 c1 idle_cpu
  idle_rss=$(sum_status VmRSS "${pids[@]}")
  idle_pss=$(sum_status Pss "${pids[@]}")
  if [ -n "$AGENT" ]; then
    # Where node mode's idle PSS goes: the agent itself, the pods' proxies it started, the pods' stubs.
    mapfile -t children < <(pgrep -P "$AGENT" || true)
    echo "node $n pods, idle PSS KiB: agent $(sum_status Pss "$AGENT") ($(ls /proc/"$AGENT"/task | wc -l) threads)," \
      "pod proxies $(sum_status Pss "${children[@]}") (${#children[@]})," \
      "stubs $(sum_status Pss "${PROXIES[@]}") (${#PROXIES[@]})" | tee -a "$OUT/breakdown.txt"
  fi
  c0=$(cpu_ns "${pids[@]}")
  sleep "$IDLE"
  c1=$(cpu_ns "${pids[@]}")
  idle_cpu=$(( (c1 - c0) / 1000 / IDLE ))  # µs per s, every process of the mode together
  # Every pod serves: 200 requests each, 4 connections (h2load --h1), then wrk in pod 0.
  local i
  for ((i = 0; i < n; i++)); do
    taskset -c 1 nsenter --net="$(netns "$i")" -- h2load --h1 -n 200 -c 4 http://127.0.0.1:8012/ >/dev/null 2>&1 ||
      die "$mode: pod $i: h2load failed"
  done
  c0=$(cpu_ns "${pids[@]}")
  local report=$WORK/wrk.txt
  taskset -c 1 nsenter --net="$(netns 0)" -- wrk -t1 -c50 -d"${DURATION}s" http://127.0.0.1:8012/ >"$report"
  c1=$(cpu_ns "${pids[@]}")
  local requests rps errors
  requests=$(awk '/requests in/ { print $1 }' "$report")
  rps=$(awk '/^Requests\/sec/ { printf "%d", $2 }' "$report")
  errors=$(awk '/Non-2xx|Socket errors/ { e = 1 } END { print e + 0 }' "$report")
  [ "$errors" = 0 ] || die "$mode: errors under load: $(cat "$report")"
  sleep 1
  local rss pss
  rss=$(sum_status VmRSS "${pids[@]}")
  pss=$(sum_status Pss "${pids[@]}")
  local cpu_req
  cpu_req=$(awk -v ns=$((c1 - c0)) -v r="$requests" 'BEGIN { printf "%.2f", ns / 1000 / r }')
  # The agent restarted under wrk in pod 0: how long until the old one has handed every pod over (and their
  # old proxies have finished), and how many of wrk's requests failed meanwhile.
  local restart_s=- restart_failed=-
  if [ "$mode" = node ]; then
    taskset -c 1 nsenter --net="$(netns 0)" -- wrk -t1 -c20 -d"${DURATION}s" http://127.0.0.1:8012/ >"$WORK/restart.txt" &
    local load=$!
    sleep 1  # wrk's connections are up
    local t0=$EPOCHREALTIME
    SLUICE_NODE_CONTROL_SOCKET=$CONTROL taskset -c 0 "$SLUICE" node >"$WORK/agent2.log" 2>&1 &
    local successor=$!
    disown
    local deadline=$((SECONDS + 120))
    until grep -q "handed over: the new agent serves every pod" "$WORK/agent.log"; do
      [ $SECONDS -lt $deadline ] || die "node: no handover within 120 s"
      sleep 0.01
    done
    restart_s=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
    wait "$load" || die "node: wrk failed during the restart"
    restart_failed=$(awk '/Socket errors/ { gsub(",", ""); f += $4 + $6 + $8 + $10 } /Non-2xx/ { f += $NF }
                          END { print f + 0 }' "$WORK/restart.txt")
    stop_pids "$AGENT"
    AGENT=$successor
  fi
  printf '%-12s %5d %6d %13d %13d %13d %13d %9d %11s %14d %10s %15s\n' "$mode" "$n" "${#pids[@]}" "$idle_rss" \
    "$idle_pss" "$rss" "$pss" "$rps" "$cpu_req" "$idle_cpu" "$restart_s" "$restart_failed" | tee -a "$RESULTS"
  stop_pids "${PROXIES[@]}"
  [ -z "$AGENT" ] || stop_pids "$AGENT"
  PROXIES=()
  AGENT=
  # The next mode binds the same ports in the same pods.
  local deadline=$((SECONDS + 10))
  for ((i = 0; i < n; i++)); do
    while in_pod "$i" ss -Htln 'sport = :8012' | grep -q 8012; do
      [ $SECONDS -lt $deadline ] || die "$mode: pod $i's 8012 still taken"
      sleep 0.05
    done
  done
}

[ -z "$QUEUE_PROXY" ] || MODES="$MODES queue-proxy"
{
  echo "# sluice bench/node.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -r), $(nproc) CPUs; sluice $("$SLUICE" --version 2>/dev/null | head -n1)"
  echo "# memory in KiB summed over the mode's processes (node: the agent, the proxies it started and the pods' stubs);"
  echo "# cpu_us/req under wrk -c50 in one pod; idle_cpu in µs per second, all processes together;"
  echo "# node: restart_s until a second agent has taken every pod over, restart_failed wrk's failed requests meanwhile"
  printf '%-12s %5s %6s %13s %13s %13s %13s %9s %11s %14s %10s %15s\n' mode pods procs idle_rss_kib idle_pss_kib \
    loaded_rss_kib loaded_pss_kib rps cpu_us/req idle_cpu_us/s restart_s restart_failed
} | tee "$RESULTS"
make_pods
for n in $PODS; do
  for mode in $MODES; do measure "$mode" "$n"; done
done
