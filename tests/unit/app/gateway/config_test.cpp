// sluice gateway's configuration: YAML, Procfile and the one-liner, with errors that name the file, the
// line and the key.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/gateway/config.h"
#include "app/gateway/yaml_fields.h"
#include "runtime/spawn.h"
#include "common/config_error.h"
#include "tests/unit/app/gateway/yaml_error.h"

namespace sluice::app::gateway {
namespace {

TEST(GatewayConfig, OneLinerIsOneDefaultThrottledServiceOn8080StartedOnDemand) {
  auto g = one_liner({"./server", "--flag"});
  ASSERT_EQ(g.services.size(), 1u);
  const auto& s = g.services[0];
  EXPECT_EQ(g.port, 8080);
  EXPECT_EQ(s.name, "app");
  EXPECT_TRUE(s.is_default);
  EXPECT_EQ(s.command, (std::vector<std::string>{"./server", "--flag"}));
  EXPECT_TRUE(throttling_on(g, s));
  EXPECT_TRUE(scale_to_zero_on(g, s));
  EXPECT_EQ(s.scaling.initial_scale, 0);
  EXPECT_EQ(s.scaling.min_scale, 0);
}

TEST(GatewayConfig, YamlServicesWithKnativeAutoscalingKeys) {
  auto g = parse_yaml(R"(
listen: 0.0.0.0:9000
admin: 9001
request-timeout: 90s
request-lines: false
features: {throttling: allowed, scale-to-zero: enabled}
autoscaler:
  stable-window: 10s
services:
  web:
    command: ./web --port $PORT
    hosts: [Web.Test, www.test]
    default: true
    env: {MODE: dev}
    container-concurrency: 2
    max-scale: 3
    features: {throttling: true}
  worker:
    command: ["./worker", "-v"]
    buffer-size: 7
    buffer-timeout: 1500ms
)", "sluice.yaml");
  EXPECT_EQ(g.listen_address, "0.0.0.0");
  EXPECT_EQ(g.port, 9000);
  EXPECT_EQ(g.admin_address, "127.0.0.1");
  EXPECT_EQ(g.admin_port, 9001);
  EXPECT_EQ(g.request_timeout, std::chrono::seconds(90));
  EXPECT_FALSE(g.request_lines);
  EXPECT_TRUE(one_liner({"./server"}).request_lines);
  ASSERT_EQ(g.services.size(), 2u);
  const auto& web = g.services[0];
  EXPECT_EQ(web.command, (std::vector<std::string>{"/bin/sh", "-c", "exec ./web --port $PORT"}));
  EXPECT_EQ(web.hosts, (std::vector<std::string>{"web.test", "www.test"}));
  EXPECT_EQ(web.env.at("MODE"), "dev");
  EXPECT_EQ(web.scaling.container_concurrency, 2);
  EXPECT_EQ(web.scaling.max_scale, 3);
  EXPECT_EQ(web.scaling.stable_window, std::chrono::seconds(10));
  EXPECT_TRUE(throttling_on(g, web));
  const auto& worker = g.services[1];
  EXPECT_EQ(worker.command, (std::vector<std::string>{"./worker", "-v"}));
  EXPECT_EQ(worker.hosts, (std::vector<std::string>{"worker.localhost"}));
  EXPECT_FALSE(worker.is_default);
  EXPECT_EQ(worker.buffer_size, 7u);
  EXPECT_EQ(worker.buffer_timeout, std::chrono::milliseconds(1500));
  EXPECT_FALSE(throttling_on(g, worker)) << "allowed means opt-in";
}

TEST(GatewayConfig, ACompoundShellCommandKeepsItsShell) {
  auto g = parse_yaml("services:\n  a:\n    command: sleep 1; ./a\n", "f.yaml");
  EXPECT_EQ(g.services[0].command, (std::vector<std::string>{"/bin/sh", "-c", "sleep 1; ./a"}));
}

// What `argv` prints on stdout, run as the runtime runs an instance's command.
std::string output_of(const std::vector<std::string>& argv) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return "pipe failed";
  runtime::SpawnRequest req;
  req.argv = argv;
  req.env = {"PATH=/usr/bin:/bin"};
  req.stdout_fd = out[1];
  const auto child = runtime::spawn_process(req);
  ::close(out[1]);
  std::string text;
  char buf[256];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  if (child.pid > 0) ::waitpid(child.pid, nullptr, 0);
  if (child.pidfd >= 0) ::close(child.pidfd);
  return text;
}

// A string command (and a Procfile line, `web: NAME=value cmd`) may set variables before its command, as a
// shell line does: they stay before the `exec` that replaces the shell, which exports them to the command.
TEST(GatewayConfig, AStringCommandMaySetVariablesBeforeItsCommand) {
  using Argv = std::vector<std::string>;
  EXPECT_EQ(shell_command("NAME=value python3 app.py"), (Argv{"/bin/sh", "-c", "NAME=value exec python3 app.py"}));
  EXPECT_EQ(shell_command("A='x y' B=\"q r\" C=a\\ b ./web --port $PORT"),
            (Argv{"/bin/sh", "-c", "A='x y' B=\"q r\" C=a\\ b exec ./web --port $PORT"}));
  EXPECT_EQ(shell_command("./web A=1"), (Argv{"/bin/sh", "-c", "exec ./web A=1"}));
  EXPECT_EQ(shell_command("A=1"), (Argv{"/bin/sh", "-c", "A=1"}));
  EXPECT_EQ(shell_command("1A=2 ./web"), (Argv{"/bin/sh", "-c", "exec 1A=2 ./web"})) << "not a variable's name";
  // Run: the variable reaches the command.
  EXPECT_EQ(output_of(shell_command("GREETING='hello there' printenv GREETING")), "hello there\n");
  const auto procfile = parse_procfile("web: GREETING=hi printenv GREETING\n", "Procfile");
  ASSERT_EQ(procfile.services.size(), 1u);
  EXPECT_EQ(output_of(procfile.services[0].command), "hi\n");
}

// `exec ./server`, a Procfile and Dockerfile habit, is not given a second exec (dash then looked for a
// command named "exec" and exited 127).
TEST(GatewayConfig, AStringCommandThatExecsAlreadyIsRunAsWritten) {
  using Argv = std::vector<std::string>;
  EXPECT_EQ(shell_command("exec ./web"), (Argv{"/bin/sh", "-c", "exec ./web"}));
  EXPECT_EQ(shell_command("A=1 exec ./web"), (Argv{"/bin/sh", "-c", "A=1 exec ./web"}));
  EXPECT_EQ(shell_command("executor --x"), (Argv{"/bin/sh", "-c", "exec executor --x"}));
  EXPECT_EQ(output_of(shell_command("GREETING=hi exec printenv GREETING")), "hi\n");
}

// A file that cannot be read says why.
TEST(GatewayConfig, AFileThatCannotBeReadSaysWhy) {
  const auto message = [](const std::string& path) {
    try {
      load_file(path);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("/nonexistent-sluice-dir/nope.yaml"), "/nonexistent-sluice-dir/nope.yaml: cannot be read: No such file or directory");
  EXPECT_EQ(message("/"), "/: cannot be read: it is a directory");
}

// A misspelt key is told the key it is a slip for, whether a service's own or an autoscaling one, and is
// never called an autoscaler key; several errors come in the file's order.
TEST(GatewayConfig, AMisspeltKeyIsToldWhatItMeantAndErrorsComeInFileOrder) {
  EXPECT_EQ(yaml_error("services:\n  web:\n    comand: ./web\n    command: ./web\n"),
            "sluice.yaml:3: services.web.comand: unknown key (did you mean 'command'?)");
  EXPECT_EQ(yaml_error("services:\n  web:\n    command: ./web\n    max-scael: 3\n"),
            "sluice.yaml:4: services.web.max-scael: unknown key (did you mean 'max-scale'?)");
  EXPECT_EQ(yaml_error("servces:\n  web: {command: x}\nservices:\n  web: {command: x}\n"),
            "sluice.yaml:1: servces: unknown key (did you mean 'services'?)");
  const auto far = yaml_error("services:\n  web:\n    command: ./web\n    replicas: 3\n");
  EXPECT_EQ(far.rfind("sluice.yaml:4: services.web.replicas: unknown key (a service's keys are ", 0), 0u) << far;
  EXPECT_EQ(far.find("autoscaler key"), std::string::npos) << far;
  // The autoscaling keys are checked after the service's own, though they stand before them here.
  const auto two = yaml_error("services:\n  web:\n    max-scale: -2\n    command: ./web\n    buffer-size: no\n");
  const auto first = two.find("sluice.yaml:3:"), second = two.find("sluice.yaml:5:");
  ASSERT_NE(first, std::string::npos) << two;
  ASSERT_NE(second, std::string::npos) << two;
  EXPECT_LT(first, second) << two;
}

TEST(GatewayConfig, ProcfileLinesAreServicesAndTheFirstIsTheDefault) {
  auto g = parse_procfile("# comment\nweb: ./web\n\nworker:  ./worker --queue q\n", "Procfile");
  ASSERT_EQ(g.services.size(), 2u);
  EXPECT_EQ(g.services[0].name, "web");
  EXPECT_TRUE(g.services[0].is_default);
  EXPECT_EQ(g.services[1].command, (std::vector<std::string>{"/bin/sh", "-c", "exec ./worker --queue q"}));
  EXPECT_EQ(g.services[1].hosts, (std::vector<std::string>{"worker.localhost"}));
  try {
    parse_procfile("web ./web\n", "Procfile");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "Procfile:1: expected 'name: command'");
  }
}

TEST(GatewayConfig, ErrorsNameTheFileTheLineAndTheKey) {
  EXPECT_EQ(yaml_error("services:\n  web:\n    command: x\n    buffer-size: many\n"),
            "sluice.yaml:4: services.web.buffer-size: 'many' is not a whole number in [0, 1000000]");
  EXPECT_EQ(yaml_error("services:\n  web:\n    command: x\n    grace-period: soon\n"),
            "sluice.yaml:4: services.web.grace-period: 'soon' is not a duration such as 30s, 1m30s or 500ms");
  EXPECT_EQ(yaml_error("services:\n  web:\n    hosts: [a]\n"), "sluice.yaml:3: services.web.command: is required");
  EXPECT_EQ(yaml_error("listen: 8080\n"), "sluice.yaml: services: must map service names to their settings");
  EXPECT_NE(yaml_error("lisen: 8080\nservices: {a: {command: x}}\n").find("sluice.yaml:1: lisen: unknown key"),
            std::string::npos);
  EXPECT_NE(yaml_error("services:\n  web:\n    command: x\n    max-scale: -2\n").find("sluice.yaml:4: services.web: max-scale"),
            std::string::npos);
  // Every error at once, each with its line (what --check and a reload report).
  auto all = yaml_error("listen: x\nservices:\n  web:\n    command: x\n    max-scale: -2\n    buffer-size: no\n");
  EXPECT_EQ(all.rfind("3 errors in sluice.yaml:", 0), 0u) << all;
  for (const char* want : {"sluice.yaml:1: listen", "sluice.yaml:5: services.web: max-scale", "sluice.yaml:6: services.web.buffer-size"})
    EXPECT_NE(all.find(want), std::string::npos) << want << " in " << all;
  EXPECT_NE(yaml_error("services: [\n").find("sluice.yaml:"), std::string::npos);
  EXPECT_EQ(yaml_error("accept-timeout: 5ms\nservices: {a: {command: x}}\n"),
            "sluice.yaml:1: accept-timeout: must be from 10ms to 1m");
  EXPECT_EQ(yaml_error("services:\n  web:\n    command: x\n    throttle-delay: 2m\n"),
            "sluice.yaml:4: services.web.throttle-delay: must be at most 1m");
}

TEST(GatewayConfig, ThrottleDelayAndAcceptTimeoutHaveDefaultsAndAreRead) {
  auto d = parse_yaml("services: {a: {command: x}}\n", "sluice.yaml");
  EXPECT_EQ(d.accept_timeout, std::chrono::milliseconds(250));
  EXPECT_EQ(d.services[0].throttle_delay, std::chrono::milliseconds(200));
  auto g = parse_yaml("accept-timeout: 1s\nservices: {a: {command: x, throttle-delay: 0s}}\n", "sluice.yaml");
  EXPECT_EQ(g.accept_timeout, std::chrono::seconds(1));
  EXPECT_EQ(g.services[0].throttle_delay, std::chrono::milliseconds(0));
}

TEST(GatewayConfig, AnImageStandsInForTheCommandButNotBesideARootfs) {
  auto g = parse_yaml("image-cache: /var/cache/x\nservices:\n  web:\n    image: oci:./layout:v1\n", "sluice.yaml");
  ASSERT_EQ(g.services.size(), 1u);
  EXPECT_EQ(g.image_cache, "/var/cache/x");
  EXPECT_EQ(g.services[0].image, "oci:./layout:v1");
  EXPECT_TRUE(g.services[0].command.empty()) << "the image's entrypoint and cmd run";
  EXPECT_FALSE(g.services[0].image_fallback) << "only a Knative container's command is a fallback";
  EXPECT_EQ(yaml_error("services:\n  web:\n    image: x\n    handler: runc\n    rootfs: /r\n"),
            "sluice.yaml:3: services.web.image: give image or rootfs, not both");
}

TEST(GatewayConfig, FeatureStatesFollowKnative) {
  EXPECT_EQ(yaml_error("features: {throttling: disabled}\nservices:\n  a:\n    command: x\n    features: {throttling: true}\n"),
            "sluice.yaml:4: services.a.features.throttling: the feature is disabled for this gateway "
            "(features.throttling: disabled)");
  auto g = parse_yaml("features: {throttling: enabled, scale-to-zero: disabled}\nservices:\n  a:\n    command: x\n"
                      "  b:\n    command: y\n    features: {throttling: false}\n", "f.yaml");
  EXPECT_TRUE(throttling_on(g, g.services[0]));
  EXPECT_FALSE(throttling_on(g, g.services[1])) << "a service may still opt out of an enabled feature";
  EXPECT_FALSE(scale_to_zero_on(g, g.services[0]));
  EXPECT_EQ(g.services[0].scaling.min_scale, 1) << "no scale to zero: at least one instance";
  auto h = parse_yaml("services:\n  a:\n    command: x\n    features: {h2c-upstream: true}\n  b:\n    command: y\n",
                      "f.yaml");
  EXPECT_TRUE(h2c_upstream_on(h, h.services[0])) << "h2c-upstream is allowed by default: a service opts in";
  EXPECT_FALSE(h2c_upstream_on(h, h.services[1]));
}

TEST(GatewayConfig, HostsAndNamesMustBeUniqueAndOneDefaultAtMost) {
  EXPECT_EQ(yaml_error("services:\n  a: {command: x, hosts: [h.test]}\n  b: {command: y, hosts: [H.test]}\n"),
            "sluice.yaml:3: services.b.hosts: 'h.test' is routed to another service too");
  EXPECT_EQ(yaml_error("services:\n  a: {command: x, default: true}\n  b: {command: y, default: true}\n"),
            "sluice.yaml: more than one service has default: true");
  EXPECT_NE(yaml_error("services:\n  a: {command: x, port: 9000}\n").find("a fixed port allows one instance only"),
            std::string::npos);
  EXPECT_TRUE(yaml_error("services:\n  a: {command: x, port: 9000, max-scale: 1}\n").empty());
}

}  // namespace
}  // namespace sluice::app::gateway
