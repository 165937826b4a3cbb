// sluice-csi's RPCs (gRPC's synchronous API); see plugin.h. A request the agent refuses is answered
// INVALID_ARGUMENT or FAILED_PRECONDITION with its reason (the kubelet shows it in the pod's events and
// retries); no agent answering is UNAVAILABLE.
#include "csi/plugin.h"

#include "app/node/control.h"
#include "app/node/replies.h"
#include "common/log.h"
#include "csi/csi.grpc.pb.h"
#include "csi/registration.grpc.pb.h"

namespace sluice::csi {
namespace {

constexpr std::string_view kPodName = "csi.storage.k8s.io/pod.name";
constexpr std::string_view kPodNamespace = "csi.storage.k8s.io/pod.namespace";
constexpr std::string_view kPodUid = "csi.storage.k8s.io/pod.uid";
constexpr std::string_view kEphemeral = "csi.storage.k8s.io/ephemeral";

std::string context_value(const ::csi::v1::NodePublishVolumeRequest& r, std::string_view key) {
  const auto it = r.volume_context().find(std::string(key));
  return it == r.volume_context().end() ? std::string() : it->second;
}

// A word of the agent's one-line protocol: no space or line break may end up inside it.
bool plain(const std::string& s) { return !s.empty() && s.find_first_of(" \n\r\t") == std::string::npos; }

grpc::Status agent_status(const std::string& reply, const std::string& error) {
  if (reply.empty()) return {grpc::StatusCode::UNAVAILABLE, "the node agent did not answer: " + error};
  const auto answer = app::node::decode_reply(reply);
  if (const auto* r = std::get_if<app::node::Reply>(&answer); r && r->is(app::node::ReplyWord::refused))
    return {grpc::StatusCode::FAILED_PRECONDITION, "the node agent refused: " + r->detail};
  return grpc::Status::OK;
}

class IdentityService final : public ::csi::v1::Identity::Service {
 public:
  explicit IdentityService(PluginSettings s) : s_(std::move(s)) {}
  grpc::Status GetPluginInfo(grpc::ServerContext*, const ::csi::v1::GetPluginInfoRequest*,
                             ::csi::v1::GetPluginInfoResponse* response) override {
    response->set_name(s_.driver_name);
    response->set_vendor_version(s_.version);
    return grpc::Status::OK;
  }
  grpc::Status GetPluginCapabilities(grpc::ServerContext*, const ::csi::v1::GetPluginCapabilitiesRequest*,
                                     ::csi::v1::GetPluginCapabilitiesResponse*) override {
    return grpc::Status::OK;  // none: a node plugin alone
  }
  grpc::Status Probe(grpc::ServerContext*, const ::csi::v1::ProbeRequest*, ::csi::v1::ProbeResponse* response) override {
    response->mutable_ready()->set_value(true);
    return grpc::Status::OK;
  }

 private:
  PluginSettings s_;
};

class NodeService final : public ::csi::v1::Node::Service {
 public:
  NodeService(PluginSettings s, AgentCall agent) : s_(std::move(s)), agent_(std::move(agent)) {}
  grpc::Status NodePublishVolume(grpc::ServerContext*, const ::csi::v1::NodePublishVolumeRequest* request,
                                 ::csi::v1::NodePublishVolumeResponse*) override {
    return call(publish_command(*request));
  }
  grpc::Status NodeUnpublishVolume(grpc::ServerContext*, const ::csi::v1::NodeUnpublishVolumeRequest* request,
                                   ::csi::v1::NodeUnpublishVolumeResponse*) override {
    return call(unpublish_command(*request));
  }
  grpc::Status NodeGetCapabilities(grpc::ServerContext*, const ::csi::v1::NodeGetCapabilitiesRequest*,
                                   ::csi::v1::NodeGetCapabilitiesResponse*) override {
    return grpc::Status::OK;  // none: nothing staged, no stats
  }
  grpc::Status NodeGetInfo(grpc::ServerContext*, const ::csi::v1::NodeGetInfoRequest*,
                           ::csi::v1::NodeGetInfoResponse* response) override {
    response->set_node_id(s_.node_id);
    return grpc::Status::OK;
  }

 private:
  grpc::Status call(const std::variant<std::string, grpc::Status>& command) {
    if (const auto* status = std::get_if<grpc::Status>(&command)) return *status;
    std::string error;
    const std::string reply = agent_(std::get<std::string>(command), error);
    return agent_status(reply, error);
  }

  PluginSettings s_;
  AgentCall agent_;
};

class RegistrationService final : public ::pluginregistration::Registration::Service {
 public:
  explicit RegistrationService(PluginSettings s) : s_(std::move(s)) {}
  grpc::Status GetInfo(grpc::ServerContext*, const ::pluginregistration::InfoRequest*,
                       ::pluginregistration::PluginInfo* info) override {
    info->set_type("CSIPlugin");
    info->set_name(s_.driver_name);
    info->set_endpoint(s_.endpoint);
    info->add_supported_versions("1.0.0");
    return grpc::Status::OK;
  }
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*, const ::pluginregistration::RegistrationStatus* status,
                                        ::pluginregistration::RegistrationStatusResponse*) override {
    if (status->plugin_registered()) log::info("registered with the kubelet").kv("driver", s_.driver_name);
    else log::error("the kubelet did not register the plugin").kv("driver", s_.driver_name).kv("error", status->error());
    return grpc::Status::OK;
  }

 private:
  PluginSettings s_;
};

}  // namespace

std::variant<std::string, grpc::Status> publish_command(const ::csi::v1::NodePublishVolumeRequest& r) {
  if (context_value(r, kEphemeral) != "true")
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "sluice's volume is an ephemeral inline volume of a pod (csi.storage.k8s.io/ephemeral: true), "
                        "never a persistent one");
  const std::string ns = context_value(r, kPodNamespace), name = context_value(r, kPodName), uid = context_value(r, kPodUid);
  if (ns.empty() || name.empty() || uid.empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the pod's namespace, name and UID are missing from the volume context: the CSIDriver "
                        "needs podInfoOnMount: true");
  for (const auto* s : {&r.volume_id(), &ns, &name, &uid, &r.target_path()})
    if (!plain(*s)) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "\"" + *s + "\": empty, or with a space or line break");
  app::node::Publication p;
  p.volume = r.volume_id();
  p.pod = {.namespace_name = ns, .name = name, .uid = uid};
  p.target = r.target_path();
  return app::node::encode_control_command(app::node::PublishCommand{std::move(p)});
}

std::variant<std::string, grpc::Status> unpublish_command(const ::csi::v1::NodeUnpublishVolumeRequest& r) {
  if (!plain(r.volume_id()) || !plain(r.target_path()))
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the volume id and target path are required, without spaces");
  return app::node::encode_control_command(app::node::UnpublishCommand{r.volume_id(), r.target_path()});
}

Services make_services(const PluginSettings& settings, AgentCall agent) {
  Services s;
  s.identity = std::make_unique<IdentityService>(settings);
  s.node = std::make_unique<NodeService>(settings, std::move(agent));
  s.registration = std::make_unique<RegistrationService>(settings);
  return s;
}

}  // namespace sluice::csi
