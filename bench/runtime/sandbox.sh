#!/usr/bin/env bash
# bench/runtime/sandbox.sh: what a PodSandbox (network namespace + veth + pod cgroup) adds to a cold start,
# against the same app on the host network in the same run (sluice-sandbox-bench with sluice-demo-app).
# Needs root. Output on stdout and in bench/out/sandbox.txt. See bench/README.md, "Sandbox cold start".
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=$ROOT/build/release
BUILD=0
ARGS=()

while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --build) BUILD=1; shift ;;
    -h|--help)
      echo "usage: bench/runtime/sandbox.sh [--build-dir DIR] [--build] [--rounds N]"
      echo "  --build-dir DIR   CMake build dir holding the binaries (default build/release)"
      echo "  --build           build sluice_sandbox_bench and sluice_demo_app there first"
      echo "  --rounds N        cold starts per variant (default 30)"
      exit 0 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done

if [[ $BUILD == 1 ]]; then
  cmake --build "$BUILD_DIR" --target sluice_sandbox_bench sluice_demo_app
fi
BENCH=$BUILD_DIR/runtime/sluice-sandbox-bench
APP=$BUILD_DIR/demo/sluice-demo-app
for f in "$BENCH" "$APP"; do
  [[ -x $f ]] || { echo "sandbox.sh: $f missing (pass --build, or --build-dir)" >&2; exit 1; }
done

mkdir -p "$ROOT/bench/out"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs" | tee "$ROOT/bench/out/sandbox.txt"
"$BENCH" --app "$APP" "${ARGS[@]}" | tee -a "$ROOT/bench/out/sandbox.txt"
