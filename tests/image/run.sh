#!/usr/bin/env bash
# The sidecar image as Knative runs it: built from docker/Dockerfile (docker/build-image.sh), started
# read-only as uid 65532 with every capability dropped, under podman + runc on the host network, with
# queue-proxy's environment, in front of the demo app. Checks the image's shape and size, a proxied
# request (plain, and over TLS with a mounted certificate pair), the K-Network-Probe answers, the :9090
# Stat protobuf under load, and that SIGTERM drains (a streaming response completes, health checks fail)
# and the container exits 0.
#   tests/image/run.sh DEMO_APP_BINARY [SLUICE_BINARY]    (root; ctest: ctest --preset image)
# With SLUICE_BINARY (what ctest passes: the release build's), the image is docker/Dockerfile's sidecar stage
# around that binary (docker/build-image.sh --binary), so nothing is compiled twice; without it, or with
# SLUICE_IMAGE_FROM_DOCKERFILE=1, the whole Dockerfile builds, its build stage compiling sluice.
#   SLUICE_IMAGE=TAG tests/image/run.sh ...    tests an image already built instead of building one
# Exit 77 (ctest: skipped) with the reason when this machine cannot run containers.
# Every port is picked by the kernel and read back from the logs; all traffic stays on 127.0.0.1.
set -euo pipefail
demo=${1:?usage: tests/image/run.sh DEMO_APP_BINARY [SLUICE_BINARY]}
prebuilt=${2:-}
[ "${SLUICE_IMAGE_FROM_DOCKERFILE:-0}" = 1 ] && prebuilt=
repo=$(cd "$(dirname "$0")/../.." && pwd)
self=$repo/tests/image/run.sh

note_prefix=image-test
. "$repo/tests/image/lib.sh"

need root  # podman runs rootful here
reroot_if_chroot "$self" "$@"
need podman  # podman running a container under runc, as below

tag=${SLUICE_IMAGE:-localhost/sluice:image-test}
run_flags=(--runtime runc)
ulimits=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
name=sluice-image-test-$$
work=$(mktemp -d /tmp/sluice-image-test.XXXXXX)
demo_pid=
cleanup() {
  # One name per call: podman 4.3's `rm -f` removes nothing when any of several names is missing.
  for c in "$name" "$name-files"; do podman rm -f -t 0 "$c" >/dev/null 2>&1 || true; done
  [ -n "$demo_pid" ] && kill "$demo_pid" 2>/dev/null && wait "$demo_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT


# --- the image --------------------------------------------------------------------------------------
started=$SECONDS
if [ -z "${SLUICE_IMAGE:-}" ]; then
  if [ -n "$prebuilt" ]; then
    "$repo/docker/build-image.sh" --binary "$prebuilt" "$tag" >/dev/null
  else
    "$repo/docker/build-image.sh" "$tag" >/dev/null
  fi
fi
build_seconds=$((SECONDS - started))
size=$(podman image inspect --format '{{.Size}}' "$tag")
note "$tag: $size bytes uncompressed ($((size / 1000000)) MB), built in ${build_seconds}s"
[ "$size" -le 25000000 ] || fail "image is $size bytes, over the 25 MB goal"

cfg() { podman image inspect --format "$1" "$tag"; }
[ "$(cfg '{{.Config.User}}')" = 65532:65532 ] || fail "USER is '$(cfg '{{.Config.User}}')', want 65532:65532"
[ "$(cfg '{{json .Config.Entrypoint}}')" = '["/sluice"]' ] || fail "ENTRYPOINT is $(cfg '{{json .Config.Entrypoint}}')"
[ "$(cfg '{{json .Config.Cmd}}')" = '["sidecar"]' ] || fail "CMD is $(cfg '{{json .Config.Cmd}}')"
for p in 8012 8022 8112 9090 9091; do
  cfg '{{range $k, $v := .Config.ExposedPorts}}{{$k}} {{end}}' | grep -qw "$p/tcp" || fail "port $p is not exposed"
done

# The final image holds the binaries, shared libraries, their copyright files, passwd/group and /tmp only.
podman create --name "$name-files" "$tag" >/dev/null
podman export "$name-files" | tar -t > "$work/files"
podman rm "$name-files" >/dev/null
unexpected=$(grep -vE '^(sluice|sluice-node-stub|etc/|etc/(passwd|group)|tmp/|lib[^/]*/([^/]+/)?|lib[^/]*/([^/]+/)?[^/]+\.so[.0-9]*|usr/|usr/share/|usr/share/doc/|usr/share/doc/[^/]+/|usr/share/doc/[^/]+/copyright)$' "$work/files" || true)
[ -z "$unexpected" ] || fail "unexpected files in the image: $unexpected"
grep -qx sluice "$work/files" || fail "no /sluice in the image"
grep -qx sluice-node-stub "$work/files" || fail "no /sluice-node-stub in the image"
# Per-node mode's stub (deploy/node), as a pod's queue-proxy container would run it: it starts and knows its socket.
stub_help=$(podman "${run_flags[@]}" run --rm "${ulimits[@]}" --read-only --user 65532 --cap-drop ALL \
  --entrypoint /sluice-node-stub "$tag" --help 2>&1) || fail "/sluice-node-stub --help failed: $stub_help"
grep -q SLUICE_NODE_SOCKET <<<"$stub_help" || fail "/sluice-node-stub --help does not name SLUICE_NODE_SOCKET: $stub_help"
if podman "${run_flags[@]}" run --rm "${ulimits[@]}" --entrypoint /bin/sh "$tag" -c true >/dev/null 2>&1; then
  fail "the image has a shell"
fi

# --- the backend --------------------------------------------------------------------------------------
"$demo" --host 127.0.0.1 --port 0 > "$work/demo.log" 2>&1 &
demo_pid=$!
demo_port() { sed -n 's/.*"listening".*"port":\([0-9]*\).*/\1/p' "$work/demo.log" | head -n1; }
has_demo_port() { [ -n "$(demo_port)" ]; }
eventually 10 has_demo_port || fail "demo app did not start: $(cat "$work/demo.log")"
user_port=$(demo_port)

# --- the container, as Knative starts queue-proxy ------------------------------------------------------
# With system-internal TLS, Knative mounts a certificate pair at /var/lib/knative/certs: a self-signed one.
mkdir -p "$work/certs"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=hello.default.svc \
  -keyout "$work/certs/tls.key" -out "$work/certs/tls.crt" 2>/dev/null || fail "openssl could not make a certificate"
chmod 755 "$work/certs" && chmod 644 "$work/certs/tls.key" "$work/certs/tls.crt"
pod=hello-00001-deployment-7d4b9c-abcde
podman "${run_flags[@]}" run -d --name "$name" --network host "${ulimits[@]}" \
  --read-only --read-only-tmpfs=false --user 65532 --cap-drop ALL --security-opt no-new-privileges \
  -v "$work/certs:/var/lib/knative/certs:ro" \
  -e SERVING_NAMESPACE=default -e SERVING_SERVICE=hello -e SERVING_CONFIGURATION=hello \
  -e SERVING_REVISION=hello-00001 -e SERVING_POD="$pod" -e SERVING_POD_IP=127.0.0.1 \
  -e CONTAINER_CONCURRENCY=0 -e REVISION_TIMEOUT_SECONDS=300 \
  -e QUEUE_SERVING_PORT=0 -e QUEUE_SERVING_TLS_PORT=0 -e USER_PORT="$user_port" \
  -e SERVING_LOGGING_CONFIG= -e SERVING_LOGGING_LEVEL=info \
  -e SERVING_READINESS_PROBE="{\"tcpSocket\":{\"port\":$user_port,\"host\":\"127.0.0.1\"},\"successThreshold\":1}" \
  -e SLUICE_LISTEN_ADDRESS=127.0.0.1 -e SLUICE_ADMIN_PORT=0 -e SLUICE_METRICS_PORT=0 \
  -e SLUICE_USER_METRICS_PORT=0 -e SLUICE_DRAIN_QUIET_PERIOD_MS=3000 -e SLUICE_WORKERS=2 \
  "$tag" >/dev/null

listener_port() {
  podman logs "$name" 2>&1 | sed -n "s/.*\"listener\":\"$1\".*\"port\":\([0-9]*\).*/\1/p" | head -n1
}
has_proxy_port() { [ -n "$(listener_port proxy)" ]; }
eventually 20 has_proxy_port || fail "sluice did not start: $(podman logs "$name" 2>&1)"
port=$(listener_port proxy)
metrics_port=$(listener_port metrics)
[ -n "$metrics_port" ] || fail "no metrics listener logged: $(podman logs "$name" 2>&1)"
tls_port=$(listener_port tls)
[ -n "$tls_port" ] || fail "no TLS listener logged: $(podman logs "$name" 2>&1)"
note "sluice (uid 65532, read-only) on 127.0.0.1:$port, TLS :$tls_port, stats :$metrics_port, app :$user_port"

get() { curl -sS --max-time 10 "$@"; }

# A proxied request: the demo app echoes the request head it received, with queue-proxy's X-Forwarded-For.
body=$(get -H 'Host: hello.default.example.com' "http://127.0.0.1:$port/headers") || fail "proxied request failed"
grep -q '^GET /headers HTTP/1.1' <<<"$body" || fail "the app did not see the request: $body"
grep -qi '^host: hello.default.example.com' <<<"$body" || fail "Host not kept: $body"
grep -qi '^x-forwarded-for: ' <<<"$body" || fail "no X-Forwarded-For added on the way: $body"
note "proxied request: ok"

# The same over TLS (the image's OpenSSL with the mounted pair), HTTP/2 by ALPN when curl speaks it.
body=$(get --cacert "$work/certs/tls.crt" --resolve "hello.default.svc:$tls_port:127.0.0.1" \
  "https://hello.default.svc:$tls_port/headers") || fail "proxied request over TLS failed"
grep -q '^GET /headers HTTP/1.1' <<<"$body" || fail "the app did not see the request over TLS: $body"
grep -qi '^x-forwarded-for: ' <<<"$body" || fail "no X-Forwarded-For added over TLS: $body"
note "proxied request over TLS: ok"

# K-Network-Probe: probe (the ingress's probe) echoes K-Network-Hash; the activator's and kubelet's
# K-Network-Probe: queue gets 200 "queue" once the app's readiness probe passes.
get -D "$work/probe.head" -o "$work/probe.body" -H 'K-Network-Probe: probe' -H 'K-Network-Hash: x' \
  "http://127.0.0.1:$port/" || fail "network probe failed"
grep -q '^HTTP/1.1 200' "$work/probe.head" || fail "network probe: $(cat "$work/probe.head")"
grep -qix 'K-Network-Hash: x' <(tr -d '\r' < "$work/probe.head") || fail "no K-Network-Hash echo: $(cat "$work/probe.head")"
queue_probe() { get -A kube-probe/1.30 -H 'K-Network-Probe: queue' -w ' %{http_code}' "http://127.0.0.1:$port/" 2>/dev/null; }
app_ready() { [ "$(queue_probe)" = "queue 200" ]; }
eventually 10 app_ready || fail "readiness probe: '$(queue_probe)', want 'queue 200'"
note "K-Network-Probe: ok"

# The autoscaler's scrape: a request held in flight shows as concurrency in the next 1 s Stat.
get -o "$work/held.body" -w '%{http_code}' "http://127.0.0.1:$port/delay/3000" > "$work/held.code" &
held=$!
stat_concurrency() {
  local ct
  ct=$(get -H 'Accept: application/protobuf' -o "$work/stat.bin" -w '%{content_type}' \
    "http://127.0.0.1:$metrics_port/metrics") || return 1
  [ "$ct" = application/protobuf ] || { echo "content-type '$ct'" > "$work/stat.err"; return 1; }
  [ -s "$work/stat.bin" ] || { echo "empty body" > "$work/stat.err"; return 1; }
  protoc --proto_path="$repo/metrics" --decode=sluice.metrics.wire.Stat stat.proto \
    < "$work/stat.bin" > "$work/stat.txt" 2> "$work/stat.err" || return 1
  grep -qx "pod_name: \"$pod\"" "$work/stat.txt" || return 1
  awk '$1 == "average_concurrent_requests:" && $2 > 0 { found = 1 } END { exit !found }' "$work/stat.txt"
}
eventually 5 stat_concurrency ||
  fail "no Stat with pod_name $pod and concurrency > 0: $(cat "$work/stat.txt" "$work/stat.err" 2>/dev/null)"
wait "$held"
[ "$(cat "$work/held.code")" = 200 ] || fail "held request: $(cat "$work/held.code")"
note "Stat protobuf: ok ($(tr '\n' ' ' < "$work/stat.txt"))"

# SIGTERM: health checks fail at once, a response streaming at that moment completes, the container exits 0.
get -D "$work/stream.head" -o "$work/stream.body" "http://127.0.0.1:$port/slow-body/4/500" &
streaming=$!
eventually 5 grep -qs '^HTTP/1.1 200' "$work/stream.head" || fail "the streamed response did not start"
terminated_ms=$(date +%s%3N)
podman kill --signal TERM "$name" >/dev/null
health() { get -A kube-probe/1.30 -H 'K-Network-Probe: queue' -w '%{http_code}' "http://127.0.0.1:$port/" 2>/dev/null; }
health_fails() { [ "$(health)" = $'shutting down\n503' ]; }
eventually 2 health_fails || fail "health check while draining: '$(health)', want 503 'shutting down'"
wait "$streaming" || fail "the response streaming at SIGTERM was cut: $(cat "$work/stream.body")"
[ "$(cat "$work/stream.body")" = "$(printf 'chunk %s\n' 0 1 2 3)" ] ||
  fail "the response streaming at SIGTERM is incomplete: $(cat "$work/stream.body")"
code=$(timeout 30 podman wait "$name") || fail "the container did not exit within 30 s of SIGTERM"
[ "$code" = 0 ] || fail "exit code $code after SIGTERM: $(podman logs "$name" 2>&1 | tail -5)"
exited_ms=$(( $(date +%s%3N) - terminated_ms ))
podman logs "$name" 2>&1 | grep -q '"message":"stopped"' || fail "no 'stopped' line: $(podman logs "$name" 2>&1 | tail -5)"
# The listeners stay open for the quiet period after SIGTERM (3 s here), so the exit comes no sooner.
[ "$exited_ms" -ge 2900 ] || fail "exited ${exited_ms} ms after SIGTERM, before the 3 s quiet period ended"
note "SIGTERM: drained and exited 0 after ${exited_ms} ms (quiet period 3 s)"
note "passed in $((SECONDS - started))s (image build ${build_seconds}s)"
