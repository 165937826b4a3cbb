"""HTTP/1.1 framing, bodies, limits (by default the binary accepts what queue-proxy accepts: Go's net/http
limits 1 MiB of request line and header bytes, nothing else), HTTP/2 (h2c) and gRPC, WebSocket, and what the
client sees when the app misbehaves."""
import json
import socket
import subprocess
import threading
import time

import clients
from harness import BASE, GRPC_APP, HELLO, MAIN, REC, Profile, case, check, deliberate, wait_for


@case(BASE)
def proxies_a_request(t):
    r = clients.request("/")
    check(r.status == 200 and r.body == HELLO, f"{r}")


@case(BASE)
def http10_request_is_answered_and_closed(t):
    c = clients.Conn()
    try:
        c.send(b"GET / HTTP/1.0\r\n\r\n")
        r = c.read_response()
        check(r.status == 200 and r.body == HELLO, f"{r}")
        check(c.closed_by_peer(5), "connection kept open after an HTTP/1.0 request without keep-alive")
    finally:
        c.close()


@case(BASE)
def keep_alive_and_pipelining(t):
    c = clients.Conn()
    try:
        c.send(b"GET /status/201 HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
        first, second = c.read_response(), c.read_response()
        check(first.status == 201 and second.status == 200 and second.body == HELLO, f"{first} then {second}")
        c.send(b"GET /status/202 HTTP/1.1\r\nHost: a\r\n\r\n")
        check(c.read_response().status == 202, "third request on the kept-alive connection")
    finally:
        c.close()


@case(BASE)
def expect_100_continue(t):
    c = clients.Conn()
    try:
        c.send(b"POST /sink HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        head = c.read_until(b"\r\n\r\n")
        check(head.startswith(b"HTTP/1.1 100"), f"first answer {head!r}")
        c.send(b"hello")
        r = c.read_response()
        check(r.status == 200 and r.body == b"5", f"{r}")
    finally:
        c.close()


@case(BASE)
def request_bodies_reach_the_app(t):
    r = clients.request("/echo", method="POST", body=b"ping" * 1000, headers={"Content-Type": "x/y"})
    check(r.status == 200 and r.body == b"ping" * 1000, f"echo: {r.status} {len(r.body)} bytes")
    big = b"x" * (48 << 20)
    r = clients.request("/sink", method="PUT", body=big, timeout=60)
    check(r.status == 200 and r.body == str(len(big)).encode(), f"48 MiB upload: {r}")


@case(BASE)
def head_request_has_no_body(t):
    c = clients.Conn()
    try:
        c.send(b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
        r = c.read_response(head_only=True)
        check(r.status == 200, f"HEAD {r}")
        r2 = c.read_response()
        check(r2.status == 200 and r2.body == HELLO, f"the next response after HEAD: {r2} (HEAD sent a body?)")
    finally:
        c.close()


@case(BASE)
def statuses_without_bodies(t):
    for status in (204, 304):
        c = clients.Conn()
        try:
            c.send(f"GET /status/{status} HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n".encode())
            r = c.read_response()
            check(r.status == status, f"{status}: {r}")
            r2 = c.read_response()
            check(r2.status == 200 and r2.body == HELLO, f"after {status}: {r2}")
        finally:
            c.close()


@case(BASE)
def response_trailers_reach_the_client(t):
    r = clients.request("/trailers", {"TE": "trailers"})
    check(r.status == 200 and r.body == b"hello", f"{r}")
    check(("X-Checksum", "abc123") in [(k.title(), v) for k, v in r.trailers] or
          any(k.lower() == "x-checksum" and v == "abc123" for k, v in r.trailers), f"trailers {r.trailers}")


@case(BASE)
def early_hints_are_forwarded(t):
    r = clients.request("/early-hints")
    check(r.status == 200 and r.body == b"hinted\n", f"{r}")
    check([s for s, _ in r.interim] == [103], f"interim answers {r.interim}")


@case(BASE)
def large_responses_stream_whole(t):
    n = 24 << 20
    r = clients.request(f"/bytes/{n}", timeout=60)
    check(r.status == 200 and len(r.body) == n and r.complete, f"{r.status} {len(r.body)} bytes")
    pattern = b"abcdefghijklmnopqrstuvwxyz\n"
    check(r.body == (pattern * (n // 27 + 1))[:n], "content differs")
    r = clients.request("/bytes/100000?chunked=1")
    check(r.status == 200 and len(r.body) == 100000 and r.complete, f"chunked: {r.status} {len(r.body)}")


@case(BASE)
def streamed_responses_are_not_buffered(t):
    c = clients.Conn()
    try:
        started = time.time()
        c.send(b"GET /slow-body/3/600 HTTP/1.1\r\nHost: a\r\n\r\n")
        head = c.read_until(b"\r\n\r\n")
        check(b" 200 " in head.split(b"\r\n")[0], f"head {head!r}")
        c.read_until(b"chunk 0\n")
        first = time.time() - started
        c.read_until(b"chunk 2\n")
        last = time.time() - started
        check(first < 1.5 and last - first > 0.9, f"first chunk at {first:.2f}s, last at {last:.2f}s: buffered")
    finally:
        c.close()


APP_DOWN = Profile("app-down", {"USER_PORT": "8089", "SERVING_READINESS_PROBE": ""})


@case(APP_DOWN)
def app_not_listening_is_502(t):
    r = clients.request("/")
    check(r.status == 502, f"{r}")


@case(BASE)
def app_closing_without_an_answer_is_502(t):
    r = clients.request("/close-immediately")
    check(r.status == 502, f"{r}")


@case(BASE)
def app_closing_mid_body_cuts_the_response(t):
    """The app promises 1,000,000 bytes and closes after 1000: the client never gets a complete response
    (queue-proxy may not even have flushed the head), and the next request is served."""
    try:
        r = clients.request("/close-mid", timeout=15)
        check(not r.complete and len(r.body) < 1000000, f"{r.status} complete={r.complete} {len(r.body)} bytes")
    except (EOFError, ConnectionResetError):
        pass
    r = clients.request("/")
    check(r.status == 200 and r.body == HELLO, f"next request {r}")


# --- framing errors ---

@case(REC)
def conflicting_content_lengths_are_400(t):
    c = clients.Conn()
    try:
        c.send(b"POST /cl HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nhello")
        r = c.read_response()
        check(r.status == 400, f"{r}")
        check(not t.world.recorder.matching(lambda x: x["target"] == "/cl"), "the request reached the app")
    finally:
        c.close()


@case(REC)
def malformed_header_line_is_400(t):
    c = clients.Conn()
    try:
        c.send(b"GET /bad HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n")
        r = c.read_response()
        check(r.status == 400, f"{r}")
    finally:
        c.close()


@case(REC)
@deliberate("a first line with no HTTP version and no request-target, or 'PRI * HTTP/2.0' then anything but the "
            "preface, is a failed HTTP/2 preface: sluice answers as RFC 9113 §3.4 asks (SETTINGS, GOAWAY "
            "PROTOCOL_ERROR; h2spec 3.5/2), which a prior-knowledge client can read; queue-proxy answers HTTP/1.1 400")
def invalid_h2_preface_is_goaway_protocol_error(t):
    for first in (b"INVALID CONNECTION PREFACE\r\n\r\n", b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"):
        c = clients.Conn()
        try:
            c.send(first)
            got = c.read_to_eof()
        finally:
            c.close()
        check(got[3:4] == b"\x04" and got[9 + 3:9 + 4] == b"\x07" and got[9 + 9 + 4:9 + 9 + 8] == b"\0\0\0\x01",
              f"{first!r}: {got[:80]!r} is not SETTINGS then GOAWAY PROTOCOL_ERROR")


@case(REC)
@deliberate("sluice refuses a request with both Content-Length and Transfer-Encoding (request smuggling); "
            "queue-proxy drops Content-Length and proxies what follows as another request")
def content_length_with_transfer_encoding_is_refused(t):
    c = clients.Conn()
    try:
        c.send(b"POST /cl-te HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n")
        try:
            c.read_response()
            c.read_response()
        except (EOFError, OSError, ValueError):
            pass
        check(not t.world.recorder.wait_for(lambda x: x["target"] == "/smuggled", timeout=2),
              "the request after the body reached the app")
    finally:
        c.close()


@case(REC)
def options_asterisk_is_answered(t):
    c = clients.Conn()
    try:
        c.send(b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n")
        r = c.read_response()
        check(r.status == 200, f"{r}")
    finally:
        c.close()


# --- limits: accept what Go's net/http accepts ---

@case(REC)
def a_thousand_header_fields_are_accepted(t):
    headers = [(f"X-Field-{i}", f"value-{i}") for i in range(1000)]
    r = clients.request("/many", headers)
    check(r.status == 200, f"{r.status} {r.body[:200]!r}")
    seen = t.world.recorder.wait_for(lambda x: x["target"] == "/many")
    check(seen and sum(1 for k, _ in seen[-1]["headers"] if k.lower().startswith("x-field-")) == 1000,
          "the app did not get 1000 fields")


@case(REC)
@deliberate("a limitation, not a choice: one header field is held to 65533 bytes (Beast's heads), 431 with "
            "that reason; queue-proxy takes any field within its 1 MiB head")
def a_512k_header_field_is_431_naming_the_limit(t):
    r = clients.request("/big-field", [("X-Big", "v" * (512 << 10))], timeout=30)
    check(r.status == 431 and b"65533" in r.body, f"{r.status} {r.body[:200]!r}")


@case(REC)
def a_megabyte_of_headers_is_accepted(t):
    headers = [(f"X-Kb-{i}", "v" * 10000) for i in range(100)]  # 1,000,000 bytes and a little
    r = clients.request("/mb", headers, timeout=30)
    check(r.status == 200, f"{r.status} {r.body[:200]!r}")


@case(REC)
def more_than_a_mebibyte_of_headers_is_431(t):
    headers = [(f"X-Kb-{i}", "v" * 10000) for i in range(110)]
    try:
        r = clients.request("/too-much", headers, timeout=30)
    except (ConnectionResetError, BrokenPipeError) as e:
        raise AssertionError(f"reset instead of an answer: {e}") from e
    check(r.status == 431, f"{r.status} {r.body[:200]!r}")


@case(REC)
def a_100k_request_target_is_accepted(t):
    target = "/long?" + "q" * (100 << 10)
    r = clients.request(target, timeout=30)
    check(r.status == 200, f"{r.status} {r.body[:200]!r}")
    check(t.world.recorder.wait_for(lambda x: x["target"] == target), "the app did not get the whole target")


@case(REC)
def a_2m_request_target_is_431(t):
    try:
        r = clients.request("/long?" + "q" * (2 << 20), timeout=30)
    except (ConnectionResetError, BrokenPipeError) as e:
        raise AssertionError(f"reset instead of an answer: {e}") from e
    check(r.status == 431, f"{r.status} {r.body[:200]!r}")


@case(REC)
def app_response_with_500k_of_headers_passes(t):
    r = clients.request("/respond?hbytes=500000", timeout=30)
    check(r.status == 200 and sum(1 for k, _ in r.headers if k.lower().startswith("x-big-")) == 500, f"{r.status}")


# --- HTTP/2 ---

def curl(*args, timeout=20):
    return subprocess.run(["curl", "-sS", "--max-time", "10", *args], capture_output=True, timeout=timeout)


@case(BASE, needs=("curl",))
@deliberate("queue-proxy sends every HTTP/2 request upstream as h2c, so an HTTP/1.1-only app gives 502; "
            "sluice translates to the app's protocol")
def h2c_prior_knowledge_to_an_http1_app(t):
    r = curl("--http2-prior-knowledge", f"http://127.0.0.1:{MAIN}/")
    check(r.returncode == 0 and r.stdout == HELLO, f"curl {r.returncode} {r.stdout[:200]!r} {r.stderr!r}")


@case(BASE, needs=("curl",))
def h2c_upgrade_to_an_http1_app(t):
    """HTTP/1.1 `Upgrade: h2c`: the upgrading request (stream 1) is answered by the app."""
    r = curl("--http2", "-D", "-", f"http://127.0.0.1:{MAIN}/")
    check(r.returncode == 0 and r.stdout.endswith(HELLO) and b"101" in r.stdout, f"curl {r.returncode} "
                                                                                  f"{r.stdout[:300]!r} {r.stderr!r}")


# A gRPC service as Knative deploys it: the container port is named h2c, so the revision's serving port is 8013.
GRPC = Profile("grpc-app", {"USER_PORT": str(GRPC_APP), "QUEUE_SERVING_PORT": "8013", "SERVING_READINESS_PROBE":
                            json.dumps({"tcpSocket": {"port": GRPC_APP, "host": "127.0.0.1"}, "successThreshold": 1})},
               needs=("python-grpc",), app="grpc")
H2C = 8013


def grpc_channel():
    import grpc
    return grpc.insecure_channel(f"127.0.0.1:{H2C}")


@case(GRPC)
def grpc_unary_with_metadata_and_trailers(t):
    import grpc
    ch = grpc_channel()
    try:
        call = ch.unary_unary("/conformance.Echo/Unary")
        resp, info = call.with_call(b"ping", timeout=10, metadata=(("x-custom", "one"),
                                                                   ("knative-serving-revision", "r")))
        text = resp.decode()
        check(text.startswith("echo:ping"), f"answer {text!r}")
        check("x-custom: one" in text, f"metadata did not reach the app: {text!r}")
        check("knative-serving-revision" not in text, f"revision header reached the app: {text!r}")
        check("x-forwarded-for: 127.0.0.1" in text, f"no X-Forwarded-For: {text!r}")
        check(("x-trailer", "unary") in tuple(info.trailing_metadata()), f"trailers {info.trailing_metadata()}")
        check(info.code() == grpc.StatusCode.OK, f"{info.code()}")
    finally:
        ch.close()


@case(GRPC)
def grpc_server_streaming(t):
    ch = grpc_channel()
    try:
        call = ch.unary_stream("/conformance.Echo/Stream")
        it = call(b"5", timeout=10)
        got = [m for m in it]
        check(got == [b"message %d" % i for i in range(5)], f"messages {got}")
        check(("x-count", "5") in tuple(it.trailing_metadata()), f"trailers {it.trailing_metadata()}")
    finally:
        ch.close()


@case(GRPC)
def grpc_error_status_and_trailers(t):
    import grpc
    ch = grpc_channel()
    try:
        call = ch.unary_unary("/conformance.Echo/Fail")
        try:
            call(b"x", timeout=10)
            raise AssertionError("the call succeeded")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.NOT_FOUND and e.details() == "no such thing", f"{e.code()} {e.details()}")
            check(("x-reason", "test") in tuple(e.trailing_metadata()), f"trailers {e.trailing_metadata()}")
    finally:
        ch.close()


@case(GRPC)
def h2_request_with_a_connection_header_is_refused(t):
    """RFC 9113 §8.2.2: connection-specific fields make an HTTP/2 request malformed."""
    kind, value = clients.h2_exchange(H2C, [(":method", "GET"), (":scheme", "http"), (":path", "/"),
                                             (":authority", "a"), ("connection", "keep-alive")])
    check(kind in ("rst", "goaway") or (kind == "status" and value is not None and 400 <= value < 500),
          f"answered {kind} {value}")


# --- WebSocket ---

@case(BASE)
def websocket_passthrough(t):
    ws = clients.WebSocket()
    try:
        check(ws.status == 101, f"handshake answered {ws.status}")
        check(ws.echo("hello through the queue") == "hello through the queue", "echo differs")
        check(ws.echo("x" * 70000) == "x" * 70000, "a 70 kB message came back different")
    finally:
        ws.close()


@case(BASE)
def websocket_to_a_route_without_upgrade(t):
    """An Upgrade the app refuses: its ordinary answer reaches the client."""
    ws = clients.WebSocket(path="/status/404")
    try:
        check(ws.status == 404, f"handshake answered {ws.status}")
    finally:
        ws.close()


# --- full duplex (ENABLE_HTTP_FULL_DUPLEX) ---

@case(Profile("full-duplex", {"ENABLE_HTTP_FULL_DUPLEX": "true"}))
def full_duplex_interactive_echo(t):
    """The app answers while the request body is still coming: each piece sent comes back before the next."""
    c = clients.Conn(timeout=10)
    try:
        c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
        c.read_until(b"\r\n\r\n")
        for word in (b"alpha", b"bravo", b"charlie"):
            c.send(b"%x\r\n%s\r\n" % (len(word), word))
            c.read_until(word)
        c.send(b"0\r\n\r\n")
        c.read_until(b"0\r\n\r\n")
    finally:
        c.close()


@case(BASE)
def many_concurrent_connections(t):
    """200 connections at once, each a request: all answered."""
    results = []
    lock = threading.Lock()

    def one():
        try:
            r = clients.request("/delay/200", timeout=30)
            with lock:
                results.append(r.status)
        except OSError as e:
            with lock:
                results.append(str(e))
    threads = [threading.Thread(target=one) for _ in range(200)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    check(results.count(200) == 200, f"{results.count(200)} of 200 answered 200: {set(map(str, results))}")


@case(BASE)
def slow_client_upload_is_streamed(t):
    """A body sent in pieces over 1.5 s reaches the app whole."""
    c = clients.Conn(timeout=15)
    try:
        c.send(b"POST /sink HTTP/1.1\r\nHost: a\r\nContent-Length: 30\r\n\r\n")
        for _ in range(3):
            c.send(b"0123456789")
            time.sleep(0.5)  # the client's pace is the scenario
        r = c.read_response()
        check(r.status == 200 and r.body == b"30", f"{r}")
    finally:
        c.close()


@case(BASE)
def client_going_away_mid_request_does_not_hurt(t):
    """A client that disconnects while the app works: the next requests are served."""
    s = socket.create_connection(("127.0.0.1", MAIN))
    s.sendall(b"GET /delay/1000 HTTP/1.1\r\nHost: a\r\n\r\n")
    s.close()
    wait_for(lambda: clients.request("/").status == 200, 10, "served after a client went away")


@case(REC, needs=("curl",))
@deliberate("queue-proxy sends HTTP/2 requests upstream as h2c: 502 from an HTTP/1.1 app (see "
            "h2c_prior_knowledge_to_an_http1_app)")
def h2_response_from_an_http1_app_loses_its_hop_by_hop_fields(t):
    """An HTTP/2 client, an HTTP/1.1 app answering with connection-specific fields: none may appear in the
    HTTP/2 response (RFC 9113 §8.2.2)."""
    r = curl("--http2-prior-knowledge", "-D", "-", "-o", "/dev/null",
             f"http://127.0.0.1:{MAIN}/respond?h=Connection:X-Resp-Hop&h=X-Resp-Hop:1&h=Keep-Alive:timeout%3D5"
             "&h=X-Kept:2")
    head = r.stdout.decode("latin-1").lower()
    check(r.returncode == 0 and head.startswith("http/2 200"), f"curl {r.returncode} {head[:200]!r} {r.stderr!r}")
    for name in ("connection:", "x-resp-hop:", "keep-alive:"):
        check(f"\n{name}" not in head, f"{name} in the HTTP/2 response: {head!r}")
    check("\nx-kept: 2" in head, f"X-Kept missing: {head!r}")


@case(REC, needs=("curl",))
@deliberate("queue-proxy sends HTTP/2 requests upstream as h2c: 502 from an HTTP/1.1 app")
def h2_request_headers_reach_an_http1_app(t):
    r = curl("--http2-prior-knowledge", "-H", "X-Custom: one", "-H", "TE: trailers", "-H", "Host: shop.example",
             f"http://127.0.0.1:{MAIN}/h2-headers")
    check(r.returncode == 0, f"curl {r.returncode} {r.stderr!r}")
    seen = t.world.recorder.wait_for(lambda x: x["target"] == "/h2-headers", timeout=5)
    check(seen, f"did not reach the app: {r.stdout[:200]!r}")
    h = seen[-1]["h"]
    check(h.get("x-custom") == "one" and h.get("host") == "shop.example", f"app saw {seen[-1]['headers']}")
