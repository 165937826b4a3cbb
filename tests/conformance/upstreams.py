"""Servers the suite runs beside the binary under test, in its own process (standard library only, except the
gRPC app, which needs Debian's python3-grpcio, and the raw h2c app, which needs its python3-hpack):

- Recorder: an HTTP/1.1 server (plain or TLS) with no limits of its own on head or body size, that records
  every request (method, target, headers as received, body) so cases can see what the proxy sent. Routes:
  /healthz (answers per .health: status, delay, fail_until), /respond?status=N&h=Name:Value&hbytes=N (a chosen
  response), /v1/metrics and /v1/traces (an OTLP/HTTP sink: 200 with an empty protobuf answer), anything
  else 200 `recorded`.
- GrpcApp: a gRPC server with grpc.health.v1.Health/Check (status per service name, settable) and
  /conformance.Echo/{Unary,Stream,Fail}, hand-encoded (no generated stubs).
- RawApp: an HTTP/1.1 app that answers `/raw/NAME` with the steps RAW[NAME] names, byte for byte: bytes to
  send, ("sleep", s), "close" (a FIN) or "reset" (an RST); after the last step the connection stays open for
  the next request unless a step ended it. How an app may frame a response, well or badly.
- RawH2App: the same over h2c (prior knowledge): answers a request for `/raw/NAME` on its stream with the steps
  RAW_H2[NAME] names, frame by frame (header blocks HPACK-encoded as given, valid or not).
- make_certs: a CA and a server certificate for localhost, 127.0.0.1 and ::1 (openssl CLI)."""
import gzip
import socket
import ssl
import struct
import subprocess
import threading
import time
import urllib.parse

from clients import (H2_CONTINUATION, H2_DATA, H2_GOAWAY, H2_HEADERS, H2_PING, H2_RST, H2_SETTINGS, H2_WINDOW_UPDATE,
                     h2_frame, h2_headers_fragment, read_h2_frame)


def listen(port, host, serve):
    """A listening socket on host:port whose connections `serve` gets, each on a thread of its own."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(256)
    threading.Thread(target=accept_loop, args=(sock, serve), daemon=True).start()
    return sock


def end_step(conn, step):
    """Carries out a raw app's step that ends the connection: "close" (a FIN, then whatever the peer still
    sends is read) or "reset" (an RST). False for any other step."""
    if step == "close":
        conn.shutdown(socket.SHUT_WR)
        while conn.recv(65536):
            pass
        return True
    if step == "reset":
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return True
    return False


def accept_loop(sock, serve):
    """Serves each connection `sock` accepts on a thread of its own, until the socket is closed."""
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


class Recorder:
    def __init__(self, port, tls_cert=None, host="127.0.0.1"):
        self.port = port
        self.requests = []
        self.cond = threading.Condition()
        self.health = {"status": 200, "delay": 0.0, "fail_until": 0.0, "fail_status": 503}
        self.ssl = None
        if tls_cert:
            self.ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ssl.load_cert_chain(*tls_cert)
        self.sock = listen(port, host, self._serve)

    def clear(self):
        with self.cond:
            self.requests = []

    def matching(self, pred):
        with self.cond:
            return [r for r in self.requests if pred(r)]

    def wait_for(self, pred, timeout=10.0, count=1):
        deadline = time.time() + timeout
        with self.cond:
            while True:
                got = [r for r in self.requests if pred(r)]
                if len(got) >= count:
                    return got
                left = deadline - time.time()
                if left <= 0:
                    return got
                self.cond.wait(left)

    def _serve(self, conn):
        try:
            if self.ssl:
                conn.settimeout(10)
                conn = self.ssl.wrap_socket(conn, server_side=True)
            conn.settimeout(120)
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(1 << 20)
                    if not chunk:
                        return
                    buf += chunk
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                method, target, version = (lines[0].split(" ") + ["", ""])[:3]
                headers = []
                for line in lines[1:]:
                    k, _, v = line.partition(":")
                    headers.append((k, v.strip()))
                hget = {}
                for k, v in headers:
                    hget.setdefault(k.lower(), v)
                if hget.get("expect", "").lower() == "100-continue":
                    conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                body = b""
                if "chunked" in hget.get("transfer-encoding", "").lower():
                    while True:
                        while b"\r\n" not in buf:
                            buf += conn.recv(1 << 20)
                        line, buf = buf.split(b"\r\n", 1)
                        size = int(line.split(b";")[0], 16)
                        while len(buf) < size + 2:
                            buf += conn.recv(1 << 20)
                        body += buf[:size]
                        buf = buf[size + 2:]
                        if size == 0:
                            break
                elif "content-length" in hget:
                    n = int(hget["content-length"])
                    while len(buf) < n:
                        chunk = conn.recv(1 << 20)
                        if not chunk:
                            return
                        buf += chunk
                    body, buf = buf[:n], buf[n:]
                if hget.get("content-encoding", "").lower() == "gzip":
                    try:
                        body = gzip.decompress(body)
                    except OSError:
                        pass
                record = {"method": method, "target": target, "version": version, "headers": headers,
                          "h": {k.lower(): v for k, v in reversed(headers)}, "body": body, "time": time.time(),
                          "tls": bool(self.ssl), "port": self.port}
                with self.cond:
                    self.requests.append(record)
                    self.cond.notify_all()
                out = self._answer(record)
                close = version == "HTTP/1.0" or hget.get("connection", "").lower() == "close"
                if close:
                    out = out.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
                conn.sendall(out)
                if close:
                    return
        except (OSError, ValueError, ssl.SSLError):
            return
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def _answer(self, r):
        path, _, query = r["target"].partition("?")
        if path.startswith("/healthz"):
            h = self.health
            if h["delay"]:
                time.sleep(h["delay"])
            status = h["fail_status"] if time.time() < h["fail_until"] else h["status"]
            return response(status, [("Content-Type", "text/plain")], b"ok\n")
        if path == "/respond":
            q = urllib.parse.parse_qs(query)
            status = int(q.get("status", ["200"])[0])
            hdrs = [tuple(x.split(":", 1)) for x in q.get("h", [])]
            if "hbytes" in q:
                n = int(q["hbytes"][0])
                hdrs += [(f"X-Big-{i}", "v" * 1000) for i in range(n // 1000)]
            return response(status, hdrs, q.get("body", ["responded\n"])[0].encode())
        if path in ("/v1/metrics", "/v1/traces"):
            return response(200, [("Content-Type", "application/x-protobuf")], b"")
        return response(200, [("Content-Type", "text/plain")], b"recorded\n")


def response(status, headers, body):
    head = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
    if status in (204, 304) or status < 200:
        return (head + "\r\n").encode("latin-1")
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1") + body


RAW = {}  # name -> [steps], filled by the cases that use RawApp


class RawApp:
    def __init__(self, port, host="127.0.0.1"):
        self.port = port
        self.sock = listen(port, host, self._serve)

    def _serve(self, conn):
        conn.settimeout(60)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, buf = buf.split(b"\r\n\r\n", 1)
                target = head.split(b" ", 2)[1].decode("latin-1")
                for line in head.split(b"\r\n")[1:]:  # a request body is read and dropped
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        n = int(v)
                        while len(buf) < n:
                            buf += conn.recv(65536)
                        buf = buf[n:]
                name = target.split("?")[0].removeprefix("/raw/")
                for step in RAW.get(name, [b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"]):
                    if end_step(conn, step):
                        return
                    if isinstance(step, tuple):
                        time.sleep(step[1])
                    else:
                        conn.sendall(step)
        except OSError:
            return
        finally:
            conn.close()


RAW_H2 = {}  # name -> [steps], filled by the cases that use RawH2App


class H2Step:
    """What RawH2App does on a request's stream. headers: a header block (fields as (name, value) pairs, sent as
    given, in order; split into CONTINUATION frames of `split` bytes when given); data: a DATA frame; rst: a
    RST_STREAM with the code; goaway: a GOAWAY (last stream: this one) with the code; frame: raw frame bytes
    for the stream ({stream} is a function of the stream id); sleep; close (a FIN) or reset (an RST)."""

    @staticmethod
    def headers(fields, end=False, split=None, pad=0):
        return ("headers", fields, end, split, pad)

    @staticmethod
    def data(payload, end=False, pad=0):
        return ("data", payload, end, pad)


class RawH2App:
    """An h2c app that answers `/raw/NAME` with RAW_H2[NAME]: a list of H2Step.headers(...)/H2Step.data(...),
    ("rst", code), ("goaway", code), ("frame", fn(stream) -> bytes), ("sleep", s), "close" or "reset". It reads
    the proxy's frames on one thread per connection and answers each request in turn; it grants the proxy
    flow-control credit as it reads, and never waits for credit itself (a case's DATA stays within the
    default 64 KiB window)."""

    def __init__(self, port, host="127.0.0.1"):
        import hpack  # at start, not on the first connection: a missing module is the harness's skip
        self.hpack = hpack
        self.port = port
        self.sock = listen(port, host, self._serve)

    def _serve(self, conn):
        conn.settimeout(60)
        decoder, encoder = self.hpack.Decoder(max_header_list_size=1 << 30), self.hpack.Encoder()
        buf = bytearray()
        try:
            while len(buf) < 24:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
            del buf[:24]  # the preface
            conn.sendall(h2_frame(H2_SETTINGS, 0, 0))
            block, stream = b"", 0
            while True:
                ftype, flags, sid, payload = read_h2_frame(conn, buf)
                if ftype == H2_SETTINGS and not flags & 1:
                    conn.sendall(h2_frame(H2_SETTINGS, 1, 0))
                elif ftype == H2_PING and not flags & 1:
                    conn.sendall(h2_frame(H2_PING, 1, 0, payload))
                elif ftype == H2_GOAWAY:
                    return
                elif ftype == H2_DATA and payload:
                    conn.sendall(h2_frame(H2_WINDOW_UPDATE, 0, 0, struct.pack(">I", len(payload))) +
                                 h2_frame(H2_WINDOW_UPDATE, 0, sid, struct.pack(">I", len(payload))))
                elif ftype in (H2_HEADERS, H2_CONTINUATION):
                    if ftype == H2_HEADERS:
                        payload, block, stream = h2_headers_fragment(flags, payload), b"", sid
                    block += payload
                    if flags & 0x4:  # END_HEADERS: a request's head; its body is read and dropped
                        fields = dict(decoder.decode(block, raw=True))
                        name = fields.get(b":path", b"").decode("latin-1").split("?")[0].removeprefix("/raw/")
                        if not self._answer(conn, encoder, stream, RAW_H2.get(name)):
                            return
        except (OSError, EOFError):
            return
        finally:
            conn.close()

    def _answer(self, conn, encoder, sid, steps):
        """Sends the steps on stream sid; False when a step ended the connection."""
        if steps is None:
            steps = [H2Step.headers([(":status", "404"), ("content-length", "0")], end=True)]
        for step in steps:
            if end_step(conn, step):
                return False
            kind = step[0]
            if kind == "sleep":
                time.sleep(step[1])
            elif kind == "headers":
                _, fields, end, split, pad = step
                raw = [(k.encode("latin-1") if isinstance(k, str) else k,
                        v.encode("latin-1") if isinstance(v, str) else v) for k, v in fields]
                try:
                    # Huffman coding in pure Python takes 20 s for an 11 MB head: a head past 1 MiB goes
                    # out as plain literals (the same fields; only the encoding differs).
                    block = encoder.encode(raw, huffman=sum(len(k) + len(v) for k, v in raw) <= 1 << 20)
                except self.hpack.HPACKError:
                    block = b"".join(b"\x00" + _hpack_literal(k) + _hpack_literal(v) for k, v in raw)
                size = split or 16384
                parts = [block[i:i + size] for i in range(0, len(block), size)] or [b""]
                flags = (0x1 if end else 0) | (0x4 if len(parts) == 1 else 0) | (0x8 if pad else 0)
                first = (bytes([pad]) + parts[0] + b"\0" * pad) if pad else parts[0]
                out = [h2_frame(H2_HEADERS, flags, sid, first)]
                for i, part in enumerate(parts[1:], 2):
                    out.append(h2_frame(H2_CONTINUATION, 0x4 if i == len(parts) else 0, sid, part))
                conn.sendall(b"".join(out))
            elif kind == "data":
                _, payload, end, pad = step
                body = (bytes([pad]) + payload + b"\0" * pad) if pad else payload
                conn.sendall(h2_frame(H2_DATA, (0x1 if end else 0) | (0x8 if pad else 0), sid, body))
            elif kind == "rst":
                conn.sendall(h2_frame(H2_RST, 0, sid, struct.pack(">I", step[1])))
            elif kind == "goaway":
                conn.sendall(h2_frame(H2_GOAWAY, 0, 0, struct.pack(">II", sid, step[1])))
            elif kind == "frame":
                conn.sendall(step[1](sid))
        return True


def _hpack_literal(s):
    """An HPACK string literal, no Huffman, of any length (RFC 7541 §5.1 integer, 7-bit prefix)."""
    n, out = len(s), bytearray()
    if n < 127:
        out.append(n)
    else:
        out.append(127)
        n -= 127
        while n >= 128:
            out.append(n % 128 + 128)
            n //= 128
        out.append(n)
    return bytes(out) + s


class GrpcApp:
    """Needs grpcio. statuses: service name -> 1 (SERVING) or 2 (NOT_SERVING); an unknown name is NOT_FOUND."""

    def __init__(self, port):
        import grpc
        from concurrent import futures
        self.grpc = grpc
        self.statuses = {"": 1, "svc-serving": 1, "svc-not-serving": 2}
        self.checks = []
        self.lock = threading.Lock()

        def check(request, context):
            service = _proto_string(request, 1)
            md = dict(context.invocation_metadata())
            with self.lock:
                self.checks.append({"service": service, "user-agent": md.get("user-agent", ""), "time": time.time()})
            if service not in self.statuses:
                context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
            return bytes([0x08, self.statuses[service]])

        def unary(request, context):
            md = context.invocation_metadata()
            context.set_trailing_metadata((("x-trailer", "unary"),))
            return b"echo:" + request + b"\n" + "".join(f"{k}: {v}\n" for k, v in md
                                                         if isinstance(v, str)).encode()

        def stream(request, context):
            count = int(request.decode() or "3")
            for i in range(count):
                yield b"message %d" % i
            context.set_trailing_metadata((("x-count", str(count)),))

        def fail(request, context):
            context.set_trailing_metadata((("x-reason", "test"),))
            context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")

        ident = lambda b: b  # noqa: E731 - raw bytes in and out
        handlers = [
            grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
                "Check": grpc.unary_unary_rpc_method_handler(check, ident, ident)}),
            grpc.method_handlers_generic_handler("conformance.Echo", {
                "Unary": grpc.unary_unary_rpc_method_handler(unary, ident, ident),
                "Stream": grpc.unary_stream_rpc_method_handler(stream, ident, ident),
                "Fail": grpc.unary_unary_rpc_method_handler(fail, ident, ident)}),
        ]
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), handlers=handlers)
        self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.server.start()


def _proto_string(data, field):
    i = 0
    while i < len(data):
        key = data[i]
        i += 1
        if key == (field << 3 | 2):
            n = data[i]
            return data[i + 1:i + 1 + n].decode()
        return ""
    return ""


def make_certs(directory):
    """CA + server certificate (ECDSA P-256) for localhost/127.0.0.1/::1. Returns (ca, cert, key) paths."""
    ca_key, ca, key, csr, cert = (f"{directory}/{n}" for n in ("ca.key", "ca.crt", "tls.key", "tls.csr", "tls.crt"))
    ext = f"{directory}/ext.cnf"
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nbasicConstraints=CA:FALSE\n")

    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", ca_key,
        "-out", ca, "-subj", "/CN=conformance-ca", "-days", "3")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", csr,
        "-subj", "/CN=localhost")
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert, "-days", "3",
        "-extfile", ext)
    return ca, cert, key
