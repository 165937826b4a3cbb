// The generated OCI config.json parses and carries the command, env, rootfs, and the contract mounts.
#include "runtime/oci_bundle.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace sluice::runtime {
namespace {

namespace json = boost::json;

TEST(OciBundle, ConfigCarriesProcessRootAndMounts) {
  OciConfig cfg;
  cfg.args = {"/bin/sh", "-c", "echo \"$PORT\"\n"};
  cfg.env = {"PORT=8080", "K_SERVICE=svc"};
  cfg.rootfs = "/var/lib/x/rootfs";
  cfg.hostname = "inst-1";
  cfg.binds.push_back(BindMount{"/usr", "/usr", true});
  auto doc = json::parse(oci_config_json(cfg)).as_object();
  EXPECT_EQ(doc.at("ociVersion").as_string(), "1.0.2");
  auto& proc = doc.at("process").as_object();
  EXPECT_EQ(proc.at("args").as_array().size(), 3u);
  EXPECT_EQ(proc.at("args").as_array()[2].as_string(), "echo \"$PORT\"\n");
  EXPECT_EQ(proc.at("env").as_array()[0].as_string(), "PORT=8080");
  EXPECT_FALSE(proc.at("terminal").as_bool());
  EXPECT_EQ(doc.at("root").at("path").as_string(), "/var/lib/x/rootfs");
  EXPECT_EQ(doc.at("hostname").as_string(), "inst-1");
  bool tmp = false, resolv = false, usr_ro = false;
  for (const auto& m : doc.at("mounts").as_array()) {
    auto dest = m.at("destination").as_string();
    if (dest == "/tmp") tmp = m.at("type").as_string() == "tmpfs";
    if (dest == "/etc/resolv.conf") resolv = true;
    if (dest == "/usr") {
      for (const auto& o : m.at("options").as_array()) usr_ro = usr_ro || o.as_string() == "ro";
    }
  }
  EXPECT_TRUE(tmp);
  EXPECT_TRUE(resolv);
  EXPECT_TRUE(usr_ro);
  // Host network: the instance's PORT is reachable on the host's loopback.
  for (const auto& ns : doc.at("linux").at("namespaces").as_array())
    EXPECT_NE(ns.at("type").as_string(), "network");
}

TEST(OciBundle, DnsFilesCanBeLeftOut) {
  OciConfig cfg;
  cfg.args = {"/bin/true"};
  cfg.rootfs = "/r";
  cfg.dns_files = false;
  auto doc = json::parse(oci_config_json(cfg)).as_object();
  for (const auto& m : doc.at("mounts").as_array()) EXPECT_NE(m.at("destination").as_string(), "/etc/hosts");
}

TEST(OciBundle, PodSettingsGoIntoUserNamespacesAndResources) {
  OciConfig cfg;
  cfg.args = {"/app"};
  cfg.rootfs = "/r";
  cfg.uid = 1000;
  cfg.gid = 1001;
  cfg.netns_path = "/proc/42/fd/7";
  cfg.memory_limit_bytes = 64ULL << 20;
  cfg.cpu_millis = 500;
  auto doc = json::parse(oci_config_json(cfg)).as_object();
  EXPECT_EQ(doc.at("process").at("user").at("uid").as_int64(), 1000);
  EXPECT_EQ(doc.at("process").at("user").at("gid").as_int64(), 1001);
  const auto& linux_ = doc.at("linux").as_object();
  bool network = false;
  for (const auto& ns : linux_.at("namespaces").as_array())
    if (ns.at("type").as_string() == "network") network = ns.at("path").as_string() == "/proc/42/fd/7";
  EXPECT_TRUE(network);
  EXPECT_EQ(linux_.at("resources").at("memory").at("limit").as_int64(), 64LL << 20);
  EXPECT_EQ(linux_.at("resources").at("cpu").at("quota").as_int64(), 50000);
  EXPECT_EQ(linux_.at("resources").at("cpu").at("period").as_int64(), 100000);
  std::string tmp_size;
  for (const auto& m : doc.at("mounts").as_array())
    if (m.at("destination").as_string() == "/tmp")
      for (const auto& o : m.at("options").as_array())
        if (o.as_string().starts_with("size=")) tmp_size = std::string(o.as_string());
  EXPECT_EQ(tmp_size, "size=67108864");
  // Without a pod: the host's network, no resources.
  OciConfig plain;
  plain.args = {"/app"};
  auto bare = json::parse(oci_config_json(plain)).as_object();
  for (const auto& ns : bare.at("linux").at("namespaces").as_array()) EXPECT_NE(ns.at("type").as_string(), "network");
  EXPECT_FALSE(bare.at("linux").as_object().contains("resources"));
}

}  // namespace
}  // namespace sluice::runtime
