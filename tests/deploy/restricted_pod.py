"""Pod Security Standards, "baseline" and "restricted" levels, checked on one pod without an API server.

  restricted_pod.py POD_JSON [MUTATION]

POD_JSON is the pod (kubectl ... -o json). MUTATION, when given, is the expression of deploy/node's
MutatingAdmissionPolicy with its spaces removed: its changes to the queue-proxy container (command, volume
mounts) and the pod's volumes are applied first, as the API server would, read from the expression as written.
Prints each violation; exit 1 when there is one, 0 when the pod is allowed."""
import json
import re
import sys

RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes"}


def fields(text):
    """`a:"x",b:true` -> {"a": "x", "b": True} (one level, as the policy writes them)."""
    out = {}
    for key, value in re.findall(r'(\w+):("[^"]*"|true|false|\[[^\]]*\])', text):
        out[key] = json.loads(value)
    return out


def apply_mutation(pod, expression):
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "queue-proxy")
    command = re.search(r'name:"queue-proxy",command:(\[[^\]]*\])', expression)
    if command:
        container["command"] = json.loads(command.group(1))
    for mount in re.findall(r'volumeMounts\{([^}]*)\}', expression):
        container.setdefault("volumeMounts", []).append(fields(mount))
    for name, kind, source in re.findall(r'volumes\{name:"([^"]*)",(\w+):Object\.spec\.volumes\.\w+\{([^}]*)\}', expression):
        pod["spec"].setdefault("volumes", []).append({"name": name, kind: fields(source)})


def violations(pod):
    spec = pod["spec"]
    out = []
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(host):
            out.append(f"baseline: {host} is true")
    for v in spec.get("volumes", []):
        kind = next(k for k in v if k != "name")
        if kind == "hostPath":
            out.append(f"baseline: volume {v['name']} is a hostPath")
        if kind not in RESTRICTED_VOLUMES:
            out.append(f"restricted: volume {v['name']} is of type {kind}")
    for s in spec.get("securityContext", {}).get("sysctls", []):
        if s["name"] not in SAFE_SYSCTLS:
            out.append(f"baseline: sysctl {s['name']}")
    pod_sc = spec.get("securityContext", {})
    containers = spec.get("containers", []) + spec.get("initContainers", []) + spec.get("ephemeralContainers", [])
    for c in containers:
        sc = c.get("securityContext", {})
        name = c["name"]
        if sc.get("privileged"):
            out.append(f"baseline: {name} is privileged")
        for p in c.get("ports", []):
            if p.get("hostPort"):
                out.append(f"baseline: {name} uses hostPort {p['hostPort']}")
        caps = sc.get("capabilities", {})
        for cap in caps.get("add", []):
            if cap not in BASELINE_CAPABILITIES:
                out.append(f"baseline: {name} adds {cap}")
            if cap != "NET_BIND_SERVICE":
                out.append(f"restricted: {name} adds {cap}")
        if "ALL" not in caps.get("drop", []):
            out.append(f"restricted: {name} does not drop ALL capabilities")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"restricted: {name} does not set allowPrivilegeEscalation: false")
        if not sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot", False)):
            out.append(f"restricted: {name} does not run as non-root")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            out.append(f"restricted: {name} runs as uid 0")
        seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {})).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"restricted: {name} has no RuntimeDefault or Localhost seccomp profile")
        if sc.get("procMount", "Default") != "Default":
            out.append(f"baseline: {name} procMount {sc['procMount']}")
    return out


def main():
    with open(sys.argv[1]) as f:
        pod = json.load(f)
    if len(sys.argv) > 2:
        apply_mutation(pod, sys.argv[2])
    found = violations(pod)
    for v in found:
        print(v)
    if not found:
        print("allowed: " + ", ".join(sorted(f"{c['name']}:{','.join(m['mountPath'] for m in c.get('volumeMounts', []))}"
                                             for c in pod["spec"]["containers"])) +
              "; volumes " + ",".join(f"{v['name']}={next(k for k in v if k != 'name')}" for v in pod["spec"].get("volumes", [])))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
