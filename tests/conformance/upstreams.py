"""Servers the suite runs beside the binary under test, in its own process (standard library only, except the
gRPC app, which needs Debian's python3-grpcio):

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
- make_certs: a CA and a server certificate for localhost, 127.0.0.1 and ::1 (openssl CLI)."""
import gzip
import socket
import ssl
import struct
import subprocess
import threading
import time
import urllib.parse


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
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(256)
        threading.Thread(target=accept_loop, args=(self.sock, self._serve), daemon=True).start()

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
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(256)
        threading.Thread(target=accept_loop, args=(self.sock, self._serve), daemon=True).start()

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
                    if step == "close":
                        conn.shutdown(socket.SHUT_WR)
                        while conn.recv(65536):
                            pass
                        return
                    if step == "reset":
                        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        return
                    if isinstance(step, tuple):
                        time.sleep(step[1])
                    else:
                        conn.sendall(step)
        except OSError:
            return
        finally:
            conn.close()


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
