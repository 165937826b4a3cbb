#!/usr/bin/env bash
# sluice's two entry points on a Debian 12 machine:
#   scripts/dev.sh run    install what building needs, build, run `sluice gateway -- <demo app>` (cold, then warm requests)
#   scripts/dev.sh test   install what is missing, build, run the whole suite (release, ASan+UBSan, TSan;
#                         with SLUICE_TEST_FUZZ=1 the fuzz targets too), then the image test
# Other commands: build [preset], bench (see bench/README.md), deps [build|run|scaler|image] (`build`: only
# what compiling the sluice binary needs; `run`: that and curl; `scaler`: that plus gRPC, for
# sluice-autoscaler; `image`: what building and testing the container image needs),
# dist (the one-file `sluice`: every library but glibc linked in, at dist/sluice),
# image-test (builds and tests the container image alone: tests/image/run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# Everything sluice builds and tests with, from Debian 12's own archive. Boost comes as 1.81 components:
# the default libboost-dev is 1.74 and conflicts with them. BUILD_PACKAGES are enough to compile the
# `sluice` binary; docker/Dockerfile installs just those (`scripts/dev.sh deps build`).
BUILD_PACKAGES=(
  g++ cmake ninja-build pkg-config
  libboost1.81-dev libboost-json1.81-dev
  libnghttp2-dev libssl-dev libyaml-cpp-dev libprotobuf-dev protobuf-compiler zlib1g-dev
)
# `run` builds the one-file binaries (the dist preset: no tests) and talks to the gateway with curl.
RUN_PACKAGES=("${BUILD_PACKAGES[@]}" curl ca-certificates)
# sluice-autoscaler (KEDA's external scaler) is a binary of its own so that the sidecar carries no gRPC;
# without these packages CMake simply leaves it out. docker/Dockerfile's scaler stage installs them.
SCALER_BUILD_PACKAGES=("${BUILD_PACKAGES[@]}" libgrpc++-dev protobuf-compiler-grpc)
PACKAGES=(
  "${SCALER_BUILD_PACKAGES[@]}" git ca-certificates
  # The dist preset (the image test's one-file build) finds most of the release preset's objects in its cache.
  ccache
  libgtest-dev libgmock-dev
  # The fuzz preset: Debian's clang 14 and its libFuzzer/sanitizer runtimes (a Recommends, so named here).
  clang libclang-rt-14-dev
  curl openssl procps iproute2 coreutils
  # mount(8): the conformance suite re-roots itself in a chroot, where '/' is not a mount point.
  mount
  nginx-light wrk nghttp2-client
  runc busybox-static
  kubernetes-client
  # The gateway's dashboard test loads the page in a headless browser; its terminal test reads tmux's screen.
  chromium tmux
  # grpc_tools (the scaler tests' Python stubs) imports pkg_resources without depending on it.
  python3-grpcio python3-grpc-tools python3-pkg-resources
  # tests/support/otlp_receiver.py (the OTLP test collector) decodes with protoc-made Python classes.
  python3-protobuf
  # The conformance suite's HTTP/2 app and client encode and decode header blocks with it.
  python3-hpack
)
# The image test (tests/image/run.sh, run last by `test`): podman + runc build and run the image offline.
IMAGE_PACKAGES=(podman runc mmdebstrap mount)

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

deps() {
  local wanted=("${PACKAGES[@]}") missing=()
  [ "${1:-}" = build ] && wanted=("${BUILD_PACKAGES[@]}")
  [ "${1:-}" = run ] && wanted=("${RUN_PACKAGES[@]}")
  [ "${1:-}" = scaler ] && wanted=("${SCALER_BUILD_PACKAGES[@]}")
  [ "${1:-}" = image ] && wanted=("${IMAGE_PACKAGES[@]}")
  for p in "${wanted[@]}"; do
    # Any kubectl will do for `kubectl kustomize` (another vendor's package would conflict with Debian's).
    [ "$p" = kubernetes-client ] && command -v kubectl >/dev/null && continue
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "sluice: installing ${missing[*]}" >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# build [PRESET [TARGET...]]: the whole preset, or only the named targets.
build() {
  local preset=${1:-release}
  shift || true
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" ${1:+--target "$@"}
}

# Ctrl-C reaches the gateway straight from the terminal (same process group), so the script does not
# send a second signal for it; a TERM to the script is passed on. The gateway drains and exits 0, and
# so does the script; its /tmp/sluice-<pid> goes with it on every path (a kill -9 included).
gateway_pid=""
status_file=""
interrupted=0
stop_gateway() {
  interrupted=1
  [ -n "$gateway_pid" ] || return 0
  kill -TERM "$gateway_pid" 2>/dev/null || true
}
cleanup_gateway() {
  [ -z "$status_file" ] || rm -f "$status_file"
  [ -n "$gateway_pid" ] || return 0
  if kill -0 "$gateway_pid" 2>/dev/null; then
    kill -TERM "$gateway_pid" 2>/dev/null || true
    wait "$gateway_pid" 2>/dev/null || true
  fi
  rm -rf "${TMPDIR:-/tmp}/sluice-$gateway_pid"
}

run_gateway_demo() {
  # SLUICE_SKIP_BUILD=1 with SLUICE_BIN/DEMO_APP_BIN: run what is built already (the script's own test).
  if [ "${SLUICE_SKIP_BUILD:-0}" != 1 ]; then
    deps run
    build dist  # what it runs (the one-file sluice and the demo app), not the tests
  fi
  local port=${PORT:-8080} admin=${ADMIN_PORT:-8079}
  local sluice=${SLUICE_BIN:-build/dist/app/sluice} demo=${DEMO_APP_BIN:-build/dist/demo/sluice-demo-app}
  trap cleanup_gateway EXIT
  trap 'stop_gateway' TERM
  trap 'interrupted=1' INT
  "$sluice" gateway --listen "127.0.0.1:$port" --admin "127.0.0.1:$admin" "$@" -- "$demo" &
  gateway_pid=$!  # global: the EXIT trap runs after this function has returned
  # The gateway first proves the app can start (that instance stops as soon as it listens: the first
  # request below cold-starts the app).
  # One plain command at a time, no pipeline and no $(...): a Ctrl-C that lands while bash forks one of
  # those can make bash exit 130 at once (seen with bash 5.2), before the gateway has drained.
  local i
  status_file="${TMPDIR:-/tmp}/sluice-dev-$$.status"
  for ((i = 0; i < 400; i++)); do
    if curl -sf -o "$status_file" "http://127.0.0.1:$admin/.sluice/status" 2>/dev/null &&
      grep -q '"validated":true' "$status_file"; then
      break
    fi
    kill -0 "$gateway_pid" 2>/dev/null || break
    [ "$interrupted" = 0 ] || break
    sleep 0.05 || true  # a Ctrl-C ends the sleep too: not an error (set -e)
  done
  # Four requests; the gateway prints a line for each (status, time, instance). Nothing is written here
  # while the gateway runs: on a terminal it keeps its title (its URLs) and table below its own lines.
  if [ "$interrupted" = 0 ] && kill -0 "$gateway_pid" 2>/dev/null; then
    for i in 1 2 3 4; do
      curl -s -o /dev/null "http://127.0.0.1:$port/" || true
    done
  fi
  # `wait` returns early when a trapped signal arrives: wait again until the gateway has really exited.
  local rc=0
  while :; do
    interrupted=0
    set +e
    wait "$gateway_pid"
    rc=$?
    set -e
    [ "$interrupted" = 1 ] || break
  done
  return "$rc"
}

run_demo() {
  deps run
  build dist
  local app_port=${APP_PORT:-8080} port=${PORT:-8012}
  pids=()
  trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null' EXIT INT TERM
  build/dist/demo/sluice-demo-app --port "$app_port" &
  pids+=($!)
  env CONTAINER_CONCURRENCY="${CONTAINER_CONCURRENCY:-0}" QUEUE_SERVING_PORT="$port" QUEUE_SERVING_TLS_PORT=8112 \
    USER_PORT="$app_port" REVISION_TIMEOUT_SECONDS=300 SERVING_NAMESPACE=default \
    SERVING_CONFIGURATION=demo SERVING_REVISION=demo-00001 SERVING_POD=demo-00001-local \
    SERVING_POD_IP=127.0.0.1 SERVING_LOGGING_CONFIG= SERVING_LOGGING_LEVEL=info \
    SERVING_ENABLE_REQUEST_LOG=true SERVING_REQUEST_METRICS_BACKEND=prometheus \
    SLUICE_DRAIN_QUIET_PERIOD_MS="${SLUICE_DRAIN_QUIET_PERIOD_MS:-1000}" \
    build/dist/app/sluice sidecar "$@" &
  pids+=($!)
  echo
  echo "sluice sidecar is proxying http://127.0.0.1:$port/ to the demo app on 127.0.0.1:$app_port"
  echo "  try: curl -i http://127.0.0.1:$port/    curl http://127.0.0.1:$port/headers    (Ctrl-C stops)"
  echo "  autoscaler stats: curl http://127.0.0.1:9090/metrics    request metrics: curl http://127.0.0.1:9091/metrics"
  echo
  wait -n "${pids[@]}"
}

# The one-file `sluice` at dist/sluice: copy it to any x86-64 Linux with glibc 2.36 or later (Debian 12's).
make_dist() {
  deps build
  build dist
  mkdir -p dist
  install -m 0755 -s build/dist/app/sluice dist/sluice
  local needed
  needed=$(ldd dist/sluice | grep -v -E 'linux-vdso|/(libc|libm|ld-linux[^/]*)\.so' || true)
  [ -z "$needed" ] || { echo "sluice: dist/sluice needs more than glibc:" >&2; echo "$needed" >&2; exit 1; }
  echo "dist/sluice: $(stat -c %s dist/sluice) bytes, needs only glibc ($(dist/sluice --version))"
}

# Each phase of `test` says when it starts, so a slow CI run shows where its minutes went.
phase() { printf '\n== %s (at %d min %02d s)\n' "$1" $((SECONDS / 60)) $((SECONDS % 60)); }

run_tests() {
  phase "dependencies"
  deps
  phase "release build"
  build release
  phase "release suite"
  ctest --preset release
  phase "asan build"
  build asan
  phase "asan suite"
  ctest --preset asan
  # TSan, the whole suite again (SLUICE_TEST_TSAN=0 leaves it out).
  if [ "${SLUICE_TEST_TSAN:-1}" != 0 ]; then
    phase "tsan build"
    build tsan
    phase "tsan suite"
    ctest --preset tsan
  fi
  # Fuzzing (SLUICE_TEST_FUZZ=1): the libFuzzer targets, built with clang, each replay their corpus and then
  # fuzz for SLUICE_FUZZ_SECONDS per target (default 30; see docs/building-and-testing.md). Not in CI's default run: the release and ASan suites
  # above already replay every corpus (fuzz_replay.*), and the clang build and the fuzzing would take CI
  # past its 45 minutes.
  if [ "${SLUICE_TEST_FUZZ:-0}" = 1 ]; then
    phase "fuzz build"
    cmake --preset fuzz -DSLUICE_FUZZ_SECONDS="${SLUICE_FUZZ_SECONDS:-30}" >/dev/null
    build fuzz
    phase "fuzz targets"
    ctest --preset fuzz
  fi
  # Last, as it is the slowest: build the container image and run it (SLUICE_IMAGE_TEST=0 leaves it out).
  if [ "${SLUICE_IMAGE_TEST:-1}" != 0 ]; then
    phase "image"
    deps image
    ctest --preset image
  fi
  phase "done"
}

case "${1:-}" in
  run) shift; run_gateway_demo "$@" ;;
  run-sidecar) shift; run_demo "$@" ;;
  test) run_tests ;;
  build) deps; build "${2:-release}" ;;
  bench) shift; deps; build release; exec bench/run.sh "$@" ;;
  image-test) deps; deps image; cmake --preset release >/dev/null; cmake --build --preset release --target sluice_demo_app sluice sluice_node_stub_bin; ctest --preset image ;;
  deps) deps "${2:-}" ;;
  dist) make_dist ;;
  *) echo "usage: scripts/dev.sh run|run-sidecar|test|build [preset]|bench|dist|deps [build|run|scaler|image]|image-test" >&2; exit 2 ;;
esac
