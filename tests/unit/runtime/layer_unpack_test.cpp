// Image layers applied to a root: entries, whiteouts and opaque directories as the OCI image spec says,
// PAX long names, and nothing written outside the root whatever symlinks or `..` a layer carries.
#include "runtime/layer_unpack.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace sluice::runtime {
namespace {

namespace fs = std::filesystem;

// A tar stream written entry by entry (ustar headers; a PAX record where a name does not fit).
class Tar {
 public:
  Tar& dir(const std::string& name, int mode = 0755) { return entry(name, '5', "", "", mode); }
  Tar& file(const std::string& name, const std::string& data, int mode = 0644) { return entry(name, '0', data, "", mode); }
  Tar& symlink(const std::string& name, const std::string& target) { return entry(name, '2', "", target, 0777); }
  Tar& hardlink(const std::string& name, const std::string& target) { return entry(name, '1', "", target, 0644); }
  Tar& device(const std::string& name) { return entry(name, '3', "", "", 0600); }
  std::string end() const { return out_ + std::string(1024, '\0'); }
  std::string truncated() const { return out_.substr(0, out_.size() - 300); }

 private:
  Tar& entry(const std::string& name, char type, const std::string& data, const std::string& link, int mode) {
    if (name.size() > 99) {
      std::string record = " path=" + name + "\n";
      std::string len = std::to_string(record.size() + 1);
      if (len.size() + record.size() != std::stoul(len)) len = std::to_string(record.size() + len.size());
      header("PaxHeader", 'x', len + record, "", 0644);
    }
    return header(name.size() > 99 ? name.substr(0, 99) : name, type, data, link, mode);
  }
  Tar& header(const std::string& name, char type, const std::string& data, const std::string& link, int mode) {
    char h[512] = {};
    std::memcpy(h, name.data(), name.size());
    std::snprintf(h + 100, 8, "%07o", mode);
    std::snprintf(h + 108, 8, "%07o", 0);
    std::snprintf(h + 116, 8, "%07o", 0);
    std::snprintf(h + 124, 12, "%011o", static_cast<unsigned>(data.size()));
    std::snprintf(h + 136, 12, "%011o", 0);
    h[156] = type;
    std::memcpy(h + 157, link.data(), std::min<std::size_t>(link.size(), 100));
    std::memcpy(h + 257, "ustar", 6);
    std::memcpy(h + 263, "00", 2);
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);
    out_.append(h, sizeof h);
    out_ += data;
    out_.append((512 - data.size() % 512) % 512, '\0');
    return *this;
  }
  std::string out_;
};

class LayerUnpack : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("sluice-layer-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(root_ = base_ / "root");
    fs::create_directories(host_ = base_ / "host");
    root_fd_ = ::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(root_fd_, 0);
  }
  void TearDown() override {
    ::close(root_fd_);
    fs::remove_all(base_);
  }
  // Feeds `bytes` through a pipe, as a decompressor would.
  bool apply(const std::string& bytes, std::string& error) {
    auto path = base_ / "layer.tar";
    std::ofstream(path, std::ios::binary) << bytes;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    bool ok = unpack_layer(fd, root_fd_, stats_, error);
    ::close(fd);
    return ok;
  }
  void apply_ok(const std::string& bytes) {
    std::string error;
    ASSERT_TRUE(apply(bytes, error)) << error;
  }
  std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  fs::path base_, root_, host_;
  int root_fd_ = -1;
  UnpackStats stats_;
};

TEST_F(LayerUnpack, AppliesFilesDirectoriesLinksAndModes) {
  apply_ok(Tar()
               .dir("bin/")
               .file("bin/tool", "#!/bin/sh\n", 0755)
               .symlink("bin/sh", "tool")
               .hardlink("bin/same", "bin/tool")
               .file("deep/er/file", "implicit parents")  // no directory entries before it
               .device("dev/null")
               .end());
  EXPECT_EQ(read(root_ / "bin/tool"), "#!/bin/sh\n");
  EXPECT_EQ(fs::status(root_ / "bin/tool").permissions() & fs::perms::all, static_cast<fs::perms>(0755));
  EXPECT_EQ(fs::read_symlink(root_ / "bin/sh"), "tool");
  EXPECT_TRUE(fs::equivalent(root_ / "bin/same", root_ / "bin/tool"));
  EXPECT_EQ(read(root_ / "deep/er/file"), "implicit parents");
  EXPECT_FALSE(fs::exists(fs::symlink_status(root_ / "dev/null"))) << "devices are the runtime's to provide";
  EXPECT_EQ(stats_.skipped, 1u);
}

TEST_F(LayerUnpack, ALaterLayerReplacesAndItsWhiteoutsDelete) {
  apply_ok(Tar().file("www/index.html", "one").file("www/gone.html", "x").dir("www/old/").file("www/old/a", "a").end());
  apply_ok(Tar()
               .file("www/index.html", "two")
               .file("www/.wh.gone.html", "")
               .file("www/.wh.old", "")
               .end());
  EXPECT_EQ(read(root_ / "www/index.html"), "two");
  EXPECT_FALSE(fs::exists(root_ / "www/gone.html"));
  EXPECT_FALSE(fs::exists(root_ / "www/old"));
  EXPECT_FALSE(fs::exists(root_ / "www/.wh.gone.html")) << "a whiteout is not a file of the image";
  EXPECT_EQ(stats_.whiteouts, 2u);
}

TEST_F(LayerUnpack, AnOpaqueDirectoryLosesWhatLowerLayersPutThereButKeepsThisLayersEntries) {
  apply_ok(Tar().file("etc/conf.d/lower1", "1").file("etc/conf.d/lower2", "2").file("etc/keep", "k").end());
  // This layer's own entry comes before the marker in the stream: it stays.
  apply_ok(Tar().file("etc/conf.d/upper", "u").file("etc/conf.d/.wh..wh..opq", "").end());
  EXPECT_TRUE(fs::exists(root_ / "etc/conf.d/upper"));
  EXPECT_FALSE(fs::exists(root_ / "etc/conf.d/lower1"));
  EXPECT_FALSE(fs::exists(root_ / "etc/conf.d/lower2"));
  EXPECT_TRUE(fs::exists(root_ / "etc/keep")) << "only the marked directory is emptied";
}

TEST_F(LayerUnpack, ADirectoryReplacesAFileAndAFileADirectory) {
  apply_ok(Tar().file("a", "file").dir("b/").file("b/x", "x").end());
  apply_ok(Tar().dir("a/").file("b", "now a file").end());
  EXPECT_TRUE(fs::is_directory(root_ / "a"));
  EXPECT_EQ(read(root_ / "b"), "now a file");
}

TEST_F(LayerUnpack, APaxRecordCarriesANameLongerThanUstarHolds) {
  std::string name = "long/" + std::string(150, 'n') + ".txt";
  apply_ok(Tar().file(name, "long").end());
  EXPECT_EQ(read(root_ / name), "long");
}

TEST_F(LayerUnpack, NothingIsWrittenOutsideTheRoot) {
  // An absolute symlink and `..` must resolve inside the image, as they would inside the container.
  const std::string host = host_.string();
  std::string error;
  apply(Tar().symlink("escape", host).symlink("up", "../../..").dir("etc/").end(), error);
  // Each in a layer of its own: an entry that fails ends its layer.
  apply(Tar().file("escape/pwned", "no").end(), error);
  apply(Tar().file("up/pwned-too", "no").end(), error);
  apply(Tar().file("../../dotdot", "clamped").end(), error);
  apply(Tar().hardlink("stolen", host + "/../../../etc/hostname").end(), error);
  EXPECT_TRUE(fs::is_empty(host_)) << "written through an absolute symlink into the host";
  EXPECT_FALSE(fs::exists(base_ / "dotdot"));
  EXPECT_FALSE(fs::exists(base_ / "pwned-too"));
  EXPECT_FALSE(fs::exists(fs::path("/pwned-too")));
  // What did land, landed inside.
  EXPECT_EQ(read(root_ / "dotdot"), "clamped") << "`..` above the root stays at the root";
  EXPECT_FALSE(fs::exists(fs::symlink_status(root_ / "stolen"))) << "a hard link to a host file was made";
}

TEST_F(LayerUnpack, GarbageAndTruncationAreErrorsThatSayWhat) {
  std::string error;
  EXPECT_FALSE(apply(std::string(2048, 'x'), error));
  EXPECT_NE(error.find("not a tar stream"), std::string::npos) << error;
  error.clear();
  EXPECT_FALSE(apply(Tar().file("big", std::string(4000, 'b')).truncated(), error));
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;
  EXPECT_NE(error.find("big"), std::string::npos) << error;
}

}  // namespace
}  // namespace sluice::runtime
