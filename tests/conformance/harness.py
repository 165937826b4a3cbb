"""The conformance suite's machinery: the environment Knative injects, profiles (a binary started with that
environment plus overrides), the case registry, the binary-under-test process, waits, and the runner of one
shard (a set of profiles run in one private network namespace)."""
import copy
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

import clients

# Ports as in a pod: queue-proxy's fixed ones and the user container's.
MAIN, TLS, ADMIN, STATS, USER_METRICS, PROFILING = 8012, 8112, 8022, 9090, 9091, 8008
APP = 8080            # sluice-demo-app, the user container
RECORDER = 8081       # the suite's recording HTTP server (probe target, header/limit app)
RECORDER_TLS = 8443   # the same over TLS
RAW_APP = 8082        # the suite's raw app (a response's head and body byte for byte)
RAW_H2_APP = 8083     # the same over h2c (frame by frame)
GRPC_APP = 8090       # the suite's gRPC app (health + echo)
CERT_DIR = "/var/lib/knative/certs"

POD = "hello-00001-deployment-7d9f8b6c5-x2x4z"
POD_IP = "127.0.0.1"
HELLO = b"Hello from sluice-demo-app\n"

# queue-proxy's DefaultRequestLogTemplate (knative.dev/serving/pkg/observability), what config-observability
# holds unless an operator changes it.
DEFAULT_LOG_TEMPLATE = (
    '{"httpRequest": {"requestMethod": "{{.Request.Method}}", "requestUrl": "{{js .Request.RequestURI}}", '
    '"requestSize": "{{.Request.ContentLength}}", "status": {{.Response.Code}}, "responseSize": "{{.Response.Size}}", '
    '"userAgent": "{{js .Request.UserAgent}}", "remoteIp": "{{js .Request.RemoteAddr}}", "serverIp": '
    '"{{.Revision.PodIP}}", "referer": "{{js .Request.Referer}}", "latency": "{{.Response.Latency}}s", '
    '"protocol": "{{.Request.Proto}}"}, "traceId": "{{.TraceID}}"}')

# config-logging's zap-logger-config, as Knative ships it.
ZAP_CONFIG = json.dumps({
    "level": "info", "development": False, "outputPaths": ["stdout"], "errorOutputPaths": ["stderr"],
    "encoding": "json", "encoderConfig": {
        "timeKey": "timestamp", "levelKey": "severity", "nameKey": "logger", "callerKey": "caller",
        "messageKey": "message", "stacktraceKey": "stacktrace", "lineEnding": "", "levelEncoder": "",
        "timeEncoder": "iso8601", "durationEncoder": "", "callerEncoder": ""}})

DEFAULT_PROBE = json.dumps({"tcpSocket": {"port": APP, "host": "127.0.0.1"}, "successThreshold": 1})


def observability(**overrides):
    """OBSERVABILITY_CONFIG as the reconciler marshals config-observability's defaults, with overrides merged
    in (a nested dict merges, any other value replaces; None removes the key)."""
    cfg = {"tracing": {"protocol": "none"}, "metrics": {"protocol": "none"},
           "runtime": {"profiling": "disabled", "exportInterval": 15000000000},
           "requestMetrics": {"protocol": "none"}, "requestLogTemplate": DEFAULT_LOG_TEMPLATE}

    def merge(dst, src):
        for k, v in src.items():
            if v is None:
                dst.pop(k, None)
            elif isinstance(v, dict) and isinstance(dst.get(k), dict):
                merge(dst[k], v)
            else:
                dst[k] = copy.deepcopy(v)
    merge(cfg, overrides)
    return json.dumps(cfg)


def base_env():
    """What pkg/reconciler/revision/resources/queue.go (v1.23) injects for a revision with defaults: service
    hello, containerConcurrency 0, timeoutSeconds 300, the default TCP readiness probe, no TLS settings."""
    return {
        "SERVING_NAMESPACE": "conformance",
        "SERVING_SERVICE": "hello",
        "SERVING_CONFIGURATION": "hello",
        "SERVING_REVISION": "hello-00001",
        "QUEUE_SERVING_PORT": str(MAIN),
        "QUEUE_SERVING_TLS_PORT": str(TLS),
        "CONTAINER_CONCURRENCY": "0",
        "REVISION_TIMEOUT_SECONDS": "300",
        "REVISION_RESPONSE_START_TIMEOUT_SECONDS": "0",
        "REVISION_IDLE_TIMEOUT_SECONDS": "0",
        "SERVING_POD": POD,
        "SERVING_POD_IP": POD_IP,
        "SERVING_LOGGING_CONFIG": ZAP_CONFIG,
        "SERVING_LOGGING_LEVEL": "info",
        "USER_PORT": str(APP),
        "SYSTEM_NAMESPACE": "knative-serving",
        "SERVING_READINESS_PROBE": DEFAULT_PROBE,
        "HOST_IP": "127.0.0.1",
        "ENABLE_HTTP2_AUTO_DETECTION": "false",
        "ENABLE_HTTP_FULL_DUPLEX": "false",
        "ROOT_CA": "",
        "QUEUE_PROXY_TLS_MIN_VERSION": "",
        "QUEUE_PROXY_TLS_MAX_VERSION": "",
        "QUEUE_PROXY_TLS_CIPHER_SUITES": "",
        "QUEUE_PROXY_TLS_CURVE_PREFERENCES": "",
        "ENABLE_MULTI_CONTAINER_PROBES": "false",
        "OBSERVABILITY_CONFIG": observability(),
    }


# Cases where Knative's queue-proxy answers otherwise on purpose (sluice is better for the user there).
# With --flavor queue-proxy they are expected to fail (XFAIL); passing is reported (XPASS).
DELIBERATE = {}


def deliberate(reason):
    def deco(fn):
        DELIBERATE[fn.__name__] = reason
        return fn
    return deco


class Skip(Exception):
    pass


class Profile:
    """A binary started with base_env() plus env (a dict, or a function of the World giving one; a None value
    unsets the variable). shard: the network namespace it runs in. certs: /var/lib/knative/certs holds a
    certificate. wait: extra ports to wait for. needs: tools without which its cases are skipped. restart:
    start the binary again for the next case when it exited (not for cases that end it on purpose)."""

    def __init__(self, name, env=None, shard="main", certs=False, wait=(), needs=(), app="demo", restart=True):
        self.name, self.env, self.shard, self.certs, self.restart = name, env or {}, shard, certs, restart
        self.wait, self.needs, self.app = tuple(wait), tuple(needs), app

    def environment(self, world):
        env = base_env()
        env.update(self.env(world) if callable(self.env) else self.env)
        return env


class Case:
    def __init__(self, fn, profile, needs, shard, since):
        self.fn, self.name, self.profile, self.needs = fn, fn.__name__, profile, tuple(needs)
        self.area = fn.__module__.replace("cases_", "")
        self.shard = profile.shard if profile else (shard or "main")
        self.since = since


def release_key(release):
    """"1.22" -> (1, 22), for comparing Knative releases."""
    return tuple(int(x) for x in release.lstrip("v").split(".")[:2])


# The queue-proxy release the suite measures by default: what its cases describe.
LATEST = "1.23"


CASES = []


def case(profile=None, needs=(), shard=None, since=None):
    """Registers a case. With a profile the case runs against that running binary; without one it starts
    binaries itself (t.start). since: the Knative release whose queue-proxy first behaves so (against an
    earlier one, with --release, a failure is expected: LATER)."""
    def deco(fn):
        CASES.append(Case(fn, profile, needs, shard, since))
        return fn
    return deco


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def short(v):
    """A long value as its length and digest, so that a failure message stays readable."""
    if isinstance(v, (bytes, str)) and len(v) > 120:
        raw = v.encode("latin-1") if isinstance(v, str) else v
        return f"<{len(raw)} bytes {hashlib.sha1(raw).hexdigest()[:12]}>"
    return v


def observed_case(profile, name, observe, expect, module, why=None):
    """Registers a case `name` (in `module`'s area) that checks observe(), a dict, against expect: each key
    of the observation it names must be equal (a callable: must hold of it), and `fields` names header
    fields whose values (a list) must be these (an empty list: absent). `why` makes it deliberate."""
    def fn(t):
        got = observe()
        diff = {}
        for k, v in expect.items():
            if k == "fields":
                have = {n: [x for h, x in got.get("headers", []) if h == n] for n in v}
                diff.update({f"field {n}": (have[n], want) for n, want in v.items() if have[n] != want})
            elif callable(v):
                if not v(got.get(k)):
                    diff[k] = (got.get(k), v.__doc__)
            elif got.get(k) != v:
                diff[k] = (got.get(k), v)
        check(not diff, f"differs (got, expected): {diff}; whole observation: {got}")
    fn.__name__ = name
    fn.__module__ = module
    if why:
        fn = deliberate(why)(fn)
    case(profile)(fn)


def wait_for(fn, timeout, what, interval=0.05):
    """Polls fn until it returns a true value (returned) or timeout seconds pass (AssertionError with what).
    Exceptions from fn count as not yet."""
    deadline = time.time() + timeout
    last = None
    while True:
        try:
            v = fn()
            if v:
                return v
            last = v
        except Exception as e:  # noqa: BLE001 - not yet
            last = e
        if time.time() >= deadline:
            raise AssertionError(f"{what} (waited {timeout:.0f}s; last: {last!r:.300})")
        time.sleep(interval)


def ensure_localhost(tmp):
    """In this shard's private mount namespace, makes `localhost` resolve as it does in a pod (the kubelet
    writes /etc/hosts). A bare chroot has no /etc/hosts: there, an overlay on /etc holds one, so the
    machine's own /etc is never written. Returns the overlay's scratch directory to unmount, or None."""
    try:
        socket.getaddrinfo("localhost", None)
        return None
    except socket.gaierror:
        pass
    hosts = "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"
    if os.path.exists("/etc/hosts"):
        path = os.path.join(tmp, "hosts")
        with open(path, "w") as f:
            f.write(hosts)
        subprocess.run(["mount", "--bind", path, "/etc/hosts"], check=True, capture_output=True)
        return None
    base = os.path.join(tmp, "etc-overlay")
    os.makedirs(base, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", base], check=True, capture_output=True)
    os.makedirs(f"{base}/u")
    os.makedirs(f"{base}/w")
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o", f"lowerdir=/etc,upperdir={base}/u,workdir={base}/w",
                    "/etc"], check=True, capture_output=True)
    with open("/etc/hosts", "w") as f:
        f.write(hosts)
    return base


def port_open(port, host="127.0.0.1"):
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


CAPABILITY_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "capability.sh")


NODE_USER = 65534  # a per-node pod's stub runs as a user other than root, as Knative's queue-proxy does


def node_cgroup_base():
    """A cgroup v2 directory of this suite's own (under the one it runs in), where each per-node pod's stub
    gets a cgroup named as the kubelet names a pod's (pod<UID>/queue-proxy)."""
    root = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[fields.index("-") + 1] == "cgroup2":
                root = fields[4]
                break
    own = next(l.split(":", 2)[2].strip() for l in open("/proc/self/cgroup") if l.startswith("0::"))
    if root is None:
        raise RuntimeError("no cgroup v2 hierarchy mounted: per-node mode's stubs need one")
    base = os.path.join(root + own, f"sluice-conformance-{os.getpid()}")
    os.makedirs(base, exist_ok=True)
    return base


def _die_with_parent(new_session=False):
    """For a child process: killed when this process ends (PR_SET_PDEATHSIG), so that nothing the suite
    started outlives it, even when it is killed itself."""
    def setup():
        if new_session:
            os.setsid()
        try:
            import ctypes
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    return setup


class World:
    """What one shard has: the binary's flavor and path, a scratch directory, the demo app, the recorder, and
    lazily the TLS recorder, the gRPC app, certificates and the /var/lib overlay."""

    def __init__(self, flavor, binary, app_binary, tmp, release=LATEST):
        self.flavor, self.binary, self.app_binary, self.tmp = flavor, binary, app_binary, tmp
        self.release = release
        self._tools = {}
        self._certs = None
        self._overlay = None
        self._grpc = None
        self._recorder_tls = None
        self._raw = None
        self._raw_h2 = None
        self._otlp = None
        self.proxies = 0
        self.all_proxies = []
        self.demo = subprocess.Popen([app_binary, "--port", str(APP)], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     preexec_fn=_die_with_parent())
        line = self.demo.stdout.readline()
        if b"listening" not in line:
            raise RuntimeError(f"the demo app did not start: {line!r}")
        from upstreams import Recorder
        self.recorder = Recorder(RECORDER)
        self.node_agent = None
        if flavor == "sluice-node":
            # `sluice node`, which every case's pod joins through its stub (app/node/join.h) on the pod's own
            # socket: published as the kubelet publishes a pod's volume (Proxy.publish), the stub run as a
            # user other than root in a cgroup named for its pod (node_cgroup), as in a cluster.
            self.node_control = os.path.join(tmp, "control", "control.sock")
            os.chmod(tmp, 0o711)  # the stubs' user (and its proxy) reaches the suite's certificates below it
            self.node_public = tempfile.mkdtemp(prefix="sluice-node-conformance-")
            os.chmod(self.node_public, 0o755)  # the stubs' user reaches the volumes and the binary there
            shutil.copy(binary, os.path.join(self.node_public, "sluice"))
            self.node_stub_binary = os.path.join(self.node_public, "sluice")
            self.node_cgroup_base = node_cgroup_base()
            self.node_volumes = 0
            log = os.path.join(tmp, "node-agent.log")
            with open(log, "wb") as out:
                self.node_agent = subprocess.Popen([binary, "node"],
                                                   env={"SLUICE_NODE_CONTROL_SOCKET": self.node_control,
                                                        "SLUICE_NODE_MAX_PODS": "2000"},
                                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                   preexec_fn=_die_with_parent())
            deadline = time.time() + 10
            while not os.path.exists(self.node_control):
                if time.time() > deadline or self.node_agent.poll() is not None:
                    raise RuntimeError(f"the node agent did not start: {open(log, 'rb').read()[-500:]!r}")
                time.sleep(0.01)

    def node_command(self, *args):
        """A root command to the agent (`sluice node ...`): its reply."""
        r = subprocess.run([self.binary, "node", *args], env={"SLUICE_NODE_CONTROL_SOCKET": self.node_control},
                           capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            raise RuntimeError(f"sluice node {' '.join(args)}: {r.stdout.strip()} {r.stderr.strip()}")
        return r.stdout

    def need(self, *names):
        """Capabilities of the machine (tests/support/capability.sh probes them): a missing one skips the
        case, or fails it where SLUICE_REQUIRED_CAPABILITIES declares the machine has it."""
        for n in names:
            if n not in self._tools:
                r = subprocess.run(["bash", CAPABILITY_SH, n], capture_output=True, text=True, timeout=180)
                self._tools[n] = (r.returncode, (r.stdout.strip() or r.stderr.strip()))
            code, why = self._tools[n]
            if code == 77:
                raise Skip(why)
            if code != 0:
                raise AssertionError(why)

    def certs(self):
        if self._certs is None:
            self.need("openssl")
            from upstreams import make_certs
            d = os.path.join(self.tmp, "certs")
            os.makedirs(d, exist_ok=True)
            os.chmod(d, 0o755)  # the CA, as a pod's trust store, readable by a per-node pod's proxy
            self._certs = make_certs(d)
        return self._certs  # (ca, cert, key)

    @property
    def recorder_tls(self):
        if self._recorder_tls is None:
            from upstreams import Recorder
            _, cert, key = self.certs()
            self._recorder_tls = Recorder(RECORDER_TLS, tls_cert=(cert, key))
        return self._recorder_tls

    @property
    def raw(self):
        if self._raw is None:
            from upstreams import RawApp
            self._raw = RawApp(RAW_APP)
        return self._raw

    @property
    def raw_h2(self):
        if self._raw_h2 is None:
            self.need("python-hpack")
            from upstreams import RawH2App
            self._raw_h2 = RawH2App(RAW_H2_APP)
        return self._raw_h2

    @property
    def grpc(self):
        if self._grpc is None:
            self.need("python-grpc")
            from upstreams import GrpcApp
            self._grpc = GrpcApp(GRPC_APP)
        return self._grpc

    def otlp(self):
        """The gRPC/HTTP OTLP test collector (tests/support/otlp_receiver.py): (process, lines, ports)."""
        if self._otlp is None:
            self.need("python-otlp")
            here = os.path.dirname(os.path.abspath(__file__))
            receiver = os.path.join(here, "..", "support", "otlp_receiver.py")
            protos = os.path.join(here, "..", "..", "proxy", "telemetry", "proto")
            if not os.path.exists(receiver) or not os.path.isdir(protos):
                raise Skip("tests/support/otlp_receiver.py or proxy/telemetry/proto missing")
            p = subprocess.Popen(["/usr/bin/python3", receiver, "--proto-dir", protos], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
                                 preexec_fn=_die_with_parent())
            first = json.loads(p.stdout.readline())
            lines = []
            import threading

            def pump():
                for line in p.stdout:
                    try:
                        lines.append(json.loads(line))
                    except ValueError:
                        pass
            threading.Thread(target=pump, daemon=True).start()
            self._otlp = (p, lines, first)
        return self._otlp

    def set_certs(self, present):
        """Makes /var/lib/knative/certs hold the certificate (or not exist): an overlay on /var/lib in this
        shard's private mount namespace, so the machine's own /var/lib is never written."""
        if not present and self._overlay is None:
            if os.path.exists(CERT_DIR):
                raise RuntimeError(f"{CERT_DIR} exists on this machine: TLS would be on in every profile")
            return
        if self._overlay is None:
            base = os.path.join(self.tmp, "overlay")
            os.makedirs(base, exist_ok=True)
            r = subprocess.run(["mount", "-t", "tmpfs", "tmpfs", base], capture_output=True, text=True)
            if r.returncode == 0:
                os.makedirs(f"{base}/u")
                os.makedirs(f"{base}/w")
                r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                                    f"lowerdir=/var/lib,upperdir={base}/u,workdir={base}/w", "/var/lib"],
                                   capture_output=True, text=True)
            if r.returncode != 0:
                raise Skip(f"this machine cannot overlay /var/lib to hold {CERT_DIR}: {r.stderr.strip()}")
            self._overlay = base
        if present:
            _, cert, key = self.certs()
            os.makedirs(CERT_DIR, exist_ok=True)
            shutil.copy(cert, f"{CERT_DIR}/tls.crt")
            shutil.copy(key, f"{CERT_DIR}/tls.key")
            os.chmod(f"{CERT_DIR}/tls.key", 0o644)  # as a Secret volume shows it to queue-proxy's non-root user
        elif os.path.exists(CERT_DIR):
            shutil.rmtree(CERT_DIR)

    def close(self):
        for proxy in self.all_proxies:
            proxy.kill()
        for p in [self.demo] + ([self._otlp[0]] if self._otlp else []) + ([self.node_agent] if self.node_agent else []):
            p.kill()
            p.wait()
        if self._grpc:
            self._grpc.server.stop(0)
        if self.node_agent:
            shutil.rmtree(self.node_public, ignore_errors=True)
            for d in [os.path.join(self.node_cgroup_base, e) for e in os.listdir(self.node_cgroup_base)] + [self.node_cgroup_base]:
                try:
                    os.rmdir(os.path.join(d, "queue-proxy")) if os.path.isdir(os.path.join(d, "queue-proxy")) else None
                    os.rmdir(d)
                except OSError:
                    pass


class Proxy:
    """The binary under test, started with env (exactly: PATH and HOSTNAME besides, as in a pod)."""

    def __init__(self, world, env, label):
        world.proxies += 1
        base = os.path.join(world.tmp, f"{world.proxies:03d}-{label}")
        self.out_path, self.err_path = base + ".stdout", base + ".stderr"
        full = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOSTNAME": POD}
        full.update({k: v for k, v in env.items() if v is not None})
        for k, v in env.items():
            if v is None:
                full.pop(k, None)
        self.env = full
        self.flavor = world.flavor
        self.world = world
        self.volume = None
        setup = _die_with_parent(new_session=True)
        if world.flavor == "sluice-node":  # the pod's stub; the pod's proxy is the agent's (World.node_agent)
            full["SLUICE_NODE_SOCKET"] = self.publish(world, full)
            args = [world.node_stub_binary, "node-stub"]
            procs = os.path.join(self.cgroup, "cgroup.procs")
            die_with_parent = setup

            def setup():  # into the pod's cgroup, then the pod's user (which clears the parent-death signal)
                with open(procs, "w") as f:
                    f.write("0")
                os.setgroups([])
                os.setgid(NODE_USER)
                os.setuid(NODE_USER)
                die_with_parent()
        else:
            args = [world.binary] + (["sidecar"] if world.flavor == "sluice" else [])
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.p = subprocess.Popen(args, env=full, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                      preexec_fn=setup, cwd=world.node_public if self.volume else world.tmp)
        self.started = time.time()
        world.all_proxies.append(self)

    def publish(self, world, env):
        """The kubelet's part: this pod's volume published to the agent (its own socket) and a cgroup named for
        the pod; the socket's path."""
        world.node_volumes += 1
        n = world.node_volumes
        self.volume = f"conformance-{n}"
        uid = f"00000000-0000-4000-8000-{n:012d}"
        self.target = os.path.join(world.node_public, "volumes", self.volume)
        self.cgroup = os.path.join(world.node_cgroup_base, f"pod{uid}", "queue-proxy")
        os.makedirs(self.cgroup, exist_ok=True)
        # Knative sets both from the pod's metadata; a case that empties or unsets them names no pod.
        namespace = env.get("SERVING_NAMESPACE") or "conformance"
        name = env.get("SERVING_POD") or POD
        world.node_command("publish", self.volume, namespace, name, uid, self.target)
        return os.path.join(self.target, "node.sock")

    def unpublish(self):
        if self.volume is None:
            return
        self.world.node_command("unpublish", self.volume, self.target)
        for d in (self.cgroup, os.path.dirname(self.cgroup)):
            deadline = time.time() + 5
            while os.path.exists(d):
                try:
                    os.rmdir(d)
                except OSError:
                    if time.time() > deadline:
                        break
                    time.sleep(0.02)
        self.volume = None

    def alive(self):
        return self.p.poll() is None

    @property
    def pid(self):
        return self.p.pid

    def stdout(self):
        with open(self.out_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stderr(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def output(self):
        return self.stdout() + self.stderr()

    def tail(self, n=8):
        lines = self.output().splitlines()
        return " | ".join(line[:300] for line in lines[-n:])

    def wait_ports(self, ports, timeout=20.0):
        deadline = time.time() + timeout
        for port in ports:
            while not port_open(port):
                if not self.alive():
                    raise AssertionError(f"exited with {self.p.returncode} before listening on {port}: {self.tail()}")
                if time.time() > deadline:
                    raise AssertionError(f"not listening on {port} after {timeout:.0f}s: {self.tail()}")
                time.sleep(0.02)

    def wait_exit(self, timeout):
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def signal(self, sig=signal.SIGTERM):
        if self.alive():
            os.kill(self.p.pid, sig)

    def kill(self):
        if self.alive():
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except OSError:
                self.p.kill()
        self.p.wait()
        if self.flavor == "sluice-node":
            # The pod's proxy is the agent's child: it goes once the agent sees the stub gone. Every case
            # shares this namespace (a pod in a cluster would have a new one), so wait for its ports.
            deadline = time.time() + 5
            while time.time() < deadline and any(port_open(p) for p in (MAIN, ADMIN, STATS)):
                time.sleep(0.01)
            self.unpublish()  # as the kubelet does once the pod is gone


class T:
    """What a case gets: the world, its running binary (proxy) when it has a profile, and helpers."""

    def __init__(self, world, proxy, profile):
        self.world, self.proxy, self.profile = world, proxy, profile
        self.flavor = world.flavor
        self.own = []

    # --- requests ---
    def get(self, path="/", headers=None, **kw):
        return clients.request(path, headers, **kw)

    def ok(self, path="/", headers=None, **kw):
        r = self.get(path, headers, **kw)
        check(r.status == 200, f"{path}: {r.status} {r.body[:200]!r}")
        return r

    def app_headers(self, headers=None, **kw):
        """Sends GET /headers to the demo app through the proxy; the headers the app saw."""
        r = self.ok("/headers", headers, **kw)
        return clients.echoed_headers(r.body)

    # --- binaries the case starts itself ---
    def start(self, overrides=None, wait=(MAIN,), label="own", timeout=20.0):
        env = base_env()
        env.update(overrides or {})
        p = Proxy(self.world, env, label)
        self.own.append(p)
        if wait:
            p.wait_ports(wait, timeout)
        return p

    def logs(self, proxy=None):
        return (proxy or self.proxy).stdout()

    def wait_log(self, pred, timeout=10.0, what="a log line", proxy=None, stream="stdout"):
        proxy = proxy or self.proxy

        def find():
            text = proxy.stdout() if stream == "stdout" else proxy.output()
            hits = [line for line in text.splitlines() if pred(line)]
            return hits
        return wait_for(find, timeout, what)

    def cleanup(self):
        for p in self.own:
            p.kill()


def run_shard(world, cases, emit, only=None):
    """Runs the cases (grouped by profile, in order of first appearance) and calls emit(result dict)."""
    groups = []
    for c in cases:
        key = c.profile.name if c.profile else f"-{c.name}"
        for g in groups:
            if g[0] == key:
                g[2].append(c)
                break
        else:
            groups.append((key, c.profile, [c]))

    def outcome(c, started, err, skip=None):
        expect_fail = world.flavor == "queue-proxy" and c.name in DELIBERATE
        later = (world.flavor == "queue-proxy" and c.since is not None and
                 release_key(world.release) < release_key(c.since))
        if skip is not None:
            o = "SKIP"
        elif err is None:
            o = "XPASS" if expect_fail else "PASS"
        elif later and not expect_fail:
            o = "LATER"
        else:
            o = "XFAIL" if expect_fail else "FAIL"
        detail = skip if skip is not None else err
        if o == "XFAIL":
            detail = f"deliberate: {DELIBERATE[c.name]} ({err})"
        elif o == "LATER":
            detail = f"queue-proxy behaves so from v{c.since} ({err})"
        emit({"name": c.name, "area": c.area, "outcome": o, "time": time.time() - started,
              "detail": detail, "profile": c.profile.name if c.profile else None})

    def run_case(c, t):
        started = time.time()
        try:
            world.need(*c.needs)
            c.fn(t)
            outcome(c, started, None)
        except Skip as s:
            outcome(c, started, None, skip=str(s))
        except Exception as e:  # noqa: BLE001 - every failure is reported, the run goes on
            msg = "".join(traceback.format_exception_only(type(e), e)).strip()
            if not isinstance(e, AssertionError):
                tb = traceback.extract_tb(e.__traceback__)
                where = [f for f in tb if os.path.basename(f.filename).startswith("cases_")]
                if where:
                    msg += f" (at {os.path.basename(where[-1].filename)}:{where[-1].lineno})"
            outcome(c, started, msg)
        finally:
            t.cleanup()

    for _, profile, group in groups:
        if profile is None:
            for c in group:
                run_case(c, T(world, None, None))
            continue
        started = time.time()
        proxy = None
        try:
            world.need(*profile.needs)
            if profile.app == "grpc":
                _ = world.grpc
            elif profile.app == "raw":
                _ = world.raw
            elif profile.app == "raw-h2":
                _ = world.raw_h2
            world.set_certs(profile.certs)
            env = profile.environment(world)

            def launch():
                p = Proxy(world, env, profile.name)
                extra = list(profile.wait) + ([TLS] if profile.certs else [])
                try:
                    p.wait_ports([int(env.get("QUEUE_SERVING_PORT") or MAIN), ADMIN, STATS])
                    p.wait_ports(extra, timeout=5)  # once the fixed ports are up, the rest come at once
                except AssertionError:
                    p.kill()
                    raise
                return p
            proxy = launch()
        except Skip as s:
            for c in group:
                outcome(c, started, None, skip=str(s))
            continue
        except Exception as e:  # noqa: BLE001
            for c in group:
                outcome(c, started, f"profile {profile.name} did not start: {e}")
            continue
        for c in group:
            if not proxy.alive() and profile.restart:
                code = proxy.p.returncode
                try:
                    proxy = launch()
                except Exception as e:  # noqa: BLE001
                    outcome(c, time.time(), f"profile {profile.name}: the binary exited ({code}) and did not "
                                            f"restart: {e}")
                    continue
            run_case(c, T(world, proxy, profile))
        proxy.kill()
    world.set_certs(False) if world._overlay else None


def load_cases():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    for name in sorted(os.listdir(here)):
        if name.startswith("cases_") and name.endswith(".py"):
            importlib.import_module(name[:-3])
    return CASES


# Profiles several areas share.
BASE = Profile("base")
REC = Profile("recorder-app", {"USER_PORT": str(RECORDER), "SERVING_READINESS_PROBE": json.dumps(
    {"tcpSocket": {"port": RECORDER, "host": "127.0.0.1"}, "successThreshold": 1})})
PROM = Profile("prometheus", {"CONTAINER_CONCURRENCY": "1", "OBSERVABILITY_CONFIG": observability(
    requestMetrics={"protocol": "prometheus"})}, wait=(USER_METRICS,))
KUBELET = {"User-Agent": "kube-probe/1.31", "K-Network-Probe": "queue"}
