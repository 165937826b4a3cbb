"""Small clients the conformance suite speaks with (standard library only): HTTP/1.1 requests, a WebSocket
echo, Knative's Stat protobuf decoded by hand (7 fields, proto3 wire format)."""
import base64
import http.client
import os
import socket
import struct


def split(addr):
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


def request(addr, path, headers=None, method="GET", timeout=30.0, body=None):
    """One request on a fresh connection: (status, headers dict lower-cased, body bytes)."""
    host, port = split(addr)
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        c.putrequest(method, path, skip_host=headers is not None and any(k.lower() == "host" for k in headers),
                     skip_accept_encoding=True)
        for k, v in (headers or {}).items():
            c.putheader(k, v)
        if body is not None:
            c.putheader("Content-Length", str(len(body)))
        c.endheaders(body)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def echoed_headers(body):
    """The demo app's /headers body as a dict (lower-cased names; repeated names joined with ', ')."""
    out = {}
    for line in body.decode().splitlines()[1:]:
        name, _, value = line.partition(": ")
        out[name.lower()] = out[name.lower()] + ", " + value if name.lower() in out else value
    return out


class WebSocket:
    """A client WebSocket (RFC 6455) over a plain socket: handshake, masked text frames, unmasked reads."""

    def __init__(self, addr, path="/ws", timeout=10.0):
        host, port = split(addr)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed during the handshake")
            head += chunk
        self.status = int(head.split(b" ", 2)[1])
        self.buffer = head.split(b"\r\n\r\n", 1)[1]

    def send_text(self, text):
        payload = text.encode()
        mask = os.urandom(4)
        header = bytes([0x81])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", n)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _take(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def read_text(self):
        b0, b1 = self._take(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._take(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._take(8))[0]
        return self._take(n).decode()

    def close(self):
        self.sock.close()


def decode_stat(data):
    """Knative's autoscaler Stat: pod_name=1 (string), 2..6 doubles, timestamp=7 (int64)."""
    names = {1: "pod_name", 2: "average_concurrent_requests", 3: "average_proxied_concurrent_requests",
             4: "request_count", 5: "proxied_request_count", 6: "process_uptime", 7: "timestamp"}
    out, i = {}, 0

    def varint():
        nonlocal i
        shift = value = 0
        while True:
            b = data[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    while i < len(data):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            out[names.get(field, field)] = varint()
        elif wire == 1:
            out[names.get(field, field)] = struct.unpack("<d", data[i:i + 8])[0]
            i += 8
        elif wire == 2:
            n = varint()
            out[names.get(field, field)] = data[i:i + n].decode()
            i += n
        else:
            raise ValueError(f"unexpected wire type {wire} for field {field}")
    return out
