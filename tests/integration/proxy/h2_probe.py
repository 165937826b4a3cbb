#!/usr/bin/python3
"""Malformed HTTP/2 messages with hand-built frames (RFC 9113 §8), for h2_rfc9113_test.cpp.

  h2_probe.py request CASE PORT   sends one malformed request on stream 1 of a fresh h2c connection and
                                  prints {"case", "rst", "status", "goaway", "closed"} (-1: none came)
  h2_probe.py app MODE            an h2c "app" on an ephemeral port (prints "listening PORT") that answers
                                  every request with the response MODE names, malformed or not; MODE
                                  refuse_first (refuse_twice) answers the first stream (the first two) with
                                  RST_STREAM REFUSED_STREAM and every later one as "good", printing
                                  "refused|answered connection N stream S" for each; every mode prints
                                  "accepted connection N" and "closed connection N" (by sluice)
"""
import json
import socket
import struct
import sys
import threading
import time

from h2_attack import (CONTINUATION, DATA, END_HEADERS, END_STREAM, HEADERS, PREFACE, RST_STREAM, SETTINGS, ACK,
                       Conn, frame, hpack_str, literal, request_block)

REFUSED_STREAM = 7


def req(*extra, path="/", method="GET"):
    return request_block(path, method) + b"".join(literal(n, v) for n, v in extra)


def headers(block, end_stream=True):
    return frame(HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), 1, block)


# Each case: the frames of stream 1. All are malformed (RFC 9113 §8.1.1, §8.2, §8.3) except "good" ones.
CASES = {
    "good": headers(req()),
    "te_trailers": headers(req(("te", "trailers"))),
    "uppercase_name": headers(req(("X-Upper", "1"))),
    "connection_field": headers(req(("connection", "keep-alive"))),
    "keep_alive_field": headers(req(("keep-alive", "timeout=5"))),
    "transfer_encoding": headers(req(("transfer-encoding", "chunked"))),
    "upgrade_field": headers(req(("upgrade", "websocket"))),
    "te_gzip": headers(req(("te", "gzip"))),
    "space_in_name": headers(req(("x y", "1"))),
    "colon_in_name": headers(req(("x:y", "1"))),
    "nul_in_value": headers(req(("x-a", "a\x00b"))),
    "cr_in_value": headers(req(("x-a", "a\rb"))),
    "lf_in_value": headers(req(("x-a", "a\nb"))),
    "leading_space_in_value": headers(req(("x-a", " a"))),
    "pseudo_after_regular": headers(req(("x-a", "1")) + b"\x04" + hpack_str("/again")),
    "unknown_pseudo": headers(req((":foo", "bar"))),
    "duplicate_path": headers(req() + b"\x04" + hpack_str("/twice")),
    "missing_path": headers(b"\x82\x86\x01" + hpack_str("127.0.0.1")),
    "empty_path": headers(b"\x82\x86\x04\x00\x01" + hpack_str("127.0.0.1")),
    "status_in_request": headers(req((":status", "200"))),
    "length_without_body": headers(req(("content-length", "5"), method="POST")),
    "length_shorter_than_body": headers(req(("content-length", "3"), path="/echo", method="POST"), False)
    + frame(DATA, END_STREAM, 1, b"0123456789"),
    "length_longer_than_body": headers(req(("content-length", "30"), path="/echo", method="POST"), False)
    + frame(DATA, END_STREAM, 1, b"0123456789"),
    "bad_length": headers(req(("content-length", "1x"), method="POST")),
    "pseudo_in_trailers": headers(req(path="/echo", method="POST"), False) + frame(DATA, 0, 1, b"abc")
    + frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\x04" + hpack_str("/late")),
    "host_differs": headers(req(("host", "evil.example"))),
    "host_twice": headers(req(("host", "127.0.0.1"), ("host", "evil.example"))),
    "huge_header_list": headers(req(*[(f"x-big-{i}", "v" * 2000) for i in range(6)])),  # 12 KiB
}


def probe(case, port):
    conn = Conn(port)
    conn.send(CASES[case])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not conn.rst and not conn.statuses and not conn.ended():
        conn.poll(0.05)
    conn.poll(0.1)  # a GOAWAY right behind
    rst = next(iter(conn.rst), -1)
    print(json.dumps({"case": case, "rst": rst, "status": conn.statuses[0] if conn.statuses else -1,
                      "goaway": conn.goaway if conn.goaway is not None else -1, "closed": conn.closed}),
          flush=True)


# Responses of the fake app: (header block, DATA payload or None). ":status 200" is the static entry 8.
RESPONSES = {
    "good": (b"\x88" + literal("content-length", "5"), b"hello"),
    "uppercase_name": (b"\x88" + literal("X-Upper", "1"), b"hello"),
    "connection_field": (b"\x88" + literal("connection", "close"), b"hello"),
    "missing_status": (literal("content-type", "text/plain"), b"hello"),
    "bad_status": (b"\x08" + hpack_str("2x0"), b"hello"),
    "request_pseudo": (b"\x88" + b"\x04" + hpack_str("/"), b"hello"),
    "nul_in_value": (b"\x88" + literal("x-a", "a\x00b"), b"hello"),
    "length_mismatch": (b"\x88" + literal("content-length", "50"), b"hello"),
}
REFUSALS = {"refuse_first": 1, "refuse_twice": 2}
for refusing in REFUSALS:
    RESPONSES[refusing] = RESPONSES["good"]


def serve_app(mode):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    print(f"listening {listener.getsockname()[1]}", flush=True)
    block, body = RESPONSES[mode]
    state = {"connections": 0, "to_refuse": REFUSALS.get(mode, 0)}
    lock = threading.Lock()

    def refuse(stream, connection):
        """Whether to refuse this stream (REFUSED_STREAM: the app did not process it, RFC 9113 §8.7)."""
        if mode not in REFUSALS:
            return False
        with lock:
            refused = state["to_refuse"] > 0
            state["to_refuse"] -= refused
        print(f"{'refused' if refused else 'answered'} connection {connection} stream {stream}", flush=True)
        return refused

    def serve(sock, connection):
        buf = b""
        sock.sendall(frame(SETTINGS, 0, 0))
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    print(f"closed connection {connection}", flush=True)
                    return
                buf += chunk
                if buf.startswith(PREFACE):
                    buf = buf[len(PREFACE):]
                while len(buf) >= 9:
                    length = struct.unpack(">I", b"\x00" + buf[:3])[0]
                    if len(buf) < 9 + length:
                        break
                    ftype, flags = buf[3], buf[4]
                    stream = struct.unpack(">I", buf[5:9])[0] & 0x7FFFFFFF
                    buf = buf[9 + length:]
                    if ftype == SETTINGS and not flags & ACK:
                        sock.sendall(frame(SETTINGS, ACK, 0))
                    elif ftype in (HEADERS, CONTINUATION) and flags & END_HEADERS:
                        if refuse(stream, connection):
                            sock.sendall(frame(RST_STREAM, 0, stream, struct.pack(">I", REFUSED_STREAM)))
                            continue
                        out = frame(HEADERS, END_HEADERS | (0 if body else END_STREAM), stream, block)
                        if body:
                            out += frame(DATA, END_STREAM, stream, body)
                        sock.sendall(out)
        except OSError:
            return
        finally:
            sock.close()

    while True:
        sock, _ = listener.accept()
        state["connections"] += 1
        print(f"accepted connection {state['connections']}", flush=True)
        threading.Thread(target=serve, args=(sock, state["connections"]), daemon=True).start()


if __name__ == "__main__":
    if sys.argv[1] == "request":
        probe(sys.argv[2], int(sys.argv[3]))
    else:
        serve_app(sys.argv[2])
