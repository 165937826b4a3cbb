"""The TLS serving port (8112): on only when /var/lib/knative/certs holds tls.crt and tls.key (the suite puts
them there in a private overlay of /var/lib), TLS 1.3 minimum unless QUEUE_PROXY_TLS_MIN_VERSION says 1.2,
the QUEUE_PROXY_TLS_* knobs (and their errors), ALPN, IPv6, and the plain ports beside it."""
import ssl
import subprocess

import clients
from cases_env import exits
from harness import ADMIN, HELLO, MAIN, TLS, Profile, case, check

TLS_ON = Profile("tls", certs=True, needs=("openssl",))
TLS12 = Profile("tls-min-1.2", {"QUEUE_PROXY_TLS_MIN_VERSION": "1.2"}, certs=True, needs=("openssl",))
TLS_MAX12 = Profile("tls-max-1.2", {"QUEUE_PROXY_TLS_MIN_VERSION": "1.2", "QUEUE_PROXY_TLS_MAX_VERSION": "1.2"},
                    certs=True, needs=("openssl",))


def tls_get(path="/", host="127.0.0.1", **ctx):
    return clients.request(path, port=TLS, host=host, tls=clients.tls_context(**ctx))


def handshake_fails(**ctx):
    try:
        r = tls_get(**ctx)
    except (ssl.SSLError, ConnectionResetError, EOFError) as e:
        return str(e)
    raise AssertionError(f"the handshake succeeded: {r.status}")


def s_client(*args):
    """`openssl s_client -brief` against 8112 with these options: (established, {field: value}) from what it
    prints (Ciphersuite, Server Temp Key, Signature type, ...)."""
    r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{TLS}", "-brief", *args], input=b"",
                       capture_output=True, timeout=30)
    out = (r.stdout + r.stderr).decode("latin-1")
    fields = {}
    for line in out.splitlines():
        k, sep, v = line.partition(": ")
        if sep:
            fields[k.strip()] = v.strip()
    return "CONNECTION ESTABLISHED" in out, fields


# With no QUEUE_PROXY_TLS_* set, what crypto/tls (queue-proxy) negotiates.

@case(TLS_ON)
def tls_default_groups_are_x25519_and_the_nist_curves(t):
    """X25519, P-256, P-384, P-521 only: a client cannot pick x448 or a finite-field group (up to ffdhe8192,
    the costliest key exchange)."""
    for group, shown in (("X25519", "X25519"), ("P-256", "prime256v1"), ("P-384", "secp384r1"), ("P-521", "secp521r1")):
        ok, f = s_client("-groups", group)
        check(ok and shown in f.get("Server Temp Key", ""), f"{group}: {ok} {f}")
    for group in ("x448", "ffdhe2048", "ffdhe8192"):
        ok, f = s_client("-groups", group)
        check(not ok, f"{group} was accepted: {f}")


@case(TLS_ON)
def tls_default_suite_is_aes_128_gcm_unless_the_client_puts_chacha20_first(t):
    for offer, chosen in (("TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_GCM_SHA256"),
                          ("TLS_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384"),
                          ("TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256", "TLS_CHACHA20_POLY1305_SHA256")):
        ok, f = s_client("-ciphersuites", offer)
        check(ok and f.get("Ciphersuite") == chosen, f"offered {offer}: {ok} {f}")


@case(TLS12, since="1.21")
def tls_default_signatures_are_gos(t):
    """ECDSA with SHA-256 or SHA-512 signs the handshake; SHA-224, which Go does not offer, is refused."""
    for offer in ("ECDSA+SHA256", "ECDSA+SHA512"):
        ok, f = s_client("-tls1_2", "-sigalgs", offer)
        check(ok, f"{offer}: {f}")
    ok, f = s_client("-tls1_2", "-sigalgs", "ECDSA+SHA224")
    check(not ok, f"ECDSA+SHA224 was accepted: {f}")


@case(TLS_ON)
def tls_port_serves_on_ipv4_and_ipv6(t):
    for host in ("127.0.0.1", "::1"):
        r = tls_get(host=host)
        check(r.status == 200 and r.body == HELLO, f"[{host}]:{TLS}: {r}")


@case(TLS_ON)
def tls_serves_the_mounted_certificate(t):
    ca = t.world.certs()[0]
    r = clients.request("/", port=TLS, tls=clients.tls_context(verify=True, cafile=ca), host="localhost")
    check(r.status == 200, f"{r}")


@case(TLS_ON)
def tls_minimum_is_1_3_by_default(t):
    handshake_fails(max_version=ssl.TLSVersion.TLSv1_2)
    r = tls_get(min_version=ssl.TLSVersion.TLSv1_3)
    check(r.status == 200, f"TLS 1.3: {r}")


@case(TLS_ON)
def tls_alpn_offers_h2_and_http11(t):
    import socket
    for offer, want in ((["h2", "http/1.1"], "h2"), (["http/1.1"], "http/1.1")):
        ctx = clients.tls_context(alpn=offer)
        with socket.create_connection(("127.0.0.1", TLS), timeout=10) as raw:
            with ctx.wrap_socket(raw) as s:
                check(s.selected_alpn_protocol() == want, f"offered {offer}: selected {s.selected_alpn_protocol()!r}")


@case(TLS_ON, since="1.20")
def tls_on_keeps_the_plain_ports(t):
    r = clients.request("/")
    check(r.status == 200 and r.body == HELLO, f"plain :{MAIN}: {r}")
    r = clients.request("/", port=ADMIN)
    check(r.status == 404, f"admin :{ADMIN} over plain HTTP: {r.status}")


@case(TLS_ON)
def tls_requests_reach_the_app_without_x_forwarded_proto(t):
    r = tls_get("/headers")
    h = clients.echoed_headers(r.body)
    check(r.status == 200 and "x-forwarded-proto" not in h and "forwarded" not in h, f"app saw {h}")
    check(h.get("x-forwarded-for") == "127.0.0.1", f"X-Forwarded-For {h.get('x-forwarded-for')!r}")


@case(TLS_ON)
def tls_health_checks(t):
    r = clients.request("/", {"User-Agent": "kube-probe/1.31", "K-Network-Probe": "queue"}, port=TLS,
                        tls=clients.tls_context())
    check(r.status == 200 and r.body == b"queue", f"{r}")


@case(TLS12, since="1.21")
def tls_min_version_1_2_accepts_1_2(t):
    r = tls_get(max_version=ssl.TLSVersion.TLSv1_2)
    check(r.status == 200 and r.body == HELLO, f"TLS 1.2: {r}")


@case(TLS_MAX12, since="1.21")
def tls_max_version_1_2_refuses_1_3(t):
    handshake_fails(min_version=ssl.TLSVersion.TLSv1_3)
    r = tls_get(max_version=ssl.TLSVersion.TLSv1_2)
    check(r.status == 200, f"TLS 1.2: {r}")


@case(Profile("tls-ciphers", {"QUEUE_PROXY_TLS_MIN_VERSION": "1.2", "QUEUE_PROXY_TLS_MAX_VERSION": "1.2",
                              "QUEUE_PROXY_TLS_CIPHER_SUITES": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                              "QUEUE_PROXY_TLS_CURVE_PREFERENCES": "CurveP256"}, certs=True, needs=("openssl",)), since="1.21")
def tls_cipher_suites_and_curves(t):
    ctx = clients.tls_context(max_version=ssl.TLSVersion.TLSv1_2)
    ctx.set_ciphers("ECDHE-ECDSA-AES256-GCM-SHA384")
    try:
        clients.request("/", port=TLS, tls=ctx)
        raise AssertionError("a suite outside QUEUE_PROXY_TLS_CIPHER_SUITES was accepted")
    except (ssl.SSLError, ConnectionResetError, EOFError):
        pass
    ctx = clients.tls_context(max_version=ssl.TLSVersion.TLSv1_2)
    ctx.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256")
    r = clients.request("/", port=TLS, tls=ctx)
    check(r.status == 200, f"{r}")


def tls_exit_case(name, variable, value, since=None):
    def fn(t):
        t.world.set_certs(True)
        try:
            exits(t, {variable: value}, variable)
        finally:
            t.world.set_certs(False)
    fn.__name__ = name
    return case(needs=("openssl",), since=since)(fn)


tls_exit_case("tls_min_version_1_1_stops", "QUEUE_PROXY_TLS_MIN_VERSION", "1.1", since="1.21")
tls_exit_case("tls_max_version_unknown_stops", "QUEUE_PROXY_TLS_MAX_VERSION", "TLSv1.3", since="1.21")
tls_exit_case("tls_cipher_suite_unknown_stops", "QUEUE_PROXY_TLS_CIPHER_SUITES", "TLS_RSA_WITH_RC4_128_SHA,NOPE", since="1.21")
tls_exit_case("tls_curve_unknown_stops", "QUEUE_PROXY_TLS_CURVE_PREFERENCES", "Curve25519", since="1.21")
tls_exit_case("tls_port_not_a_port_stops_with_certificates", "QUEUE_SERVING_TLS_PORT", "none")
