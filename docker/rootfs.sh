#!/usr/bin/env bash
# Makes /rootfs, the whole content of a FROM-scratch image: the stripped BINARY, the shared libraries ldd
# names (and the loader), their Debian copyright files, an /etc/passwd naming uid 65532, and an empty
# sticky /tmp. Run inside a Dockerfile's build stage:  bash docker/rootfs.sh /build/app/sluice
set -eu
binary=$1
name=$(basename "$binary")
mkdir -p /rootfs/etc /rootfs/tmp /rootfs/usr/share/doc
chmod 1777 /rootfs/tmp
strip --strip-unneeded -o "/rootfs/$name" "$binary"
for lib in $(ldd "/rootfs/$name" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
  cp -L --parents "$lib" /rootfs/
  pkg=$( (dpkg -S "$lib" 2>/dev/null || dpkg -S "/usr$lib") | head -n1 | cut -d: -f1)
  mkdir -p "/rootfs/usr/share/doc/$pkg"
  cp "/usr/share/doc/$pkg/copyright" "/rootfs/usr/share/doc/$pkg/"
done
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /rootfs/etc/passwd
printf 'root:x:0:\nnonroot:x:65532:\n' > /rootfs/etc/group
ls -lR /rootfs
