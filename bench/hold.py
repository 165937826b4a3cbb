"""Holds N idle client connections to a proxy, for bench/connections.sh (via peers.sh --connections).

Each connection sends one GET and reads its whole answer, then stays open and idle. Prints "ready N" once
every connection has had its answer (or "failed K: reason" for those that did not), then waits for a line
on stdin, closes them all and prints "closed". Protocols: h1 (HTTP/1.1 keep-alive), h2c (HTTP/2 by prior
knowledge), tls-h1 and tls-h2 (TLS, ALPN http/1.1 or h2; the certificate is not verified), ws (HTTP/1.1
Upgrade: websocket, held after the 101). Run with Debian's /usr/bin/python3; needs nothing else.

    hold.py HOST PORT PROTOCOL COUNT [PATH]
"""
import asyncio
import base64
import os
import ssl
import struct
import sys

CONCURRENT_OPENS = 200  # handshakes in flight at once: a listen backlog's worth, not a SYN flood


def h2_headers_block(host, path, tls):
    """An HPACK block without Huffman coding: :method GET, :scheme http(s), :path, :authority."""
    def literal(index, value):  # literal without indexing, indexed name
        v = value.encode()
        assert len(v) < 127
        return bytes([index]) + bytes([len(v)]) + v  # 0000xxxx with index < 15
    return bytes([0x82, 0x87 if tls else 0x86]) + literal(4, path) + literal(1, host)


def frame(kind, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


async def read_h1_answer(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    length = None
    chunked = False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
        if name.strip().lower() == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    status = int(head.split(b" ", 2)[1])
    if status == 101:
        return status
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif length:
        await reader.readexactly(length)
    return status


def skip_table_size_updates(block):
    """A header block without the dynamic table size updates it starts with (RFC 7541 §6.3: 001xxxxx, an
    integer with a 5-bit prefix), as a server that indexes no field sends first."""
    at = 0
    while at < len(block) and block[at] & 0xE0 == 0x20:
        at += 1
        if block[at - 1] & 0x1F == 0x1F:  # the integer goes on while the high bit is set
            while at < len(block) and block[at] & 0x80:
                at += 1
            at += 1
    return block[at:]


async def read_h2_answer(reader, writer):
    """Frames until stream 1 ends; SETTINGS are acknowledged. Returns the status class seen (2 for 2xx)."""
    status = 0
    while True:
        header = await reader.readexactly(9)
        length = int.from_bytes(header[:3], "big")
        kind, flags, stream = header[3], header[4], int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
        payload = await reader.readexactly(length)
        if kind == 4 and not flags & 1:  # SETTINGS
            writer.write(frame(4, 1, 0, b""))
        if kind == 1 and stream == 1 and payload:  # HEADERS: the first field is :status, 0x88 = 200
            status = 200 if skip_table_size_updates(payload)[:1] == b"\x88" else payload[0]
        if kind == 7:  # GOAWAY
            raise ConnectionError("GOAWAY")
        if stream == 1 and kind in (0, 1) and flags & 1:  # END_STREAM
            return status


async def open_one(host, port, protocol, path, tls_context, gate):
    async with gate:
        ssl_arg = tls_context if protocol.startswith("tls") else None
        reader, writer = await asyncio.open_connection(host, port, ssl=ssl_arg, limit=1 << 16)
        if protocol in ("h2c", "tls-h2"):
            writer.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"") +
                         frame(1, 0x05, 1, h2_headers_block(f"{host}:{port}", path, ssl_arg is not None)))
            await writer.drain()
            status = await read_h2_answer(reader, writer)
        elif protocol == "ws":
            key = base64.b64encode(os.urandom(16)).decode()
            writer.write((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                          f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
            await writer.drain()
            status = await read_h1_answer(reader)
        else:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            await writer.drain()
            status = await read_h1_answer(reader)
        if status not in (200, 101):
            writer.close()
            raise ConnectionError(f"status {status}")
        return reader, writer


async def main():
    host, port, protocol, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    path = sys.argv[5] if len(sys.argv) > 5 else "/"
    tls_context = None
    if protocol.startswith("tls"):
        tls_context = ssl.create_default_context()
        tls_context.check_hostname = False
        tls_context.verify_mode = ssl.CERT_NONE
        tls_context.set_alpn_protocols(["h2"] if protocol == "tls-h2" else ["http/1.1"])
    gate = asyncio.Semaphore(CONCURRENT_OPENS)
    results = await asyncio.gather(*(open_one(host, port, protocol, path, tls_context, gate) for _ in range(count)),
                                   return_exceptions=True)
    held = [r for r in results if not isinstance(r, BaseException)]
    failed = [r for r in results if isinstance(r, BaseException)]
    print(f"ready {len(held)}", flush=True)
    if failed:
        print(f"failed {len(failed)}: {failed[0]!r}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    for _, writer in held:
        writer.transport.abort()
    print("closed", flush=True)


asyncio.run(main())
