// The image store over a real OCI layout (written by tests/integration/gateway/make_oci_layout.py): the
// rootfs with its layers applied, the config read, one unpack per image, and clear errors for a tag that
// is not there, a damaged blob, a path that is no layout, and Kubernetes' command/args rule.
#include "runtime/image_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace sluice::runtime {
namespace {

namespace fs = std::filesystem;

class ImageStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("sluice-images-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_);
    layout_ = base_ / "layout";
    // Any executable stands in for busybox here: nothing is run.
    std::string cmd = std::string("/usr/bin/python3 ") + SOURCE_DIR + "/tests/integration/gateway/make_oci_layout.py " +
                      layout_.string() + " v1 /bin/true > " + (base_ / "id").string();
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream in(base_ / "id");
    std::getline(in, id_);
  }
  void TearDown() override { fs::remove_all(base_); }
  std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  fs::path base_, layout_;
  std::string id_;
};

TEST_F(ImageStoreTest, ALayoutIsUnpackedOnceWithItsLayersAppliedAndItsConfigRead) {
  ImageStore store(base_ / "cache");
  std::string error;
  auto image = store.pull("oci:" + layout_.string() + ":v1", error);
  ASSERT_TRUE(image) << error;
  EXPECT_TRUE(image->unpacked);
  EXPECT_EQ(image->id, id_);
  EXPECT_EQ(read(image->rootfs / "www/index.html"), "from the image\n") << "the second layer replaces the first's";
  EXPECT_FALSE(fs::exists(image->rootfs / "www/gone.html")) << "the second layer's whiteout deletes it";
  EXPECT_EQ(image->config.entrypoint, (std::vector<std::string>{"/bin/sh", "-c"}));
  ASSERT_EQ(image->config.cmd.size(), 1u);
  EXPECT_NE(image->config.cmd[0].find("busybox httpd -f -p $PORT -h /www"), std::string::npos) << image->config.cmd[0];
  EXPECT_EQ(image->config.working_dir, "/www");
  int uid = -1, gid = -1;
  ASSERT_TRUE(image_user_ids(*image, uid, gid, error)) << error;
  EXPECT_EQ(uid, 1000);
  EXPECT_EQ(gid, 1000);

  // Again, by path and without the tag (the layout holds one image): the cache answers.
  auto again = store.pull(layout_.string(), error);
  ASSERT_TRUE(again) << error;
  EXPECT_FALSE(again->unpacked);
  EXPECT_EQ(again->rootfs, image->rootfs);
  // And a second store (another gateway) over the same cache finds it too.
  ImageStore other(base_ / "cache");
  auto third = other.pull("oci:" + layout_.string(), error);
  ASSERT_TRUE(third) << error;
  EXPECT_FALSE(third->unpacked);
  // Nothing half-made is left beside it.
  for (const auto& e : fs::directory_iterator(base_ / "cache")) EXPECT_NE(e.path().filename().string()[0], '.') << e.path();
}

TEST_F(ImageStoreTest, ErrorsSayWhatWasLookedForAndWhy) {
  ImageStore store(base_ / "cache");
  std::string error;
  EXPECT_FALSE(store.pull("oci:" + layout_.string() + ":v2", error));
  EXPECT_NE(error.find("no image tagged 'v2'"), std::string::npos) << error;
  EXPECT_NE(error.find("v1"), std::string::npos) << "the tags there are listed: " << error;

  EXPECT_FALSE(store.pull("oci:" + base_.string(), error));
  EXPECT_NE(error.find("not an OCI image layout"), std::string::npos) << error;

  // A layer blob changed after the manifest named it.
  fs::path victim;
  for (const auto& e : fs::directory_iterator(layout_ / "blobs/sha256"))
    if (fs::file_size(e.path()) > 100 && read(e.path()).substr(0, 2) == "\x1f\x8b") victim = e.path();
  ASSERT_FALSE(victim.empty());
  std::ofstream(victim, std::ios::app) << "tampered";
  EXPECT_FALSE(store.pull("oci:" + layout_.string() + ":v1", error));
  EXPECT_NE(error.find("does not match its digest"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(base_ / "cache" / id_.substr(7))) << "a failed unpack leaves no cache entry";
}

TEST_F(ImageStoreTest, WhatAKilledUnpackLeftIsRemovedAndAnotherLiveOnesWorkIsNot) {
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const auto left = base_ / "cache" / (".unpacking-" + id_.substr(7) + "-" + std::to_string(dead));
  const auto live = base_ / "cache" / (".podman-" + id_.substr(7) + "-" + std::to_string(::getppid()));
  fs::create_directories(left / "rootfs/bin");
  fs::create_directories(live / "layout");
  ImageStore store(base_ / "cache");
  std::string error;
  ASSERT_TRUE(store.pull("oci:" + layout_.string(), error)) << error;
  EXPECT_FALSE(fs::exists(left)) << "its maker is gone";
  EXPECT_TRUE(fs::exists(live)) << "its maker is alive";
}

TEST(ContainerArgv, CommandReplacesTheEntrypointAndArgsTheCmd) {
  ImageConfig image;
  image.entrypoint = {"/entry"};
  image.cmd = {"default-arg"};
  using V = std::vector<std::string>;
  EXPECT_EQ(container_argv(image, {}, std::nullopt), (V{"/entry", "default-arg"}));
  EXPECT_EQ(container_argv(image, {}, V{"mine"}), (V{"/entry", "mine"}));
  EXPECT_EQ(container_argv(image, {"/other"}, std::nullopt), (V{"/other"})) << "a command drops the image's cmd";
  EXPECT_EQ(container_argv(image, {"/other"}, V{"x"}), (V{"/other", "x"}));
  EXPECT_TRUE(container_argv(ImageConfig{}, {}, std::nullopt).empty());
}

// An instance of an image, as the kubelet makes a container: the container's own values win.
TEST(ApplyImage, TheImagesRootfsArgvEnvDirAndUserUnderWhatTheContainerSays) {
  Image image;
  image.rootfs = "/cache/abc/rootfs";
  image.config.entrypoint = {"/entry"};
  image.config.cmd = {"serve"};
  image.config.env = {"MODE=image", "ONLY_IMAGE=1", "NOT_A_PAIR"};
  image.config.working_dir = "/app";
  image.config.user = "7:8";
  InstanceSpec spec;
  spec.env = {{"MODE", "service"}};
  std::string error;
  ASSERT_TRUE(apply_image(image, {"oci:/x", "process", {}, std::nullopt, std::nullopt, std::nullopt}, spec, error)) << error;
  EXPECT_EQ(spec.handler, "runc") << "a process service runs its image under runc";
  EXPECT_EQ(spec.rootfs, image.rootfs);
  EXPECT_EQ(spec.command, (std::vector<std::string>{"/entry", "serve"}));
  EXPECT_EQ(spec.env.at("MODE"), "service");
  EXPECT_EQ(spec.env.at("ONLY_IMAGE"), "1");
  EXPECT_FALSE(spec.env.contains("NOT_A_PAIR"));
  EXPECT_EQ(spec.env.at("PATH"), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  EXPECT_EQ(spec.working_dir, "/app");
  EXPECT_EQ(spec.run_as_user, 7);
  EXPECT_EQ(spec.run_as_group, 8);

  InstanceSpec mine;
  mine.working_dir = "/mine";
  ASSERT_TRUE(apply_image(image, {"oci:/x", "crun", {"/bin/other"}, std::nullopt, 0, std::nullopt}, mine, error)) << error;
  EXPECT_EQ(mine.handler, "crun");
  EXPECT_EQ(mine.command, (std::vector<std::string>{"/bin/other"}));
  EXPECT_EQ(mine.working_dir, "/mine");
  EXPECT_FALSE(mine.run_as_user) << "the container's own user is applied later, by the pod's settings";

  image.config.entrypoint.clear();
  image.config.cmd.clear();
  InstanceSpec none;
  EXPECT_FALSE(apply_image(image, {"oci:/x", "runc", {}, std::nullopt, std::nullopt, std::nullopt}, none, error));
  EXPECT_EQ(error, "image oci:/x has no entrypoint or cmd: give the container a command:");
}

}  // namespace
}  // namespace sluice::runtime
