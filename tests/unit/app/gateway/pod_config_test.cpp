// sluice gateway's pod settings: `sandbox:`, per-service memory/cpu limits, users and lifecycle hooks,
// with errors that name the file, the line and the key.
#include <gtest/gtest.h>

#include "app/gateway/config.h"
#include "common/config_error.h"
#include "tests/unit/app/gateway/yaml_error.h"

namespace sluice::app::gateway {
namespace {

TEST(GatewayPodConfig, ServiceLimitsUsersAndHooks) {
  auto g = parse_yaml(R"(
sandbox: auto
sandbox-network: 10.213.0.0/16
services:
  web:
    command: ./server
    memory: 256Mi
    cpu: 500m
    run-as-user: 1000
    run-as-group: 1001
    run-as-non-root: true
    pre-stop: sleep 2
    post-start: [/bin/warm, --cache]
)", "sluice.yaml");
  EXPECT_EQ(g.sandbox, SandboxMode::auto_);
  EXPECT_EQ(g.sandbox_network, "10.213.0.0/16");
  const auto& s = g.services[0];
  EXPECT_EQ(s.memory_bytes, std::optional<std::uint64_t>(256ULL << 20));
  EXPECT_EQ(s.cpu_millis, std::optional<std::uint32_t>(500));
  EXPECT_EQ(s.run_as_user, std::optional<int>(1000));
  EXPECT_EQ(s.run_as_group, std::optional<int>(1001));
  EXPECT_TRUE(s.run_as_non_root);
  EXPECT_EQ(s.pre_stop, (std::vector<std::string>{"/bin/sh", "-c", "exec sleep 2"}));
  EXPECT_EQ(s.post_start, (std::vector<std::string>{"/bin/warm", "--cache"}));
}

TEST(GatewayPodConfig, DefaultsAreHostNetworkAndNoLimits) {
  auto g = parse_yaml("services:\n  web:\n    command: ./server\n", "sluice.yaml");
  EXPECT_EQ(g.sandbox, SandboxMode::off);
  EXPECT_FALSE(g.services[0].memory_bytes);
  EXPECT_FALSE(g.services[0].cpu_millis);
  EXPECT_FALSE(g.services[0].run_as_user);
  EXPECT_TRUE(g.services[0].pre_stop.empty());
}

TEST(GatewayPodConfig, QuantitiesAsKubernetesWritesThem) {
  EXPECT_EQ(parse_memory_quantity("64Mi"), std::optional<std::uint64_t>(64ULL << 20));
  EXPECT_EQ(parse_memory_quantity("1Gi"), std::optional<std::uint64_t>(1ULL << 30));
  EXPECT_EQ(parse_memory_quantity("500M"), std::optional<std::uint64_t>(500000000ULL));
  EXPECT_EQ(parse_memory_quantity("1048576"), std::optional<std::uint64_t>(1048576ULL));
  EXPECT_FALSE(parse_memory_quantity("lots"));
  EXPECT_FALSE(parse_memory_quantity("Mi"));
  EXPECT_FALSE(parse_memory_quantity("-5Mi"));
  EXPECT_EQ(parse_cpu_quantity("500m"), std::optional<std::uint32_t>(500));
  EXPECT_EQ(parse_cpu_quantity("0.25"), std::optional<std::uint32_t>(250));
  EXPECT_EQ(parse_cpu_quantity("2"), std::optional<std::uint32_t>(2000));
  EXPECT_EQ(parse_cpu_quantity(".5"), std::optional<std::uint32_t>(500));
  EXPECT_FALSE(parse_cpu_quantity("0.0001"));
  EXPECT_FALSE(parse_cpu_quantity("1."));
  EXPECT_FALSE(parse_cpu_quantity("half"));
}

TEST(GatewayPodConfig, ErrorsNameFileLineAndKey) {
  EXPECT_EQ(yaml_error("services:\n  web:\n    command: x\n    memory: lots\n"),
            "sluice.yaml:4: services.web.memory: 'lots' is not a memory size of at least 4Mi such as 256Mi, 1Gi or 500M");
  EXPECT_EQ(yaml_error("services:\n  web:\n    command: x\n    cpu: 1m\n"),
            "sluice.yaml:4: services.web.cpu: '1m' is not a CPU amount of at least 10m such as 500m, 0.5 or 2");
  EXPECT_EQ(yaml_error("sandbox: maybe\nservices:\n  web:\n    command: x\n"),
            "sluice.yaml:1: sandbox: 'maybe' is not auto, on or off");
  EXPECT_EQ(yaml_error("sandbox-network: 10.1.2.3/16\nservices:\n  web:\n    command: x\n"),
            "sluice.yaml:1: sandbox-network: '10.1.2.3/16' is not an IPv4 range such as 169.254.64.0/18 (prefix 8 to 30)");
  EXPECT_NE(yaml_error("services:\n  web:\n    command: x\n    run-as-user: -1\n").find("services.web.run-as-user"),
            std::string::npos);
}

TEST(GatewayPodConfig, AFixedPortWithSeveralInstancesNeedsPods) {
  EXPECT_NE(yaml_error("services:\n  web:\n    command: x\n    port: 8080\n    max-scale: 3\n")
                .find("a fixed port allows one instance only"),
            std::string::npos);
  EXPECT_EQ(yaml_error("sandbox: on\nservices:\n  web:\n    command: x\n    port: 8080\n    max-scale: 3\n"), "");
}

}  // namespace
}  // namespace sluice::app::gateway
