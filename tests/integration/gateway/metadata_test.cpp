// The gateway's metadata server: instances find it through GCE_METADATA_HOST and learn who they are;
// requests without `Metadata-Flavor: Google` get 403; the token is the documented fake.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/integration/gateway/gateway_harness.h"

namespace sluice::test {
namespace {

int metadata_port(Gateway& gw) {
  auto line = gw.process->wait_for_line("\"listener\":\"metadata\"", 5s);
  return line ? static_cast<int>(json_int_field(*line, "port")) : 0;
}

std::string url(int port, const std::string& path) { return "http://127.0.0.1:" + std::to_string(port) + path; }

TEST(GatewayMetadata, WithoutTheHeaderIs403WithItTheProjectRegionAndAFakeToken) {
  Gateway gw({"--", DEMO_APP_BIN});
  int port = metadata_port(gw);
  ASSERT_GT(port, 0) << gw.process->stdout_text();
  auto denied = curl({"-s", "-w", "\n%{http_code}", url(port, "/computeMetadata/v1/project/project-id")});
  EXPECT_NE(denied.out.find("Missing required header"), std::string::npos) << denied.out;
  EXPECT_NE(denied.out.find("\n403"), std::string::npos) << denied.out;
  const std::vector<std::string> flavor = {"-s", "-H", "Metadata-Flavor: Google"};
  auto get = [&](const std::string& path) {
    auto args = flavor;
    args.push_back(url(port, path));
    return curl(args).out;
  };
  EXPECT_EQ(get("/computeMetadata/v1/project/project-id"), "local");
  EXPECT_EQ(get("/computeMetadata/v1/instance/region"), "projects/0/regions/local");
  auto token = json::parse(get("/computeMetadata/v1/instance/service-accounts/default/token")).as_object();
  EXPECT_EQ(token["access_token"].as_string(), "sluice-local-fake-token-valid-nowhere");
  EXPECT_EQ(token["token_type"].as_string(), "Bearer");
  // The response says where it comes from, as Google's does (client libraries check it).
  auto head = curl({"-s", "-D", "-", "-o", "/dev/null", "-H", "Metadata-Flavor: Google", url(port, "/")});
  EXPECT_NE(head.out.find("Metadata-Flavor: Google"), std::string::npos) << head.out;
  // Not an instance: no identity.
  auto who = curl({"-s", "-w", "\n%{http_code}", "-H", "Metadata-Flavor: Google", url(port, "/computeMetadata/v1/instance/id")});
  EXPECT_NE(who.out.find("\n404"), std::string::npos) << who.out;
  // Proxied requests are refused even with the header.
  auto proxied = curl({"-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Metadata-Flavor: Google", "-H",
                       "X-Forwarded-For: 10.0.0.1", url(port, "/computeMetadata/v1/project/project-id")});
  EXPECT_EQ(proxied.out, "403");
}

TEST(GatewayMetadata, AnInstanceLearnsItsIdServiceAndRevision) {
  auto out = std::filesystem::temp_directory_path() / ("sluice-md-" + std::to_string(::getpid()));
  std::filesystem::create_directories(out);
  const std::string ask = "curl -s -H 'Metadata-Flavor: Google' \"http://$GCE_METADATA_HOST/computeMetadata/v1/";
  const std::string script = ask + "instance/id\" > " + out.string() + "/id; " + ask + "instance/attributes/service\" > " +
                             out.string() + "/service; " + ask + "instance/attributes/revision\" > " + out.string() +
                             "/revision; echo \"$GCE_METADATA_IP\" > " + out.string() + "/ip; exec " + DEMO_APP_BIN;
  {
    Gateway gw({"--", "/bin/sh", "-c", script});
    ASSERT_TRUE(gw.validated()) << gw.process->stdout_text();
    int port = metadata_port(gw);
    auto read = [&](const std::string& name) {
      std::ifstream in(out / name);
      return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    EXPECT_EQ(read("id"), "app-1");
    EXPECT_EQ(read("service"), "app");
    EXPECT_EQ(read("revision"), "app-00001");
    EXPECT_EQ(read("ip"), "127.0.0.1:" + std::to_string(port) + "\n");
  }
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace sluice::test
