"""Timeouts (REVISION_TIMEOUT_SECONDS, REVISION_RESPONSE_START_TIMEOUT_SECONDS, REVISION_IDLE_TIMEOUT_SECONDS,
including 0 and a request that times out while queued) and the breaker (CONTAINER_CONCURRENCY)."""
import threading
import time

import clients
from harness import BASE, HELLO, KUBELET, Profile, case, check, deliberate

TIMEOUT = Profile("timeout-2s", {"REVISION_TIMEOUT_SECONDS": "2"})
RESPONSE_START = Profile("response-start-1s", {"REVISION_TIMEOUT_SECONDS": "10",
                                               "REVISION_RESPONSE_START_TIMEOUT_SECONDS": "1"})
IDLE = Profile("idle-1s", {"REVISION_TIMEOUT_SECONDS": "10", "REVISION_IDLE_TIMEOUT_SECONDS": "1"})


def timed(path, timeout=30, **kw):
    started = time.time()
    r = clients.request(path, timeout=timeout, **kw)
    return r, time.time() - started


@case(TIMEOUT)
def request_timeout_is_504_before_the_response(t):
    r, took = timed("/delay/4000")
    check(r.status == 504 and r.body.strip() == b"request timeout", f"{r}")
    check(1.8 <= took <= 3.8, f"answered after {took:.1f}s (timeout 2 s)")


@case(TIMEOUT)
def request_timeout_after_the_response_started_ends_it(t):
    """The head is out when the timeout passes: the response ends there, without the rest of the body."""
    r, took = timed("/slow-body/10/400", timeout=20)
    check(r.status == 200, f"{r}")
    check(b"chunk 9" not in r.body, f"the whole body arrived: {r.body!r}")
    check(b"chunk 0" in r.body and took <= 5, f"body {r.body!r} after {took:.1f}s")


@case(TIMEOUT)
def quick_requests_are_not_touched_by_the_timeout(t):
    r, _ = timed("/delay/500")
    check(r.status == 200 and r.body == b"delayed 500\n", f"{r}")


@case(TIMEOUT)
def health_checks_are_not_timed(t):
    r = clients.request("/", KUBELET)
    check(r.status == 200 and r.body == b"queue", f"{r}")


@case(RESPONSE_START)
def response_start_timeout_is_504(t):
    r, took = timed("/delay/3000")
    check(r.status == 504 and r.body.strip() == b"request timeout", f"{r}")
    check(0.8 <= took <= 2.6, f"answered after {took:.1f}s (response-start timeout 1 s)")


@case(RESPONSE_START)
def response_start_timeout_stops_counting_at_the_first_byte(t):
    r, took = timed("/slow-body/3/700")
    check(r.status == 200 and r.complete and r.body == b"chunk 0\nchunk 1\nchunk 2\n", f"{r} after {took:.1f}s")


@case(RESPONSE_START)
@deliberate("queue-proxy cuts upgraded connections when the response-start timeout passes "
            "(knative/serving#16169); sluice keeps only the idle and request timeouts for them")
def websocket_outlives_the_response_start_timeout(t):
    ws = clients.WebSocket(timeout=20)
    try:
        check(ws.status == 101, f"handshake answered {ws.status}")
        check(ws.echo("before") == "before", "echo differs")
        time.sleep(2.0)  # the connection idles past the 1 s response-start timeout: that is the scenario
        try:
            check(ws.echo("still here") == "still here", "echo differs")
        except (ConnectionError, OSError) as e:
            raise AssertionError(f"the upgraded connection was cut: {e}") from e
    finally:
        ws.close()


@case(IDLE)
def idle_timeout_is_504_before_any_byte(t):
    r, took = timed("/delay/3000")
    check(r.status == 504 and r.body.strip() == b"request timeout", f"{r}")
    check(0.8 <= took <= 2.6, f"answered after {took:.1f}s (idle timeout 1 s)")


@case(IDLE)
def idle_timeout_ends_a_silent_stream(t):
    r, took = timed("/slow-body/3/1600", timeout=20)
    check(r.status == 200 and b"chunk 2" not in r.body, f"{r} after {took:.1f}s")
    check(took <= 4, f"ended after {took:.1f}s")


@case(IDLE)
def idle_timeout_spares_a_chatty_stream(t):
    r, took = timed("/slow-body/5/500")
    check(r.status == 200 and r.complete and r.body.count(b"chunk") == 5, f"{r} after {took:.1f}s")


@case(Profile("timeout-zero", {"REVISION_TIMEOUT_SECONDS": "0"}))
@deliberate("REVISION_TIMEOUT_SECONDS=0 means no timeout in sluice; queue-proxy arms a 0 s timer and "
            "every proxied request is a 504 at once")
def revision_timeout_zero_is_no_timeout(t):
    r, _ = timed("/delay/300")
    check(r.status == 200, f"{r}")
    r = clients.request("/", KUBELET)
    check(r.status == 200 and r.body == b"queue", f"health check {r}")


# --- the breaker ---

BREAKER = Profile("breaker-cc1", {"CONTAINER_CONCURRENCY": "1"})


def concurrent(paths, timeout=60):
    results = [None] * len(paths)

    def one(i, p):
        try:
            results[i] = clients.request(p, timeout=timeout)
        except Exception as e:  # noqa: BLE001 - recorded
            results[i] = e
    threads = [threading.Thread(target=one, args=(i, p)) for i, p in enumerate(paths)]
    for th in threads:
        th.start()
        time.sleep(0.005)  # keep the arrival order
    return threads, results


@case(BREAKER)
def breaker_queues_ten_times_the_concurrency_then_503(t):
    """CONTAINER_CONCURRENCY=1: one in flight, ten waiting, the rest 503 `pending request queue full`."""
    threads, results = concurrent(["/delay/700"] * 14)
    for th in threads:
        th.join(60)
    ok = [r for r in results if getattr(r, "status", 0) == 200]
    full = [r for r in results if getattr(r, "status", 0) == 503]
    check(len(ok) == 11 and len(full) == 3, f"{len(ok)} served, {len(full)} refused: {results[:3]}")
    check(all(r.body.startswith(b"pending request queue full") for r in full), f"503 body {full[0].body!r}")


@case(BREAKER)
def breaker_serves_one_at_a_time(t):
    started = time.time()
    threads, results = concurrent(["/delay/400"] * 3)
    for th in threads:
        th.join(30)
    took = time.time() - started
    check(all(getattr(r, "status", 0) == 200 for r in results), f"{results}")
    check(took >= 1.15, f"three 400 ms requests took {took:.2f}s with concurrency 1")


@case(BREAKER)
def health_checks_bypass_a_busy_breaker(t):
    threads, results = concurrent(["/delay/1000"] * 3)
    try:
        time.sleep(0.2)  # all 3 are in (1 in flight, 2 waiting)
        started = time.time()
        r = clients.request("/", KUBELET, timeout=10)
        check(r.status == 200 and r.body == b"queue" and time.time() - started < 1, f"health check {r}")
        r = clients.request("/", {"User-Agent": "Knative-Activator-Probe", "K-Network-Probe": "queue"}, timeout=10)
        check(r.status == 200 and r.body == b"queue", f"activator probe {r}")
    finally:
        for th in threads:
            th.join(60)


@case(Profile("breaker-timeout", {"CONTAINER_CONCURRENCY": "1", "REVISION_TIMEOUT_SECONDS": "2"}))
def request_times_out_while_queued(t):
    """Waiting in the breaker's queue counts toward the request timeout: the second of two 1.5 s requests
    waits 1.5 s for the first, so its 2 s pass before the app answers it: 504 `request timeout` 2 s after it
    was sent (it would be a 200 at 3 s if the wait did not count)."""
    started = time.time()
    threads, results = concurrent(["/delay/1500", "/delay/1500"])
    done = {}
    for i, th in enumerate(threads):
        th.join(30)
        done[i] = time.time() - started
    statuses = sorted(getattr(r, "status", 0) for r in results)
    check(statuses == [200, 504], f"answers {results} (one served, the one that waited timed out)")
    late = [i for i, r in enumerate(results) if r.status == 504][0]
    check(results[late].body.strip() == b"request timeout", f"the queued one: {results[late]}")
    check(done[late] < 2.9, f"the queued one answered after {done[late]:.1f}s")


@case(BASE)
def no_breaker_with_concurrency_zero(t):
    started = time.time()
    threads, results = concurrent(["/delay/800"] * 40)
    for th in threads:
        th.join(30)
    check(all(getattr(r, "status", 0) == 200 for r in results), f"{[getattr(r, 'status', r) for r in results]}")
    check(time.time() - started < 5, f"40 requests of 800 ms took {time.time() - started:.1f}s: not in parallel")
    r = clients.request("/")
    check(r.body == HELLO, "after")
