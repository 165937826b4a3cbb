#!/usr/bin/env bash
# Builds docker/Dockerfile on a machine without a Docker engine or an image registry (Debian 12, root):
# the builder's base image is made locally (an mmdebstrap bookworm root filesystem from this machine's apt
# sources, imported into podman under the tag the Dockerfile's FROM names), then `podman build` runs the
# Dockerfile unchanged with runc.
#   docker/build-image.sh [TAG]        default TAG: localhost/sluice:dev
#   docker/build-image.sh --base       only makes the base image (when missing)
#   SLUICE_REFRESH_BASE=1 docker/build-image.sh    rebuilds the base image first
#   SLUICE_IMAGE_TARGET=scaler docker/build-image.sh localhost/sluice-autoscaler:dev    the KEDA scaler image
#   docker/build-image.sh --binary PATH [TAG]   the sidecar image around a sluice binary (and the
#       sluice-node-stub beside it) already built on this Debian 12 host (the image test's default: nothing
#       compiled twice): docker/rootfs.sh runs here, then the
#       Dockerfile's own final stage, with its root filesystem taken from here instead of the build stage
# Prints the image's tag and uncompressed size last. Installs podman, runc and mmdebstrap when missing.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
base_only=0 binary=
[ "${1:-}" = --base ] && { base_only=1; shift; }
if [ "${1:-}" = --binary ]; then
  binary=$(realpath "${2:?--binary: which binary?}")
  shift 2
fi
tag=${1:-localhost/sluice:dev}
cache=${SLUICE_IMAGE_CACHE:-/var/tmp/sluice-image}

# Facts of this kind of machine: crun refuses to start containers (cgroup hybrid mode) and runc works;
# containers fail to start without explicit ulimits; apt inside a build step needs the host's network.
podman_flags=(--runtime runc)
container_flags=(--network=host --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)

say() { echo "build-image: $*" >&2; }

missing=()
for tool in podman runc mmdebstrap; do  # each command is its package's name
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { say "needs ${missing[*]} (apt-get install ${missing[*]}), or root to install them"; exit 2; }
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ -n "$binary" ]; then
  work=$(mktemp -d /tmp/sluice-image-build.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  bash "$repo/docker/rootfs.sh" "$binary" "$work/rootfs" >/dev/null
  # The image's second binary, the per-node stub, built beside sluice (cmake target sluice_node_stub_bin).
  stub=$(dirname "$binary")/sluice-node-stub
  [ -x "$stub" ] || { say "no $stub beside $binary: build the sluice_node_stub_bin target too"; exit 2; }
  bash "$repo/docker/rootfs.sh" "$stub" "$work/rootfs" >/dev/null
  # The Dockerfile's final stage, from its FROM to the end, with the build stage's /rootfs replaced by this one.
  awk 'toupper($1) == "FROM" && $NF == "sidecar" { on = 1 } on' "$repo/docker/Dockerfile" |
    sed 's|^COPY --from=build /rootfs/ /$|COPY rootfs/ /|' >"$work/Containerfile"
  grep -qx 'COPY rootfs/ /' "$work/Containerfile" ||
    { say "docker/Dockerfile's sidecar stage no longer copies /rootfs/ from the build stage"; exit 1; }
  say "building $tag around $binary (docker/Dockerfile's sidecar stage)"
  podman "${podman_flags[@]}" build --pull=never "${container_flags[@]}" -f "$work/Containerfile" -t "$tag" "$work" >&2
  size=$(podman image inspect --format '{{.Size}}' "$tag")
  say "$tag: $size bytes uncompressed"
  echo "$tag $size"
  exit 0
fi

# The builder stage's base: whatever tag the Dockerfile's first FROM names (debian:bookworm).
base=$(awk 'toupper($1) == "FROM" { print $2; exit }' "$repo/docker/Dockerfile")
if [ "${SLUICE_REFRESH_BASE:-0}" = 1 ] || ! podman image exists "$base"; then
  mkdir -p "$cache"
  # Debian's own sources of this machine (files naming a debian.org host; a machine may also list other
  # vendors' repositories, which have no place in the image). SLUICE_APT_SOURCES names files instead.
  if [ -n "${SLUICE_APT_SOURCES:-}" ]; then
    read -r -a sources <<<"$SLUICE_APT_SOURCES"
  else
    sources=()
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] && grep -qE '^[^#]*[./]debian\.org' "$f" && sources+=("$f")
    done
  fi
  [ ${#sources[@]} -gt 0 ] || { say "no Debian apt sources found: set SLUICE_APT_SOURCES to a sources file"; exit 2; }
  say "making $base with mmdebstrap from ${sources[*]}"
  # The apt variant (Essential packages + apt) is a subset of the official debian:bookworm image, so a
  # Dockerfile that builds on it builds there too. Release files are accepted past their Valid-Until so
  # that a mirror snapshot older than the clock still works; that option stays inside the local base.
  mmdebstrap --variant=apt --mode=root --format=tar \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    bookworm "$cache/base.tar" "${sources[@]}" >"$cache/mmdebstrap.log" 2>&1 ||
    { tail -20 "$cache/mmdebstrap.log" >&2; exit 1; }
  podman import --change 'CMD ["bash"]' "$cache/base.tar" "$base" >/dev/null
  rm -f "$cache/base.tar"
fi
[ "$base_only" = 1 ] && { echo "$base"; exit 0; }

say "building $tag from docker/Dockerfile"
target_flags=()
[ -n "${SLUICE_IMAGE_TARGET:-}" ] && target_flags=(--target "$SLUICE_IMAGE_TARGET")
podman "${podman_flags[@]}" build --pull=never "${container_flags[@]}" "${target_flags[@]}" \
  -f "$repo/docker/Dockerfile" -t "$tag" "$repo" >&2
size=$(podman image inspect --format '{{.Size}}' "$tag")
say "$tag: $size bytes uncompressed"
echo "$tag $size"
