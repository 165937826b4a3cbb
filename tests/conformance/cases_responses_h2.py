"""The response side as a matrix over h2c to the app: how an HTTP/2 app may frame its answer (lengths absent,
repeated, conflicting or wrong; 1xx before the final answer; 204/304/HEAD with lengths or DATA; header blocks
large or split into CONTINUATION frames; fields HTTP/2 forbids: upper case, connection-specific, pseudo-fields
out of place, bad :status; a RST_STREAM, a GOAWAY, a close or a reset before and mid-body; trailers), sent frame
by frame by the suite's raw h2c app (upstreams.RawH2App), and what an HTTP/2 client then receives: the interim
header blocks, the :status and every field but date, the body's bytes, the trailers, how the stream ended
(END_STREAM, RST_STREAM and its code) and whether the connection serves the next request.

The revision's port is 8013, Knative's for a container port named h2c: queue-proxy sends an HTTP/2 client's
requests to the app as h2c on any port; sluice on this one. Each expectation is what Knative's queue-proxy
v1.23 gives the same client; where a response it serves would be refused, that is a deliberate difference
with its reason."""
import json
import time

import clients
import upstreams
from harness import RAW_H2_APP, Profile, case, check, observed_case, short
from upstreams import H2Step

H2C = 8013
RAW_H2 = Profile("raw-h2-app", {"USER_PORT": str(RAW_H2_APP), "QUEUE_SERVING_PORT": str(H2C),
                                "SERVING_READINESS_PROBE": json.dumps({"tcpSocket": {"port": RAW_H2_APP, "host": "127.0.0.1"},
                                                                       "successThreshold": 1})},
                 needs=("python-hpack",), app="raw-h2")

H, D = H2Step.headers, H2Step.data
upstreams.RAW_H2["next"] = [H([(":status", "200"), ("content-length", "4")]), D(b"next", end=True)]

# RFC 9113 §7 error codes, by the names an observation uses.
ERRORS = {0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR", 3: "FLOW_CONTROL_ERROR", 5: "STREAM_CLOSED",
          6: "FRAME_SIZE_ERROR", 7: "REFUSED_STREAM", 8: "CANCEL", 9: "COMPRESSION_ERROR", 10: "CONNECT_ERROR",
          11: "ENHANCE_YOUR_CALM", 13: "HTTP_1_1_REQUIRED"}


def _end(end):
    if isinstance(end, tuple):
        return f"{end[0]} {ERRORS.get(end[1], end[1])}"
    return end


def observe(name, method="GET"):
    """Sends `METHOD /raw/NAME` on stream 1 and reads what the client receives; then sends `GET /raw/next` on
    the same connection to see whether it still serves. A dict of the observation."""
    c = clients.H2Conn(port=H2C, timeout=20)
    try:
        st = c.read(c.request(method, f"/raw/{name}"))
        out = {"end": _end(st.end)}
        interim = [b for b in st.blocks if (dict(b).get(":status") or "").startswith("1")]
        final = [b for b in st.blocks if b not in interim]
        if interim:
            out["interim"] = [(dict(b).get(":status"), sorted((k, v) for k, v in b if not k.startswith(":")))
                              for b in interim]
        if final:
            head = final[0]
            out["status"] = dict(head).get(":status")
            out["headers"] = sorted(((k, short(v)) for k, v in head if k != "date" and not k.startswith(":")),
                                    key=lambda kv: kv[0])
            out["body"] = short(st.body)
            out["trailers"] = sorted(final[1]) if len(final) > 1 else []
        if st.end not in ("closed", "timeout") and not (isinstance(st.end, tuple) and st.end[0] == "goaway"):
            nxt = c.read(c.request("GET", "/raw/next"))
            ok = nxt.end == "end" and nxt.body == b"next"
            out["conn"] = "kept" if ok else f"next: {_end(nxt.end)} {nxt.blocks[:1]}"
        else:
            out["conn"] = "closed"
        return out
    finally:
        c.close()


def matrix_case(name, steps, expect, method="GET", why=None):
    """A case named `response_h2_NAME`: the raw h2c app answers with steps; the client must observe expect
    (harness.observed_case)."""
    upstreams.RAW_H2[name] = steps
    observed_case(RAW_H2, f"response_h2_{name}", lambda: observe(name, method), expect, __name__, why)


def served(body=b"hello", status="200", **more):
    e = {"status": status, "body": body, "end": "end", "conn": "kept", "trailers": []}
    e.update(more)
    return e


def status(s, *fields):
    return [(":status", s), *fields]


TEXT = "text/plain; charset=utf-8"
CL5, TYPED, PLAIN = ("content-length", "5"), ("content-type", TEXT), ("content-type", "text/plain")
HELLO = D(b"hello", end=True)
# The app's answer could not be used: 502 with a plain-text reason (its words are sluice's own: queue-proxy
# prints Go's error string), and the client's connection stays usable.
BAD_GATEWAY = {"status": "502", "end": "end", "conn": "kept",
               "fields": {"content-type": [TEXT], "x-content-type-options": ["nosniff"]}}


def cut(observed_end):
    """the stream is not ended cleanly (a RST_STREAM from the proxy)"""
    return isinstance(observed_end, str) and observed_end.startswith("rst ")


# Lengths. With no content-length the body is passed on as it comes.
# A body of known length that names no type gets one from its first bytes (WHATWG sniffing, as net/http).
matrix_case("content_length", [H(status("200", CL5)), HELLO], served(headers=[CL5, TYPED]))
matrix_case("typed_without_length", [H(status("200", PLAIN)), HELLO], served(headers=[PLAIN]))
matrix_case("untyped_without_length", [H(status("200")), HELLO], served(headers=[]))
matrix_case("body_in_many_frames", [H(status("200", PLAIN)), D(b"he"), D(b""), D(b"ll"), D(b"o", end=True)],
            served(headers=[PLAIN]))
matrix_case("padded_frames", [H(status("200", CL5, PLAIN), pad=7), D(b"hello", end=True, pad=9)],
            served(headers=[CL5, PLAIN]))
matrix_case("content_length_twice_same", [H(status("200", CL5, CL5)), HELLO], BAD_GATEWAY,
            why="limitation: nghttp2 holds the app's h2c answers to RFC 9113's rules and takes a repeated "
                "content-length as malformed (RFC 9110 §8.6 lets a recipient refuse it): sluice answers 502; "
                "queue-proxy serves the response with one content-length")
MALFORMED_LENGTH = ("RFC 9113 §8.1.1: a content-length that differs from the DATA frames' length makes the response "
                    "malformed, and an intermediary MUST NOT forward it: sluice answers 502; queue-proxy serves it "
                    "with the first value, or none")
matrix_case("content_length_conflicting", [H(status("200", CL5, ("content-length", "6"))), HELLO], BAD_GATEWAY,
            why=MALFORMED_LENGTH)
matrix_case("content_length_not_a_number", [H(status("200", ("content-length", "five"))), HELLO], BAD_GATEWAY,
            why=MALFORMED_LENGTH)
matrix_case("content_length_longer_than_body", [H(status("200", ("content-length", "10"))), HELLO],
            {"end": cut, "conn": "kept"})
matrix_case("content_length_shorter_than_body", [H(status("200", ("content-length", "3"))), HELLO],
            {"end": cut, "conn": "kept"})
matrix_case("empty_data_end_stream", [H(status("200", PLAIN)), D(b"", end=True)], served(body=b"", headers=[PLAIN]))
# HEADERS that end the stream: an empty body, declared as such.
matrix_case("headers_end_stream", [H(status("200", PLAIN), end=True)],
            served(body=b"", headers=[("content-length", "0"), PLAIN]))
# 1xx before the final answer.
# 1xx before the final answer: each passed on, an app's unasked 100 too.
matrix_case("early_hints", [H(status("103", ("link", "</a.css>; rel=preload"))), H(status("200", CL5)), HELLO],
            served(interim=[("103", [("link", "</a.css>; rel=preload")])], headers=[CL5, TYPED]))
matrix_case("unsolicited_100_continue", [H(status("100")), H(status("200", CL5)), HELLO],
            served(interim=[("100", [])], headers=[CL5, TYPED]))
matrix_case("processing_then_early_hints", [H(status("102")), H(status("103", ("link", "</b>"))),
                                            H(status("200", CL5)), HELLO],
            served(interim=[("102", []), ("103", [("link", "</b>")])]),
            why="RFC 9110 §15.2: a proxy MUST forward 1xx responses: sluice passes on both; queue-proxy (Go's "
                "ReverseProxy) the first only")
matrix_case("interim_with_end_stream", [H(status("103"), end=True)], BAD_GATEWAY)
# No body by status or method. queue-proxy resets the stream where a declared length is not met by its own
# server's rules; sluice answers as for HTTP/1.1: a 204 or 304 loses its length, a 304 its type.
matrix_case("no_content_with_length", [H(status("204", CL5), end=True)], BAD_GATEWAY,
            why="RFC 9110 §8.6: a 204 must not carry a content-length; nghttp2 takes it as malformed: sluice "
                "answers 502; queue-proxy resets the client's stream (INTERNAL_ERROR)")
matrix_case("no_content_with_data", [H(status("204")), HELLO],
            {"status": "204", "headers": [], "end": "end", "body": b"", "conn": "kept"},
            why="a 204 has no content (RFC 9110 §15.3.5): sluice ends the 204 and drops the app's DATA; "
                "queue-proxy sends the 204 and then resets the stream (INTERNAL_ERROR)")
matrix_case("not_modified_with_length_and_type", [H(status("304", ("etag", '"x"'), ("content-length", "100"),
                                                            ("content-type", "text/html")), end=True)],
            {"status": "304", "headers": [("etag", '"x"')], "end": "end", "conn": "kept"},
            why="a 304 may declare the length of what it stands for (RFC 9113 §8.1.1): sluice sends the 304 "
                "without length and type, as net/http does over HTTP/1.1; queue-proxy resets the client's stream "
                "(INTERNAL_ERROR)")
matrix_case("head_with_length", [H(status("200", ("content-length", "1234")), end=True)],
            served(body=b"", headers=[("content-length", "1234")]), method="HEAD")
matrix_case("head_with_data", [H(status("200", CL5)), HELLO], served(body=b"", headers=[CL5]), method="HEAD")
matrix_case("sniff_html", [H(status("200", ("content-length", "13"))), D(b"<html>hi</htm", end=True)],
            served(body=b"<html>hi</htm", headers=[("content-length", "13"), ("content-type", "text/html; charset=utf-8")]))
matrix_case("sniff_html_without_length", [H(status("200")), D(b"<html>hi</htm", end=True)],
            served(body=b"<html>hi</htm", headers=[]))
# Heads: large, split, many fields, single large fields.
matrix_case("head_in_continuations", [H(status("200", CL5, ("x-a", "1"), ("x-b", "2")), split=5), HELLO],
            served(headers=[CL5, TYPED, ("x-a", "1"), ("x-b", "2")]))
matrix_case("head_of_600k", [H(status("200", CL5, *((f"x-big-{i}", "v" * 1000) for i in range(600)))), HELLO],
            served(fields={"x-big-599": [short("v" * 1000)]}))
matrix_case("head_of_11m", [H(status("200", CL5, *((f"x-big-{i}", "v" * 10000) for i in range(1100)))), HELLO],
            BAD_GATEWAY)
matrix_case("many_fields", [H(status("200", CL5, *((f"x-f{i}", "v") for i in range(3000)))), HELLO],
            served(fields={"x-f2999": ["v"]}))
matrix_case("field_of_100k", [H(status("200", CL5, ("x-huge", "v" * 100_000))), HELLO], BAD_GATEWAY,
            why="limitation: one field's value is held to 65533 bytes (a head is kept as Beast's fields, 16-bit "
                "offsets): sluice answers 502; queue-proxy takes any field within its 10 MiB response head")
matrix_case("set_cookie_twice", [H(status("200", CL5, ("set-cookie", "a=1"), ("set-cookie", "b=2"))), HELLO],
            served(fields={"set-cookie": ["a=1", "b=2"]}))
matrix_case("field_value_8bit", [H(status("200", CL5, ("x-utf8", "caf\xc3\xa9"))), HELLO],
            served(fields={"x-utf8": ["caf\xc3\xa9"]}))
# :status.
matrix_case("status_unregistered", [H(status("299", CL5)), HELLO], served(status="299", headers=[CL5, TYPED]))
matrix_case("status_599", [H(status("599", CL5)), HELLO], served(status="599", headers=[CL5, TYPED]))
matrix_case("status_missing", [H([CL5]), HELLO], BAD_GATEWAY)
BAD_STATUS = ("RFC 9113 §8.3.2: :status is a three-digit code: sluice answers 502; queue-proxy's client takes any "
              "number, its server then refuses to write it and resets the client's stream (INTERNAL_ERROR)")
matrix_case("status_two_digits", [H(status("20", CL5)), HELLO], BAD_GATEWAY, why=BAD_STATUS)
matrix_case("status_four_digits", [H(status("2000", CL5)), HELLO], BAD_GATEWAY, why=BAD_STATUS)
matrix_case("status_not_a_number", [H(status("abc", CL5)), HELLO], BAD_GATEWAY)
matrix_case("status_with_reason", [H(status("200 OK", CL5)), HELLO], BAD_GATEWAY)
matrix_case("status_twice", [H(status("200", (":status", "201"), CL5)), HELLO], BAD_GATEWAY)
# Fields HTTP/2 forbids (RFC 9113 §8.2): the answer is malformed.
matrix_case("field_name_upper_case", [H(status("200", CL5, ("X-Upper", "v"))), HELLO], BAD_GATEWAY)
matrix_case("pseudo_field_after_regular", [H([CL5, (":status", "200")]), HELLO], BAD_GATEWAY)
matrix_case("pseudo_field_unknown", [H(status("200", (":foo", "bar"), CL5)), HELLO], BAD_GATEWAY)
matrix_case("pseudo_field_of_a_request", [H(status("200", (":path", "/"), CL5)), HELLO], BAD_GATEWAY)
matrix_case("field_value_newline", [H(status("200", CL5, ("x-bad", "a\nb"))), HELLO], BAD_GATEWAY)
matrix_case("field_value_nul", [H(status("200", CL5, ("x-bad", "a\x00b"))), HELLO], BAD_GATEWAY)
matrix_case("field_value_padded", [H(status("200", CL5, ("x-pad", " v "))), HELLO], BAD_GATEWAY,
            why="RFC 9113 §8.2.1: a field value that starts or ends with whitespace makes the response malformed, "
                "and an intermediary MUST NOT forward it: sluice answers 502; queue-proxy passes ` v ` on")
matrix_case("field_name_empty", [H(status("200", CL5, ("", "v"))), HELLO], BAD_GATEWAY)
matrix_case("field_name_with_space", [H(status("200", CL5, ("x bad", "v"))), HELLO], BAD_GATEWAY)
CONNECTION_SPECIFIC = ("RFC 9113 §8.2.2: a connection-specific field makes the response malformed, and an "
                       "intermediary MUST NOT forward it: sluice answers 502; queue-proxy drops the field and serves")
matrix_case("connection_field", [H(status("200", CL5, ("connection", "close"))), HELLO], BAD_GATEWAY,
            why=CONNECTION_SPECIFIC)
matrix_case("transfer_encoding_chunked", [H(status("200", CL5, ("transfer-encoding", "chunked"))), HELLO], BAD_GATEWAY,
            why=CONNECTION_SPECIFIC)
matrix_case("keep_alive_and_upgrade", [H(status("200", CL5, ("keep-alive", "timeout=5"), ("upgrade", "h2c"),
                                                ("proxy-connection", "keep-alive"))), HELLO], BAD_GATEWAY,
            why=CONNECTION_SPECIFIC)
matrix_case("te_trailers", [H(status("200", CL5, ("te", "trailers"))), HELLO], served(headers=[CL5, TYPED]))
# Trailers.
def declares_x_sum(headers):
    """the head is `trailer: x-sum` alone (field names compared without case)"""
    return [(k, v.lower()) for k, v in headers or []] == [("trailer", "x-sum")]


matrix_case("trailers", [H(status("200", ("trailer", "x-sum"))), D(b"hello"), H([("x-sum", "abc")], end=True)],
            served(trailers=[("x-sum", "abc")], headers=declares_x_sum))
matrix_case("trailers_undeclared", [H(status("200")), D(b"hello"), H([("x-late", "1")], end=True)],
            served(trailers=[("x-late", "1")], headers=[]))
matrix_case("trailers_without_body", [H(status("200")), H([("grpc-status", "0")], end=True)],
            served(body=b"", trailers=[("grpc-status", "0")], headers=[]))
matrix_case("trailers_with_pseudo_field", [H(status("200")), D(b"hello"), H([(":status", "200"), ("x-t", "1")], end=True)],
            {"end": cut})
matrix_case("trailers_without_end_stream", [H(status("200")), D(b"hello"), H([("x-t", "1")]), ("sleep", 0.2),
                                            D(b"more", end=True)], {"end": cut})
# Ends: RST_STREAM, GOAWAY, a close or a reset before the answer and mid-body.
matrix_case("rst_before_headers", [("rst", 2)], BAD_GATEWAY)
matrix_case("rst_cancel_before_headers", [("rst", 8)], BAD_GATEWAY)
matrix_case("rst_mid_body", [H(status("200", ("content-length", "10"))), D(b"hello"), ("sleep", 0.2), ("rst", 2)],
            {"end": cut})
matrix_case("rst_no_error_after_end", [H(status("200", CL5)), HELLO, ("rst", 0)], served(headers=[CL5, TYPED]))
matrix_case("goaway_after_answer", [H(status("200", CL5)), HELLO, ("goaway", 0), "close"], served(headers=[CL5, TYPED]))
matrix_case("goaway_then_close_before_headers", [("goaway", 2), "close"], BAD_GATEWAY)
matrix_case("closed_before_headers", ["close"], BAD_GATEWAY)
matrix_case("reset_before_headers", ["reset"], BAD_GATEWAY)
matrix_case("closed_mid_body", [H(status("200", ("content-length", "10"))), D(b"hello"), ("sleep", 0.2), "close"],
            {"end": cut})
matrix_case("reset_mid_body", [H(status("200", ("content-length", "10"))), D(b"hello"), ("sleep", 0.2), "reset"],
            {"end": cut})
matrix_case("data_before_headers", [D(b"hello", end=True)], BAD_GATEWAY)


# Two DATA frames of a full frame's size and a third: the response leaves through several frames.
upstreams.RAW_H2["after-idle"] = [H([(":status", "200"), ("content-type", "text/plain"), ("x-same", "every time")]),
                                  D(b"a" * 16384), D(b"b" * 16384), D(b"c" * 100, end=True)]


@case(RAW_H2)
def h2_connection_idle_for_two_seconds_serves_on(t):
    """An HTTP/2 connection left idle for 2 s serves its next requests as it served its first: the same
    fields each time (HPACK's dynamic tables, both ways, outlive the idle time) and the same body over
    several DATA frames. (sluice gives an idle session's frame buffer pages back after 1 s.)"""
    c = clients.H2Conn(port=H2C, timeout=20)
    asked = [("x-asked", "the same field")]
    try:
        first = c.read(c.request("GET", "/raw/after-idle", asked))
        check(first.end == "end" and len(first.body) == 2 * 16384 + 100, f"first: {first.end} {len(first.body)} bytes")
        head = sorted(kv for kv in first.blocks[0] if kv[0] != "date")
        time.sleep(2)  # the idle time is what this case is about, not a wait for something
        for i in range(2):
            st = c.read(c.request("GET", "/raw/after-idle", asked))
            check(st.end == "end" and st.body == first.body, f"after the idle time, #{i + 1}: {st.end} {len(st.body)} bytes")
            check(sorted(kv for kv in st.blocks[0] if kv[0] != "date") == head, f"#{i + 1}: {st.blocks[0]} vs {head}")
    finally:
        c.close()
