#!/usr/bin/python3
"""Writes an OCI image layout holding one small web server image, for the gateway's `image:` tests.

    make_oci_layout.py DIR TAG BUSYBOX

Two layers, as a build would make them: the first (gzip) lays down a static busybox, a passwd naming
user `app` (1000:1000), /www with index.html and gone.html, and a CGI script that prints its environment;
the second (an uncompressed tar) deletes gone.html with a whiteout and replaces index.html. The config
says: entrypoint `/bin/sh -c`, cmd `busybox httpd -f -p $PORT -h /www` under a SIGTERM trap (it is PID 1),
env GREETING, working dir
/www, user app. Only Python's standard library is used; the digests are sha256 as the spec requires.
"""
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile

CGI = b"""#!/bin/sh
printf 'Content-Type: text/plain\\r\\n\\r\\n'
echo "greeting=$GREETING uid=$(/bin/busybox id -u) gid=$(/bin/busybox id -g) service=$K_SERVICE pwd=$PWD"
"""


def tar_bytes(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.mode = mode
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind == "symlink":
                info.type = tarfile.SYMTYPE
                info.linkname = data
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def main():
    out, tag, busybox = sys.argv[1], sys.argv[2], sys.argv[3]
    blobs = os.path.join(out, "blobs", "sha256")
    os.makedirs(blobs, exist_ok=True)

    def put(data):
        digest = hashlib.sha256(data).hexdigest()
        with open(os.path.join(blobs, digest), "wb") as f:
            f.write(data)
        return "sha256:" + digest, len(data)

    with open(busybox, "rb") as f:
        bb = f.read()
    layer1 = tar_bytes([
        ("bin", "dir", None, 0o755),
        ("bin/busybox", "file", bb, 0o755),
        ("bin/sh", "symlink", "busybox", 0o777),
        ("etc", "dir", None, 0o755),
        ("etc/passwd", "file", b"root:x:0:0:root:/:/bin/sh\napp:x:1000:1000:app:/www:/bin/sh\n", 0o644),
        ("etc/group", "file", b"root:x:0:\napp:x:1000:\n", 0o644),
        ("www", "dir", None, 0o755),
        ("www/index.html", "file", b"from layer one\n", 0o644),
        ("www/gone.html", "file", b"deleted by the next layer\n", 0o644),
        ("www/cgi-bin", "dir", None, 0o755),
        ("www/cgi-bin/env", "file", CGI, 0o755),
    ])
    layer2 = tar_bytes([
        ("www/.wh.gone.html", "file", b"", 0o644),
        ("www/index.html", "file", b"from the image\n", 0o644),
    ])
    gz1 = gzip.compress(layer1, mtime=0)
    d1, s1 = put(gz1)
    d2, s2 = put(layer2)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Entrypoint": ["/bin/sh", "-c"],
            # PID 1 in its container: without a handler of its own SIGTERM would be ignored until the grace ends.
            "Cmd": ["trap 'kill $pid; exit 0' TERM; busybox httpd -f -p $PORT -h /www & pid=$!; wait $pid"],
            "Env": ["PATH=/bin", "GREETING=hello-from-image"],
            "WorkingDir": "/www",
            "User": "app",
        },
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer1).hexdigest(),
                                                   "sha256:" + hashlib.sha256(layer2).hexdigest()]},
    }
    cd, cs = put(json.dumps(config).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
        "layers": [
            {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d1, "size": s1},
            {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": d2, "size": s2},
        ],
    }
    md, ms = put(json.dumps(manifest).encode())
    index = {
        "schemaVersion": 2,
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": ms,
                       "annotations": {"org.opencontainers.image.ref.name": tag}}],
    }
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f)
    with open(os.path.join(out, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    print(cd)


if __name__ == "__main__":
    main()
