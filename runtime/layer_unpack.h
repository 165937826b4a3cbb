// Applying an OCI image layer (a tar stream) to a root filesystem directory, as the image spec's
// "Applying Changesets" says: entries are created or replaced, `.wh.NAME` deletes NAME from the layers
// below, `.wh..wh..opq` empties its directory of what the layers below put there.
//
// Every path is resolved inside the root (openat2 RESOLVE_IN_ROOT): an absolute symlink or `..` in a layer
// points into the image, never at the host, whatever an earlier layer laid down. Devices are not created
// (the OCI runtime provides /dev); ownership is kept when running as root.
#pragma once

#include <cstdint>
#include <string>

namespace sluice::runtime {

struct UnpackStats {
  std::uint64_t entries = 0, bytes = 0, whiteouts = 0, skipped = 0;
};

// Reads an uncompressed tar stream from `fd` (to its end) into the directory `root_fd`. False with `error`
// naming the entry and the reason on the first failure; what was written so far stays.
bool unpack_layer(int fd, int root_fd, UnpackStats& stats, std::string& error);

// openat2(root_fd, path, flags | O_CLOEXEC) with RESOLVE_IN_ROOT: `path` and every symlink on the way are
// taken relative to root_fd, never above it. A file descriptor, or -1 with errno set.
int open_in_root(int root_fd, const std::string& path, int flags);

}  // namespace sluice::runtime
