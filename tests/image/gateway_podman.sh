#!/usr/bin/env bash
# `image:` from the local podman store: a busybox web server imported into podman (`podman import`, with
# its entrypoint, cmd, env and user), named by a Knative Service that `sluice gateway` runs. Checks that a
# request reaches it, that the image's env and user apply, that it was saved and unpacked once, and that
# the next gateway takes it from the cache without asking podman to save it again.
#   tests/image/gateway_podman.sh SLUICE_BINARY       (root; ctest: ctest --preset image)
# Exit 77 (ctest: skipped) with the reason when this machine cannot run it. All traffic stays on 127.0.0.1.
set -euo pipefail
sluice=${1:?usage: tests/image/gateway_podman.sh SLUICE_BINARY}
self=$(cd "$(dirname "$0")" && pwd)/gateway_podman.sh

note_prefix=gateway-podman
. "$(dirname "$self")/lib.sh"

need root  # podman and runc run rootful here
reroot_if_chroot "$self" "$@"
need podman  # podman running a busybox container under runc

tag=localhost/sluice-gateway-test:$$
work=$(mktemp -d /tmp/sluice-gateway-podman.XXXXXX)
gateway_pid=
cleanup() {
  if [ -n "$gateway_pid" ]; then kill -TERM "$gateway_pid" 2>/dev/null && wait "$gateway_pid" 2>/dev/null; fi
  podman rmi -f "$tag" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT


# The image: busybox, a page, a CGI that prints what the config set; PID 1 traps SIGTERM.
root=$work/rootfs
mkdir -p "$root/bin" "$root/etc" "$root/www/cgi-bin"
cp /bin/busybox "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
printf 'root:x:0:0::/:/bin/sh\nweb:x:4242:4343::/www:/bin/sh\n' > "$root/etc/passwd"
echo "from podman's store" > "$root/www/index.html"
printf '#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n"\necho "greeting=$GREETING uid=$(busybox id -u) gid=$(busybox id -g)"\n' \
  > "$root/www/cgi-bin/env"
chmod 755 "$root/www/cgi-bin/env"
tar -C "$root" -cf "$work/rootfs.tar" .
podman import \
  --change 'ENTRYPOINT ["/bin/sh", "-c"]' \
  --change "CMD [\"trap 'kill \$pid; exit 0' TERM; busybox httpd -f -p \$PORT -h /www & pid=\$!; wait \$pid\"]" \
  --change 'ENV PATH=/bin' \
  --change 'ENV GREETING=from-podman' \
  --change 'USER web' \
  "$work/rootfs.tar" "$tag" >/dev/null 2>"$work/import.err" || fail "podman import: $(cat "$work/import.err")"
note "imported $tag ($(podman image inspect --format '{{.Id}}' "$tag" | cut -c1-12))"

cat > "$work/service.yaml" <<EOF
apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: web
spec:
  template:
    spec:
      containers:
        - image: $tag
EOF

# Starts a gateway in the background; sets gateway_pid and port.
start_gateway() {
  local log=$1
  SLUICE_IMAGE_CACHE=$work/cache "$sluice" gateway --config "$work/service.yaml" --listen 127.0.0.1:0 \
    --admin 127.0.0.1:0 --status none > "$log" 2>&1 &
  gateway_pid=$!
  listening() { grep -q '"listener":"gateway"' "$log"; }
  eventually 10 listening || fail "the gateway did not start: $(tail -5 "$log")"
  port=$(grep '"listener":"gateway"' "$log" | sed 's/.*"port":\([0-9]*\).*/\1/')
}
stop_gateway() {
  kill -TERM "$gateway_pid"
  wait "$gateway_pid" || fail "the gateway exited $? after SIGTERM"
  gateway_pid=
}

start_gateway "$work/first.log"
body=$(curl -s -m 30 "http://127.0.0.1:$port/") || fail "no answer: $(tail -5 "$work/first.log")"
[ "$body" = "from podman's store" ] || fail "body '$body': $(grep -i image "$work/first.log" | tail -3)"
env=$(curl -s -m 10 "http://127.0.0.1:$port/cgi-bin/env")
[ "$env" = "greeting=from-podman uid=4242 gid=4343" ] || fail "the image's env and user: '$env'"
[ "$(grep -c '"event":"image.unpacked"' "$work/first.log")" = 1 ] || fail "not unpacked exactly once: $(grep image "$work/first.log")"
stop_gateway
note "first gateway: served from the image, env and user applied, unpacked once"

# The next gateway: from the cache (podman is asked for the id only).
start_gateway "$work/second.log"
body=$(curl -s -m 30 "http://127.0.0.1:$port/") || fail "no answer from the second gateway"
[ "$body" = "from podman's store" ] || fail "second gateway body '$body'"
! grep -q '"event":"image.unpacked"' "$work/second.log" || fail "the second gateway unpacked the image again"
stop_gateway
note "passed: the second gateway used the cache"
