#!/usr/bin/env bash
# Renders deploy/knative, deploy/sidecar, deploy/keda and deploy/node with `kubectl kustomize` and checks what a cluster
# relies on: the image, ports, queue-proxy's environment, probes answered by sluice, the drain budget, and
# each container's securityContext (runAsNonRoot, readOnlyRootFilesystem, no privilege escalation, every
# capability dropped). No cluster is contacted: fields are read with `kubectl annotate --local -o jsonpath`.
#   tests/deploy/render_test.sh [KUBECTL]       exit 77 (ctest: skipped) when there is no kubectl
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
kubectl=${1:-kubectl}
if [ "$kubectl" = kubectl ]; then
  "$(dirname "$0")/../support/capability.sh" kubectl || exit $?
else
  command -v "$kubectl" >/dev/null || { echo "FAIL: $kubectl is not a command"; exit 1; }
fi
export KUBECONFIG=/dev/null
work=$(mktemp -d /tmp/sluice-deploy-test.XXXXXX)
trap 'rm -rf "$work"' EXIT

failures=0
check() {  # check WHAT GOT WANT
  if [ "$2" = "$3" ]; then
    echo "ok   $1"
  else
    echo "FAIL $1: got '$2', want '$3'"
    failures=$((failures + 1))
  fi
}

render() { "$kubectl" kustomize "$repo/deploy/$1" > "$work/$1.yaml"; }
# q DIR KIND/NAME JSONPATH: the field of one rendered object ("" when absent).
q() {
  "$kubectl" annotate --local -f "$work/$1.yaml" sluice.test/read=1 \
    -o jsonpath="{.kind}/{.metadata.name}={$3}{\"\\n\"}" | sed -n "s|^$2=||p"
}

image=registry.example.com/sluice:0.1.0

# --- knative: the queue-proxy image swap ---------------------------------------------------------------
render knative
check "knative: the only object is knative-serving's config-deployment" \
  "$(q knative ConfigMap/config-deployment .metadata.namespace)" knative-serving
check "knative: queue-sidecar-image is sluice's image" \
  "$(q knative ConfigMap/config-deployment '.data.queue-sidecar-image')" "$image"
check "knative: nothing else in the ConfigMap (a server-side apply leaves Knative's keys alone)" \
  "$(q knative ConfigMap/config-deployment '.data' | tr -d ' ')" "{\"queue-sidecar-image\":\"$image\"}"

# check_security DIR OBJ CONTAINER_PATH LABEL: the container's securityContext.
check_security() {
  local dir=$1 obj=$2 c=$3 what="$1: $4"
  check "$what: runAsNonRoot" "$(q "$dir" "$obj" "$c.securityContext.runAsNonRoot")" true
  check "$what: readOnlyRootFilesystem" "$(q "$dir" "$obj" "$c.securityContext.readOnlyRootFilesystem")" true
  check "$what: allowPrivilegeEscalation false" "$(q "$dir" "$obj" "$c.securityContext.allowPrivilegeEscalation")" false
  check "$what: capabilities drop ALL" "$(q "$dir" "$obj" "$c.securityContext.capabilities.drop[*]")" ALL
}
env_of() {  # env_of DIR OBJ CONTAINER_PATH NAME: the variable's value, or its fieldRef path
  local v
  v=$(q "$1" "$2" "$3.env[?(@.name==\"$4\")].value")
  [ -n "$v" ] || v=$(q "$1" "$2" "$3.env[?(@.name==\"$4\")].valueFrom.fieldRef.fieldPath")
  echo "$v"
}
has_env() {  # present, with a value (possibly "") or a valueFrom
  q "$1" "$2" "$3.env[?(@.name==\"$4\")].name"
}

# --- sidecar: sluice as a native sidecar in front of the app --------------------------------------------
render sidecar
D=Deployment/hello
S='.spec.template.spec.initContainers[?(@.name=="sluice")]'
A='.spec.template.spec.containers[?(@.name=="app")]'
check "sidecar: sluice is the one init container" "$(q sidecar $D '.spec.template.spec.initContainers[*].name')" sluice
check "sidecar: sluice's image" "$(q sidecar $D "$S.image")" "$image"
check "sidecar: sluice is a native sidecar (restartPolicy Always)" "$(q sidecar $D "$S.restartPolicy")" Always
check "sidecar: sluice sets no command or args (the image's default: sidecar)" \
  "$(q sidecar $D "$S.command")$(q sidecar $D "$S.args")" ""
for p in queue-port=8012 http-autometric=9090 http-usermetric=9091; do
  check "sidecar: sluice port ${p%=*}" "$(q sidecar $D "$S.ports[?(@.name==\"${p%=*}\")].containerPort")" "${p#*=}"
done
for v in SERVING_NAMESPACE SERVING_CONFIGURATION SERVING_REVISION SERVING_POD SERVING_POD_IP \
         QUEUE_SERVING_PORT QUEUE_SERVING_TLS_PORT USER_PORT CONTAINER_CONCURRENCY REVISION_TIMEOUT_SECONDS \
         SERVING_LOGGING_CONFIG SERVING_LOGGING_LEVEL; do
  check "sidecar: queue-proxy's required $v is set" "$(has_env sidecar $D "$S" $v)" "$v"
done
check "sidecar: SERVING_POD from the pod's name" "$(env_of sidecar $D "$S" SERVING_POD)" metadata.name
check "sidecar: SERVING_POD_IP from the pod's IP" "$(env_of sidecar $D "$S" SERVING_POD_IP)" status.podIP
check "sidecar: QUEUE_SERVING_PORT is the queue-port" "$(env_of sidecar $D "$S" QUEUE_SERVING_PORT)" 8012
check "sidecar: USER_PORT is the app's port" "$(env_of sidecar $D "$S" USER_PORT)" \
  "$(q sidecar $D "$A.ports[0].containerPort")"
check "sidecar: sluice probes the app's port" \
  "$(env_of sidecar $D "$S" SERVING_READINESS_PROBE | sed -n 's/.*"port":\([0-9]*\).*/\1/p')" \
  "$(q sidecar $D "$A.ports[0].containerPort")"
check "sidecar: readiness is sluice's K-Network-Probe: queue answer" \
  "$(q sidecar $D "$S.readinessProbe.httpGet.port") $(q sidecar $D "$S.readinessProbe.httpGet.httpHeaders[?(@.name==\"K-Network-Probe\")].value")" \
  "queue-port queue"
check "sidecar: startup waits for sluice's listener only" "$(q sidecar $D "$S.startupProbe.tcpSocket.port")" queue-port
check "sidecar: the app has no probe of its own (sluice answers)" \
  "$(q sidecar $D "$A.readinessProbe")$(q sidecar $D "$A.livenessProbe")$(q sidecar $D "$A.startupProbe")" ""
check "sidecar: the app's preStop asks sluice to drain" \
  "$(q sidecar $D "$A.lifecycle.preStop.httpGet.port") $(q sidecar $D "$A.lifecycle.preStop.httpGet.path")" \
  "8022 /wait-for-drain"
check "sidecar: /wait-for-drain holds until SIGTERM (native sidecar), undone only by an app restart" \
  "$(env_of sidecar $D "$S" SLUICE_WAIT_FOR_DRAIN_RESET)" app-restart
quiet_ms=$(env_of sidecar $D "$S" SLUICE_DRAIN_QUIET_PERIOD_MS)
drain_s=$(env_of sidecar $D "$S" SLUICE_DRAIN_TIMEOUT_SECONDS)
revision_s=$(env_of sidecar $D "$S" REVISION_TIMEOUT_SECONDS)
grace=$(q sidecar $D .spec.template.spec.terminationGracePeriodSeconds)
# sluice gets SIGTERM only after the app exits (in-flight requests: up to the revision timeout), then
# waits its quiet period and at most the drain timeout.
need=$(( revision_s + (${quiet_ms:-30000} + 999) / 1000 + ${drain_s:-60} ))
check "sidecar: terminationGracePeriodSeconds ($grace) covers app drain + quiet period + drain timeout ($need)" \
  "$([ "${grace:-30}" -ge "$need" ] && echo yes || echo no)" yes
check "sidecar: pod runAsNonRoot" "$(q sidecar $D .spec.template.spec.securityContext.runAsNonRoot)" true
check_security sidecar $D "$S" "sluice container"
check_security sidecar $D "$A" "app container"
check "sidecar: the Service sends traffic to sluice's queue-port" "$(q sidecar Service/hello '.spec.ports[0].targetPort')" queue-port
check "sidecar: the Service selects the Deployment's pods" \
  "$(q sidecar Service/hello .spec.selector.app)" "$(q sidecar $D .spec.template.metadata.labels.app)"

# --- keda: the scaler and the ScaledObject -----------------------------------------------------------
render keda
D=Deployment/sluice-autoscaler
C='.spec.template.spec.containers[?(@.name=="scaler")]'
check "keda: the scaler's image" "$(q keda $D "$C.image")" registry.example.com/sluice-autoscaler:0.1.0
check "keda: the scaler sets no command (the image's entrypoint: sluice-autoscaler)" "$(q keda $D "$C.command")" ""
# Every arg is one of sluice-autoscaler's flags (`sluice autoscaler serve --help`), and the ports match.
args=$(q keda $D "$C.args[*]")
check "keda: the scaler's args are its flags" \
  "$(for a in $args; do case "${a%%=*}" in --listen|--grpc-port|--metrics-port|--scrape-timeout-ms) ;; *) echo "$a" ;; esac; done)" ""
arg() { for a in $args; do [ "${a%%=*}" = "$1" ] && echo "${a#*=}"; done; }
check "keda: the scaler's gRPC port" "$(q keda $D "$C.ports[?(@.name==\"grpc\")].containerPort")" 6000
check "keda: --grpc-port is the gRPC containerPort" "$(arg --grpc-port)" 6000
check "keda: --metrics-port is the http-metrics containerPort" "$(arg --metrics-port)" \
  "$(q keda $D "$C.ports[?(@.name==\"http-metrics\")].containerPort")"
check "keda: the scaler's readiness probe" "$(q keda $D "$C.readinessProbe.tcpSocket.port")" grpc
check "keda: the scaler's liveness probe" "$(q keda $D "$C.livenessProbe.tcpSocket.port")" grpc
check "keda: scaler pod runAsNonRoot" "$(q keda $D .spec.template.spec.securityContext.runAsNonRoot)" true
check_security keda $D "$C" "scaler container"
check "keda: the scaler's Service" "$(q keda Service/sluice-autoscaler '.spec.ports[?(@.name=="grpc")].port')" 6000
check "keda: the scaler's Service selects it" "$(q keda Service/sluice-autoscaler .spec.selector.app)" sluice-autoscaler
check "keda: the sidecars' Service is headless (DNS lists every pod)" "$(q keda Service/hello-sidecars .spec.clusterIP)" None
check "keda: the sidecars' Service points at the Stat port" "$(q keda Service/hello-sidecars .spec.ports[0].port)" 9090
check "keda: the sidecars' Service selects deploy/sidecar's pods" "$(q keda Service/hello-sidecars .spec.selector.app)" hello
O=ScaledObject/hello
check "keda: the ScaledObject scales deploy/sidecar's Deployment" "$(q keda $O .spec.scaleTargetRef.name)" hello
check "keda: the trigger is KEDA's external scaler" "$(q keda $O '.spec.triggers[0].type')" external
check "keda: the trigger reaches the scaler's Service" "$(q keda $O '.spec.triggers[0].metadata.scalerAddress')" \
  "sluice-autoscaler.default.svc.cluster.local:$(q keda Service/sluice-autoscaler '.spec.ports[?(@.name=="grpc")].port')"
check "keda: the trigger names the headless sidecars' Service" "$(q keda $O '.spec.triggers[0].metadata.sidecars')" \
  hello-sidecars.default.svc.cluster.local
check "keda: at least one pod is kept (no activator in front)" "$([ "$(q keda $O .spec.minReplicaCount)" -ge 1 ] && echo yes)" yes

# --- node: one sluice per node, every pod's queue-proxy a stub ------------------------------------------
render node
D=DaemonSet/sluice-node
N='.spec.template.spec.containers[?(@.name=="node")]'
P=MutatingAdmissionPolicy/sluice-node-stub
check "node: the agent's image" "$(q node $D "$N.image")" registry.example.com/sluice-node:0.1.0
check "node: ... which the image's node target builds, with sluice-csi" \
  "$(grep -c '^RUN .*rootfs.sh /build/app/sluice-csi' "$repo/docker/Dockerfile")" 1
check "node: the agent runs 'sluice node'" "$(q node $D "$N.args[*]")" node
check "node: the agent runs on every node (tolerates every taint)" "$(q node $D '.spec.template.spec.tolerations[0].operator')" Exists
control=$(env_of node $D "$N" SLUICE_NODE_CONTROL_SOCKET)
control_dir=$(q node $D "$N.volumeMounts[?(@.name==\"control\")].mountPath")
check "node: the control socket is in its own directory" "$(dirname "$control")" "$control_dir"
check "node: ... the host's, so that an old agent and its successor share it" \
  "$(q node $D '.spec.template.spec.volumes[?(@.name=="control")].hostPath.path')" "$control_dir"
check "node: the CSI socket is where the kubelet looks for plugins" \
  "$(env_of node $D "$N" SLUICE_CSI_SOCKET)" /var/lib/kubelet/plugins/csi.sluice.dev/csi.sock
check "node: the plugin registers in the kubelet's registry" \
  "$(env_of node $D "$N" SLUICE_CSI_REGISTRATION_SOCKET)" /var/lib/kubelet/plugins_registry/csi.sluice.dev-reg.sock
check "node: the agent sees the kubelet's directory (pods' volumes), new mounts included" \
  "$(q node $D '.spec.template.spec.volumes[?(@.name=="kubelet")].hostPath.path') $(q node $D "$N.volumeMounts[?(@.name==\"kubelet\")].mountPath") $(q node $D "$N.volumeMounts[?(@.name==\"kubelet\")].mountPropagation")" \
  "/var/lib/kubelet /var/lib/kubelet HostToContainer"
check "node: the agent sees the host's cgroups (a stub's, which its proxy joins)" \
  "$(q node $D '.spec.template.spec.volumes[?(@.name=="cgroup")].hostPath.path') $(q node $D "$N.volumeMounts[?(@.name==\"cgroup\")].mountPath")" \
  "/sys/fs/cgroup /sys/fs/cgroup"
check "node: the agent sees every process (a joining stub's pid)" "$(q node $D .spec.template.spec.hostPID)" true
check "node: the CSI driver's name is the agent's" "$(q node CSIDriver/csi.sluice.dev .metadata.name)" \
  "$(env_of node $D "$N" SLUICE_CSI_DRIVER_NAME)"
check "node: the driver is told each pod's namespace, name and UID, for inline volumes alone" \
  "$(q node CSIDriver/csi.sluice.dev .spec.podInfoOnMount) $(q node CSIDriver/csi.sluice.dev '.spec.volumeLifecycleModes[*]') $(q node CSIDriver/csi.sluice.dev .spec.attachRequired)" \
  "true Ephemeral false"
check "node: the agent's generation is its DaemonSet pod's (never hands over to an older one)" \
  "$(env_of node $D "$N" SLUICE_NODE_GENERATION)" "metadata.labels['pod-template-generation']"
check "node: ready once it holds every pod (the readiness probe asks the agent's ready file)" \
  "$(q node $D "$N.readinessProbe.exec.command[*]") $(dirname "$(env_of node $D "$N" SLUICE_NODE_READY_FILE)")" \
  "/sluice node ready $(q node $D "$N.volumeMounts[?(@.name==\"ready\")].mountPath")"
check "node: the agent keeps only SYS_ADMIN (setns), SETUID, SETGID, SETPCAP and KILL" \
  "$(q node $D "$N.securityContext.capabilities.drop[*]") $(q node $D "$N.securityContext.capabilities.add[*]")" \
  "ALL SYS_ADMIN SETUID SETGID SETPCAP KILL"
check "node: an update starts the new agent beside the old one (it takes the pods over)" \
  "$(q node $D '.spec.updateStrategy.rollingUpdate.maxSurge') $(q node $D '.spec.updateStrategy.rollingUpdate.maxUnavailable')" "1 0"
check "node: ... and deletes the old one only once the new one has run a while" "$(q node $D '.spec.minReadySeconds')" 10
check "node: the agent's grace period covers Knative's longest revision timeout (600 s) and the quiet period (30 s)" \
  "$([ "$(q node $D .spec.template.spec.terminationGracePeriodSeconds)" -ge 630 ] && echo yes || echo no)" yes
check "node: the agent's root file system is read-only" "$(q node $D "$N.securityContext.readOnlyRootFilesystem")" true
check "node: the agent cannot gain privileges" "$(q node $D "$N.securityContext.allowPrivilegeEscalation")" false
check "node: the agent's namespace allows a privileged pod" \
  "$(q node Namespace/sluice-system '.metadata.labels.pod-security\.kubernetes\.io/enforce')" privileged
check "node: the DaemonSet is in that namespace" "$(q node $D .metadata.namespace)" sluice-system
check "node: the policy mutates pods at creation" \
  "$(q node $P '.spec.matchConstraints.resourceRules[0].resources[*]') $(q node $P '.spec.matchConstraints.resourceRules[0].operations[*]')" \
  "pods CREATE"
check "node: the policy takes Knative revisions' pods" \
  "$(q node $P '.spec.matchConstraints.objectSelector.matchExpressions[0].key') $(q node $P '.spec.matchConstraints.objectSelector.matchExpressions[0].operator')" \
  "serving.knative.dev/revision Exists"
# The expression spans lines, which q's one line per object cannot carry: only the policy has the field.
mutation=$("$kubectl" annotate --local -f "$work/node.yaml" sluice.test/read=1 \
  -o jsonpath='{.spec.mutations[0].applyConfiguration.expression}' | tr -d ' \n')
check "node: the policy changes the queue-proxy container" \
  "$(grep -o 'name:"queue-proxy"' <<<"$mutation")" 'name:"queue-proxy"'
check "node: ... into the stub (the image's sluice-node-stub)" \
  "$(grep -o 'command:\["/sluice-node-stub"\]' <<<"$mutation")" 'command:["/sluice-node-stub"]'
check "node: ... which the image has" "$(grep -c '^RUN .*rootfs.sh /build/app/sluice-node-stub' "$repo/docker/Dockerfile")" 1
# The stub has no SLUICE_NODE_SOCKET of its own (Knative sets queue-proxy's environment): it uses the
# default, which must be the pod's socket in the volume the policy mounts.
default_socket=$(sed -n 's/.*kDefaultSocket = "\(.*\)";/\1/p' "$repo/app/node/join.h")
pod_socket=$(sed -n 's/.*kPodSocketName = "\(.*\)";/\1/p' "$repo/app/node/publications.h")
check "node: ... with its sluice volume mounted where the stub looks for its socket" \
  "$(grep -o 'mountPath:"[^"]*"' <<<"$mutation")" "mountPath:\"$(dirname "$default_socket")\""
check "node: ... the socket the agent makes in the volume" "$(basename "$default_socket")" "$pod_socket"
check "node: ... a CSI inline volume of the agent's driver" \
  "$(grep -o 'csi:Object.spec.volumes.csi{driver:"[^"]*"' <<<"$mutation")" 'csi:Object.spec.volumes.csi{driver:"csi.sluice.dev"'
check "node: no stubbed pod gets a hostPath" "$(grep -c hostPath <<<"$mutation")" 0
# Pod Security "restricted", as a namespace that enforces it would judge a Knative pod with the policy's
# changes applied (tests/deploy/restricted_pod.py; the pod as Knative v1.23 makes it, knative_pod.yaml).
"$kubectl" annotate --local -f "$repo/tests/deploy/knative_pod.yaml" sluice.test/read=1 -o json > "$work/pod.json"
verdict=$(/usr/bin/python3 "$repo/tests/deploy/restricted_pod.py" "$work/pod.json" "$mutation"; echo "exit $?")
check "node: a Knative pod, stubbed, is allowed by Pod Security restricted" "$(tail -n1 <<<"$verdict")" "exit 0"
[ "$(tail -n1 <<<"$verdict")" = "exit 0" ] || echo "$verdict"
check "node: ... the check itself refuses a hostPath volume" \
  "$(/usr/bin/python3 "$repo/tests/deploy/restricted_pod.py" "$work/pod.json" \
       "${mutation//csi:Object.spec.volumes.csi\{driver:\"csi.sluice.dev\",readOnly:true\}/hostPath:Object.spec.volumes.hostPath\{path:\"/run/sluice\"\}}" | head -n1)" \
  "baseline: volume sluice is a hostPath"
check "node: the binding names the policy" "$(q node MutatingAdmissionPolicyBinding/sluice-node-stub .spec.policyName)" sluice-node-stub
check "node: namespaces opt in by label" \
  "$(q node MutatingAdmissionPolicyBinding/sluice-node-stub '.spec.matchResources.namespaceSelector.matchLabels.sluice\.dev/per-node')" enabled
check "node: Knative's queue-proxy image is sluice's" "$(q node ConfigMap/config-deployment '.data.queue-sidecar-image')" "$image"
check "node: no cluster-wide Knative default is lowered (the queue-proxy image alone is set)" \
  "$(q node ConfigMap/config-deployment '.data' | tr -d ' ')" "{\"queue-sidecar-image\":\"$image\"}"
check "node: the agent's DaemonSet is deploy/node's only workload (the pods it serves are Knative's)" \
  "$("$kubectl" annotate --local -f "$work/node.yaml" sluice.test/read=1 -o jsonpath='{.kind}{"\n"}' |
     grep -cE '^(Deployment|DaemonSet|StatefulSet|Pod|Job|CronJob|ReplicaSet)$')" 1

echo
[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed with $("$kubectl" version --client 2>/dev/null | head -n1 || true)"
