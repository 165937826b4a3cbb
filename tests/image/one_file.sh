#!/usr/bin/env bash
# The one-file install: `scripts/dev.sh dist` makes dist/sluice, which needs nothing but glibc; copied
# into a Debian 12 root with nothing installed (mmdebstrap's apt variant: the Essential packages and apt,
# as docker/build-image.sh makes it), it serves the README's one-liner there, the demo app (built by the
# same preset) as the command. The root runs under podman + runc with the host's network; the requests
# come from the host, on 127.0.0.1.
#   tests/image/one_file.sh        (root; ctest: ctest --preset image)
# Exit 77 (ctest: skipped) with the reason when this machine cannot run it.
set -euo pipefail
self=$(cd "$(dirname "$0")" && pwd)/one_file.sh
repo=$(cd "$(dirname "$self")/../.." && pwd)

note_prefix=one-file
. "$(dirname "$self")/lib.sh"

need root  # podman and runc run rootful here
reroot_if_chroot "$self" "$@"
need podman curl

cd "$repo"
note "building dist/sluice (scripts/dev.sh dist)"
bash scripts/dev.sh dist >/tmp/sluice-one-file-dist.log 2>&1 || { tail -20 /tmp/sluice-one-file-dist.log; fail "scripts/dev.sh dist failed"; }
tail -1 /tmp/sluice-one-file-dist.log
base=$(bash docker/build-image.sh --base)  # Debian 12, Essential packages and apt only
container=sluice-one-file-$$
cleanup() { podman --runtime runc rm -f "$container" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# Nothing sluice builds with is in that root: not one of the build's libraries.
for lib in libssl.so.3 libnghttp2.so.14 libyaml-cpp.so.0.7 libboost_json.so.1.81.0 libprotobuf-lite.so.32; do
  if podman --runtime runc run --rm --network=host "$base" sh -c "ls /usr/lib/x86_64-linux-gnu/$lib" >/dev/null 2>&1; then
    fail "$base has $lib: not a root without sluice's dependencies"
  fi
done

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
  shuf -i 20000-29999 -n 1)
admin=$((port + 1))
podman --runtime runc run -d --name "$container" --network=host --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
  -v "$repo/dist/sluice:/usr/local/bin/sluice:ro" -v "$repo/build/dist/demo/sluice-demo-app:/opt/demo:ro" \
  "$base" sluice gateway --listen "127.0.0.1:$port" --admin "127.0.0.1:$admin" --status json -- /opt/demo >/dev/null
serves() { [ "$(curl -s --max-time 2 "http://127.0.0.1:$port/" 2>/dev/null)" = "Hello from sluice-demo-app" ]; }
eventually 30 serves || fail "the one-liner did not serve in the fresh root: $(podman --runtime runc logs "$container" 2>&1 | tail -20)"
note "served http://127.0.0.1:$port/ from $base"
# It cold-started and scaled as usual: the gateway's own status says so.
status=$(curl -s "http://127.0.0.1:$admin/.sluice/status")
case "$status" in *'"validated":true'*) ;; *) fail "status: $status" ;; esac
podman --runtime runc stop -t 20 "$container" >/dev/null
code=$(podman --runtime runc inspect --format '{{.State.ExitCode}}' "$container")
[ "$code" = 0 ] || fail "the gateway exited $code after SIGTERM: $(podman --runtime runc logs "$container" 2>&1 | tail -20)"
echo "PASS: one-file sluice served the one-liner in a Debian 12 root with nothing installed"
