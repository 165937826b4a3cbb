"""Headers in and out: what reaches the app (Host, K-Original-Host, Knative-*, K-*, X-Forwarded-*, Forwarded,
hop-by-hop fields, trace context) and what reaches the client (the app's headers, hop-by-hop fields removed,
what the proxy adds itself). The app here is the suite's recorder, which keeps every request as received."""
import itertools
import uuid

import clients
from harness import HELLO, REC, Profile, case, check

_ids = itertools.count()


def through(t, headers=None, method="GET", body=None, host="127.0.0.1", **kw):
    """Sends a request through the proxy to a unique path; (response, the request the app saw)."""
    path = f"/rec/{next(_ids)}-{uuid.uuid4().hex[:8]}"
    r = clients.request(path, headers, method=method, body=body, host=host, **kw)
    seen = t.world.recorder.wait_for(lambda x: x["target"] == path, timeout=10)
    check(r.status == 200, f"{path}: {r.status} {r.body[:200]!r}")
    check(seen, f"{path} never reached the app")
    return r, seen[0]


def names(req):
    return [k.lower() for k, _ in req["headers"]]


def values(req, name):
    return [v for k, v in req["headers"] if k.lower() == name.lower()]


@case(REC)
def custom_headers_reach_the_app(t):
    _, req = through(t, [("X-Custom", "one"), ("X-Multi", "a"), ("X-Multi", "b"), ("X-Empty", "")])
    check(values(req, "x-custom") == ["one"], f"X-Custom {values(req, 'x-custom')}")
    multi = ", ".join(values(req, "x-multi"))
    check(multi == "a, b", f"X-Multi arrived as {values(req, 'x-multi')}")
    check("x-empty" in names(req), f"X-Empty (empty value) dropped: {names(req)}")


@case(REC)
def host_is_preserved(t):
    _, req = through(t, host_header="shop.example.com:8443")
    check(req["h"].get("host") == "shop.example.com:8443", f"Host {req['h'].get('host')!r}")


@case(REC)
def original_host_replaces_host(t):
    _, req = through(t, [("K-Original-Host", "app.example.com")], host_header="hello.conformance.svc")
    check(req["h"].get("host") == "app.example.com", f"Host {req['h'].get('host')!r}")
    check("k-original-host" not in names(req), "K-Original-Host reached the app")


@case(REC)
def revision_headers_are_stripped(t):
    _, req = through(t, [("Knative-Serving-Revision", "hello-00001"), ("Knative-Serving-Namespace", "conformance")])
    check("knative-serving-revision" not in names(req) and "knative-serving-namespace" not in names(req),
          f"app saw {names(req)}")


@case(REC)
def route_tag_headers_reach_the_app(t):
    _, req = through(t, [("Knative-Serving-Tag", "canary"), ("Knative-Serving-Default-Route", "true")])
    check(req["h"].get("knative-serving-tag") == "canary", f"Knative-Serving-Tag {req['h'].get('knative-serving-tag')!r}")
    check(req["h"].get("knative-serving-default-route") == "true", f"app saw {names(req)}")


@case(REC)
def knative_proxy_and_hash_headers_reach_the_app(t):
    _, req = through(t, [("K-Proxy-Request", "activator"), ("K-Network-Hash", "h1"), ("K-Passthrough-Lb", "true")])
    for n in ("k-proxy-request", "k-network-hash", "k-passthrough-lb"):
        check(n in names(req), f"{n} did not reach the app: {names(req)}")


@case(REC)
def x_forwarded_for_gets_the_client_appended(t):
    _, req = through(t, [("X-Forwarded-For", "203.0.113.9")])
    check(req["h"].get("x-forwarded-for") == "203.0.113.9, 127.0.0.1", f"X-Forwarded-For {values(req, 'x-forwarded-for')}")


@case(REC)
def x_forwarded_for_is_added_when_absent(t):
    _, req = through(t)
    check(values(req, "x-forwarded-for") == ["127.0.0.1"], f"X-Forwarded-For {values(req, 'x-forwarded-for')}")


@case(REC)
def x_forwarded_for_lines_are_joined(t):
    _, req = through(t, [("X-Forwarded-For", "203.0.113.9"), ("X-Forwarded-For", "198.51.100.7")])
    check(values(req, "x-forwarded-for") == ["203.0.113.9, 198.51.100.7, 127.0.0.1"],
          f"X-Forwarded-For {values(req, 'x-forwarded-for')}")


@case(REC)
def x_forwarded_for_of_an_ipv6_client(t):
    _, req = through(t, host="::1")
    check(values(req, "x-forwarded-for") == ["::1"], f"X-Forwarded-For {values(req, 'x-forwarded-for')}")


@case(REC)
def forwarded_is_synthesized_from_x_forwarded(t):
    _, req = through(t, [("X-Forwarded-For", "203.0.113.9, 198.51.100.7"), ("X-Forwarded-Proto", "https"),
                         ("X-Forwarded-Host", "shop.example.com")])
    check(values(req, "forwarded") == ["for=203.0.113.9;host=shop.example.com;proto=https, for=198.51.100.7"],
          f"Forwarded {values(req, 'forwarded')}")


@case(REC)
def forwarded_quotes_ipv6_nodes(t):
    _, req = through(t, [("X-Forwarded-For", "2001:db8::1")])
    check(values(req, "forwarded") == ['for="[2001:db8::1]"'], f"Forwarded {values(req, 'forwarded')}")


@case(REC)
def forwarded_from_proto_or_host_alone(t):
    _, req = through(t, [("X-Forwarded-Proto", "https")])
    check(values(req, "forwarded") == ["proto=https"], f"Forwarded {values(req, 'forwarded')}")
    _, req = through(t, [("X-Forwarded-Host", "a.example")])
    check(values(req, "forwarded") == ["host=a.example"], f"Forwarded {values(req, 'forwarded')}")


@case(REC)
def forwarded_from_the_client_is_kept(t):
    _, req = through(t, [("Forwarded", "for=192.0.2.60;proto=http"), ("X-Forwarded-For", "203.0.113.9")])
    check(values(req, "forwarded") == ["for=192.0.2.60;proto=http"], f"Forwarded {values(req, 'forwarded')}")


@case(REC)
def no_forwarded_without_x_forwarded(t):
    _, req = through(t)
    check("forwarded" not in names(req), f"Forwarded {values(req, 'forwarded')}")


@case(REC)
def nothing_else_is_added_upstream(t):
    """Besides X-Forwarded-For (and Forwarded when X-Forwarded-* came): no X-Forwarded-Proto, X-Request-Id,
    Via, User-Agent, Accept-Encoding, traceparent of its own."""
    _, req = through(t, [("Accept", "*/*")])
    extra = set(names(req)) - {"host", "accept", "x-forwarded-for", "content-length"}
    check(not extra, f"the proxy added {sorted(extra)}")


@case(REC)
def hop_by_hop_request_headers_are_removed(t):
    _, req = through(t, [("Connection", "keep-alive, X-Hop"), ("X-Hop", "1"), ("Keep-Alive", "timeout=5"),
                         ("Proxy-Connection", "keep-alive"), ("Proxy-Authorization", "Basic eDp5"),
                         ("TE", "gzip"), ("Upgrade", "something"), ("X-End", "2")])
    gone = {"connection", "x-hop", "keep-alive", "proxy-connection", "proxy-authorization", "te", "upgrade"}
    check(not gone & set(names(req)), f"reached the app: {sorted(gone & set(names(req)))}")
    check(values(req, "x-end") == ["2"], f"X-End {values(req, 'x-end')}")


@case(REC)
def te_trailers_is_kept(t):
    _, req = through(t, [("TE", "trailers")])
    check([v.lower() for v in values(req, "te")] == ["trailers"], f"TE {values(req, 'te')}")


@case(REC)
def chunked_request_reaches_the_app_with_its_body(t):
    body = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    _, req = through(t, [("Transfer-Encoding", "chunked")], method="POST", body=body)
    check(req["body"] == b"hello world", f"body {req['body']!r}")


@case(REC)
def app_response_headers_reach_the_client(t):
    r = clients.request("/respond?h=X-App:1&h=Set-Cookie:a=1&h=Set-Cookie:b=2&h=Cache-Control:no-store")
    check(r.status == 200, f"{r.status}")
    check(r.header("x-app") == "1" and r.header_values("set-cookie") == ["a=1", "b=2"], f"headers {r.headers}")
    check(r.header("cache-control") == "no-store", f"headers {r.headers}")


@case(REC)
def hop_by_hop_response_headers_are_removed(t):
    r = clients.request("/respond?h=Connection:X-Resp-Hop&h=X-Resp-Hop:1&h=Keep-Alive:timeout%3D5"
                        "&h=Proxy-Authenticate:Basic&h=Upgrade:foo&h=X-Kept:2")
    got = {k.lower() for k, _ in r.headers}
    check(not {"x-resp-hop", "keep-alive", "proxy-authenticate", "upgrade"} & got, f"reached the client: {r.headers}")
    check(r.header("x-kept") == "2", f"X-Kept missing: {r.headers}")


@case(REC)
def response_status_and_reason_from_the_app(t):
    for status in (201, 202, 301, 404, 418, 500, 503):
        r = clients.request(f"/respond?status={status}")
        check(r.status == status, f"app {status}: client got {r.status}")


@case(REC)
def responses_carry_a_date(t):
    """Go's server adds Date to every response that lacks one (the recorder sends none)."""
    r = clients.request("/respond")
    check(r.has("date"), f"no Date: {r.headers}")


@case(REC)
def no_server_header_is_added(t):
    r = clients.request("/respond")
    check(not r.has("server") and not r.has("via"), f"added: {r.headers}")


# --- trace context, with tracing off (the default) ---

@case(REC)
def trace_context_passes_unchanged_without_tracing(t):
    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    _, req = through(t, [("traceparent", tp), ("tracestate", "congo=t61rcWkgMzE"), ("baggage", "k=v")])
    check(values(req, "traceparent") == [tp], f"traceparent {values(req, 'traceparent')}")
    check(values(req, "tracestate") == ["congo=t61rcWkgMzE"], f"tracestate {values(req, 'tracestate')}")
    check(values(req, "baggage") == ["k=v"], f"baggage {values(req, 'baggage')}")


@case(REC)
def b3_headers_pass_unchanged(t):
    b3 = [("X-B3-TraceId", "463ac35c9f6413ad48485a3953bb6124"), ("X-B3-SpanId", "a2fb4a1d1a96d312"),
          ("X-B3-Sampled", "1"), ("b3", "463ac35c9f6413ad48485a3953bb6124-a2fb4a1d1a96d312-1")]
    _, req = through(t, b3)
    for k, v in b3:
        check(values(req, k) == [v], f"{k}: {values(req, k)}")


@case(Profile("demo-headers"))
def demo_app_sees_the_request_line_unchanged(t):
    r = clients.request("/headers?a=1&b=%20x")
    check(r.status == 200, f"{r.status}")
    line = clients.echoed_request_line(r.body)
    check(line == "GET /headers?a=1&b=%20x HTTP/1.1", f"request line {line!r}")


@case(Profile("demo-headers"))
def hello_through_the_proxy(t):
    r = clients.request("/")
    check(r.status == 200 and r.body == HELLO, f"{r}")
