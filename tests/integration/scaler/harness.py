"""Real processes for the scaler's integration tests: the demo app as the backend, `sluice sidecar`
processes on their own loopback addresses, `sluice autoscaler serve`, requests held open against the
sidecars, and a gRPC client generated from scaler/externalscaler.proto. Loopback only; every wait has a
deadline and every load is a fixed number of requests of a fixed duration."""
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import grpc

import externalscaler_pb2 as pb
import externalscaler_pb2_grpc as pb_grpc

SLUICE = os.environ["SLUICE_BIN"]
DEMO_APP = os.environ["DEMO_APP_BIN"]


class Process:
    """A child process whose output lines are collected by a thread."""

    def __init__(self, argv, env=None):
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.argv = argv
        self.proc = subprocess.Popen(argv, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True)
        self.lines = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_for_line(self, needle, timeout=10.0):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines:
                    if needle in line:
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise RuntimeError(f"{self.argv[0]}: no line with {needle!r}; output:\n" + "\n".join(self.lines))
                self.cond.wait(left)

    def output(self):
        with self.cond:
            return "\n".join(self.lines)

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.reader.join(5)


def port_of(line):
    return int(json.loads(line)["port"])


class Backend(Process):
    def __init__(self):
        super().__init__([DEMO_APP, "--port", "0"])
        self.port = port_of(self.wait_for_line('"listening"'))


class Sidecar(Process):
    """`sluice sidecar` on `address` in front of the backend; every port picked by the kernel."""

    def __init__(self, address, backend_port, pod):
        env = {
            "CONTAINER_CONCURRENCY": "0", "QUEUE_SERVING_PORT": "0", "QUEUE_SERVING_TLS_PORT": "0",
            "USER_PORT": str(backend_port), "REVISION_TIMEOUT_SECONDS": "300", "SERVING_NAMESPACE": "default",
            "SERVING_CONFIGURATION": "demo", "SERVING_REVISION": "demo-00001", "SERVING_POD": pod,
            "SERVING_POD_IP": address, "SERVING_LOGGING_CONFIG": "", "SERVING_LOGGING_LEVEL": "info",
            "SLUICE_LISTEN_ADDRESS": address, "SLUICE_WORKERS": "1", "SLUICE_ADMIN_PORT": "0",
            "SLUICE_METRICS_PORT": "0", "SLUICE_USER_METRICS_PORT": "0", "SLUICE_DRAIN_QUIET_PERIOD_MS": "0",
        }
        super().__init__([SLUICE, "sidecar"], env)
        self.address = address
        self.port = port_of(self.wait_for_line('"listener":"proxy"'))
        self.metrics_port = port_of(self.wait_for_line('"listener":"metrics"'))

    @property
    def stat_address(self):
        return f"{self.address}:{self.metrics_port}"


class Scaler(Process):
    """`sluice autoscaler serve` (which execs sluice-autoscaler) on 127.0.0.1."""

    def __init__(self):
        super().__init__([SLUICE, "autoscaler", "serve", "--listen", "127.0.0.1", "--grpc-port", "0",
                          "--metrics-port", "0"])
        self.grpc_port = port_of(self.wait_for_line('"listener":"grpc"'))
        self.metrics_port = port_of(self.wait_for_line('"listener":"metrics"'))
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")
        self.stub = pb_grpc.ExternalScalerStub(self.channel)

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        self.channel.close()
        super().stop(sig, timeout)

    def metrics_text(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            return r.read().decode()


def ref(name, metadata, namespace="default"):
    return pb.ScaledObjectRef(name=name, namespace=namespace, scalerMetadata=metadata)


def get_metrics(scaler, scaled_object):
    response = scaler.stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=scaled_object,
                                                           metricName="kpa-desired-pods"), timeout=5)
    assert len(response.metricValues) == 1
    value = response.metricValues[0]
    assert value.metricValue == int(value.metricValueFloat)
    return value.metricValue


def is_active(scaler, scaled_object):
    return scaler.stub.IsActive(scaled_object, timeout=5).result


def prometheus_value(text, name, *fragments):
    """The sample `name{...}` whose labels contain every fragment, or None."""
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f in line for f in fragments):
            return float(line.rsplit(" ", 1)[1])
    return None


def eventually(predicate, timeout, interval=0.1):
    """Polls `predicate` until it returns a truthy value or `timeout` passes; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


class HeldRequests:
    """`count` requests to GET /delay/MS through a sidecar, each on its own connection, all sent at once
    and held by the backend for `hold_ms`. A fixed count and a fixed duration: the load is bounded."""

    def __init__(self, address, port, count, hold_ms):
        self.sockets = []
        self.started = time.monotonic()
        request = f"GET /delay/{hold_ms} HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n".encode()
        for _ in range(count):
            s = socket.create_connection((address, port), timeout=5)
            s.sendall(request)
            self.sockets.append(s)

    def wait_answered(self, timeout):
        """Reads every response (the backend answers after hold_ms); returns how many were 200."""
        deadline = time.monotonic() + timeout
        ok = 0
        for s in self.sockets:
            data = b""
            while b"\r\n\r\n" not in data:
                s.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    chunk = s.recv(4096)
                except OSError:
                    break
                if not chunk:
                    break
                data += chunk
            ok += data.startswith(b"HTTP/1.1 200")
        self.close()
        return ok

    def close(self):
        for s in self.sockets:
            s.close()
        self.sockets = []
