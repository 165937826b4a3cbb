#!/usr/bin/env bash
# bench/runtime/run.sh: thaw latency of a paused app instance, per throttle mechanism (sluice-thaw-bench
# against sluice-demo-app on 127.0.0.1). Needs root for the cgroup mechanisms; the others are reported skipped.
# Output on stdout and in bench/out/thaw.txt. See bench/README.md, "Thaw latency".
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
      echo "usage: bench/runtime/run.sh [--build-dir DIR] [--build] [sluice-thaw-bench options]"
      echo "  --build-dir DIR   CMake build dir holding the binaries (default build/release)"
      echo "  --build           build sluice_thaw_bench and sluice_demo_app there first"
      echo "  other options go to sluice-thaw-bench: --cycles N, --mechanisms LIST, --path P"
      exit 0 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done

if [[ $BUILD == 1 ]]; then
  cmake --build "$BUILD_DIR" --target sluice_thaw_bench sluice_demo_app
fi
BENCH=$BUILD_DIR/runtime/sluice-thaw-bench
APP=$BUILD_DIR/demo/sluice-demo-app
for f in "$BENCH" "$APP"; do
  [[ -x $f ]] || { echo "run.sh: $f missing (pass --build, or --build-dir)" >&2; exit 1; }
done

mkdir -p "$ROOT/bench/out"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs" | tee "$ROOT/bench/out/thaw.txt"
"$BENCH" --app "$APP" "${ARGS[@]}" | tee -a "$ROOT/bench/out/thaw.txt"
