// A tar reader for image layers: ustar headers, GNU long names, PAX path/linkpath/size records.
#include "runtime/layer_unpack.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "runtime/fd.h"

namespace sluice::runtime {
namespace {

constexpr std::size_t kBlock = 512;
constexpr std::string_view kWhiteout = ".wh.";
constexpr std::string_view kOpaque = ".wh..wh..opq";
constexpr std::uint64_t kNoSize = ~std::uint64_t{0};

std::string errno_text(int e = errno) { return std::strerror(e); }

// Reads exactly n bytes; false at a premature end or an error.
bool read_exact(int fd, char* buf, std::size_t n) {
  while (n > 0) {
    ssize_t got = ::read(fd, buf, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    buf += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

std::uint64_t padded(std::uint64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

bool skip_bytes(int fd, std::uint64_t n) {
  char buf[16 * 1024];
  while (n > 0) {
    auto chunk = static_cast<std::size_t>(std::min<std::uint64_t>(n, sizeof buf));
    if (!read_exact(fd, buf, chunk)) return false;
    n -= chunk;
  }
  return true;
}

// A numeric header field: octal text, or base-256 when the top bit of the first byte is set.
std::optional<std::uint64_t> number(const char* field, std::size_t len) {
  auto bytes = reinterpret_cast<const unsigned char*>(field);
  if (bytes[0] & 0x80) {
    std::uint64_t v = bytes[0] & 0x7f;
    for (std::size_t i = 1; i < len; ++i) {
      if (v >> 56) return std::nullopt;
      v = (v << 8) | bytes[i];
    }
    return v;
  }
  std::uint64_t v = 0;
  std::size_t i = 0;
  while (i < len && (field[i] == ' ' || field[i] == '\0')) ++i;
  for (; i < len && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (v >> 60) return std::nullopt;
    v = v * 8 + static_cast<std::uint64_t>(field[i] - '0');
  }
  return v;
}

std::string text(const char* field, std::size_t len) { return std::string(field, ::strnlen(field, len)); }

bool checksum_ok(const char* h) {
  auto stored = number(h + 148, 8);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i)
    sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
  return stored && *stored == sum;
}

std::optional<std::uint64_t> decimal(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

// "path" and "linkpath" and "size" from a PAX extended header's "LEN key=value\n" records.
void pax_records(std::string_view data, std::string& path, std::string& linkpath, std::uint64_t& size) {
  while (!data.empty()) {
    auto space = data.find(' ');
    if (space == std::string_view::npos) return;
    std::size_t len = 0;
    for (char c : data.substr(0, space)) {
      if (c < '0' || c > '9') return;
      len = len * 10 + static_cast<std::size_t>(c - '0');
    }
    if (len <= space + 1 || len > data.size()) return;
    auto record = data.substr(space + 1, len - space - 2);  // without the trailing '\n'
    data.remove_prefix(len);
    auto eq = record.find('=');
    if (eq == std::string_view::npos) continue;
    auto key = record.substr(0, eq), value = record.substr(eq + 1);
    if (key == "path") path = value;
    else if (key == "linkpath") linkpath = value;
    else if (key == "size") size = decimal(value).value_or(kNoSize);
  }
}

// A path of the image as its components, `.` dropped and `..` resolved lexically (never above the root).
std::vector<std::string> components(std::string_view path) {
  std::vector<std::string> out;
  while (!path.empty()) {
    auto slash = path.find('/');
    auto part = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!out.empty()) out.pop_back();
      continue;
    }
    out.emplace_back(part);
  }
  return out;
}

std::string joined(const std::vector<std::string>& parts, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += '/';
    out += parts[i];
  }
  return out.empty() ? "." : out;
}

Fd open_fd(int root, const std::string& rel, int flags) { return Fd(runtime::open_in_root(root, rel, flags)); }

// Removes `name` in `dir` (a directory with everything under it), not following symlinks.
bool remove_tree(int dir, const char* name) {
  struct stat st;
  if (::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT;
  if (!S_ISDIR(st.st_mode)) return ::unlinkat(dir, name, 0) == 0;
  int sub = ::openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0) return false;
  DIR* d = ::fdopendir(sub);
  if (!d) {
    ::close(sub);
    return false;
  }
  bool ok = true;
  while (auto* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    ok = remove_tree(::dirfd(d), e->d_name) && ok;
  }
  ::closedir(d);
  return ::unlinkat(dir, name, AT_REMOVEDIR) == 0 && ok;
}

struct Entry {
  std::string path, linkpath;
  char type = '0';
  std::uint64_t size = 0;
  mode_t mode = 0644;
  uid_t uid = 0;
  gid_t gid = 0;
};

class Unpacker {
 public:
  Unpacker(int in, int root, UnpackStats& stats) : in_(in), root_(root), stats_(stats), as_root_(::geteuid() == 0) {}

  bool run(std::string& error) {
    char header[kBlock];
    std::string long_name, long_link, pax_path, pax_link;
    std::uint64_t pax_size = kNoSize;
    int zero_blocks = 0;
    while (true) {
      if (!read_exact(in_, header, kBlock)) {
        // A stream that ends without the two zero blocks is accepted once at least one was seen.
        if (zero_blocks > 0) return true;
        error = "the layer ends inside an entry (truncated)";
        return false;
      }
      if (std::all_of(header, header + kBlock, [](char c) { return c == 0; })) {
        if (++zero_blocks == 2) return true;
        continue;
      }
      zero_blocks = 0;
      if (!checksum_ok(header)) {
        error = "not a tar stream (a header's checksum is wrong after " + std::to_string(stats_.entries) + " entries)";
        return false;
      }
      Entry e;
      e.type = header[156];
      auto size = number(header + 124, 12);
      if (!size) {
        error = "an entry's size field is not a number";
        return false;
      }
      e.size = *size;
      // Extension headers describe the entry that follows them.
      if (e.type == 'x' || e.type == 'g' || e.type == 'L' || e.type == 'K') {
        if (e.size > (1u << 20)) {
          error = "an extended header of " + std::to_string(e.size) + " bytes (1 MiB at most)";
          return false;
        }
        std::string data(static_cast<std::size_t>(e.size), '\0');
        if (!read_exact(in_, data.data(), data.size()) || !skip_bytes(in_, padded(e.size) - e.size)) {
          error = "the layer ends inside an extended header";
          return false;
        }
        if (e.type == 'x') pax_records(data, pax_path, pax_link, pax_size);
        else if (e.type == 'L') long_name = text(data.data(), data.size());
        else if (e.type == 'K') long_link = text(data.data(), data.size());
        continue;
      }
      if (pax_size != kNoSize) e.size = pax_size;
      std::string prefix = text(header + 345, 155);
      std::string name = text(header, 100);
      e.path = !pax_path.empty() ? pax_path : !long_name.empty() ? long_name : prefix.empty() ? name : prefix + "/" + name;
      e.linkpath = !pax_link.empty() ? pax_link : !long_link.empty() ? long_link : text(header + 157, 100);
      e.mode = static_cast<mode_t>(number(header + 100, 8).value_or(0644) & 07777);
      e.uid = static_cast<uid_t>(number(header + 108, 8).value_or(0));
      e.gid = static_cast<gid_t>(number(header + 116, 8).value_or(0));
      long_name.clear(), long_link.clear(), pax_path.clear(), pax_link.clear();
      pax_size = kNoSize;
      ++stats_.entries;
      if (!apply(e, error)) {
        error = e.path + ": " + error;
        return false;
      }
    }
  }

 private:
  // The directory that holds `parts[0..n)`, made (0755, like a runtime's implicit parents) where missing.
  Fd parent_dir(const std::vector<std::string>& parts, std::size_t n, std::string& error) {
    Fd dir = open_fd(root_, joined(parts, n), O_PATH | O_DIRECTORY);
    if (dir) return dir;
    if (errno != ENOENT) {
      error = "cannot open " + joined(parts, n) + ": " + errno_text();
      return Fd();
    }
    Fd cur = open_fd(root_, ".", O_PATH | O_DIRECTORY);
    for (std::size_t i = 0; i < n && cur; ++i) {
      Fd next = open_fd(root_, joined(parts, i + 1), O_PATH | O_DIRECTORY);
      if (!next && errno == ENOENT) {
        if (::mkdirat(cur.get(), parts[i].c_str(), 0755) != 0 && errno != EEXIST) {
          error = "cannot make " + joined(parts, i + 1) + ": " + errno_text();
          return Fd();
        }
        touched_.insert(joined(parts, i + 1));
        next = open_fd(root_, joined(parts, i + 1), O_PATH | O_DIRECTORY);
      }
      if (!next) {
        error = joined(parts, i + 1) + " is not a directory: " + errno_text();
        return Fd();
      }
      cur = std::move(next);
    }
    return cur;
  }

  void own(int dir, const char* name, const Entry& e) {
    if (as_root_) (void)::fchownat(dir, name, e.uid, e.gid, AT_SYMLINK_NOFOLLOW);
  }

  bool apply(const Entry& e, std::string& error) {
    auto parts = components(e.path);
    if (parts.empty()) return true;  // "./": the root itself keeps its own mode
    const std::string& base = parts.back();
    Fd dir = parent_dir(parts, parts.size() - 1, error);
    if (!dir) return false;

    if (base.starts_with(kWhiteout)) {
      ++stats_.whiteouts;
      if (!skip_bytes(in_, padded(e.size))) return truncated(error);
      if (base == kOpaque) return empty_below(joined(parts, parts.size() - 1), error);
      std::string victim = base.substr(kWhiteout.size());
      if (!remove_tree(dir.get(), victim.c_str())) {
        error = "whiteout cannot remove " + victim + ": " + errno_text();
        return false;
      }
      return true;
    }
    for (std::size_t i = 1; i <= parts.size(); ++i) touched_.insert(joined(parts, i));

    struct stat st;
    bool exists = ::fstatat(dir.get(), base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (e.type == '5') {
      if (exists && !S_ISDIR(st.st_mode) && !remove_tree(dir.get(), base.c_str())) return failed("cannot replace", error);
      if ((!exists || !S_ISDIR(st.st_mode)) && ::mkdirat(dir.get(), base.c_str(), 0700) != 0) return failed("mkdir", error);
      own(dir.get(), base.c_str(), e);
      // Without root a directory stays writable by us, or the entries under it could not be written.
      (void)::fchmodat(dir.get(), base.c_str(), as_root_ ? e.mode : (e.mode | 0700), 0);
      return skip_bytes(in_, padded(e.size)) || truncated(error);
    }
    if (exists && !remove_tree(dir.get(), base.c_str())) return failed("cannot replace", error);
    switch (e.type) {
      case '0':
      case '\0':
      case '7': return regular(dir.get(), base, e, error);
      case '2':
        if (::symlinkat(e.linkpath.c_str(), dir.get(), base.c_str()) != 0) return failed("symlink", error);
        own(dir.get(), base.c_str(), e);
        return skip_bytes(in_, padded(e.size)) || truncated(error);
      case '1': {
        auto target = components(e.linkpath);
        if (target.empty()) {
          error = "a hard link to the root";
          return false;
        }
        Fd tdir = parent_dir(target, target.size() - 1, error);
        if (!tdir) return false;
        if (::linkat(tdir.get(), target.back().c_str(), dir.get(), base.c_str(), 0) != 0)
          return failed("link to " + e.linkpath, error);
        return skip_bytes(in_, padded(e.size)) || truncated(error);
      }
      case '6':
        if (::mknodat(dir.get(), base.c_str(), S_IFIFO | e.mode, 0) != 0) return failed("mkfifo", error);
        own(dir.get(), base.c_str(), e);
        return skip_bytes(in_, padded(e.size)) || truncated(error);
      case 'S':
        error = "sparse files are not supported";
        return false;
      default:  // devices (the runtime mounts /dev) and types this reader does not know
        ++stats_.skipped;
        return skip_bytes(in_, padded(e.size)) || truncated(error);
    }
  }

  bool regular(int dir, const std::string& base, const Entry& e, std::string& error) {
    Fd out(::openat(dir, base.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out) return failed("create", error);
    char buf[64 * 1024];
    std::uint64_t left = e.size;
    while (left > 0) {
      auto chunk = static_cast<std::size_t>(std::min<std::uint64_t>(left, sizeof buf));
      if (!read_exact(in_, buf, chunk)) return truncated(error);
      for (std::size_t off = 0; off < chunk;) {
        ssize_t w = ::write(out.get(), buf + off, chunk - off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return failed("write", error);
        off += static_cast<std::size_t>(w);
      }
      left -= chunk;
    }
    stats_.bytes += e.size;
    // Owner first: chown clears the set-id bits the mode may carry.
    if (as_root_) (void)::fchown(out.get(), e.uid, e.gid);
    (void)::fchmod(out.get(), e.mode);
    return skip_bytes(in_, padded(e.size) - e.size) || truncated(error);
  }

  // The opaque marker: what the layers below put in this directory goes; this layer's entries stay.
  bool empty_below(const std::string& dir_path, std::string& error) {
    Fd dir = open_fd(root_, dir_path, O_RDONLY | O_DIRECTORY);
    if (!dir) return true;
    DIR* d = ::fdopendir(::dup(dir.get()));
    if (!d) return failed("opendir", error);
    std::vector<std::string> victims;
    while (auto* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      std::string path = dir_path == "." ? name : dir_path + "/" + name;
      if (!touched_.contains(path)) victims.push_back(name);
    }
    ::closedir(d);
    for (const auto& v : victims)
      if (!remove_tree(dir.get(), v.c_str())) return failed("opaque whiteout cannot remove " + v, error);
    return true;
  }

  bool failed(const std::string& what, std::string& error) {
    error = what + ": " + errno_text();
    return false;
  }
  bool truncated(std::string& error) {
    error = "the layer ends inside this entry (truncated)";
    return false;
  }

  int in_, root_;
  UnpackStats& stats_;
  bool as_root_;
  std::unordered_set<std::string> touched_;  // paths this layer wrote (an opaque marker keeps them)
};

}  // namespace

int open_in_root(int root_fd, const std::string& path, int flags) {
  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  for (;;) {
    long fd = ::syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof how);
    if (fd < 0 && errno == EAGAIN) continue;  // a rename elsewhere raced the lookup: the kernel asks to retry
    return static_cast<int>(fd);
  }
}

bool unpack_layer(int fd, int root_fd, UnpackStats& stats, std::string& error) {
  Unpacker u(fd, root_fd, stats);
  return u.run(error);
}

}  // namespace sluice::runtime
