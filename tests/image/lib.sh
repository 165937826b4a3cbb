# Shared by the image-stage scripts (run.sh, gateway_podman.sh): sourced, after the script sets `note_prefix`.

skip() { echo "SKIP: $*"; exit 77; }
# need NAME...: goes on where this machine has each (tests/support/capability.sh probes it); otherwise exits
# 77 (skipped), or 1 where SLUICE_REQUIRED_CAPABILITIES declares the machine has it; says why either way.
need() { "$(dirname "${BASH_SOURCE[0]}")/../support/capability.sh" "$@" || exit $?; }
fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "$note_prefix: $*"; }

# In a chroot, such as a fresh Debian 12 machine (container), '/' is not a mount point, and podman cannot unpack
# image layers there (containers/storage remounts '/' private: EINVAL). Re-runs the calling script
# (`reroot_if_chroot SCRIPT ARGS...`) inside a private mount namespace whose root is a bind mount of '/',
# which is a mount point, and exits with its status; returns when '/' already is one.
reroot_if_chroot() {
  mountpoint -q / && return 0
  [ -z "${SLUICE_IMAGE_TEST_REROOTED:-}" ] || fail "'/' is still not a mount point after re-rooting"
  command -v mount >/dev/null || skip "in a chroot ('/' is not a mount point) and mount(8) is missing (apt-get install mount)"
  local newroot rc=0
  newroot=$(mktemp -d /var/tmp/sluice-image-root.XXXXXX)
  note "'/' is not a mount point (a chroot): re-running under a bind-mounted root at $newroot"
  unshare -m --propagation unchanged bash -c \
    'mount --rbind / "$1" && exec chroot "$1" env SLUICE_IMAGE_TEST_REROOTED=1 bash "${@:2}"' \
    _ "$newroot" "$@" || rc=$?
  rmdir "$newroot" 2>/dev/null || true
  exit "$rc"
}

# Polls `cmd` every 100 ms until it succeeds or `seconds` pass (cmd is re-run each time: pass a function,
# not a $(...) that would be expanded once).
eventually() {
  local seconds=$1; shift
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.1
  done
}
