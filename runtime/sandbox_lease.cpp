// Sandbox slot files; see sandbox_lease.h.
#include "runtime/sandbox_lease.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "common/log.h"
#include "runtime/cgroup_fs.h"
#include "runtime/sandbox_net.h"

namespace sluice::runtime {
namespace {

namespace fs = std::filesystem;

bool write_all(int fd, const std::string& text) {
  return ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

// Kills what is still inside (a runc container is not our child and does not die with us), then removes
// the tree deepest first: a cgroup dir can only go once its children have.
void remove_cgroup_tree(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_directory(ec)) remove_cgroup_tree(entry.path());
  if (!cgroup::write_file(dir / "cgroup.kill", "1")) {
    std::istringstream in(cgroup::read_file(dir / "cgroup.procs").value_or(""));
    pid_t pid;
    while (in >> pid) ::kill(pid, SIGKILL);
  }
  cgroup::remove_dir(dir, std::chrono::seconds(2), nullptr);
}

// Undoes what a lease's text records.
void undo(const std::string& lease) {
  std::istringstream in(lease);
  std::string kind, value;
  std::vector<fs::path> bases;
  while (in >> kind && std::getline(in >> std::ws, value)) {
    std::string error;
    if (kind == "link" && !delete_host_link(value, error))
      log::warn("sandbox sweep: link not deleted").kv("link", value).kv("error", error);
    else if (kind == "cgroup") remove_cgroup_tree(value);
    else if (kind == "base") bases.emplace_back(value);
  }
  for (const auto& b : bases) ::rmdir(b.c_str());  // shared by the owner's sandboxes: fails while others remain
}

}  // namespace

unsigned long long process_start_time(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i)
    if (i == 22) return std::stoull(field);
  return 0;
}

std::unique_ptr<SandboxLease> SandboxLease::acquire(const fs::path& dir, int slots, const std::string& sandbox,
                                                    std::string& error) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    error = "create " + dir.string() + ": " + ec.message();
    return nullptr;
  }
  const pid_t self = ::getpid();
  const std::string owner = "owner " + std::to_string(self) + " " + std::to_string(process_start_time(self)) + "\n" +
                            "sandbox " + sandbox + "\n";
  for (int slot = 0; slot < slots; ++slot) {
    auto file = dir / std::to_string(slot);
    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) {
      error = "create " + file.string() + ": " + std::strerror(errno);
      return nullptr;
    }
    if (!write_all(fd, owner)) {
      error = "write " + file.string() + ": " + std::strerror(errno);
      ::close(fd);
      ::unlink(file.c_str());
      return nullptr;
    }
    return std::unique_ptr<SandboxLease>(new SandboxLease(file, slot, fd));
  }
  error = "all " + std::to_string(slots) + " sandbox addresses are in use (see " + dir.string() + ")";
  return nullptr;
}

SandboxLease::~SandboxLease() {
  ::close(fd_);
  ::unlink(file_.c_str());
}

void SandboxLease::record(std::string_view kind, const std::string& value) {
  std::string line(kind);
  line += ' ';
  line += value;
  line += '\n';
  if (!write_all(fd_, line)) log::warn("sandbox lease: record not written").kv("file", file_.string());
}

namespace {

std::string read_all(int fd) {
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
  return text;
}

// The lock of a slot whose owner is gone. Only sweeps take it: another runtime starting at the same time
// holds it while it undoes the slot (removing a cgroup may take seconds). Waited for, up to 30 s, so that
// when a runtime's sweep has returned every slot of a dead owner is gone (a sweep that gave up at once left
// it to the other, which might still be undoing it).
bool lock_orphaned(int fd) {
  for (int i = 0; i < 1500; ++i) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
    if (errno != EWOULDBLOCK) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Sweeps one slot file if its owner is gone; true when it did. Two runtimes that start at once both sweep,
// and the moment the file goes the slot's next owner may take it and make a link of the same name: the file
// is undone only by the sweep that holds its lock while it is still the one at `path`, and removed before
// that lock goes.
bool sweep_one(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // swept meanwhile
  bool swept = false;
  const std::string text = read_all(fd);
  std::istringstream in(text);
  std::string word;
  pid_t pid = 0;
  unsigned long long started = 0;
  struct stat held {}, current {};
  // A slot file is written whole at creation; an unreadable one is being created right now. Leave it, and
  // one whose owner still runs.
  if ((in >> word >> pid >> started) && word == "owner" &&
      !(pid > 0 && process_start_time(pid) == started && started != 0) &&
      lock_orphaned(fd) && ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &current) == 0 &&
      held.st_dev == current.st_dev && held.st_ino == current.st_ino) {
    undo(text);
    ::unlink(path.c_str());
    swept = true;
  }
  ::close(fd);
  return swept;
}

}  // namespace

int sweep_stale_leases(const fs::path& dir) {
  int swept = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (sweep_one(entry.path())) ++swept;
  return swept;
}

}  // namespace sluice::runtime
