#!/usr/bin/env bash
# The conformance suite against `sluice sidecar` (what ctest runs): run_against_sluice.sh SLUICE_BIN DEMO_APP_BIN
# [sluice-node: each case's pod served by `sluice node` through its `sluice node-stub` instead].
# Every case in private network namespaces, on queue-proxy's real ports, with the environment Knative injects.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# In a chroot, such as a fresh Debian 12 machine (container), '/' is not a mount point and `unshare --mount --propagation
# private` fails: re-run under a bind-mounted root, as the image stage does (tests/image/lib.sh).
note_prefix=conformance
. "$here/../image/lib.sh"
reroot_if_chroot "$here/run_against_sluice.sh" "$@"
exec "$here/run.sh" "$1" "${3:-sluice}" "$2"
