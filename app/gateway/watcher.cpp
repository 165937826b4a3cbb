// inotify watching with debounce; see watcher.h.
#include "app/gateway/watcher.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <fnmatch.h>

#include "common/log.h"

namespace sluice::app::gateway {
namespace {

namespace fs = std::filesystem;
constexpr std::uint32_t kEvents = IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_ATTRIB;
constexpr int kMaxDepth = 12;

// Directories no one means to watch (version control, dependencies), unless a glob names them.
bool skipped(const std::string& name) {
  return name == ".git" || name == "node_modules" || name == "__pycache__" || name == ".venv" || name == "target";
}

}  // namespace

Watcher::Watcher(boost::asio::io_context& control, std::string config_file, Millis debounce, ConfigChanged on_config,
                 FilesChanged on_files)
    : control_(control),
      config_file_(std::move(config_file)),
      debounce_(debounce),
      on_config_(std::move(on_config)),
      on_files_(std::move(on_files)),
      stream_(control),
      timer_(control) {
  base_ = config_file_.empty() ? fs::current_path() : fs::absolute(config_file_).parent_path();
  fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ < 0) {
    log::warn("inotify unavailable: files are not watched (SIGHUP still reloads)").kv("errno", errno);
    return;
  }
  stream_.assign(fd_);
}

Watcher::~Watcher() {
  boost::system::error_code ec;
  stream_.close(ec);
}

bool Watcher::matches(const std::string& glob, const std::string& relative) {
  // fnmatch without FNM_PATHNAME lets `*` cross '/', so `**/` is just `*/` or nothing.
  if (::fnmatch(glob.c_str(), relative.c_str(), FNM_PERIOD) == 0) return true;
  std::string g = glob;
  for (auto at = g.find("**/"); at != std::string::npos; at = g.find("**/")) {
    std::string without = g.substr(0, at) + g.substr(at + 3);
    if (::fnmatch(without.c_str(), relative.c_str(), 0) == 0) return true;
    g.replace(at, 3, "*/");
  }
  return ::fnmatch(g.c_str(), relative.c_str(), 0) == 0;
}

void Watcher::add_tree(const fs::path& dir, int depth) {
  if (fd_ < 0 || depth > kMaxDepth) return;
  for (const auto& [wd, d] : dirs_)
    if (d == dir) return;
  int wd = ::inotify_add_watch(fd_, dir.c_str(), kEvents | IN_ONLYDIR);
  if (wd < 0) return;
  dirs_[wd] = dir;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory(ec) && !e.is_symlink(ec) && !skipped(e.path().filename().string())) add_tree(e.path(), depth + 1);
}

void Watcher::watch(const std::vector<ServiceConfig>& services, const std::vector<std::string>& inputs) {
  if (fd_ < 0) return;
  globs_.clear();
  inputs_.clear();
  for (const auto& [wd, dir] : dirs_) ::inotify_rm_watch(fd_, wd);
  dirs_.clear();
  if (!config_file_.empty()) {
    int wd = ::inotify_add_watch(fd_, base_.c_str(), kEvents | IN_ONLYDIR);
    if (wd >= 0) dirs_[wd] = base_;
  }
  for (const auto& input : inputs) {
    const auto path = fs::absolute(input).lexically_normal();
    inputs_.insert(path);
    add_tree(path.parent_path(), kMaxDepth);  // that directory alone
  }
  for (const auto& s : services) {
    if (s.watch.empty()) continue;
    globs_[s.name] = s.watch;
    for (const auto& glob : s.watch) {
      // The directory part before the first wildcard is where changes can happen.
      auto wild = glob.find_first_of("*?[");
      auto prefix = glob.substr(0, wild == std::string::npos ? glob.size() : wild);
      auto slash = prefix.rfind('/');
      fs::path dir = slash == std::string::npos ? base_ : base_ / prefix.substr(0, slash);
      if (wild == std::string::npos && slash == std::string::npos) dir = base_;
      add_tree(dir, 0);
    }
  }
}

void Watcher::start() {
  if (fd_ >= 0) read();
}

void Watcher::stop() {
  stopped_ = true;
  boost::system::error_code ec;
  timer_.cancel();
  stream_.cancel(ec);
}

void Watcher::read() {
  stream_.async_read_some(boost::asio::buffer(buffer_), [this](boost::system::error_code ec, std::size_t n) {
    if (ec || stopped_) return;
    for (std::size_t at = 0; at + sizeof(inotify_event) <= n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buffer_ + at);
      at += sizeof(inotify_event) + e->len;
      auto dir = dirs_.find(e->wd);
      if (dir == dirs_.end() || e->len == 0) continue;
      event(dir->second / e->name, (e->mask & IN_ISDIR) && (e->mask & (IN_CREATE | IN_MOVED_TO)));
    }
    read();
  });
}

void Watcher::event(const fs::path& path, bool is_dir_created) {
  if ((!config_file_.empty() && path.lexically_normal() == fs::absolute(config_file_).lexically_normal()) ||
      inputs_.contains(path.lexically_normal())) {
    config_pending_ = true;
    arm();
    return;
  }
  auto relative = path.lexically_relative(base_).string();
  for (const auto& [service, globs] : globs_)
    for (const auto& glob : globs)
      if (matches(glob, relative)) {
        files_pending_[service] = {relative, std::chrono::steady_clock::now()};
        arm();
      }
  if (is_dir_created && !skipped(path.filename().string()) && !globs_.empty()) add_tree(path, 1);
}

void Watcher::arm() {
  timer_.expires_after(debounce_);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || stopped_) return;
    // The config first: it may change what the services are; their files then roll what is left.
    if (std::exchange(config_pending_, false)) on_config_();
    auto files = std::exchange(files_pending_, {});
    for (const auto& [service, change] : files) on_files_(service, change.first, change.second);
  });
}

}  // namespace sluice::app::gateway
