// Per-node mode's CSI plugin (sluice-csi, started by `sluice node`): the test plays the kubelet, over gRPC on
// the plugin's unix sockets, as the kubelet would: plugin registration, then NodePublishVolume with the pod's
// details in the volume context (the CSIDriver's podInfoOnMount), a stub joining through the socket that
// appears at the target path, and NodeUnpublishVolume ending that pod.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "csi/csi.grpc.pb.h"
#include "csi/registration.grpc.pb.h"
#include "node_harness.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::shared_ptr<grpc::Channel> unix_channel(const std::string& path) {
  return grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials());
}

std::unique_ptr<grpc::ClientContext> deadline(std::chrono::seconds s = 10s) {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(std::chrono::system_clock::now() + s);
  return c;
}

TEST_F(NodeAgent, TheKubeletPublishesAPodsVolumeThroughCsiAndItsStubJoinsThroughIt) {
  const auto csi_socket = (dir_ / "plugins" / "csi.sluice.dev" / "csi.sock").string();
  const auto registration = (dir_ / "plugins_registry" / "csi.sluice.dev-reg.sock").string();
  auto agent = start_agent({{"SLUICE_CSI_SOCKET", csi_socket},
                            {"SLUICE_CSI_REGISTRATION_SOCKET", registration},
                            {"NODE_NAME", "node-a"}});
  ASSERT_TRUE(agent->wait_for_line("\"listener\":\"csi\"", 10s)) << agent->stdout_text() << agent->stderr_text();
  for (const auto& path : {csi_socket, registration}) {
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600u) << path << ": the kubelet (root) alone";
  }

  // The kubelet's plugin watcher: what is this plugin, where is its CSI socket.
  auto reg = pluginregistration::Registration::NewStub(unix_channel(registration));
  pluginregistration::PluginInfo info;
  ASSERT_TRUE(reg->GetInfo(deadline().get(), {}, &info).ok());
  EXPECT_EQ(info.type(), "CSIPlugin");
  EXPECT_EQ(info.name(), "csi.sluice.dev");
  EXPECT_EQ(info.endpoint(), csi_socket);
  ASSERT_EQ(info.supported_versions_size(), 1);
  EXPECT_EQ(info.supported_versions(0), "1.0.0");
  pluginregistration::RegistrationStatus registered;
  registered.set_plugin_registered(true);
  pluginregistration::RegistrationStatusResponse ignored;
  ASSERT_TRUE(reg->NotifyRegistrationStatus(deadline().get(), registered, &ignored).ok());
  EXPECT_TRUE(agent->wait_for_line("registered with the kubelet", 10s)) << agent->stdout_text();

  // The kubelet's CSI client.
  auto identity = csi::v1::Identity::NewStub(unix_channel(csi_socket));
  csi::v1::GetPluginInfoResponse plugin;
  ASSERT_TRUE(identity->GetPluginInfo(deadline().get(), {}, &plugin).ok());
  EXPECT_EQ(plugin.name(), "csi.sluice.dev");
  csi::v1::ProbeResponse probe;
  ASSERT_TRUE(identity->Probe(deadline().get(), {}, &probe).ok());
  EXPECT_TRUE(probe.ready().value());
  auto node = csi::v1::Node::NewStub(unix_channel(csi_socket));
  csi::v1::NodeGetInfoResponse node_info;
  ASSERT_TRUE(node->NodeGetInfo(deadline().get(), {}, &node_info).ok());
  EXPECT_EQ(node_info.node_id(), "node-a");

  // The pod's ephemeral inline volume: its parent made by the kubelet, the target by the plugin.
  const std::string name = env_.at("SERVING_POD"), uid = uid_of(name);
  const auto target = dir_ / "kubelet" / "pods" / uid / "volumes" / "kubernetes.io~csi" / "sluice" / "mount";
  fs::create_directories(target.parent_path());
  fs::permissions(dir_ / "kubelet", fs::perms::owner_all | fs::perms::others_exec | fs::perms::group_exec);
  for (auto d = target.parent_path(); d != dir_ / "kubelet"; d = d.parent_path())
    fs::permissions(d, fs::perms::owner_all | fs::perms::others_exec | fs::perms::group_exec);
  csi::v1::NodePublishVolumeRequest publish;
  publish.set_volume_id("csi-0f6e5d4c3b2a");
  publish.set_target_path(target.string());
  publish.set_readonly(true);
  auto& context = *publish.mutable_volume_context();
  context["csi.storage.k8s.io/pod.name"] = name;
  context["csi.storage.k8s.io/pod.namespace"] = env_.at("SERVING_NAMESPACE");
  context["csi.storage.k8s.io/pod.uid"] = uid;
  context["csi.storage.k8s.io/serviceAccount.name"] = "default";
  context["csi.storage.k8s.io/ephemeral"] = "true";
  csi::v1::NodePublishVolumeResponse published;
  auto status = node->NodePublishVolume(deadline().get(), publish, &published);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  const auto socket = (target / "node.sock").string();
  struct stat st {};
  ASSERT_EQ(::stat(socket.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  // Publishing again (the kubelet retries) is no error and the same socket.
  ASSERT_TRUE(node->NodePublishVolume(deadline().get(), publish, &published).ok());

  // What the kubelet would never send: no pod details, or a persistent volume.
  auto without_pod = publish;
  without_pod.mutable_volume_context()->erase("csi.storage.k8s.io/pod.uid");
  status = node->NodePublishVolume(deadline().get(), without_pod, &published);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("podInfoOnMount"), std::string::npos) << status.error_message();
  auto persistent = publish;
  persistent.mutable_volume_context()->erase("csi.storage.k8s.io/ephemeral");
  EXPECT_EQ(node->NodePublishVolume(deadline().get(), persistent, &published).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Another volume for the same path is refused by the agent.
  auto other = publish;
  other.set_volume_id("csi-ffff");
  (*other.mutable_volume_context())["csi.storage.k8s.io/pod.name"] = "someone-else";
  status = node->NodePublishVolume(deadline().get(), other, &published);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
  EXPECT_NE(status.error_message().find("is volume csi-0f6e5d4c3b2a's"), std::string::npos) << status.error_message();

  // The stub joins through the socket the kubelet's publish made.
  auto stub = start_stub_in(*pod_, env_, kPodUser, nullptr, socket);
  ASSERT_TRUE(stub->wait_for_line("joined the node agent", 10s)) << stub->stdout_text() << agent->stdout_text();
  EXPECT_TRUE(eventually([&] { return serves(); }, 10s)) << agent->stdout_text();
  const long proxy = proxy_pid(*agent);

  // The pod goes: NodeUnpublishVolume ends its proxy and leaves nothing at the target.
  csi::v1::NodeUnpublishVolumeRequest unpublish;
  unpublish.set_volume_id(publish.volume_id());
  unpublish.set_target_path(target.string());
  csi::v1::NodeUnpublishVolumeResponse unpublished;
  status = node->NodeUnpublishVolume(deadline().get(), unpublish, &unpublished);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  EXPECT_FALSE(fs::exists(target));
  EXPECT_EQ(exit_status(*stub, 10s), "exited 1");
  EXPECT_TRUE(eventually([&] { return ::kill(static_cast<pid_t>(proxy), 0) != 0; }, 10s));
  EXPECT_FALSE(listening());
  // Again (the kubelet retries): no error.
  EXPECT_TRUE(node->NodeUnpublishVolume(deadline().get(), unpublish, &unpublished).ok());
}

// Without an agent on the control socket the plugin says so: UNAVAILABLE, which the kubelet retries.
TEST_F(NodeAgent, ThePluginAnswersUnavailableWhileNoAgentListens) {
  const auto csi_socket = (dir_ / "plugins" / "csi.sock").string();
  Process plugin(ProcessOptions{.argv = {SLUICE_CSI_BIN},
                                .env = {{"SLUICE_CSI_SOCKET", csi_socket}, {"SLUICE_NODE_CONTROL_SOCKET", control_}}});
  ASSERT_TRUE(plugin.wait_for_line("\"listener\":\"csi\"", 10s)) << plugin.stderr_text();
  auto node = csi::v1::Node::NewStub(unix_channel(csi_socket));
  csi::v1::NodePublishVolumeRequest publish;
  publish.set_volume_id("csi-1");
  publish.set_target_path((dir_ / "t").string());
  auto& context = *publish.mutable_volume_context();
  context["csi.storage.k8s.io/pod.name"] = "p";
  context["csi.storage.k8s.io/pod.namespace"] = "n";
  context["csi.storage.k8s.io/pod.uid"] = "u";
  context["csi.storage.k8s.io/ephemeral"] = "true";
  csi::v1::NodePublishVolumeResponse published;
  const auto status = node->NodePublishVolume(deadline().get(), publish, &published);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_NE(status.error_message().find("the node agent did not answer"), std::string::npos) << status.error_message();
}

}  // namespace
}  // namespace sluice::test
