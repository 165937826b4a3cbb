#!/usr/bin/python3
"""Writes the seed corpora of the HTTP/2 fuzz targets: tests/fuzz/corpus/h2_server_fuzz/ (what a client
sends to sluice's server codec) and tests/fuzz/corpus/h2_client_fuzz/ (what an h2c app sends back to
sluice's client). Each seed is one steering byte (see the target's header comment) and HTTP/2 frames,
built here from RFC 9113 §4-6 and RFC 7541 (HPACK without Huffman coding). The output is committed;
run this again after changing it: /usr/bin/python3 tests/fuzz/make_h2_corpus.py
crash-* files in those folders are inputs the fuzzer found; this script leaves them alone."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIO = 0x1, 0x1, 0x4, 0x8, 0x20


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def settings(*pairs, ack=False):
    return frame(SETTINGS, ACK if ack else 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def integer(value, prefix_bits, first=0):
    """RFC 7541 §5.1 integer with an N-bit prefix; `first` carries the pattern bits above the prefix."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def string(s):
    s = s.encode() if isinstance(s, str) else s
    return integer(len(s), 7) + s


def literal(name, value, indexing=False):
    """A literal field with a literal name: without indexing (0x00) or with incremental indexing (0x40)."""
    return bytes([0x40 if indexing else 0x00]) + string(name) + string(value)


def indexed(index):
    return integer(index, 7, 0x80)


def block(fields):
    return b"".join(literal(n, v) for n, v in fields)


def request(method="GET", path="/", authority="app.example", extra=()):
    return block([(":method", method), (":scheme", "http"), (":path", path), (":authority", authority), *extra])


def response(status="200", extra=()):
    return block([(":status", status), *extra])


def padded(payload, pad):
    return bytes([pad]) + payload + b"\0" * pad


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def server_seeds():
    whole = 0x1F  # preface prepended, the rest in one piece
    get = frame(HEADERS, END_STREAM | END_HEADERS, 1, request())
    hello = settings((3, 100), (4, 65535))
    seeds = {
        "get": get,
        "get-byte-by-byte": get,  # steering byte below: 1-byte pieces
        "settings-ack": hello + settings(ack=True) + get,
        "post-length": frame(HEADERS, END_HEADERS, 1, request("POST", "/echo", extra=[("content-length", "5")]))
        + frame(DATA, END_STREAM, 1, b"hello"),
        "post-unknown-length": frame(HEADERS, END_HEADERS, 1, request("POST", "/echo"))
        + frame(DATA, 0, 1, b"hel") + frame(DATA, END_STREAM, 1, b"lo"),
        "post-trailers": frame(HEADERS, END_HEADERS, 1, request("POST", "/trailers", extra=[("te", "trailers")]))
        + frame(DATA, 0, 1, b"body")
        + frame(HEADERS, END_STREAM | END_HEADERS, 1, block([("x-checksum", "abc")])),
        "continuation": frame(HEADERS, END_STREAM, 1, request()[:10])
        + frame(CONTINUATION, 0, 1, request()[10:20]) + frame(CONTINUATION, END_HEADERS, 1, request()[20:]),
        "continuation-flood": frame(HEADERS, END_STREAM, 1, request()[:10])
        + b"".join(frame(CONTINUATION, 0, 1, literal("x-a", "b")) for _ in range(12)),
        "padded": frame(HEADERS, END_HEADERS | PADDED, 1, padded(request("POST", "/"), 7))
        + frame(DATA, END_STREAM | PADDED, 1, padded(b"data", 200)),
        "priority": frame(HEADERS, END_STREAM | END_HEADERS | PRIO, 1, struct.pack(">IB", 0x80000000, 15) + request())
        + frame(PRIORITY, 0, 3, struct.pack(">IB", 1, 200)),
        "rst-stream": frame(HEADERS, END_HEADERS, 1, request("POST", "/"))
        + frame(RST_STREAM, 0, 1, struct.pack(">I", 8)),
        "rapid-reset": b"".join(frame(HEADERS, END_STREAM | END_HEADERS, i, request())
                                + frame(RST_STREAM, 0, i, struct.pack(">I", 8)) for i in range(1, 80, 2)),
        "goaway": get + frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0) + b"bye"),
        "ping-window": frame(PING, 0, 0, b"12345678") + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 20))
        + frame(HEADERS, END_STREAM | END_HEADERS, 1, request("GET", "/big"))
        + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 100000)),
        "big-no-window": settings((4, 0)) + frame(HEADERS, END_STREAM | END_HEADERS, 1, request("GET", "/big")),
        "interim": frame(HEADERS, END_STREAM | END_HEADERS, 1, request("GET", "/interim")),
        "empty-and-fail": frame(HEADERS, END_STREAM | END_HEADERS, 1, request("GET", "/empty"))
        + frame(HEADERS, END_STREAM | END_HEADERS, 3, request("GET", "/fail")),
        "head": frame(HEADERS, END_STREAM | END_HEADERS, 1, request("HEAD", "/big")),
        "three-streams": b"".join(frame(HEADERS, END_STREAM | END_HEADERS, i, request("GET", p))
                                  for i, p in ((1, "/a"), (3, "/trailers"), (5, "/interim"))),
        "skipped-stream-id": frame(HEADERS, END_STREAM | END_HEADERS, 5, request())
        + frame(HEADERS, END_STREAM | END_HEADERS, 3, request()),
        "huge-hpack-index": frame(HEADERS, END_STREAM | END_HEADERS, 1, indexed(2) + indexed(0x7FFFFFF0)),
        "hpack-dynamic-table": frame(HEADERS, END_STREAM | END_HEADERS, 1,
                                     request() + literal("x-big", "v" * 3000, indexing=True))
        + frame(HEADERS, END_STREAM | END_HEADERS, 3, indexed(2) + indexed(6) + indexed(4) + indexed(1)
                + indexed(62) * 40),
        "hpack-table-size-update": frame(HEADERS, END_STREAM | END_HEADERS, 1, integer(0, 5, 0x20) + request()),
        "connection-specific": frame(HEADERS, END_STREAM | END_HEADERS, 1,
                                     request(extra=[("connection", "keep-alive")])),
        "uppercase-name": frame(HEADERS, END_STREAM | END_HEADERS, 1, request(extra=[("X-Upper", "1")])),
        "te-gzip": frame(HEADERS, END_STREAM | END_HEADERS, 1, request(extra=[("te", "gzip")])),
        "content-length-mismatch": frame(HEADERS, END_HEADERS, 1, request("POST", "/", extra=[("content-length", "10")]))
        + frame(DATA, END_STREAM, 1, b"short"),
        "missing-path": frame(HEADERS, END_STREAM | END_HEADERS, 1, block([(":method", "GET"), (":scheme", "http")])),
        "cookies": frame(HEADERS, END_STREAM | END_HEADERS, 1, request(extra=[("cookie", "a=1"), ("cookie", "b=2")])),
        "health-probe": frame(HEADERS, END_STREAM | END_HEADERS, 1,
                              request(extra=[("k-network-probe", "queue"), ("user-agent", "kube-probe/1.29")])),
        "extended-connect": settings((8, 1)) + frame(HEADERS, END_HEADERS, 1, block(
            [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"), (":path", "/ws"),
             (":authority", "app.example")])),
        "bad-authority": frame(HEADERS, END_STREAM | END_HEADERS, 1, request(authority="a b@c:99999")),
        "push-promise-from-client": frame(PUSH_PROMISE, END_HEADERS, 1, struct.pack(">I", 2) + request()),
        "data-on-idle-stream": frame(DATA, END_STREAM, 7, b"x"),
        "oversized-frame": struct.pack(">I", 20000)[1:] + bytes([HEADERS, END_HEADERS]) + struct.pack(">I", 1)
        + request(),
        "unknown-frame-type": frame(0x42, 0xFF, 1, b"whatever") + get,
        "window-overflow": get + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7FFFFFFF)),
        "settings-bad-values": settings((2, 2), (4, 0x80000000), (5, 1)) + get,
    }
    for name, body in seeds.items():
        steering = 0x10 if name == "get-byte-by-byte" else whole
        if body[3] != SETTINGS:
            body = settings() + body  # the client preface ends with a SETTINGS frame (RFC 9113 §3.4)
        write("h2_server_fuzz", name, bytes([steering]) + body)
    # Tight limits (steering bit 7): a header list, a field count, a body and a stream count beyond them.
    tight = 0x9F
    write("h2_server_fuzz", "tight-header-list", bytes([tight]) + settings()
          + frame(HEADERS, END_STREAM | END_HEADERS, 1, request(extra=[("x-big", "b" * 600)])))
    write("h2_server_fuzz", "tight-field-count", bytes([tight]) + settings()
          + frame(HEADERS, END_STREAM | END_HEADERS, 1, request(extra=[("x-f%d" % i, "1") for i in range(10)])))
    write("h2_server_fuzz", "tight-body", bytes([tight]) + settings()
          + frame(HEADERS, END_HEADERS, 1, request("POST", "/", extra=[("content-length", "100")]))
          + frame(DATA, END_STREAM, 1, b"b" * 100)
          + frame(HEADERS, END_HEADERS, 3, request("POST", "/")) + frame(DATA, END_STREAM, 3, b"c" * 100))
    write("h2_server_fuzz", "tight-streams", bytes([tight]) + settings()
          + b"".join(frame(HEADERS, END_HEADERS, i, request("POST", "/")) for i in range(1, 12, 2)))
    write("h2_server_fuzz", "tight-pings", bytes([tight]) + settings()
          + b"".join(frame(PING, 0, 0, b"%08d" % i) for i in range(12)))
    # Without the preface prepended: the input carries its own, or a bad one (RFC 9113 §3.4).
    write("h2_server_fuzz", "own-preface", bytes([0x0F]) + PREFACE + settings() + get)
    write("h2_server_fuzz", "bad-preface", bytes([0x0F]) + b"PRI * HTTP/1.1\r\n\r\nSM\r\n\r\n" + settings() + get)
    write("h2_server_fuzz", "http1-request", bytes([0x0F]) + b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
    # The sniffer's bytes handed over first, in 64-byte pieces.
    write("h2_server_fuzz", "initial-bytes", bytes([0x36]) + settings() + get + frame(PING, 0, 0, b"abcdefgh"))
    # An h2c upgrade: HTTP2-Settings of 6 bytes (MAX_CONCURRENT_STREAMS 50), then the client's preface and frames.
    write("h2_server_fuzz", "upgrade", bytes([0x5F, 6]) + struct.pack(">HI", 3, 50) + settings()
          + frame(HEADERS, END_STREAM | END_HEADERS, 3, request()))


def client_seeds():
    # Steering: bits 0-3 piece size, bits 4-5 requests (one, two, three, two with a HEAD), bit 6 POST first,
    # bit 7 response heads limited to 512 bytes.
    one, two, three = 0x0F, 0x1F, 0x2F
    hello = settings((3, 100), (4, 65535)) + settings(ack=True)
    ok = frame(HEADERS, END_HEADERS, 1, response(extra=[("content-length", "5")])) + frame(DATA, END_STREAM, 1, b"hello")
    seeds = {
        "ok": (one, hello + ok),
        "ok-byte-by-byte": (0x00, hello + ok),
        "no-settings": (one, ok),
        "trailers": (one, hello + frame(HEADERS, END_HEADERS, 1, response(extra=[("content-type", "application/grpc")]))
                     + frame(DATA, 0, 1, b"\0\0\0\0\x02hi")
                     + frame(HEADERS, END_STREAM | END_HEADERS, 1, block([("grpc-status", "0"), ("grpc-message", "")]))),
        "interim": (one, hello + frame(HEADERS, END_HEADERS, 1, response("100"))
                    + frame(HEADERS, END_HEADERS, 1, response("103", [("link", "</a>; rel=preload")])) + ok),
        "continuation": (one, hello + frame(HEADERS, END_STREAM, 1, response(extra=[("x-long", "y" * 100)])[:30])
                         + frame(CONTINUATION, 0, 1, response(extra=[("x-long", "y" * 100)])[30:60])
                         + frame(CONTINUATION, END_HEADERS, 1, response(extra=[("x-long", "y" * 100)])[60:])),
        "padded": (one, hello + frame(HEADERS, END_HEADERS | PADDED, 1, padded(response(), 20))
                   + frame(DATA, PADDED, 1, padded(b"abc", 255)) + frame(DATA, END_STREAM | PADDED, 1, padded(b"", 0))),
        "priority": (one, hello + frame(HEADERS, END_HEADERS | END_STREAM | PRIO, 1,
                                        struct.pack(">IB", 0, 10) + response("204"))),
        "refused": (two, hello + frame(RST_STREAM, 0, 1, struct.pack(">I", 7)) + frame(RST_STREAM, 0, 3, struct.pack(">I", 7))),
        "reset-after-head": (one, hello + frame(HEADERS, END_HEADERS, 1, response()) + frame(DATA, 0, 1, b"part")
                             + frame(RST_STREAM, 0, 1, struct.pack(">I", 2))),
        "goaway": (three, hello + frame(GOAWAY, 0, 0, struct.pack(">II", 1, 0)) + ok),
        "goaway-error": (two, hello + frame(GOAWAY, 0, 0, struct.pack(">II", 0, 11) + b"calm down")),
        "ping-window": (one, hello + frame(PING, 0, 0, b"01234567") + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1000))
                        + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 1000)) + ok),
        "huge-hpack-index": (one, hello + frame(HEADERS, END_HEADERS | END_STREAM, 1, indexed(8) + indexed(0x7FFFFFF0))),
        "hpack-dynamic-table": (two, hello + frame(HEADERS, END_HEADERS | END_STREAM, 1,
                                                   response(extra=[]) + literal("x-cached", "z" * 2000, indexing=True))
                                + frame(HEADERS, END_HEADERS | END_STREAM, 3, indexed(8) + indexed(62) * 50)),
        "not-http2": (one, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        "three-interleaved": (three, hello + frame(HEADERS, END_HEADERS, 3, response())
                              + frame(HEADERS, END_HEADERS, 1, response("404")) + frame(DATA, 0, 3, b"three")
                              + frame(HEADERS, END_HEADERS | END_STREAM, 5, response("500"))
                              + frame(DATA, END_STREAM, 1, b"one") + frame(DATA, END_STREAM, 3, b"")),
        "post-with-trailers": (0x4F, hello + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 10)) + ok),
        "head-with-length": (0x3F, hello + frame(HEADERS, END_HEADERS | END_STREAM, 1, response(extra=[("content-length", "5")]))
                             + frame(HEADERS, END_HEADERS | END_STREAM, 3, response(extra=[("content-length", "100")]))),
        "not-modified": (one, hello + frame(HEADERS, END_HEADERS | END_STREAM, 1, response("304"))),
        "length-mismatch": (one, hello + frame(HEADERS, END_HEADERS, 1, response(extra=[("content-length", "10")]))
                            + frame(DATA, END_STREAM, 1, b"short")),
        "bad-fields": (one, hello + frame(HEADERS, END_HEADERS | END_STREAM, 1,
                                          response(extra=[("Upper", "1"), ("connection", "close"), ("x", "a\r\nb")]))),
        "bad-status": (one, hello + frame(HEADERS, END_HEADERS | END_STREAM, 1, response("2000"))),
        "push-promise": (one, hello + frame(PUSH_PROMISE, END_HEADERS, 1, struct.pack(">I", 2) + request())),
        "data-before-head": (one, hello + frame(DATA, END_STREAM, 1, b"early")),
        "head-over-tight-limit": (0x8F, hello + frame(HEADERS, END_HEADERS | END_STREAM, 1,
                                                     response(extra=[("x-big", "b" * 600)]))),
        "headers-too-large": (one, hello + frame(HEADERS, END_HEADERS | END_STREAM, 1,
                                                 response() + literal("x-big", "b" * 4000, indexing=True)
                                                 + indexed(62) * 3000)),
        "settings-bad-values": (one, settings((2, 5), (4, 0x80000000)) + ok),
        "zero-window-then-open": (0x4F, settings((4, 0)) + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 5)) + ok),
        "stream-zero-headers": (one, hello + frame(HEADERS, END_HEADERS, 0, response()) + ok),
        "unknown-frame": (one, hello + frame(0x77, 0xFF, 1, b"??") + ok),
    }
    for name, (steering, body) in seeds.items():
        write("h2_client_fuzz", name, bytes([steering]) + body)


server_seeds()
client_seeds()
