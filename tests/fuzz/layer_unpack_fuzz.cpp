// libFuzzer: arbitrary bytes as an image layer, applied to a fresh root directory. Whatever the entries say
// (absolute or `..` names, symlinks out of the root followed by entries through them, hard links to host
// files, whiteouts of `..`), nothing may appear outside the root: the sentinel directory next to it (the
// target of the corpus's escaping symlinks) stays empty, and the base holds only the two. No crash, no hang.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "runtime/layer_unpack.h"

namespace {

namespace fs = std::filesystem;

// Fixed, so that corpus entries can name the sentinel: /tmp/sluice-layer-fuzz/host.
const fs::path kBase = "/tmp/sluice-layer-fuzz";

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fs::path root = kBase / "root", host = kBase / "host";
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root);
  fs::create_directories(host);
  int layer = ::memfd_create("layer", MFD_CLOEXEC);
  check(layer >= 0);
  for (std::size_t off = 0; off < size;) {
    ssize_t n = ::write(layer, data + off, size - off);
    check(n > 0);
    off += static_cast<std::size_t>(n);
  }
  ::lseek(layer, 0, SEEK_SET);
  int root_fd = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  check(root_fd >= 0);
  sluice::runtime::UnpackStats stats;
  std::string error;
  sluice::runtime::unpack_layer(layer, root_fd, stats, error);
  ::close(root_fd);
  ::close(layer);
  check(fs::is_empty(host));
  for (const auto& e : fs::directory_iterator(kBase)) check(e.path() == root || e.path() == host);
  return 0;
}
