"""The proxy's own answers, byte for byte: every status sluice produces itself (a request it refuses, the
app unreachable or too slow, the breaker's queue full, probe and admin answers), as a client receives it:
status line, every header field but Date, the body and how the connection ends, each compared with what
Knative's queue-proxy v1.23 sends for the same request."""
import socket

import clients
from harness import ADMIN, BASE, MAIN, STATS, Profile, case, check, deliberate

TEXT = "text/plain; charset=utf-8"


def observe(raw, port=MAIN, timeout=20, then=b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"):
    """Sends raw request bytes and reads the answer whole; then sends `then` on the same connection to see
    whether it stays usable. (status line, [(name, value)] sorted without Date, body, end)."""
    c = clients.Conn(port=port, timeout=timeout)
    try:
        c.send(raw)
        head = c.read_until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        fields = []
        for line in head[1:]:
            if line:
                k, _, v = line.partition(":")
                fields.append((k.lower(), v.strip()))
        fields = sorted((kv for kv in fields if kv[0] != "date"), key=lambda kv: kv[0])
        length = dict(fields).get("content-length")
        body = c.read_exact(int(length)) if length is not None else c.read_to_eof()
        end = "closed"
        if length is not None:
            try:
                c.send(then)
                nxt = c.read_response()
                end = "kept" if nxt.status else "closed"
            except (EOFError, ConnectionResetError, BrokenPipeError, socket.timeout):
                end = "closed"
        return head[0], fields, body, end
    finally:
        c.close()



def answer_case(name, raw, status_line, fields, body, end, port=MAIN, profile=BASE, why=None):
    """A case named `answer_NAME`: `raw` sent, the answer must have this status line (a str: exactly; a tuple:
    starting with its one element), these header fields besides Date and Content-Length (names to values),
    this body (bytes: exactly; a tuple: starting with its element; None: any non-empty text ending in a
    newline) and end."""
    def fn(t):
        line, got_fields, got_body, got_end = observe(raw, port)
        diff = {}
        ok_line = line.startswith(status_line[0]) if isinstance(status_line, tuple) else line == status_line
        if not ok_line:
            diff["status line"] = (line, status_line)
        named = {k: v for k, v in got_fields if k != "content-length"}
        if named != fields:
            diff["fields"] = (named, fields)
        if body is None:
            ok_body = got_body.endswith(b"\n") and len(got_body) > 1
        elif isinstance(body, tuple):
            ok_body = got_body.startswith(body[0])
        else:
            ok_body = got_body == body
        if not ok_body:
            diff["body"] = (got_body, body)
        if got_end != end:
            diff["end"] = (got_end, end)
        check(not diff, f"differs (got, expected): {diff}")
    fn.__name__ = f"answer_{name}"
    fn.__module__ = __name__
    if why:
        fn = deliberate(why)(fn)
    case(profile)(fn)


H = b"Host: x\r\n"
REFUSED = {"connection": "close", "content-type": TEXT}

# A request refused before it is forwarded: "NNN Reason" in the status line and starting the body, plain
# text, and the connection closes. (queue-proxy's net/http writes some causes into the status line; sluice
# writes its own cause after the reason in the body, and a Content-Length.)
answer_case("missing_host", b"GET / HTTP/1.1\r\n\r\n", ("HTTP/1.1 400 Bad Request",), REFUSED,
            (b"400 Bad Request",), "closed")
answer_case("two_hosts", b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", ("HTTP/1.1 400 Bad Request",), REFUSED,
            (b"400 Bad Request",), "closed")
answer_case("bad_field_name", b"GET / HTTP/1.1\r\n" + H + b"X Bad: v\r\n\r\n", ("HTTP/1.1 400 Bad Request",),
            REFUSED, (b"400 Bad Request",), "closed")
answer_case("bad_content_length", b"POST / HTTP/1.1\r\n" + H + b"Content-Length: abc\r\n\r\n",
            ("HTTP/1.1 400 Bad Request",), REFUSED, (b"400 Bad Request",), "closed")
answer_case("target_with_space", b"GET /a b HTTP/1.1\r\n" + H + b"\r\n", ("HTTP/1.1 400 Bad Request",), REFUSED,
            (b"400 Bad Request",), "closed")
answer_case("transfer_coding_not_chunked", b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip\r\n\r\n",
            ("HTTP/1.1 400 Bad Request",), REFUSED, (b"400 Bad Request",), "closed",
            why="RFC 9112 §6.3: a request whose final transfer coding is not chunked MUST get 400: sluice answers "
                "400; queue-proxy answers 501 `Unsupported transfer encoding`")
answer_case("transfer_coding_unsupported", b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip, chunked\r\n\r\n",
            ("HTTP/1.1 501 Not Implemented",), REFUSED, (b"",), "closed")
answer_case("version_2_over_http1", b"GET / HTTP/2.0\r\n" + H + b"\r\n", ("HTTP/1.1 505 HTTP Version Not Supported",),
            REFUSED, (b"505 HTTP Version Not Supported",), "closed")
answer_case("version_3", b"GET / HTTP/3.0\r\n" + H + b"\r\n", ("HTTP/1.1 505 HTTP Version Not Supported",),
            REFUSED, (b"505 HTTP Version Not Supported",), "closed")
answer_case("head_too_large", b"GET / HTTP/1.1\r\n" + H + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 8000) for i in range(140))
            + b"\r\n", "HTTP/1.1 431 Request Header Fields Too Large", REFUSED,
            b"431 Request Header Fields Too Large", "closed")
answer_case("expectation_unknown", b"POST / HTTP/1.1\r\n" + H + b"Expect: 200-ok\r\nContent-Length: 2\r\n\r\nhi",
            "HTTP/1.1 417 Expectation Failed", {"connection": "close"}, b"", "closed")
answer_case("options_asterisk", b"OPTIONS * HTTP/1.1\r\n" + H + b"\r\n", "HTTP/1.1 200 OK", {}, b"", "kept")
# Answers about the app: unreachable, too slow.
answer_case("app_unreachable", b"GET / HTTP/1.1\r\n" + H + b"\r\n", "HTTP/1.1 502 Bad Gateway",
            {"content-type": TEXT, "x-content-type-options": "nosniff"}, None, "kept",
            profile=Profile("app-unreachable", {"USER_PORT": "8089"}))
answer_case("request_timeout", b"GET /delay/3000 HTTP/1.1\r\n" + H + b"\r\n", "HTTP/1.1 504 Gateway Timeout",
            {"content-type": TEXT}, b"request timeout", "kept",
            profile=Profile("timeout-2s", {"REVISION_TIMEOUT_SECONDS": "2"}))
# Probes and the other ports.
answer_case("kubelet_probe", b"GET / HTTP/1.1\r\n" + H + b"User-Agent: kube-probe/1.31\r\nK-Network-Probe: queue\r\n\r\n",
            "HTTP/1.1 200 OK", {"content-type": TEXT}, b"queue", "kept")
answer_case("admin_port_unknown_path", b"GET / HTTP/1.1\r\n" + H + b"\r\n", "HTTP/1.1 404 Not Found",
            {"content-type": TEXT, "x-content-type-options": "nosniff"}, b"404 page not found\n", "kept", port=ADMIN)
answer_case("stats_port_unknown_path", b"GET / HTTP/1.1\r\n" + H + b"\r\n", "HTTP/1.1 404 Not Found",
            {"content-type": TEXT, "x-content-type-options": "nosniff"}, b"404 page not found\n", "kept", port=STATS)

# Request-side leniency: where Go's server takes what a strict parser may refuse, each decided against
# queue-proxy and RFC 9112. Served as queue-proxy serves them unless a smuggling defence or the RFC says
# otherwise (then a deliberate difference, with why).
APP_ANSWER = {"content-type": "text/plain"}
answer_case("request_version_1_2_is_read_as_1_1", b"GET / HTTP/1.2\r\n" + H + b"\r\n", "HTTP/1.1 200 OK",
            APP_ANSWER, b"Hello from sluice-demo-app\n", "kept")
answer_case("request_tab_in_a_value", b"GET / HTTP/1.1\r\n" + H + b"X-A: a\tb\r\n\r\n", "HTTP/1.1 200 OK",
            APP_ANSWER, b"Hello from sluice-demo-app\n", "kept")
answer_case("request_lower_case_method_is_passed_on", b"get / HTTP/1.1\r\n" + H + b"\r\n", "HTTP/1.1 200 OK",
            APP_ANSWER, b"Hello from sluice-demo-app\n", "kept")
answer_case("request_empty_host_is_served", b"GET / HTTP/1.1\r\nHost:\r\n\r\n", "HTTP/1.1 200 OK",
            APP_ANSWER, b"Hello from sluice-demo-app\n", "kept")
answer_case("request_host_with_userinfo_is_refused", b"GET / HTTP/1.1\r\nHost: u@x\r\n\r\n",
            ("HTTP/1.1 400 Bad Request",), REFUSED, (b"400 Bad Request",), "closed")
answer_case("request_whitespace_before_a_colon_is_refused", b"GET / HTTP/1.1\r\n" + H + b"X-A : v\r\n\r\n",
            ("HTTP/1.1 400 Bad Request",), REFUSED, (b"400 Bad Request",), "closed")
answer_case("request_obs_fold_is_refused", b"GET / HTTP/1.1\r\n" + H + b"X-A: a\r\n b\r\n\r\n",
            ("HTTP/1.1 400 Bad Request",), REFUSED, (b"400 Bad Request",), "closed",
            why="RFC 9112 §5.2 lets a server refuse obs-fold with 400: a folded field read as two by one hop and "
                "one by another is a smuggling vector, so sluice refuses it; queue-proxy unfolds it")
answer_case("request_bare_lf_is_refused", b"GET / HTTP/1.1\n" + b"Host: x\n\n", ("HTTP/1.1 400 Bad Request",),
            REFUSED, (b"400 Bad Request",), "closed",
            why="RFC 9112 §2.2 lets a recipient refuse a bare LF: a line end one hop sees and another does not "
                "splits requests (smuggling), so sluice answers 400; queue-proxy reads LF as a line end")
answer_case("request_authority_form_for_get_is_refused", b"GET x:80 HTTP/1.1\r\n" + H + b"\r\n",
            ("HTTP/1.1 400 Bad Request",), REFUSED, (b"400 Bad Request",), "closed",
            why="RFC 9112 §3.2.3: authority-form is for CONNECT only, and a server SHOULD answer an invalid target "
                "400; queue-proxy passes `x:80` to the app as the path")
answer_case("request_asterisk_for_get_is_refused", b"GET * HTTP/1.1\r\n" + H + b"\r\n",
            ("HTTP/1.1 400 Bad Request",), REFUSED, (b"400 Bad Request",), "closed",
            why="RFC 9112 §3.2.4: asterisk-form is for OPTIONS only; queue-proxy passes `*` to the app")
answer_case("request_8bit_target_is_refused", b"GET /caf\xc3\xa9 HTTP/1.1\r\n" + H + b"\r\n",
            ("HTTP/1.1 400 Bad Request",), REFUSED, (b"400 Bad Request",), "closed",
            why="RFC 9112 §3.2 / RFC 3986: raw 8-bit bytes are no part of a target (clients percent-encode them); "
                "refused so that the app never sees a path other hops decode differently; queue-proxy passes them")
answer_case("request_fragment_in_target_is_refused", b"GET /a#b HTTP/1.1\r\n" + H + b"\r\n",
            ("HTTP/1.1 400 Bad Request",), REFUSED, (b"400 Bad Request",), "closed",
            why="RFC 9112 §3.2: a fragment is never sent in a target; queue-proxy passes `#b` on as part of it")
answer_case("request_after_an_empty_line_is_served", b"\r\nGET / HTTP/1.1\r\n" + H + b"\r\n", "HTTP/1.1 200 OK",
            APP_ANSWER, b"Hello from sluice-demo-app\n", "kept",
            why="RFC 9112 §2.2: a server SHOULD ignore at least one empty line before a request line (a client may "
                "send one after a body); queue-proxy answers 400")


@case(BASE)
def answer_request_absolute_form_target_names_the_host(t):
    """RFC 9112 §3.2.2: an absolute-form target's host is the request's, whatever Host says: the app gets
    origin-form and that host, as from queue-proxy."""
    line, _, body, end = observe(b"GET http://y.example/headers HTTP/1.1\r\nHost: x\r\n\r\n")
    check(line == "HTTP/1.1 200 OK" and end == "kept", f"{line} ({end})")
    check(clients.echoed_request_line(body).startswith("GET /headers "), f"{clients.echoed_request_line(body)!r}")
    check(clients.echoed_headers(body).get("host") == "y.example", f"the app saw Host {clients.echoed_headers(body).get('host')!r}")
