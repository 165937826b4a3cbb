"""Request logs (OBSERVABILITY_CONFIG enableRequestLog / requestLogTemplate / enableProbeRequestLog): one line
per request on stdout, from a Go text/template over {Request (*http.Request), Response {Code, Size, Latency},
Revision {Name, Namespace, Service, Configuration, PodName, PodIP}, TraceID}: the default template, fields,
actions (if/else if/with/range/break/define/template), variables, pipelines, the built-in functions; a
template that does not parse disables the logs with an error line and never stops the process; one that fails
while executing writes queue-proxy's `Invalid request log template` line instead."""
import json
import subprocess

import clients
from harness import DEFAULT_LOG_TEMPLATE, HELLO, KUBELET, MAIN, POD, POD_IP, Profile, case, check, observability


def logging(name, template=DEFAULT_LOG_TEMPLATE, enable=True, probes=False, **extra):
    cfg = {"enableRequestLog": enable, "requestLogTemplate": template, "enableProbeRequestLog": probes}
    env = {"OBSERVABILITY_CONFIG": observability(**cfg)}
    env.update(extra)
    return Profile(f"log-{name}", env)


def lines_with(t, prefix, count=1, timeout=10):
    return t.wait_log(lambda line: line.startswith(prefix), timeout=timeout,
                      what=f"{count} line(s) starting {prefix!r}")


def never(t, pred, message, seconds=0.6):
    """Nothing matching in the binary's stdout within a short while (a request's line is written as it ends)."""
    try:
        found = t.wait_log(pred, timeout=seconds, what="")
    except AssertionError:
        return
    raise AssertionError(f"{message}: {found[-1][:300]!r}")


def json_lines(t):
    """The request-log entries (JSON objects with httpRequest) on stdout so far."""
    out = []
    for line in t.logs().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and "httpRequest" in entry:
            out.append(entry)
    return out


def logged_json(t, url, timeout=10):
    """The default template's entry for a request URL (Go's js escapes = & < > ' " as \\uXXXX or \\')."""
    from harness import wait_for
    return wait_for(lambda: next((e for e in reversed(json_lines(t)) if e["httpRequest"].get("requestUrl") == url),
                                 None), timeout, f"a request-log entry for {url}")


DEFAULT = logging("default")


@case(DEFAULT, since="1.21")
def request_log_default_template(t):
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    r = clients.request("/headers?q=1", {"User-Agent": "conformance/1", "Referer": "http://ref.example/",
                                         "traceparent": tp})
    check(r.status == 200, f"{r}")
    entry = logged_json(t, "/headers?q=1")
    h = entry["httpRequest"]
    check(h["requestMethod"] == "GET" and h["requestUrl"] == "/headers?q=1" and h["status"] == 200, f"{h}")
    check(h["requestSize"] == "0" and h["responseSize"] == str(len(r.body)), f"sizes {h}")
    check(h["userAgent"] == "conformance/1" and h["referer"] == "http://ref.example/", f"{h}")
    check(h["remoteIp"].startswith("127.0.0.1:") and h["serverIp"] == POD_IP, f"{h}")
    check(h["protocol"] == "HTTP/1.1" and h["latency"].endswith("s") and float(h["latency"][:-1]) >= 0, f"{h}")
    check(entry["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736", f"traceId {entry['traceId']!r}")


@case(DEFAULT, since="1.21")
def request_log_b3_trace_id(t):
    clients.request("/status/201", {"X-B3-TraceId": "80f198ee56343ba864fe8b2a57d3eff7"})
    entry = logged_json(t, "/status/201")
    check(entry["traceId"] == "80f198ee56343ba864fe8b2a57d3eff7", f"{entry}")


@case(DEFAULT, since="1.21")
def request_log_leaves_out_probes_by_default(t):
    clients.request("/probe-kubelet", KUBELET)
    clients.request("/probe-queue-header", {"User-Agent": "curl", "K-Network-Probe": "queue"})
    clients.request("/after-probes")
    logged_json(t, "/after-probes")
    urls = [e["httpRequest"]["requestUrl"] for e in json_lines(t)]
    check("/probe-kubelet" not in urls and "/probe-queue-header" not in urls, f"probes were logged: {urls}")


@case(DEFAULT, since="1.21")
def request_log_escapes_with_js(t):
    clients.request('/q?x="quoted"', {"User-Agent": 'agent "007" <x>'})
    h = logged_json(t, '/q?x="quoted"')["httpRequest"]
    check(h["userAgent"] == 'agent "007" <x>' and h["requestUrl"] == '/q?x="quoted"', f"{h}")


@case(logging("probes", probes=True), since="1.21")
def request_log_with_probes_enabled(t):
    clients.request("/probe-kubelet", KUBELET)
    entry = logged_json(t, "/probe-kubelet")
    check(entry["httpRequest"]["status"] == 200, f"{entry}")


FIELDS = logging("fields", "RL|{{.Request.Method}}|{{.Request.URL}}|{{.Request.Host}}|{{.Request.RequestURI}}|"
                           "{{.Request.Proto}}|{{.Request.ContentLength}}|{{.Response.Code}}|{{.Response.Size}}|"
                           "{{.Revision.Name}}|{{.Revision.Namespace}}|{{.Revision.Service}}|"
                           "{{.Revision.Configuration}}|{{.Revision.PodName}}|{{.Revision.PodIP}}|{{.TraceID}}|"
                           "{{.Request.UserAgent}}|{{.Request.Referer}}|{{.Request.URL.Path}}|{{.Request.URL.RawQuery}}|"
                           "{{.Request.Header.Get \"X-Tenant\"}}")


@case(FIELDS, since="1.21")
def request_log_fields(t):
    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    r = clients.request("/echo?x=1", {"User-Agent": "ua/1", "Referer": "ref", "traceparent": tp, "X-Tenant": "acme"},
                        method="POST", body=b"hello", host_header="shop.example")
    check(r.status == 200, f"{r}")
    found = lines_with(t, "RL|POST|/echo?x=1")
    want = (f"RL|POST|/echo?x=1|shop.example|/echo?x=1|HTTP/1.1|5|200|5|hello-00001|conformance|hello|hello|{POD}|"
            f"{POD_IP}|0af7651916cd43dd8448eb211c80319c|ua/1|ref|/echo|x=1|acme")
    check(found[-1] == want, f"logged\n{found[-1]}\nwanted\n{want}")


@case(FIELDS)
def request_log_chunked_request_size(t):
    c = clients.Conn()
    try:
        c.send(b"POST /echo?chunked HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
        check(c.read_response().status == 200, "answer")
    finally:
        c.close()
    found = lines_with(t, "RL|POST|/echo?chunked")
    check(found[-1].split("|")[6] == "-1", f"ContentLength of a chunked request: {found[-1]}")


@case(FIELDS, needs=("curl",))
def request_log_protocol_of_h2c(t):
    subprocess.run(["curl", "-sS", "--max-time", "10", "--http2-prior-knowledge", f"http://127.0.0.1:{MAIN}/h2-logged"],
                   capture_output=True, timeout=20)
    found = lines_with(t, "RL|GET|/h2-logged")
    check(found[-1].split("|")[5] == "HTTP/2.0", f"{found[-1]}")


ACTIONS = logging("actions", 'RA|{{if eq .Response.Code 404}}missing{{else if ge .Response.Code 500}}error'
                             '{{else}}fine{{end}}|{{with .Request.Header.Get "X-Tenant"}}tenant={{.}}{{else}}none'
                             '{{end}}|{{range $i, $v := .Request.Header.Values "X-Multi"}}{{$i}}={{$v}};{{else}}'
                             'empty{{end}}|{{$m := .Request.Method}}{{$m}}{{$m}}|{{.Request.Method | printf "%q"}}|'
                             '{{printf "%s-%d" .Revision.Name .Response.Code}}|'
                             '{{len (.Request.Header.Values "X-Multi")}}|{{/* a comment */}} {{- "t" -}} |'
                             '{{define "sub"}}<{{.}}>{{end}}{{template "sub" .Response.Code}}|'
                             '{{range $v := .Request.Header.Values "X-Multi"}}{{if eq $v "b"}}{{break}}{{end}}'
                             '{{$v}}{{end}}|{{block "blk" .Revision.Service}}[{{.}}]{{end}}')


@case(ACTIONS)
def request_log_actions_variables_pipelines(t):
    clients.request("/", [("X-Tenant", "acme"), ("X-Multi", "a"), ("X-Multi", "b"), ("X-Multi", "c")])
    found = lines_with(t, "RA|fine")
    check(found[-1] == 'RA|fine|tenant=acme|0=a;1=b;2=c;|GETGET|"GET"|hello-00001-200|3|t|<200>|a|[hello]',
          f"logged {found[-1]!r}")


@case(ACTIONS)
def request_log_else_branches(t):
    clients.request("/status/404")
    clients.request("/status/503")
    missing = lines_with(t, "RA|missing")
    check(missing[-1] == 'RA|missing|none|empty|GETGET|"GET"|hello-00001-404|0|t|<404>||[hello]',
          f"logged {missing[-1]!r}")
    lines_with(t, "RA|error")


FUNCS_OK = logging("functions-ok", 'RG|{{index .Request.Header "X-Tenant"}}|{{urlquery "a b&c"}}|'
                                   '{{js "it\'s <x>"}}|{{html "<b>&"}}|{{slice "abcdef" 1 3}}|{{and 1 0}}|'
                                   '{{or 0 "x"}}|{{not true}}|{{lt 1 2}}|{{print 1 2}}|'
                                   '{{eq .Request.Method "PUT" "GET"}}|{{printf "%.0f" 0.6}}|{{len .Revision.Name}}|'
                                   '{{ne .Response.Code 200}}|{{print .Response.Latency | len | lt 0}}')


@case(FUNCS_OK)
def request_log_builtin_functions_output(t):
    clients.request("/?funcs", {"X-Tenant": "acme"})
    found = lines_with(t, "RG|")
    want = "RG|[acme]|a+b%26c|it\\'s \\u003Cx\\u003E|&lt;b&gt;&amp;|bc|0|x|false|true|1 2|true|1|11|false|true"
    check(found[-1] == want, f"logged\n{found[-1]}\nwanted\n{want}")


EXEC_ERROR = logging("exec-error", "RX|{{.Nope}}")


@case(EXEC_ERROR, since="1.21")
def request_log_execution_error_line(t):
    r = clients.request("/?exec-error")
    check(r.status == 200 and r.body == HELLO, f"{r}")
    found = t.wait_log(lambda line: "Invalid request log template" in line, what="queue-proxy's error line")
    check(found[-1].startswith("Invalid request log template: method: GET, response code: 200, latency: ")
          and found[-1].endswith("url: /?exec-error"), f"logged {found[-1]!r}")
    check("RX|" not in t.logs(), "the half-executed template was written")


def unparsable(name, template):
    p = logging(name, template)

    def fn(t):
        r = clients.request(f"/?{name}")
        check(r.status == 200 and r.body == HELLO, f"{r}")
        check(t.proxy.alive(), "the process stopped")
        t.wait_log(lambda line: "error" in line.lower(), what="an error line", stream="all")
        clients.request(f"/?{name}-again")
        never(t, lambda line: name in line and "GET" in line, "a request was logged with a template that does not parse")
    fn.__name__ = f"request_log_{name.replace('-', '_')}_disables_logs"
    fn.__doc__ = f"template {template!r}"
    return case(p)(fn)


unparsable("unclosed-action", "{{.Request.Method")
unparsable("unknown-function", "{{nosuch .Request.Method}}")
unparsable("unclosed-if", "{{if .Request.Method}}x")


@case(logging("no-newline", "RN|{{.Request.Method}}|{{.Request.URL.Path}}"))
def request_log_template_gets_a_newline(t):
    clients.request("/one")
    clients.request("/two")
    lines_with(t, "RN|GET|/two")
    check("RN|GET|/one\n" in t.logs(), f"lines glued: {t.logs()[-300:]!r}")


@case(logging("disabled", "RD|{{.Request.Method}}", enable=False))
def request_log_disabled_writes_nothing(t):
    clients.request("/disabled-x")
    clients.request("/", KUBELET)
    never(t, lambda line: "RD|" in line, "logged with enableRequestLog false")


@case(logging("empty-template", ""))
def request_log_empty_template_writes_nothing(t):
    clients.request("/empty-template-x")
    never(t, lambda line: "/empty-template-x" in line, "logged with an empty template")
