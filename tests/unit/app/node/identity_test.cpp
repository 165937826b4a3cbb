// Per-node mode's checks of a join (app/node/pod_identity.h) and the pods' records and sockets
// (app/node/publications.h).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "app/node/node_socket.h"
#include "app/node/pod_identity.h"
#include "app/node/publications.h"

namespace sluice::app::node {
namespace {

namespace fs = std::filesystem;

const PodIdentity kPod{"shop", "cart-00001-deployment-7d9f-x2x", "4c1e0a2b-9f3d-4a7e-8b1c-0d2e3f405162"};

TEST(NodeIdentity, AJoinNamingAnotherPodOrNamespaceIsRefusedAndOneNamingNoneIsNot) {
  EXPECT_EQ(join_names_other_pod(kPod, {"SERVING_NAMESPACE=shop", "SERVING_POD=cart-00001-deployment-7d9f-x2x"}), "");
  const auto other = join_names_other_pod(kPod, {"SERVING_NAMESPACE=shop", "SERVING_POD=billing-1"});
  EXPECT_NE(other.find("names pod shop/billing-1"), std::string::npos) << other;
  EXPECT_NE(other.find("pod shop/cart-00001-deployment-7d9f-x2x's"), std::string::npos) << other;
  EXPECT_NE(join_names_other_pod(kPod, {"SERVING_NAMESPACE=bank", "SERVING_POD=cart-00001-deployment-7d9f-x2x"}), "");
  // Empty or missing names claim no pod (the proxy stops on a missing one, as queue-proxy).
  EXPECT_EQ(join_names_other_pod(kPod, {"SERVING_NAMESPACE=", "SERVING_POD="}), "");
  EXPECT_EQ(join_names_other_pod(kPod, {}), "");
}

TEST(NodeIdentity, APodsCgroupIsFoundUnderEitherDriversNameAndOnlyAsAWholeName) {
  const std::string uid = kPod.uid;
  std::string underscored = uid;
  std::replace(underscored.begin(), underscored.end(), '-', '_');
  // cgroupfs driver, v1 and v2.
  EXPECT_TRUE(cgroup_is_pods("4:memory:/kubepods/burstable/pod" + uid + "/0123abc\n0::/kubepods/burstable/pod" + uid +
                                 "/0123abc\n", uid));
  // systemd driver.
  EXPECT_TRUE(cgroup_is_pods("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + underscored +
                                 ".slice/cri-containerd-0123.scope\n", uid));
  // Another pod's, a longer UID that begins with this one, a name inside a path element, none.
  EXPECT_FALSE(cgroup_is_pods("0::/kubepods/burstable/pod9a8b7c6d-0000-4000-8000-000000000000/c\n", uid));
  EXPECT_FALSE(cgroup_is_pods("0::/kubepods/burstable/pod" + uid + "0/c\n", uid));
  EXPECT_FALSE(cgroup_is_pods("0::/kubepods/burstable/xpod" + uid + "/c\n", uid));
  EXPECT_FALSE(cgroup_is_pods("0::/\n", uid));
  EXPECT_FALSE(cgroup_is_pods("0::/kubepods/pod/c\n", ""));
}

std::vector<std::string> shaped(std::vector<std::string> env, ProxyEnvLimits limits = {}) {
  auto out = proxy_environment(std::move(env), limits);
  if (auto* reason = std::get_if<std::string>(&out)) {
    ADD_FAILURE() << *reason;
    return {};
  }
  return std::get<std::vector<std::string>>(out);
}
std::string refusal(std::vector<std::string> env) {
  auto out = proxy_environment(std::move(env), {});
  auto* reason = std::get_if<std::string>(&out);
  return reason ? *reason : "";
}

TEST(NodeIdentity, OneWorkerUnlessThePodAsksForMoreAndNeverMoreThanTheCap) {
  const ProxyEnvLimits limits{.default_workers = 1, .max_workers = 4};
  EXPECT_EQ(env_value(shaped({"USER_PORT=8080"}, limits), "SLUICE_WORKERS"), "1");
  EXPECT_EQ(env_value(shaped({"SLUICE_WORKERS=3"}, limits), "SLUICE_WORKERS"), "3");
  EXPECT_EQ(env_value(shaped({"SLUICE_WORKERS=64"}, limits), "SLUICE_WORKERS"), "4");
  EXPECT_EQ(env_value(shaped({"GOMAXPROCS=2"}, limits), "SLUICE_WORKERS"), "2");
  EXPECT_EQ(env_value(shaped({"SLUICE_WORKERS=0"}, limits), "SLUICE_WORKERS"), "1");  // 0 would be every CPU
  // Not a number: left for the proxy to report as the configuration error it is.
  EXPECT_EQ(env_value(shaped({"SLUICE_WORKERS=many"}, limits), "SLUICE_WORKERS"), "many");
  const auto env = shaped({"SLUICE_WORKERS=2"}, limits);
  EXPECT_EQ(std::count_if(env.begin(), env.end(), [](const auto& kv) { return kv.starts_with("SLUICE_WORKERS="); }), 1);
}

TEST(NodeIdentity, APodsFilesAreItsOwnAndWhatReachesBeyondThePodIsRefused) {
  const auto env = shaped({"SLUICE_TLS_CERT_FILE=/etc/certs/tls.crt", "SLUICE_TLS_KEY_FILE=/etc/certs/tls.key"});
  EXPECT_EQ(env_value(env, "SLUICE_TLS_CERT_FILE"), "/proc/self/fd/3/etc/certs/tls.crt");
  EXPECT_EQ(env_value(env, "SLUICE_TLS_KEY_FILE"), "/proc/self/fd/3/etc/certs/tls.key");
  const auto trust = shaped({"SSL_CERT_FILE=/etc/ssl/ca.pem", "SSL_CERT_DIR=/etc/ssl/certs:/usr/local/certs"});
  EXPECT_EQ(env_value(trust, "SSL_CERT_FILE"), "/proc/self/fd/3/etc/ssl/ca.pem");
  EXPECT_EQ(env_value(trust, "SSL_CERT_DIR"), "/proc/self/fd/3/etc/ssl/certs:/proc/self/fd/3/usr/local/certs");
  EXPECT_NE(refusal({"SSL_CERT_DIR=/etc/ssl/certs:relative"}).find("SSL_CERT_DIR"), std::string::npos);
  EXPECT_NE(refusal({"SLUICE_TLS_KEY_FILE=relative/tls.key"}).find("SLUICE_TLS_KEY_FILE"), std::string::npos);
  EXPECT_NE(refusal({"SLUICE_TLS_CERT_FILE=/../../etc/shadow"}), "");
  EXPECT_NE(refusal({"SLUICE_TLS_CERT_FILE=/certs/.."}), "");
  EXPECT_NE(refusal({"SLUICE_NETNS=/proc/1/ns/net"}).find("SLUICE_NETNS"), std::string::npos);
  // What only the agent sets is the agent's.
  const auto own = shaped({"SLUICE_POD_ROOT=/", "SLUICE_NODE_CHANNEL=0", "SLUICE_LISTEN_FDS=0,1", "A=1"});
  EXPECT_EQ(env_value(own, "SLUICE_POD_ROOT"), "");
  EXPECT_EQ(env_value(own, "SLUICE_NODE_CHANNEL"), "");
  EXPECT_EQ(env_value(own, "SLUICE_LISTEN_FDS"), "");
  EXPECT_EQ(env_value(own, "A"), "1");
}

Publication publication(std::string target) {
  return Publication{"csi-0a1b2c", kPod, std::move(target)};
}

TEST(NodePublications, AVolumeMustNameItsPodInFullAndAPlainPath) {
  EXPECT_EQ(publication_error(publication("/var/lib/kubelet/pods/x/volumes/kubernetes.io~csi/sluice/mount")), "");
  auto p = publication("/t");
  p.volume = "../etc";
  EXPECT_NE(publication_error(p), "");
  p = publication("/t");
  p.pod.uid.clear();
  EXPECT_NE(publication_error(p).find("podInfoOnMount"), std::string::npos);
  EXPECT_NE(publication_error(publication("relative/dir")), "");
  EXPECT_NE(publication_error(publication("/a/../b")), "");
  EXPECT_NE(publication_error(publication("/a b")), "");
  // A kubelet's volume path can be longer than a socket address holds: the socket is made all the same.
  EXPECT_EQ(publication_error(publication("/" + std::string(120, 'x'))), "");
}

TEST(NodePublications, ARecordReadsBackAsWrittenAndAnythingElseIsNone) {
  const auto p = publication("/var/lib/kubelet/pods/x/volumes/kubernetes.io~csi/sluice/mount");
  const auto back = parse_record(record_text(p));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->volume, p.volume);
  EXPECT_EQ(back->pod.namespace_name, p.pod.namespace_name);
  EXPECT_EQ(back->pod.name, p.pod.name);
  EXPECT_EQ(back->pod.uid, p.pod.uid);
  EXPECT_EQ(back->target, p.target);
  EXPECT_FALSE(parse_record("volume v\nshell rm\n"));
  EXPECT_FALSE(parse_record(""));
}

// A pod's socket replaces whatever an earlier agent left at its path, and any user may connect to it.
TEST(NodePublications, APodsSocketIsMadeInItsVolumeAndReplacesAnEarlierOne) {
  const fs::path dir = fs::temp_directory_path() / ("sluice-publications-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto p = publication((dir / "volume").string());
  std::string error;
  const int first = make_pod_socket(p, error);
  ASSERT_GE(first, 0) << error;
  const int second = make_pod_socket(p, error);
  ASSERT_GE(second, 0) << error;
  struct stat st {};
  ASSERT_EQ(::stat(p.socket_path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  EXPECT_EQ(std::distance(fs::directory_iterator(p.target), fs::directory_iterator{}), 1) << "only node.sock is left";
  // A connection reaches the second socket, not the first.
  const int c = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strcpy(a.sun_path, p.socket_path().c_str());
  ASSERT_EQ(::connect(c, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
  EXPECT_GE(::accept4(second, nullptr, nullptr, SOCK_CLOEXEC), 0);
  EXPECT_LT(::accept4(first, nullptr, nullptr, SOCK_CLOEXEC), 0);
  ::close(c);
  ::close(first);
  ::close(second);

  // In a directory whose path is longer than a socket address holds, as a kubelet's volume may be.
  const auto deep = publication((dir / std::string(100, 'd') / "mount").string());
  const int far = make_pod_socket(deep, error);
  ASSERT_GE(far, 0) << error;
  const int c2 = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  EXPECT_EQ(unix_connect(c2, deep.socket_path()), 0) << std::strerror(errno);
  EXPECT_GE(::accept4(far, nullptr, nullptr, SOCK_CLOEXEC), 0);
  ::close(c2);
  ::close(far);

  const auto records = dir / "records";
  fs::create_directories(records);
  ASSERT_TRUE(save_record(records.string(), p, error)) << error;
  auto loaded = load_records(records.string());
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].target, p.target);
  remove_record(records.string(), p.volume);
  EXPECT_TRUE(load_records(records.string()).empty());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sluice::app::node
