#!/usr/bin/env bash
# Whether this machine has what a test needs, found by probing the machine itself (can a network
# namespace be made? does runc run a trivial bundle?), never by asking the code under test.
#
#   tests/support/capability.sh NAME...   exit 0: the machine has every NAME.
#                                          exit 77: NAME is missing (ctest: skipped); says why on stdout.
#                                          exit 1: NAME is missing and SLUICE_REQUIRED_CAPABILITIES lists it:
#                                                  the machine was declared to have it, so the test fails.
#   tests/support/capability.sh --names   every NAME this script probes
#
# SLUICE_REQUIRED_CAPABILITIES: names separated by spaces or commas; .ci/run declares CI's. C++ tests reach
# this script through SLUICE_NEED (tests/support/capability.h), Python and shell tests run it directly.
set -uo pipefail

NAMES="root busybox netns runc crun cgroup2 cgroup2-freeze cgroup2-cpu-max cgroup1-freezer cgroup1-cfs-quota podman
chromium python-grpc python-otlp python-hpack openssl curl nghttp wrk localhost kubectl h2spec tmux"

work=$(mktemp -d "${TMPDIR:-/tmp}/sluice-capability-XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT

# The cgroup v2 hierarchy: /sys/fs/cgroup itself (unified), or /sys/fs/cgroup/unified beside v1 (hybrid).
cgroup2_root() {
  local d
  for d in /sys/fs/cgroup /sys/fs/cgroup/unified; do
    [ "$(stat -fc %T "$d" 2>/dev/null)" = cgroup2fs ] && { echo "$d"; return 0; }
  done
  return 1
}

# A cgroup of our own under the one this process is in (v2), removed again; prints its path.
cgroup2_child_ok() {  # FILE: a file the child must have
  local root own child
  root=$(cgroup2_root) || { echo "no cgroup v2 hierarchy mounted"; return 1; }
  own=$(sed -n 's/^0:://p' /proc/self/cgroup)
  child="$root${own%/}/sluice-capability-$$"
  mkdir "$child" 2>/dev/null || { echo "cannot create a cgroup under $root${own}"; return 1; }
  local ok=0
  [ -e "$child/$1" ] || ok=1
  rmdir "$child" 2>/dev/null
  [ "$ok" = 0 ] || echo "a new cgroup under $root has no $1"
  return "$ok"
}

# A bundle whose process is busybox's `true`, run by the OCI runtime $1.
oci_runs() {
  local tool=$1
  command -v "$tool" >/dev/null || { echo "$tool is not installed"; return 1; }
  probe root >/dev/null || { echo "$tool runs containers as root here"; return 1; }
  probe busybox >/dev/null || { echo "/bin/busybox is missing (apt-get install busybox-static)"; return 1; }
  local b="$work/$tool-bundle"
  mkdir -p "$b/rootfs/bin" && cp /bin/busybox "$b/rootfs/bin/busybox"
  (cd "$b" && "$tool" spec >/dev/null 2>&1) || { echo "$tool spec failed"; return 1; }
  sed -i 's/"terminal": true/"terminal": false/; s/^\([[:space:]]*\)"sh"$/\1"\/bin\/busybox", "true"/' "$b/config.json"
  local out
  out=$(timeout 30 "$tool" --root "$work/$tool-state" run --bundle "$b" "sluice-capability-$$" 2>&1 </dev/null) ||
    { echo "$tool cannot run a trivial bundle: ${out:0:300}"; return 1; }
}

h2spec_binary() {
  if [ -n "${H2SPEC:-}" ] && [ -x "$H2SPEC" ]; then echo "$H2SPEC"; return 0; fi
  [ -x /var/tmp/h2spec ] && { echo /var/tmp/h2spec; return 0; }
  command -v h2spec
}

# probe NAME: exit 0 when present; otherwise prints why on stdout.
probe() {
  case "$1" in
    root) [ "$(id -u)" = 0 ] || { echo "not root"; return 1; } ;;
    busybox) [ -x /bin/busybox ] || { echo "/bin/busybox is missing (apt-get install busybox-static)"; return 1; } ;;
    netns)
      probe root >/dev/null || { echo "network namespaces and veth need root here"; return 1; }
      local out
      out=$(unshare --net ip link add sluice-cap0 type veth peer name sluice-cap1 2>&1) ||
        { echo "cannot make a network namespace with a veth pair: ${out:0:300}"; return 1; } ;;
    runc | crun) oci_runs "$1" ;;
    cgroup2) cgroup2_child_ok cgroup.procs ;;
    cgroup2-freeze) cgroup2_child_ok cgroup.freeze ;;
    cgroup2-cpu-max)
      local root
      root=$(cgroup2_root) || { echo "no cgroup v2 hierarchy mounted"; return 1; }
      grep -qw cpu "$root/cgroup.controllers" 2>/dev/null ||
        { echo "the cpu controller is not in cgroup v2 here ($root): it is bound to v1"; return 1; } ;;
    cgroup1-freezer)
      local own child
      [ "$(stat -fc %T /sys/fs/cgroup/freezer 2>/dev/null)" = cgroupfs ] ||
        { echo "no cgroup v1 freezer hierarchy at /sys/fs/cgroup/freezer"; return 1; }
      own=$(sed -n 's/^[0-9]*:freezer://p' /proc/self/cgroup)
      child="/sys/fs/cgroup/freezer${own%/}/sluice-capability-$$"
      mkdir "$child" 2>/dev/null || { echo "cannot create a cgroup under /sys/fs/cgroup/freezer$own"; return 1; }
      [ -e "$child/freezer.state" ] || { rmdir "$child"; echo "a new v1 freezer cgroup has no freezer.state"; return 1; }
      rmdir "$child" ;;
    cgroup1-cfs-quota)
      [ -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ] || [ -e /sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us ] ||
        { echo "no cgroup v1 cpu hierarchy with cpu.cfs_quota_us"; return 1; } ;;
    podman)  # as tests/image/ runs its containers; in a chroot ('/' not a mount point) only after reroot_if_chroot
      command -v podman >/dev/null || { echo "podman is not installed (scripts/dev.sh deps image)"; return 1; }
      oci_runs runc >/dev/null || { echo "podman runs containers with runc here, and runc cannot"; return 1; }
          mkdir -p "$work/podman-root/bin" && cp /bin/busybox "$work/podman-root/bin/busybox"
      local image="localhost/sluice-capability-probe:$$" out
      out=$( (tar -C "$work/podman-root" -c . | podman import -q - "$image" >/dev/null &&
        timeout 60 podman --runtime runc run --rm --network=host --ulimit nofile=1024:1024 \
          --ulimit nproc=1024:1024 "$image" /bin/busybox true) 2>&1 </dev/null)
      local rc=$?
      podman rmi -f "$image" >/dev/null 2>&1
      [ "$rc" = 0 ] || { echo "podman cannot run a container here: ${out:0:300}"; return 1; } ;;
    chromium)
      local bin out
      bin=$(command -v chromium || command -v chromium-browser) || { echo "chromium is not installed"; return 1; }
          out=$(timeout 60 "$bin" --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
        --disable-background-networking --disable-component-update --user-data-dir="$work/chromium" \
        --dump-dom 'data:text/html,<p>sluice-capability</p>' 2>/dev/null)
      [[ "$out" == *sluice-capability* ]] || { echo "headless chromium does not render a page here"; return 1; } ;;
    python-grpc)
      /usr/bin/python3 -c 'import grpc, grpc_tools.protoc' 2>/dev/null ||
        { echo "/usr/bin/python3 has no grpc and grpc_tools (python3-grpcio python3-grpc-tools)"; return 1; } ;;
    python-otlp)  # tests/support/otlp_receiver.py: protoc-made classes, served over gRPC
      /usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null && command -v protoc >/dev/null ||
        { echo "no python3 grpc and protobuf modules or no protoc (python3-grpcio python3-protobuf protobuf-compiler)"; return 1; } ;;
    python-hpack)  # the conformance suite's HTTP/2 app and client (tests/conformance/upstreams.py, clients.py)
      /usr/bin/python3 -c 'import hpack' 2>/dev/null || { echo "/usr/bin/python3 has no hpack (python3-hpack)"; return 1; } ;;
    curl) command -v curl >/dev/null || { echo "curl is not installed"; return 1; } ;;
    nghttp) command -v nghttp >/dev/null && command -v h2load >/dev/null ||
      { echo "nghttp and h2load are not installed (nghttp2-client)"; return 1; } ;;
    wrk) command -v wrk >/dev/null || { echo "wrk is not installed"; return 1; } ;;
    openssl) command -v openssl >/dev/null || { echo "the openssl tool is not installed"; return 1; } ;;
    localhost) getent hosts localhost >/dev/null || { echo "'localhost' does not resolve (no /etc/hosts entry)"; return 1; } ;;
    kubectl) command -v kubectl >/dev/null || { echo "kubectl is not installed (kubernetes-client)"; return 1; } ;;
    tmux)  # a terminal that a test can read back as a developer sees it (capture-pane)
      command -v tmux >/dev/null || { echo "tmux is not installed"; return 1; }
      tmux -f /dev/null -L "sluice-capability-$$" new-session -d -x 80 -y 24 true >/dev/null 2>&1 ||
        { echo "tmux cannot start a session here"; return 1; }
      tmux -L "sluice-capability-$$" kill-server >/dev/null 2>&1 || true ;;
    h2spec) h2spec_binary >/dev/null || { echo "h2spec is not installed (\$H2SPEC, /var/tmp/h2spec or PATH)"; return 1; } ;;
    *) echo "no such capability: $1 (tests/support/capability.sh --names)"; return 2 ;;
  esac
}

required() {
  local r
  local list=${SLUICE_REQUIRED_CAPABILITIES:-}
  for r in ${list//,/ }; do [ "$r" = "$1" ] && return 0; done
  return 1
}

[ $# -gt 0 ] || { echo "usage: $0 NAME... | --names" >&2; exit 2; }
if [ "$1" = --names ]; then echo $NAMES; exit 0; fi
for name in "$@"; do
  why=$(probe "$name")
  rc=$?
  [ "$rc" = 0 ] && continue
  [ "$rc" = 2 ] && { echo "$why"; exit 2; }
  if required "$name"; then
    echo "required capability '$name' is missing: $why (SLUICE_REQUIRED_CAPABILITIES lists it)"
    exit 1
  fi
  echo "this machine lacks '$name': $why"
  exit 77
done
exit 0
