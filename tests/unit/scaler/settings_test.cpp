// The scaler's reading of a ScaledObject's trigger metadata: the sidecars list and the KPA keys.
#include "scaler/settings.h"

#include <gtest/gtest.h>

#include "common/config_error.h"

namespace sluice::scaler {
namespace {

using namespace std::chrono_literals;

std::string error_of(const Metadata& m) {
  try {
    parse_settings(m);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SidecarsTest, HostsTakePort9090UnlessGivenOne) {
  EXPECT_EQ(parse_sidecars("hello-sidecars.default.svc.cluster.local"),
            (std::vector<SidecarAddress>{{"hello-sidecars.default.svc.cluster.local", 9090}}));
  EXPECT_EQ(parse_sidecars("10.0.0.1, 10.0.0.2:9191,[fd00::1]:9092,[fd00::2]"),
            (std::vector<SidecarAddress>{{"10.0.0.1", 9090}, {"10.0.0.2", 9191}, {"fd00::1", 9092}, {"fd00::2", 9090}}));
}

TEST(SidecarsTest, MalformedListsNameTheKey) {
  for (const char* bad : {"", "a,,b", "a:", "a:0", "a:65536", "a:x", "fd00::1", "[fd00::1", "[fd00::1]x", ":9090"}) {
    try {
      parse_sidecars(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_TRUE(std::string(e.what()).starts_with("sidecars: ")) << e.what();
    }
  }
}

TEST(SettingsTest, KnativeKeysWithOrWithoutThePrefixAndKedasOwnKeysSkipped) {
  const auto s = parse_settings({{"scalerAddress", "scaler:6000"},
                                 {"sidecars", "10.0.0.1"},
                                 {"autoscaling.knative.dev/target", "50"},
                                 {"stable-window", "6s"},
                                 {"min-scale", "1"}});
  EXPECT_EQ(s.config.target, 50);
  EXPECT_EQ(s.config.stable_window, 6s);
  EXPECT_EQ(s.config.min_scale, 1);
  EXPECT_EQ(s.autoscaling.size(), 3u);
  EXPECT_EQ(s.sidecars.size(), 1u);
}

TEST(SettingsTest, ErrorsNameTheKey) {
  EXPECT_TRUE(error_of({{"target", "1"}}).starts_with("sidecars: missing")) << error_of({{"target", "1"}});
  EXPECT_TRUE(error_of({{"sidecars", "a"}, {"stable-window", "soon"}}).starts_with("stable-window: 'soon'"));
  EXPECT_NE(error_of({{"sidecars", "a"}, {"stabel-window", "6s"}}).find("'stabel-window'"), std::string::npos);
  EXPECT_TRUE(error_of({{"sidecars", "a"}, {"target", "6s"}, {"autoscaling.knative.dev/target", "7"}})
                  .starts_with("target: given twice"));
}

}  // namespace
}  // namespace sluice::scaler
