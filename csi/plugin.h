// sluice-csi's services: CSI's Identity and Node (an ephemeral inline volume per pod, nothing staged, no
// controller) and the kubelet's plugin registration. The kubelet publishes a pod's volume with the pod's
// namespace, name and UID (the CSIDriver's podInfoOnMount); the plugin passes that on to the node agent over
// its control socket (app/node/control.h "publish"), which makes the pod's own socket in the volume. What
// the pod is thus comes from the kubelet, never from the pod.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <variant>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/service_type.h>

namespace csi::v1 {
class NodePublishVolumeRequest;
class NodeUnpublishVolumeRequest;
}  // namespace csi::v1

namespace sluice::csi {

struct PluginSettings {
  std::string driver_name = "csi.sluice.dev";
  std::string node_id;            // NodeGetInfo's (the node's name)
  std::string endpoint;           // the CSI socket, as the kubelet sees it (registration's endpoint)
  std::string version = "0.1.0";  // GetPluginInfo's vendor_version
};

// A command to the agent and its reply ("published ...", "refused REASON", ...); "" when no agent answered
// (the error in `error`).
using AgentCall = std::function<std::string(const std::string& command, std::string& error)>;

// The agent's command for a publish request, or the status to answer the kubelet with.
std::variant<std::string, grpc::Status> publish_command(const ::csi::v1::NodePublishVolumeRequest& request);
std::variant<std::string, grpc::Status> unpublish_command(const ::csi::v1::NodeUnpublishVolumeRequest& request);

// The three services, to register with one grpc::ServerBuilder.
struct Services {
  std::unique_ptr<grpc::Service> identity, node, registration;
};
Services make_services(const PluginSettings& settings, AgentCall agent);

}  // namespace sluice::csi
