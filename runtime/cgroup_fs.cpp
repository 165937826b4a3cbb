// Cgroup discovery and file operations; plain syscalls so that errors keep the kernel's errno.
#include "runtime/cgroup_fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace sluice::runtime::cgroup {
namespace {

std::string slurp(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

bool has_item(std::string_view list, std::string_view item) {
  for (auto part : split(list, ','))
    if (part == item) return true;
  return false;
}

// /proc/self/cgroup line "N:controllers:/path": the path for the hierarchy `pred` accepts.
template <class Pred>
std::optional<std::string> own_path(std::string_view proc_cgroup, Pred pred) {
  for (auto line : split(proc_cgroup, '\n')) {
    auto c1 = line.find(':');
    if (c1 == std::string_view::npos) continue;
    auto c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    if (pred(line.substr(0, c1), line.substr(c1 + 1, c2 - c1 - 1))) return std::string(line.substr(c2 + 1));
  }
  return std::nullopt;
}

// Mountinfo fields: id parent major:minor root mountpoint options [optional...] - fstype source superopts.
struct Mount {
  std::string_view root, point, fstype, superopts;
};

std::vector<Mount> mounts(std::string_view mountinfo) {
  std::vector<Mount> out;
  for (auto line : split(mountinfo, '\n')) {
    auto fields = split(line, ' ');
    size_t dash = 0;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash < 5 || dash + 1 >= fields.size()) continue;
    out.push_back(Mount{fields[3], fields[4], fields[dash + 1], dash + 3 < fields.size() ? fields[dash + 3] : ""});
  }
  return out;
}

// A cgroup namespace root other than "/" shifts the path seen in /proc/self/cgroup; strip that root.
std::filesystem::path relative_to_mount(std::string_view mount_root, const std::string& own) {
  std::string_view rest = own;
  if (mount_root != "/" && rest.substr(0, mount_root.size()) == mount_root) rest.remove_prefix(mount_root.size());
  if (rest.empty()) rest = "/";
  return std::filesystem::path(std::string(rest));
}

}  // namespace

std::filesystem::path Hierarchy::own_dir() const {
  return mount / own_path.relative_path();
}

std::optional<Hierarchy> find_unified(std::string_view mountinfo, std::string_view proc_cgroup) {
  auto own = own_path(proc_cgroup, [](std::string_view id, std::string_view) { return id == "0"; });
  if (!own) return std::nullopt;
  for (const auto& m : mounts(mountinfo))
    if (m.fstype == "cgroup2") return Hierarchy{std::string(m.point), relative_to_mount(m.root, *own)};
  return std::nullopt;
}

std::optional<Hierarchy> find_v1(std::string_view mountinfo, std::string_view proc_cgroup,
                                 std::string_view controller) {
  auto own = own_path(proc_cgroup, [&](std::string_view id, std::string_view ctrls) {
    return id != "0" && has_item(ctrls, controller);
  });
  if (!own) return std::nullopt;
  for (const auto& m : mounts(mountinfo))
    if (m.fstype == "cgroup" && has_item(m.superopts, controller))
      return Hierarchy{std::string(m.point), relative_to_mount(m.root, *own)};
  return std::nullopt;
}

std::vector<std::filesystem::path> dirs_of(std::string_view mountinfo, std::string_view proc_cgroup) {
  std::vector<std::filesystem::path> out;
  for (auto line : split(proc_cgroup, '\n')) {
    const auto c1 = line.find(':'), c2 = line.find(':', c1 == std::string_view::npos ? c1 : c1 + 1);
    if (c2 == std::string_view::npos) continue;
    const auto id = line.substr(0, c1), controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string path(line.substr(c2 + 1));
    std::optional<Hierarchy> h;
    if (id == "0") h = find_unified(mountinfo, line);
    else if (!controllers.empty()) h = find_v1(mountinfo, line, split(controllers, ',').front());
    if (h) out.push_back(h->own_dir());
  }
  return out;
}

std::optional<Hierarchy> unified() {
  return find_unified(slurp("/proc/self/mountinfo"), slurp("/proc/self/cgroup"));
}

std::optional<Hierarchy> v1(std::string_view controller) {
  return find_v1(slurp("/proc/self/mountinfo"), slurp("/proc/self/cgroup"), controller);
}

bool write_file(const std::filesystem::path& file, std::string_view value, std::string* error) {
  int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    if (error) *error = "open " + file.string() + ": " + std::strerror(errno);
    return false;
  }
  ssize_t n = ::write(fd, value.data(), value.size());
  int saved = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    if (error) *error = "write " + file.string() + ": " + std::strerror(saved);
    return false;
  }
  return true;
}

std::optional<std::string> read_file(const std::filesystem::path& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (n < 0) return std::nullopt;
  return out;
}

bool remove_dir(const std::filesystem::path& dir, std::chrono::milliseconds timeout, std::string* error) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY || std::chrono::steady_clock::now() >= deadline) {
      if (error) *error = "rmdir " + dir.string() + ": " + std::strerror(errno);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace sluice::runtime::cgroup
