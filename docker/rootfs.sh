#!/usr/bin/env bash
# Makes ROOT (default /rootfs), the whole content of a FROM-scratch image: the stripped BINARY, the shared
# libraries ldd names (and the loader), their Debian copyright files, an /etc/passwd naming uid 65532, and
# an empty sticky /tmp. In a Dockerfile's build stage:  bash docker/rootfs.sh /build/app/sluice
# On a Debian 12 host (docker/build-image.sh --binary):  bash docker/rootfs.sh BINARY DIR
# Run again with another binary and the same ROOT, it adds that binary and its libraries.
set -eu
binary=$1
root=${2:-/rootfs}
name=$(basename "$binary")
mkdir -p "$root/etc" "$root/tmp" "$root/usr/share/doc"
chmod 1777 "$root/tmp"
strip --strip-unneeded -o "$root/$name" "$binary"
for lib in $(ldd "$root/$name" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
  cp -L --parents "$lib" "$root/"
  pkg=$( (dpkg -S "$lib" 2>/dev/null || dpkg -S "/usr$lib") | head -n1 | cut -d: -f1)
  mkdir -p "$root/usr/share/doc/$pkg"
  cp "/usr/share/doc/$pkg/copyright" "$root/usr/share/doc/$pkg/"
done
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$root/etc/group"
ls -lR "$root"
