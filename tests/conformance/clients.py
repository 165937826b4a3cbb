"""Clients the conformance suite speaks with, standard library only: a raw HTTP/1.1 client (every byte of the
request is the case's choice: no Host, duplicates, HTTP/1.0, pipelining), a WebSocket echo client, Knative's
Stat protobuf decoded by hand, a Prometheus text parser, a TLS client, a minimal HTTP/2 frame client, and an
HTTP/2 client that reports every frame of a stream (H2Conn; HPACK from Debian's python3-hpack)."""
import base64
import os
import socket
import ssl
import struct
import time


class Response:
    def __init__(self):
        self.version = ""
        self.status = 0
        self.reason = ""
        self.headers = []  # [(name, value)] as received
        self.body = b""
        self.trailers = []
        self.interim = []  # [(status, headers)] for 1xx answers before the final one
        self.complete = False  # the body ended as its framing says (not cut by a close or a reset)

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def header_values(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def has(self, name):
        return self.header(name) is not None

    def __repr__(self):
        return f"<{self.status} {self.headers[:12]!r} body={self.body[:200]!r}>"


class Conn:
    """One client connection with a read buffer."""

    def __init__(self, host="127.0.0.1", port=8012, timeout=30.0, tls=None):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_hostname=None if ":" in host else host)
        self.buf = bytearray()
        self.host, self.port = host, port

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise EOFError("connection closed")
        self.buf += chunk

    def _take(self, n):
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_until(self, marker, limit=64 << 20):
        start = 0
        while True:
            i = self.buf.find(marker, start)
            if i >= 0:
                return self._take(i + len(marker))
            if len(self.buf) > limit:
                raise ValueError("too long")
            start = max(0, len(self.buf) - len(marker))
            self._fill()

    def read_exact(self, n):
        while len(self.buf) < n:
            self._fill()
        return self._take(n)

    def read_to_eof(self):
        try:
            while True:
                self._fill()
        except (EOFError, ConnectionResetError):
            pass
        return self._take(len(self.buf))

    def closed_by_peer(self, timeout=5.0):
        """True when the peer closes (EOF or reset) within timeout without sending more."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
            return data == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def read_response(self, head_only=False):
        r = Response()
        while True:
            head = self.read_until(b"\r\n\r\n").decode("latin-1")
            lines = head.split("\r\n")
            parts = lines[0].split(" ", 2)
            version, status = parts[0], int(parts[1])
            headers = []
            for line in lines[1:]:
                if not line:
                    continue
                k, _, v = line.partition(":")
                headers.append((k, v.strip()))
            if 100 <= status < 200 and status != 101:
                r.interim.append((status, headers))
                continue
            r.version, r.status, r.reason, r.headers = version, status, parts[2] if len(parts) > 2 else "", headers
            break
        if head_only or r.status in (101, 204, 304) or 100 <= r.status < 200:
            r.complete = True
            return r
        te = (r.header("transfer-encoding") or "").lower()
        cl = r.header("content-length")
        try:
            if "chunked" in te:
                body = bytearray()
                while True:
                    size_line = self.read_until(b"\r\n").decode("latin-1").strip()
                    size = int(size_line.split(";")[0], 16)
                    if size == 0:
                        break
                    body += self.read_exact(size)
                    self.read_exact(2)
                    r.body = bytes(body)
                while True:  # trailers
                    line = self.read_until(b"\r\n").decode("latin-1").rstrip("\r\n")
                    if not line:
                        break
                    k, _, v = line.partition(":")
                    r.trailers.append((k, v.strip()))
                r.body = bytes(body)
                r.complete = True
            elif cl is not None:
                n = int(cl)
                while len(self.buf) < n:
                    self._fill()
                r.body = self.read_exact(n)
                r.complete = True
            else:
                r.body = self.read_to_eof()
                r.complete = True
        except (EOFError, ConnectionResetError, socket.timeout) as e:
            r.body = r.body or bytes(self.buf)
            r.error = str(e) or type(e).__name__
        return r

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def build_request(method="GET", target="/", headers=None, body=None, version="HTTP/1.1", host="localhost"):
    """Request bytes. headers: list of (name, value) or a dict; a Host is added unless given (host=None: none);
    a Content-Length is added for a body unless a Content-Length or Transfer-Encoding is given."""
    if isinstance(headers, dict):
        headers = list(headers.items())
    headers = list(headers or [])
    names = {k.lower() for k, _ in headers}
    if host is not None and "host" not in names:
        headers.insert(0, ("Host", host))
    if body is not None and "content-length" not in names and "transfer-encoding" not in names:
        headers.append(("Content-Length", str(len(body))))
    head = f"{method} {target} {version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head.encode("latin-1") + (body or b"")


def request(path="/", headers=None, method="GET", body=None, port=8012, host="127.0.0.1", timeout=30.0,
            version="HTTP/1.1", tls=None, host_header="localhost"):
    """One request on a fresh connection; the Response (with .error set when the body was cut)."""
    c = Conn(host, port, timeout=timeout, tls=tls)
    try:
        c.send(build_request(method, path, headers, body, version, host=host_header))
        return c.read_response(head_only=method == "HEAD")
    finally:
        c.close()


def echoed_headers(body):
    """The demo app's /headers body as a dict (lower-cased names; repeated names joined with ', ')."""
    out = {}
    for line in body.decode("latin-1").splitlines()[1:]:
        name, _, value = line.partition(": ")
        n = name.lower()
        out[n] = out[n] + ", " + value if n in out else value
    return out


def echoed_request_line(body):
    return body.decode("latin-1").splitlines()[0]


class WebSocket:
    """A client WebSocket (RFC 6455): handshake, masked text frames, unmasked reads."""

    def __init__(self, host="127.0.0.1", port=8012, path="/ws", timeout=10.0, headers=None):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed during the handshake")
            head += chunk
        self.head = head.split(b"\r\n\r\n", 1)[0].decode("latin-1")
        self.status = int(head.split(b" ", 2)[1])
        self.buffer = head.split(b"\r\n\r\n", 1)[1]

    def send_text(self, text):
        payload = text.encode()
        mask = os.urandom(4)
        n = len(payload)
        header = bytes([0x81])
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
        """One message: frames until FIN (a server may fragment), control frames skipped."""
        out = b""
        while True:
            b0, b1 = self._take(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._take(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._take(8))[0]
            payload = self._take(n)
            if b0 & 0x0F >= 8:
                if b0 & 0x0F == 8:
                    raise ConnectionError("closed by a close frame")
                continue
            out += payload
            if b0 & 0x80:
                return out.decode()

    def echo(self, text, timeout=10.0):
        self.sock.settimeout(timeout)
        self.send_text(text)
        return self.read_text()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


STAT_FIELDS = {1: "pod_name", 2: "average_concurrent_requests", 3: "average_proxied_concurrent_requests",
               4: "request_count", 5: "proxied_request_count", 6: "process_uptime", 7: "timestamp"}


def decode_stat(data):
    """Knative's autoscaler Stat: pod_name=1 (string), 2..6 doubles, timestamp=7 (int64)."""
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
        name = STAT_FIELDS.get(field, field)
        if wire == 0:
            out[name] = varint()
        elif wire == 1:
            out[name] = struct.unpack("<d", data[i:i + 8])[0]
            i += 8
        elif wire == 2:
            n = varint()
            out[name] = data[i:i + n].decode()
            i += n
        else:
            raise ValueError(f"unexpected wire type {wire} for field {field}")
    return out


def parse_prometheus(text):
    """{metric name: [(labels dict, value float)]} from the Prometheus text format."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, rest = line.split("{", 1)
            labels_text, _, value = rest.rpartition("}")
            labels = {}
            i = 0
            while i < len(labels_text):
                eq = labels_text.index("=", i)
                key = labels_text[i:eq].strip().strip(",").strip()
                j = eq + 2  # past ="
                val = ""
                while labels_text[j] != '"':
                    if labels_text[j] == "\\":
                        j += 1
                    val += labels_text[j]
                    j += 1
                labels[key] = val
                i = j + 1
                while i < len(labels_text) and labels_text[i] in ", ":
                    i += 1
            value = value.strip().split(" ")[0]
        else:
            name, value = line.split(" ", 2)[:2]
            labels = {}
        try:
            v = float(value)
        except ValueError:
            continue
        out.setdefault(name.strip(), []).append((labels, v))
    return out


def tls_context(min_version=None, max_version=None, alpn=None, verify=False, cafile=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if verify:
        ctx.load_verify_locations(cafile)
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if min_version:
        ctx.minimum_version = min_version
    if max_version:
        ctx.maximum_version = max_version
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


# --- a minimal HTTP/2 client (prior knowledge), for requests curl and nghttp refuse to send ---

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_DATA, H2_HEADERS, H2_RST, H2_SETTINGS, H2_PING, H2_GOAWAY, H2_WINDOW_UPDATE, H2_CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9


def h2_frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def h2_headers_fragment(flags, payload):
    """A HEADERS frame's header block fragment: its payload without padding and priority fields."""
    if flags & 0x8:
        payload = payload[1:len(payload) - payload[0]]
    if flags & 0x20:
        payload = payload[5:]
    return payload


def read_h2_frame(sock, buf):
    """The next frame from `sock`, with `buf` (a bytearray) holding what was read past it: (type, flags,
    stream, payload). EOFError when the peer closed first."""
    while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    n = int.from_bytes(buf[:3], "big")
    frame = (buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF, bytes(buf[9:9 + n]))
    del buf[:9 + n]
    return frame


def _hpack_str(s):
    b = s.encode("latin-1")
    assert len(b) < 127
    return bytes([len(b)]) + b


def h2_literal(name, value):
    """A literal header field without indexing, new name, no Huffman."""
    return b"\x00" + _hpack_str(name) + _hpack_str(value)


# RFC 7541 Appendix B codes of the digits: enough Huffman to read a :status.
HUFFMAN_DIGITS = {"00000": "0", "00001": "1", "00010": "2", "011001": "3", "011010": "4", "011011": "5",
                  "011100": "6", "011101": "7", "011110": "8", "011111": "9"}


def huffman_digits(raw):
    bits = "".join(f"{b:08b}" for b in raw)
    out, code = "", ""
    for bit in bits:
        code += bit
        if code in HUFFMAN_DIGITS:
            out += HUFFMAN_DIGITS[code]
            code = ""
    try:
        return int(out)
    except ValueError:
        return None


STATIC_STATUS = {8: 200, 9: 204, 10: 206, 11: 304, 12: 400, 13: 404, 14: 500}


def h2_exchange(port, fields, host="127.0.0.1", timeout=5.0):
    """Sends one HEADERS (END_STREAM) on stream 1 with the literal fields; returns ("rst", code),
    ("status", N or None when not decodable), ("goaway", code) or ("closed", None)."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        block = b"".join(h2_literal(n, v) for n, v in fields)
        s.sendall(H2_PREFACE + h2_frame(H2_SETTINGS, 0, 0) + h2_frame(H2_HEADERS, 0x5, 1, block))
        buf = b""
        deadline = time.time() + timeout
        while time.time() < deadline:
            while len(buf) >= 9:
                length = int.from_bytes(buf[:3], "big")
                if len(buf) < 9 + length:
                    break
                ftype, flags, stream = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                payload = buf[9:9 + length]
                buf = buf[9 + length:]
                if ftype == H2_SETTINGS and not flags & 1:
                    s.sendall(h2_frame(H2_SETTINGS, 1, 0))
                elif ftype == H2_RST and stream == 1:
                    return ("rst", int.from_bytes(payload[:4], "big"))
                elif ftype == H2_GOAWAY:
                    return ("goaway", int.from_bytes(payload[4:8], "big"))
                elif ftype == H2_HEADERS and stream == 1:
                    p = payload
                    if flags & 0x8:  # padded
                        p = p[1:len(p) - p[0]]
                    if flags & 0x20:  # priority
                        p = p[5:]
                    first = p[0] if p else 0
                    if first & 0x80:
                        return ("status", STATIC_STATUS.get(first & 0x7F))
                    if p[:1] in (b"\x48", b"\x08", b"\x18") and len(p) > 2:
                        n = p[1] & 0x7F
                        raw = p[2:2 + n]
                        return ("status", huffman_digits(raw) if p[1] & 0x80 else int(raw))
                    return ("status", None)
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                return ("closed", None)
            if not chunk:
                return ("closed", None)
            buf += chunk
        return ("timeout", None)
    finally:
        s.close()


class H2Stream:
    """What an HTTP/2 client saw of one stream: each header block decoded ([(name, value)] as received, in
    order, as str via latin-1), the DATA bytes, and how it ended: "end" (END_STREAM), ("rst", code),
    ("goaway", code), "closed" or "timeout"."""

    def __init__(self):
        self.blocks = []
        self.body = b""
        self.end = None


class H2Conn:
    """An HTTP/2 client connection (prior knowledge) that reports what the peer sent frame by frame, without
    judging it: a malformed answer is observed, not refused. Grants flow-control credit for every DATA frame."""

    def __init__(self, host="127.0.0.1", port=8012, timeout=20.0):
        import hpack
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.encoder, self.decoder = hpack.Encoder(), hpack.Decoder(max_header_list_size=1 << 30)
        self.decoder.max_allowed_table_size = 1 << 16
        self.buf = bytearray()
        self.next_stream = 1
        self.goaway = None
        self.sock.sendall(H2_PREFACE + h2_frame(H2_SETTINGS, 0, 0))

    def request(self, method, path, headers=(), authority="localhost"):
        """Sends a request without a body; returns its stream id."""
        sid, self.next_stream = self.next_stream, self.next_stream + 2
        fields = [(":method", method), (":scheme", "http"), (":authority", authority), (":path", path), *headers]
        self.sock.sendall(h2_frame(H2_HEADERS, 0x5, sid, self.encoder.encode(fields)))
        return sid

    def read(self, sid):
        """Reads until stream sid ends; an H2Stream."""
        st, block = H2Stream(), None
        try:
            while st.end is None:
                ftype, flags, stream, payload = read_h2_frame(self.sock, self.buf)
                if ftype == H2_SETTINGS and not flags & 1:
                    self.sock.sendall(h2_frame(H2_SETTINGS, 1, 0))
                elif ftype == H2_PING and not flags & 1:
                    self.sock.sendall(h2_frame(H2_PING, 1, 0, payload))
                elif ftype == H2_GOAWAY:
                    self.goaway = int.from_bytes(payload[4:8], "big")
                    if int.from_bytes(payload[:4], "big") & 0x7FFFFFFF < sid:
                        st.end = ("goaway", self.goaway)
                elif ftype == H2_DATA:
                    if payload:
                        self.sock.sendall(h2_frame(H2_WINDOW_UPDATE, 0, 0, struct.pack(">I", len(payload))) +
                                          h2_frame(H2_WINDOW_UPDATE, 0, stream, struct.pack(">I", len(payload))))
                    if stream == sid:
                        if flags & 0x8:
                            payload = payload[1:len(payload) - payload[0]]
                        st.body += payload
                        if flags & 0x1:
                            st.end = "end"
                elif ftype in (H2_HEADERS, H2_CONTINUATION):
                    if ftype == H2_HEADERS:
                        block, ended = h2_headers_fragment(flags, payload), flags & 0x1
                    else:
                        block += payload
                    if flags & 0x4:
                        fields = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in self.decoder.decode(block, raw=True)]
                        if stream == sid:
                            st.blocks.append(fields)
                            if ended:
                                st.end = "end"
                elif ftype == H2_RST and stream == sid:
                    st.end = ("rst", int.from_bytes(payload[:4], "big"))
        except (EOFError, ConnectionResetError):
            st.end = ("goaway", self.goaway) if self.goaway is not None else "closed"
        except socket.timeout:
            st.end = "timeout"
        return st

    def close(self):
        self.sock.close()
