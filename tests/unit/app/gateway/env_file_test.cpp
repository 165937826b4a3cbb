// Environment files in compose's format (app/gateway/env_file.h), and how load_file layers them: the
// gateway's `.env`, then a service's `env-file:` list, then its `env:`; errors name the file and the line
// and never the value.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "app/gateway/config.h"
#include "app/gateway/env_file.h"
#include "common/config_error.h"

namespace sluice::app::gateway {
namespace {

namespace fs = std::filesystem;
using Vars = std::vector<std::pair<std::string, std::string>>;

TEST(EnvFile, ReadsComposeFormat) {
  const std::string text =
      "# a comment\n"
      "\n"
      "PLAIN=value with spaces   \n"
      "export EXPORTED=yes\n"
      "  INDENTED = spaced\n"
      "COMMENTED=abc # a note\n"
      "HASH=abc#def\n"
      "EMPTY=\n"
      "EMPTY_NOTE= # nothing\n"
      "SINGLE='$NOT \\n \"expanded\"'\n"
      "DOUBLE=\"tab\\there \\\"q\\\" \\$X\"  # after\n"
      "MULTI=\"line one\nline two\"\n"
      "CRLF=windows\r\n"
      "dotted.name-x=1\n";
  auto r = parse_env_file(text, "x.env");
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.vars, (Vars{{"PLAIN", "value with spaces"},
                          {"EXPORTED", "yes"},
                          {"INDENTED", "spaced"},
                          {"COMMENTED", "abc"},
                          {"HASH", "abc#def"},
                          {"EMPTY", ""},
                          {"EMPTY_NOTE", ""},
                          {"SINGLE", "$NOT \\n \"expanded\""},
                          {"DOUBLE", "tab\there \"q\" $X"},
                          {"MULTI", "line one\nline two"},
                          {"CRLF", "windows"},
                          {"dotted.name-x", "1"}}));
}

TEST(EnvFile, ABareNameTakesTheGatewaysOwnValueWhenItHasOne) {
  ::setenv("SLUICE_ENV_FILE_TEST_SET", "from-shell", 1);
  ::unsetenv("SLUICE_ENV_FILE_TEST_UNSET");
  auto r = parse_env_file("SLUICE_ENV_FILE_TEST_SET\nSLUICE_ENV_FILE_TEST_UNSET\n", "x.env");
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.vars, (Vars{{"SLUICE_ENV_FILE_TEST_SET", "from-shell"}}));
}

TEST(EnvFile, ErrorsNameTheLineAndNeverTheValue) {
  auto r = parse_env_file("OK=1\n"
                          "0123456789-hunter1\n"  // a pasted secret with no name: not a name either
                          "NAME hunter2\n"
                          "QUOTED=\"hunter3\" trailing\n"
                          "OPEN='hunter4\n",
                          "secrets.env");
  EXPECT_EQ(r.vars, (Vars{{"OK", "1"}}));
  ASSERT_EQ(r.errors.size(), 4u) << ::testing::PrintToString(r.errors);
  EXPECT_EQ(r.errors[0].rfind("secrets.env:2: expected NAME=value", 0), 0u) << r.errors[0];
  EXPECT_EQ(r.errors[1], "secrets.env:3: NAME: expected '=' after the name");
  EXPECT_EQ(r.errors[2], "secrets.env:4: QUOTED: unexpected text after the closing \"");
  EXPECT_EQ(r.errors[3], "secrets.env:5: OPEN: the quoted value has no closing '");
  for (const auto& e : r.errors)
    for (const char* secret : {"hunter1", "hunter2", "hunter3", "hunter4"}) EXPECT_EQ(e.find(secret), std::string::npos) << e;
}

class Dir {
 public:
  Dir() {
    path_ = fs::temp_directory_path() / ("sluice-envfile-" + std::to_string(::getpid()) + "-" + std::to_string(n_++));
    fs::create_directories(path_);
  }
  ~Dir() { fs::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name) << text;
    return (path_ / name).string();
  }

 private:
  static inline int n_ = 0;
  fs::path path_;
};

TEST(EnvFile, DotEnvThenTheServicesFilesThenItsEnvWin) {
  Dir dir;
  dir.write(".env", "A=dot\nB=dot\nC=dot\nD=dot\n");
  dir.write("one.env", "B=one\nC=one\n");
  dir.write("two.env", "C=two\n");
  auto path = dir.write("sluice.yaml",
                        "services:\n"
                        "  web:\n    command: ./web\n    env-file: [one.env, two.env]\n    env: {D: yaml}\n"
                        "  other:\n    command: ./other\n");
  auto g = load_file(path);
  const auto& web = g.services[0];
  EXPECT_EQ(web.env, (std::map<std::string, std::string>{{"A", "dot"}, {"B", "one"}, {"C", "two"}, {"D", "yaml"}}));
  EXPECT_EQ(g.services[1].env.at("C"), "dot");  // `.env` is every service's
  // Every file read is an input of the config (a change reloads it).
  EXPECT_EQ(g.inputs.size(), 3u);
  // A value's change is a change of the service's definition (a new revision), though the YAML is the same.
  const auto before = web.fingerprint;
  dir.write("two.env", "C=changed\n");
  auto again = load_file(path);
  EXPECT_NE(again.services[0].fingerprint, before);
  EXPECT_EQ(again.services[1].fingerprint, g.services[1].fingerprint);
}

TEST(EnvFile, AProcfileGetsDotEnvAndEnvFileCanTurnItOff) {
  Dir dir;
  dir.write(".env", "A=dot\n");
  EXPECT_EQ(load_file(dir.write("Procfile", "web: ./web\n")).services[0].env.at("A"), "dot");
  EXPECT_TRUE(load_file(dir.write("off.yaml", "env-file: []\nservices:\n  web: {command: ./web}\n")).services[0].env.empty());
}

TEST(EnvFile, AMissingNamedFileIsAnErrorAtItsKeyAndAMissingDotEnvIsNot) {
  Dir dir;
  EXPECT_NO_THROW(load_file(dir.write("plain.yaml", "services:\n  web: {command: ./web}\n")));
  auto path = dir.write("sluice.yaml", "services:\n  web:\n    command: ./web\n    env-file: nope.env\n");
  try {
    load_file(path);
    FAIL() << "a missing env-file was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), path + ":4: services.web.env-file: 'nope.env' cannot be read: No such file or directory");
  }
  auto bad = dir.write("bad.yaml", "services:\n  web:\n    command: ./web\n    env-file: bad.env\n");
  auto env = dir.write("bad.env", "TOKEN 'secret-value'\n");
  try {
    load_file(bad);
    FAIL() << "a malformed env-file was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), env + ":1: TOKEN: expected '=' after the name");
  }
}

}  // namespace
}  // namespace sluice::app::gateway
