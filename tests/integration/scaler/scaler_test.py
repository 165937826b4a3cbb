"""`sluice autoscaler serve` as KEDA sees it: a real gRPC client (stubs generated from the scaler's own
.proto) against the real scaler, which scrapes real `sluice sidecar` processes on 127.0.0.2 and
127.0.0.3 in front of the real demo app, under held-open requests.

Run one test: /usr/bin/python3 scaler_test.py ScalerTest.test_name (ctest does, with the env it needs)."""
import os
import signal
import subprocess
import time
import unittest

import grpc

import harness as h

# Knative's defaults, written out: 100 per pod at 70 % utilization, so 350 in flight want 5 pods.
TARGET = {"metric": "concurrency", "target": "100", "target-utilization-percentage": "70"}



def need(name):
    """Goes on where this machine has `name` (tests/support/capability.sh probes it); otherwise skips the
    test, or fails it where SLUICE_REQUIRED_CAPABILITIES declares the machine has it."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support", "capability.sh")
    r = subprocess.run(["bash", script, name], capture_output=True, text=True, timeout=180)
    if r.returncode == 77:
        raise unittest.SkipTest(r.stdout.strip())
    if r.returncode != 0:
        raise AssertionError(r.stdout.strip() or r.stderr.strip())


class ScalerTest(unittest.TestCase):
    def setUp(self):
        self.processes = []
        self.loads = []
        self.backend = self.start(h.Backend)
        self.sidecar_a = self.start(h.Sidecar, "127.0.0.2", self.backend.port, "demo-00001-a")
        self.sidecar_b = self.start(h.Sidecar, "127.0.0.3", self.backend.port, "demo-00001-b")
        self.scaler = self.start(h.Scaler)

    def tearDown(self):
        for load in self.loads:
            load.close()
        for p in reversed(self.processes):
            p.stop()
        # A clean exit (0 after SIGTERM) also means no sanitizer report from the scaler.
        self.assertEqual(self.scaler.proc.returncode, 0, self.scaler_says("the scaler's exit status"))

    def start(self, kind, *args):
        p = kind(*args)
        self.processes.append(p)
        return p

    def hold(self, sidecar, count, hold_ms):
        load = h.HeldRequests(sidecar.address, sidecar.port, count, hold_ms)
        self.loads.append(load)
        return load

    def both_sidecars(self, **extra):
        metadata = {"scalerAddress": "sluice-autoscaler:6000",  # KEDA passes its own key along
                    "sidecars": f"{self.sidecar_a.stat_address},{self.sidecar_b.stat_address}"}
        metadata.update(TARGET)
        metadata.update(extra)
        return metadata

    def sidecar_a_only(self, **extra):
        """A revision KEDA has scaled down to its one minimum pod: the KPA may take it to zero (from 2 ready
        pods it may only halve, to 1, and these pods stay: nothing here scales them)."""
        metadata = {"sidecars": self.sidecar_a.stat_address}
        metadata.update(TARGET)
        metadata.update(extra)
        return metadata

    def scaler_says(self, what):
        return f"{what}\n--- scaler output ---\n{self.scaler.output()}"

    def test_get_metrics_follows_the_kpa_decision(self):
        so = h.ref("hello", self.both_sidecars())
        spec = self.scaler.stub.GetMetricSpec(so, timeout=5)
        self.assertEqual([(m.metricName, m.targetSize, m.targetSizeFloat) for m in spec.metricSpecs],
                         [("kpa-desired-pods", 1, 1.0)])
        # Before any load: the KPA (started among 2 ready pods, so in panic mode) keeps what is there.
        self.assertEqual(h.get_metrics(self.scaler, so), 2)

        self.hold(self.sidecar_a, 175, 60000)
        self.hold(self.sidecar_b, 175, 60000)
        # 350 in flight / (100 × 0.7) = 5, reached through the panic window (6 s of the 60 s default).
        seen = []
        reached = h.eventually(lambda: seen.append(h.get_metrics(self.scaler, so)) or seen[-1] == 5, 25, 0.2)
        self.assertTrue(reached, self.scaler_says(f"GetMetrics answered {seen}, never 5"))
        self.assertLessEqual(max(seen), 5, "the KPA never wants more than 350 / 70")
        # The panic window fills up to exactly the 350 held requests (a time-weighted average over whole
        # seconds in which all 350 were in flight), and the decision stays at 5.
        labels = ('namespace_name="default"', 'revision_name="hello"')
        self.assertTrue(h.eventually(lambda: h.prometheus_value(self.scaler.metrics_text(),
                                                                "autoscaler_panic_request_concurrency",
                                                                *labels) == 350, 10),
                        self.scaler_says(self.scaler.metrics_text()))
        self.assertEqual(h.get_metrics(self.scaler, so), 5)
        text = self.scaler.metrics_text()
        self.assertEqual(h.prometheus_value(text, "autoscaler_desired_pods", *labels), 5)
        self.assertEqual(h.prometheus_value(text, "autoscaler_actual_pods", *labels), 2)
        self.assertEqual(h.prometheus_value(text, "autoscaler_panic_mode", *labels), 1)
        for sidecar in (self.sidecar_a, self.sidecar_b):
            self.assertGreater(h.prometheus_value(text, "sluice_autoscaler_scrapes_total",
                                                  f'pod="{sidecar.stat_address}"') or 0, 0)
        self.assertTrue(h.is_active(self.scaler, so))

    def test_is_active_turns_false_a_stable_window_after_the_last_request(self):
        # Knative's timing (kpa/scaler.go): the revision is deactivated once it has been active a stable
        # window and the decider wants 0, i.e. a stable window without traffic; with the default
        # target-burst-capacity (211 > one pod's 100) the buffer has been in the path all along, longer
        # than the grace period, so zero follows at once (the grace period does not add to it).
        stable, grace = 6.0, 2.0
        so = h.ref("hello", self.sidecar_a_only(**{"stable-window": "6s", "scale-to-zero-grace-period": "2s"}))
        self.assertTrue(h.is_active(self.scaler, so))
        load = self.hold(self.sidecar_a, 20, 1500)
        self.assertEqual(load.wait_answered(10), 20)
        last_traffic = time.monotonic()

        states = []

        def inactive():
            states.append((time.monotonic(), h.is_active(self.scaler, so)))
            return not states[-1][1]

        self.assertTrue(h.eventually(inactive, stable + grace + 6, 0.1), self.scaler_says("IsActive stayed true"))
        went_false = states[-1][0]
        # A stable window of empty 1 s buckets after the bucket of the last stat with load (slack: that
        # bucket's truncation and the scrape round's start time).
        self.assertGreaterEqual(went_false - last_traffic, stable - 1.5,
                                f"IsActive turned false {went_false - last_traffic:.2f} s after the last request")
        self.assertTrue(all(active for _, active in states[:-1]))
        print(f"IsActive false {went_false - last_traffic:.2f} s after the last request "
              f"(stable window {stable} s; grace {grace} s already served behind the buffer)")

    def test_stream_is_active_reports_load_within_a_second(self):
        so = h.ref("hello", self.sidecar_a_only(**{"stable-window": "6s", "scale-to-zero-grace-period": "1s"}))
        stream = self.scaler.stub.StreamIsActive(so, timeout=60)
        try:
            # First the current state (one pod), then a change: the idle revision goes to zero once it has
            # been active a stable window (the buffer was in the path all along).
            self.assertTrue(next(stream).result)
            self.assertFalse(next(stream).result)
            pod = f'pod="{self.sidecar_a.stat_address}"'
            scrapes_before = h.prometheus_value(self.scaler.metrics_text(), "sluice_autoscaler_scrapes_total", pod)
            self.hold(self.sidecar_a, 10, 5000)
            load_started = time.monotonic()
            self.assertTrue(next(stream).result)
            latency = time.monotonic() - load_started
            scrapes = h.prometheus_value(self.scaler.metrics_text(), "sluice_autoscaler_scrapes_total", pod) - scrapes_before
        finally:
            stream.cancel()
        print(f"StreamIsActive pushed true {latency * 1000:.0f} ms and {scrapes:.0f} scrapes after the load started")
        # Counted in the scaler's own scrapes, not in wall time (a busy machine stretches both sides alike):
        # an idle sidecar closes its Stat period at its first request, so the next scrape (every 250 ms while
        # at zero) sees the load and the scaler pushes at once. One scrape may already be under way when the
        # load starts, and one may land between the push and this read: within 1 s means at most 4.
        self.assertLessEqual(scrapes, 4)

    def test_scrapes_four_times_a_second_at_zero_and_once_a_second_when_active(self):
        so = h.ref("hello", self.sidecar_a_only(**{"stable-window": "6s", "scale-to-zero-grace-period": "1s"}))
        self.assertTrue(h.is_active(self.scaler, so))
        self.assertTrue(h.eventually(lambda: not h.is_active(self.scaler, so), 30, 0.1),
                        self.scaler_says("never at zero"))
        pod = f'pod="{self.sidecar_a.stat_address}"'

        def scrape_rate():
            # Scrapes per second over an interval this test measures (the interval is the input, not a wait
            # for something to happen); both rates are taken in the same run, so a busy machine slows both.
            first = h.prometheus_value(self.scaler.metrics_text(), "sluice_autoscaler_scrapes_total", pod)
            start = time.monotonic()
            time.sleep(3)
            count = h.prometheus_value(self.scaler.metrics_text(), "sluice_autoscaler_scrapes_total", pod) - first
            return count / (time.monotonic() - start)

        at_zero = scrape_rate()
        self.hold(self.sidecar_a, 10, 20000)
        self.assertTrue(h.eventually(lambda: h.is_active(self.scaler, so), 10, 0.1), self.scaler_says("never active"))
        active = scrape_rate()
        print(f"scrapes per second: {at_zero:.2f} at zero, {active:.2f} active")
        self.assertGreater(active, 0)
        # 250 ms against 1 s rounds: four times as often; at least 2.5 times leaves room for a late round.
        self.assertGreaterEqual(at_zero, 2.5 * active, f"{at_zero:.2f} at zero, {active:.2f} active")

    def test_killing_one_sidecar_leaves_the_scaler_answering_from_the_other(self):
        # No panic (threshold 1000 %) and a 6 s stable window, so the decision follows the stable average.
        metadata = self.both_sidecars(**{"stable-window": "6s", "panic-threshold-percentage": "1000"})
        so = h.ref("hello", metadata)
        self.assertIn(h.get_metrics(self.scaler, so), (1, 2))
        self.hold(self.sidecar_a, 175, 60000)
        self.hold(self.sidecar_b, 175, 60000)
        self.assertTrue(h.eventually(lambda: h.get_metrics(self.scaler, so) == 5, 25, 0.2),
                        self.scaler_says("never 5 with both sidecars loaded"))

        self.sidecar_b.stop(signal.SIGKILL)
        dead = self.sidecar_b.stat_address
        # 175 left on A: ceil(175 / 70) = 3 once the stable window has forgotten B's share. Every answer on
        # the way is a value (never an error), and B's failures show on the scaler's /metrics.
        answers = []
        self.assertTrue(h.eventually(lambda: answers.append(h.get_metrics(self.scaler, so)) or answers[-1] == 3,
                                     20, 0.2), self.scaler_says(f"answers after the kill: {answers}"))
        self.assertTrue(all(3 <= a <= 5 for a in answers), answers)
        text = self.scaler.metrics_text()
        self.assertGreater(h.prometheus_value(text, "sluice_autoscaler_scrape_errors_total", f'pod="{dead}"',
                                              'reason="connect"') or 0, 0)
        self.assertEqual(h.prometheus_value(text, "autoscaler_actual_pods", 'revision_name="hello"'), 1)

        # B leaves the list (as it would leave the headless Service): its series are dropped.
        metadata["sidecars"] = self.sidecar_a.stat_address
        self.assertEqual(h.get_metrics(self.scaler, h.ref("hello", metadata)), 3)
        self.assertTrue(h.eventually(lambda: f'pod="{dead}"' not in self.scaler.metrics_text(), 5),
                        self.scaler_says("the dropped pod's series stayed"))

    def test_malformed_metadata_is_invalid_argument_naming_the_key(self):
        cases = {
            "stable-window": {**self.both_sidecars(), "stable-window": "soon"},
            "target": {**self.both_sidecars(), "target": "-5"},
            "min-scale": {**self.both_sidecars(), "min-scale": "3", "max-scale": "2"},
            "stabel-window": {**self.both_sidecars(), "stabel-window": "6s"},
            "sidecars": {**TARGET},
        }
        cases_sidecars = {"sidecars": "127.0.0.2:99999"}
        for key, metadata in list(cases.items()) + [("sidecars", cases_sidecars)]:
            for call in (lambda so: self.scaler.stub.GetMetricSpec(so, timeout=5),
                         lambda so: self.scaler.stub.IsActive(so, timeout=5),
                         lambda so: self.scaler.stub.GetMetrics(h.pb.GetMetricsRequest(scaledObjectRef=so),
                                                                timeout=5)):
                with self.assertRaises(grpc.RpcError) as caught:
                    call(h.ref("bad", metadata))
                self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, key)
                self.assertIn(key, caught.exception.details())
        # The same ScaledObject with good metadata then works: a bad value changed nothing.
        self.assertIn(h.get_metrics(self.scaler, h.ref("bad", self.both_sidecars())), (1, 2))

    def test_a_dns_name_is_resolved_to_its_pods(self):
        need("localhost")
        # `localhost` stands for a headless Service: its A record is a pod, found by lookup, not listed.
        local = self.start(h.Sidecar, "127.0.0.1", self.backend.port, "demo-00001-c")
        so = h.ref("dns", {"sidecars": f"localhost:{local.metrics_port}", **TARGET})
        self.assertIn(h.get_metrics(self.scaler, so), (0, 1))
        pod = f'pod="127.0.0.1:{local.metrics_port}"'
        self.assertTrue(h.eventually(
            lambda: (h.prometheus_value(self.scaler.metrics_text(), "sluice_autoscaler_scrapes_total", pod) or 0) >= 2,
            5), self.scaler_says("the name's address was not scraped"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
