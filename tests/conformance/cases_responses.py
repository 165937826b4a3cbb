"""The response side as a matrix: every way an HTTP/1.1 app may frame its answer (lengths repeated, conflicting
or beside chunked; close-delimited; 1xx before the final answer; 204/304/HEAD with length fields or bodies;
large heads and single large fields; odd status lines; a close or a reset mid-head and mid-body; trailers),
sent byte for byte by the suite's raw app (upstreams.RawApp), and what the client then receives: the interim
answers, the status line, every header but Date, the body's framing and bytes, the trailers, and how the
connection ends (kept for the next request, closed, or cut mid-body). Each expectation is what Knative's
queue-proxy v1.23 gives the same client; where a response it serves would be refused, that is a deliberate
difference with its reason."""
import clients
import upstreams
from harness import MAIN, RAW_APP, Profile, case, check, deliberate, observed_case, short

RAW = Profile("raw-app", {"USER_PORT": str(RAW_APP), "SERVING_READINESS_PROBE": (
    '{"tcpSocket":{"port":%d,"host":"127.0.0.1"},"successThreshold":1}' % RAW_APP)}, app="raw")

OK = b"HTTP/1.1 200 OK\r\n"
upstreams.RAW["next"] = [OK + b"Content-Length: 4\r\n\r\nnext"]


def observe(name, method="GET"):
    """Sends `METHOD /raw/NAME` and reads what the client receives; then, when the answer was whole, sends
    `GET /raw/next` on the same connection to see whether the proxy kept it. A dict of the observation."""
    c = clients.Conn(port=MAIN, timeout=20)
    try:
        c.send(clients.build_request(method, f"/raw/{name}"))
        try:
            r = c.read_response(head_only=method == "HEAD")
        except (EOFError, ConnectionResetError) as e:
            return {"status": None, "end": f"closed before a response ({type(e).__name__})"}
        headers = sorted(((k.lower(), short(v)) for k, v in r.headers if k.lower() != "date"),
                         key=lambda kv: kv[0])
        te = (r.header("transfer-encoding") or "").lower()
        framing = ("none" if method == "HEAD" or r.status in (204, 304) else
                   "chunked" if "chunked" in te else "length" if r.has("content-length") else "close")
        out = {"interim": [(s, sorted((k.lower(), v) for k, v in h)) for s, h in r.interim],
               "status": r.status, "reason": r.reason, "headers": headers, "framing": framing,
               "body": short(r.body), "trailers": sorted((k.lower(), v) for k, v in r.trailers)}
        if not r.complete:
            out["end"] = "cut"
        elif framing == "close":
            out["end"] = "closed"
        else:
            try:
                c.send(clients.build_request("GET", "/raw/next"))
                nxt = c.read_response()
                out["end"] = "kept" if nxt.status == 200 and nxt.body == b"next" else f"next answered {nxt!r}"
            except (EOFError, ConnectionResetError, BrokenPipeError):
                out["end"] = "closed"
        return out
    finally:
        c.close()


def matrix_case(name, steps, expect, method="GET", why=None):
    """A case named `response_NAME`: the raw app answers with steps; the client must observe expect
    (harness.observed_case)."""
    upstreams.RAW[name] = steps
    observed_case(RAW, f"response_{name}", lambda: observe(name, method), expect, __name__, why)


def served(body=b"hello", framing="length", end="kept", status=200, reason="OK", **more):
    e = {"status": status, "reason": reason, "body": body, "framing": framing, "end": end}
    e.update(more)
    return e


def headers(*pairs):
    return sorted(pairs, key=lambda kv: kv[0])


TEXT = "text/plain; charset=utf-8"
# The app's answer could not be read: 502 with a plain-text reason (its words are sluice's own: queue-proxy
# prints Go's error string), and the client's connection stays usable.
BAD_GATEWAY = {"status": 502, "reason": "Bad Gateway", "framing": "length", "end": "kept",
               "fields": {"content-type": [TEXT], "x-content-type-options": ["nosniff"]}}
HELLO5 = b"Content-Length: 5\r\n\r\nhello"
TYPED_HELLO = headers(("content-length", "5"), ("content-type", TEXT))


def cut(observed_end):
    """the response is not delivered whole (cut mid-body, or the connection closed before it)"""
    return observed_end in ("cut", "closed before a response (EOFError)", "closed before a response (ConnectionResetError)")


# Length fields. Identical repeated values are one value (RFC 9110 §8.6 lets a recipient take them so, and
# queue-proxy does); different ones, or a list in one field, are refused.
matrix_case("content_length", [OK + HELLO5], served(headers=TYPED_HELLO))
matrix_case("content_length_twice_same", [OK + b"Content-Length: 5\r\n" + HELLO5], served(headers=TYPED_HELLO))
matrix_case("content_length_case_differs", [OK + b"Content-Length: 5\r\ncontent-length: 5\r\n\r\nhello"],
            served(headers=TYPED_HELLO))
matrix_case("content_length_list_same", [OK + b"Content-Length: 5, 5\r\n\r\nhello"], BAD_GATEWAY)
matrix_case("content_length_conflicting", [OK + b"Content-Length: 6\r\n" + HELLO5 + b"!"], BAD_GATEWAY)
matrix_case("content_length_leading_zeros", [OK + b"Content-Length: 005\r\n\r\nhello"], served())
matrix_case("content_length_padded", [OK + b"Content-Length:   5  \r\n\r\nhello"], served(headers=TYPED_HELLO))
matrix_case("content_length_plus_sign", [OK + b"Content-Length: +5\r\n\r\nhello"], BAD_GATEWAY)
# Content-Length beside chunked: chunked wins and the length is dropped (RFC 9112 §6.3).
matrix_case("content_length_with_chunked", [OK + b"Content-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n"
                                            b"5\r\nhello\r\n0\r\n\r\n"], served(framing="chunked"))
matrix_case("chunked_then_content_length", [OK + b"Transfer-Encoding: chunked\r\nContent-Length: 100\r\n\r\n"
                                            b"5\r\nhello\r\n0\r\n\r\n"], served(framing="chunked"))
matrix_case("transfer_encoding_identity", [OK + b"Transfer-Encoding: identity\r\n" + HELLO5], BAD_GATEWAY)
matrix_case("chunk_extensions", [OK + b"Transfer-Encoding: chunked\r\n\r\n2;a=b\r\nhe\r\n3\r\nllo\r\n0\r\n\r\n"],
            served(framing="chunked", headers=[("transfer-encoding", "chunked")]))
matrix_case("http10_with_chunked",
            [b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "close"],
            BAD_GATEWAY,
            why="RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing: sluice answers 502; "
                "queue-proxy passes the chunked coding on as the body's bytes")
# Close-delimited bodies: streamed to an HTTP/1.1 client chunked.
matrix_case("close_delimited", [OK + b"Content-Type: text/plain\r\n\r\nhello", "close"],
            served(framing="chunked", headers=headers(("content-type", "text/plain"), ("transfer-encoding", "chunked"))))
matrix_case("close_delimited_http10", [b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello", "close"],
            served(framing="chunked"))
matrix_case("connection_close_with_length", [OK + b"Connection: close\r\n" + HELLO5, "close"],
            served(headers=TYPED_HELLO))
# 1xx before the final answer: passed on (without a Date).
matrix_case("early_hints", [b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n", OK + HELLO5],
            served(interim=[(103, [("link", "</a.css>; rel=preload")])]))
matrix_case("early_hints_empty", [b"HTTP/1.1 103 Early Hints\r\n\r\n", OK + HELLO5], served(interim=[(103, [])]))
matrix_case("unsolicited_100_continue", [b"HTTP/1.1 100 Continue\r\n\r\n", OK + HELLO5], served(interim=[(100, [])]))
matrix_case("processing_then_early_hints", [b"HTTP/1.1 102 Processing\r\n\r\n",
                                            b"HTTP/1.1 103 Early Hints\r\nLink: </b>\r\n\r\n", OK + HELLO5],
            served(interim=[(102, []), (103, [("link", "</b>")])]),
            why="RFC 9110 §15.2: a proxy MUST forward 1xx responses: sluice passes on both; queue-proxy (Go's "
                "ReverseProxy) the first only")
matrix_case("interim_then_close", [b"HTTP/1.1 100 Continue\r\n\r\n", "close"], BAD_GATEWAY,
            why="the app closed after an interim answer: sluice answers 502; queue-proxy answers 200 with Go's "
                "error text as the body")
# No body by status or method: a 204 loses its length, a 304 its length and type (queue-proxy's net/http).
matrix_case("no_content_with_length", [b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n"],
            {"status": 204, "headers": [], "end": "kept"})
matrix_case("no_content_with_body", [b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello"],
            {"status": 204, "headers": [], "end": "kept"})
matrix_case("not_modified_with_length", [b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 100\r\n\r\n"],
            {"status": 304, "headers": [("etag", '"x"')], "end": "kept"})
matrix_case("not_modified_with_type", [b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Type: text/html\r\n"
                                       b"Cache-Control: max-age=5\r\n\r\n"],
            {"status": 304, "headers": headers(("cache-control", "max-age=5"), ("etag", '"x"')), "end": "kept"})
matrix_case("head_with_length", [OK + b"Content-Length: 1234\r\n\r\n"],
            {"status": 200, "headers": [("content-length", "1234")], "end": "kept"}, method="HEAD")
matrix_case("head_without_length", [OK + b"Content-Type: text/plain\r\n\r\n"],
            {"status": 200, "headers": [("content-type", "text/plain")], "end": "kept"}, method="HEAD")
matrix_case("head_with_body", [OK + HELLO5], {"status": 200, "headers": [("content-length", "5")], "end": "kept"},
            method="HEAD")
# A body that names no type gets one from its first bytes when its length is known; one with a coding, an
# empty type or no bytes does not.
matrix_case("sniff_html", [OK + b"Content-Length: 20\r\n\r\n<html><b>hi</b></htm"],
            served(body=b"<html><b>hi</b></htm", fields={"content-type": ["text/html; charset=utf-8"]}))
matrix_case("sniff_json", [OK + b"Content-Length: 7\r\n\r\n{\"a\":1}"], served(body=b'{"a":1}', fields={"content-type": [TEXT]}))
matrix_case("sniff_binary", [OK + b"Content-Length: 4\r\n\r\n\x00\x01\x02\x03"],
            served(body=b"\x00\x01\x02\x03", fields={"content-type": ["application/octet-stream"]}))
matrix_case("sniff_png", [OK + b"Content-Length: 8\r\n\r\n\x89PNG\r\n\x1a\n"],
            served(body=b"\x89PNG\r\n\x1a\n", fields={"content-type": ["image/png"]}))
matrix_case("sniff_gzip_encoded", [OK + b"Content-Encoding: gzip\r\n" + HELLO5],
            served(headers=headers(("content-encoding", "gzip"), ("content-length", "5"))))
matrix_case("sniff_empty_body", [OK + b"Content-Length: 0\r\n\r\n"], served(body=b"", headers=[("content-length", "0")]))
matrix_case("empty_content_type", [OK + b"Content-Type:\r\n" + HELLO5],
            served(headers=headers(("content-length", "5"), ("content-type", ""))))
# Heads: large, many fields, single large fields, odd status lines, odd fields. The reason phrase is the
# registered one whatever the app sent ("status code N" for an unregistered status), as net/http writes it.
matrix_case("head_of_600k", [OK + b"".join(b"X-Big-%d: %s\r\n" % (i, b"v" * 1000) for i in range(600)) + HELLO5],
            served(fields={"x-big-599": [short("v" * 1000)]}))
matrix_case("head_of_2m", [OK + b"".join(b"X-Big-%d: %s\r\n" % (i, b"v" * 1000) for i in range(2000)) + HELLO5],
            served(fields={"x-big-1999": [short("v" * 1000)]}))
matrix_case("head_of_11m", [OK + b"".join(b"X-Big-%d: %s\r\n" % (i, b"v" * 10000) for i in range(1100)) + HELLO5],
            BAD_GATEWAY)
matrix_case("many_fields", [OK + b"".join(b"X-F%d: v\r\n" % i for i in range(3000)) + HELLO5],
            served(fields={"x-f2999": ["v"]}))
matrix_case("field_of_100k", [OK + b"X-Huge: " + b"v" * 100_000 + b"\r\n" + HELLO5],
            dict(BAD_GATEWAY, body=lambda b: b"65533" in b),
            why="limitation: one field's value is held to 65533 bytes (Beast keeps 16-bit offsets in a head): "
                "sluice answers 502 `a header field longer than 65533 bytes`; queue-proxy takes any field within "
                "its 10 MiB response head")
matrix_case("status_without_reason", [b"HTTP/1.1 200\r\n" + HELLO5], served(headers=TYPED_HELLO))
matrix_case("status_with_custom_reason", [b"HTTP/1.1 200 Very Fine Indeed\r\n" + HELLO5], served())
matrix_case("status_unregistered", [b"HTTP/1.1 299 Custom\r\n" + HELLO5], served(status=299, reason="status code 299"))
matrix_case("status_599", [b"HTTP/1.1 599 Network Timeout\r\n" + HELLO5], served(status=599, reason="status code 599"))
matrix_case("teapot_reason", [b"HTTP/1.1 418 Short And Stout\r\n" + HELLO5], served(status=418, reason="I'm a teapot"))
matrix_case("status_four_digits", [b"HTTP/1.1 2000 OK\r\n" + HELLO5], BAD_GATEWAY)
matrix_case("status_two_digits", [b"HTTP/1.1 20 OK\r\n" + HELLO5], BAD_GATEWAY)
matrix_case("status_lowercase_version", [b"http/1.1 200 OK\r\n" + HELLO5], BAD_GATEWAY)
matrix_case("status_version_2", [b"HTTP/2.0 200 OK\r\n" + HELLO5], served(headers=TYPED_HELLO))
matrix_case("status_http10_keep_alive", [b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n" + HELLO5],
            served(headers=TYPED_HELLO))
matrix_case("field_folded", [OK + b"X-Folded: a\r\n  b\r\n" + HELLO5], served(fields={"x-folded": ["a b"]}))
matrix_case("whitespace_before_first_field", [OK + b" X-Lead: v\r\n" + HELLO5], BAD_GATEWAY)
matrix_case("field_space_before_colon", [OK + b"X-Bad : v\r\n" + HELLO5], served(fields={"x-bad": ["v"]}),
            why="RFC 9112 §5.1: a proxy MUST remove whitespace between a field's name and colon and pass the "
                "field on: sluice sends `X-Bad: v`; queue-proxy drops the field")
matrix_case("field_without_colon", [OK + b"X-Bad\r\n" + HELLO5], BAD_GATEWAY)
matrix_case("field_name_with_slash", [OK + b"X/Y: v\r\n" + HELLO5], BAD_GATEWAY)
matrix_case("field_value_nul", [OK + b"X-Nul: a\x00b\r\n" + HELLO5], BAD_GATEWAY)
matrix_case("bare_cr_in_value", [OK + b"X-Cr: a\rb\r\n" + HELLO5], BAD_GATEWAY)
matrix_case("field_value_8bit", [OK + b"X-Utf8: caf\xc3\xa9\r\n" + HELLO5],
            served(fields={"x-utf8": ["caf\xc3\xa9"]}))
matrix_case("bare_lf_line_ends", [b"HTTP/1.1 200 OK\nContent-Length: 5\n\nhello"], served(headers=TYPED_HELLO))
matrix_case("set_cookie_twice", [OK + b"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\n" + HELLO5],
            served(fields={"set-cookie": ["a=1", "b=2"]}))
# Hop-by-hop fields stop at the proxy, with what Connection names.
matrix_case("connection_listed_field", [OK + b"Connection: X-Private\r\nX-Private: 1\r\nKeep-Alive: timeout=5\r\n" + HELLO5],
            served(headers=TYPED_HELLO))
matrix_case("proxy_fields_from_app", [OK + b"Proxy-Connection: keep-alive\r\nTE: trailers\r\nUpgrade: h2c\r\n"
                                           b"Proxy-Authenticate: Basic\r\n" + HELLO5], served(headers=TYPED_HELLO))
# Ends: a close or a reset before anything, mid-head, mid-body.
matrix_case("closed_before_a_response", ["close"], BAD_GATEWAY)
matrix_case("closed_mid_head", [OK + b"Content-Le", "close"], BAD_GATEWAY)
matrix_case("reset_mid_head", [OK + b"Content-Le", "reset"], BAD_GATEWAY)
matrix_case("closed_mid_body", [OK + b"Content-Length: 10\r\n\r\nhello", "close"], {"end": cut})
matrix_case("reset_mid_body", [OK + b"Content-Length: 10\r\n\r\nhello", ("sleep", 0.2), "reset"], {"end": cut})
matrix_case("closed_mid_chunked_body", [OK + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", "close"],
            {"status": 200, "end": "cut"})
# Trailers: declared or not, passed on; a Trailer naming a framing field is refused.
matrix_case("trailers_declared", [OK + b"Trailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n"
                                       b"5\r\nhello\r\n0\r\nX-Sum: abc\r\n\r\n"],
            served(framing="chunked", trailers=[("x-sum", "abc")], fields={"trailer": ["X-Sum"]}))
matrix_case("trailers_undeclared", [OK + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Late: 1\r\n\r\n"],
            served(framing="chunked", trailers=[("x-late", "1")]))
matrix_case("trailer_forbidden_field", [OK + b"Trailer: Content-Length\r\nTransfer-Encoding: chunked\r\n\r\n"
                                             b"5\r\nhello\r\n0\r\nContent-Length: 9\r\n\r\n"], BAD_GATEWAY)


@case(RAW)
@deliberate("RFC 9110 §15.2: a server must not send a 1xx response to an HTTP/1.0 client: sluice drops the app's "
            "103 for one; queue-proxy sends it")
def response_early_hints_to_an_http10_client(t):
    """RFC 9110 §15.2: a server must not send a 1xx to an HTTP/1.0 client: the app's 103 stops at the proxy."""
    c = clients.Conn(port=MAIN, timeout=20)
    try:
        c.send(clients.build_request("GET", "/raw/early_hints", version="HTTP/1.0"))
        r = c.read_response()
        check(r.status == 200 and r.body == b"hello", f"{r!r}")
        check(r.interim == [], f"interim answers reached an HTTP/1.0 client: {r.interim}")
    finally:
        c.close()
