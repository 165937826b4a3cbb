// `image:` in a Knative Service: an OCI image layout (written by make_oci_layout.py around the static
// busybox) run under runc, its layers applied, its entrypoint, cmd, env, working dir and user honoured,
// unpacked once and taken from the cache by the next gateway; an image that is not here is a 503 with the
// reason. Root and runc are needed (CI has both); elsewhere the tests skip and say why.
#include <unistd.h>

#include "tests/integration/gateway/gateway_harness.h"
#include "tests/support/capability.h"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;

std::string service_with_image(const std::string& image) {
  return "apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  template:\n"
         "    spec:\n      containers:\n        - image: " + image + "\n";
}

std::size_t count_lines(const Gateway& gw, const std::string& needle) {
  std::size_t n = 0;
  for (const auto& l : gw.process->lines()) n += l.find(needle) != std::string::npos;
  return n;
}

class GatewayImage : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_NEED("runc");  // root, /bin/busybox, and a runc that runs a trivial bundle
    base_ = fs::temp_directory_path() / ("sluice-gw-image-" + std::to_string(::getpid()));
    fs::remove_all(base_);
    fs::create_directories(base_);
    auto made = run_command({"/usr/bin/python3", std::string(SOURCE_DIR) + "/tests/integration/gateway/make_oci_layout.py",
                             (base_ / "layout").string(), "v1", "/bin/busybox"});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    env_ = {{"SLUICE_IMAGE_CACHE", (base_ / "cache").string()}};
  }
  void TearDown() override {
    if (!base_.empty()) fs::remove_all(base_);
  }
  fs::path base_;
  std::map<std::string, std::string> env_;
};

TEST_F(GatewayImage, AnOciLayoutRunsUnderRuncWithItsLayersAndConfig) {
  TempFile file("sluice-image.yaml", service_with_image("oci:" + (base_ / "layout").string() + ":v1"));
  {
    Gateway gw({"--config", file.path()}, env_);
    auto index = curl({"-s", gw.url("/")}, 30);
    EXPECT_EQ(index.out, "from the image\n") << "the second layer's index.html replaces the first's";
    auto gone = curl({"-s", "-o", "/dev/null", "-w", "%{http_code}", gw.url("/gone.html")});
    EXPECT_EQ(gone.out, "404") << "the second layer's whiteout deletes gone.html";
    // The image's env and user, its working dir under the CGI's own, and the contract's K_SERVICE.
    auto env = curl({"-s", gw.url("/cgi-bin/env")});
    EXPECT_EQ(env.out, "greeting=hello-from-image uid=1000 gid=1000 service=web pwd=/www/cgi-bin\n");
    EXPECT_EQ(count_lines(gw, "\"event\":\"image.unpacked\""), 1u);
  }
  // The next gateway over the same cache starts the image without unpacking it again.
  Gateway again({"--config", file.path()}, env_);
  EXPECT_EQ(curl({"-s", again.url("/")}, 30).out, "from the image\n");
  EXPECT_EQ(count_lines(again, "\"event\":\"image.unpacked\""), 0u);
}

TEST_F(GatewayImage, AnImageThatIsNotHereIsA503WithTheReason) {
  TempFile file("sluice-image.yaml", service_with_image("oci:" + (base_ / "nothing-here").string() + ":v1"));
  Gateway gw({"--config", file.path()}, env_);
  auto r = curl({"-s", "-w", "\n%{http_code}", gw.url("/")}, 30);
  EXPECT_NE(r.out.find("not an OCI image layout"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.substr(r.out.rfind('\n') + 1), "503") << r.out;
}

}  // namespace
}  // namespace sluice::test
