// Watching files for the dev loop (inotify): the config file itself (sluice.yaml or a Procfile; editors
// replace files, so its directory is watched and the name filtered) and the environment files it reads and each service's `watch:` globs,
// relative to the config file's directory. A burst of changes is one change: each kind is reported once
// the files have been quiet for the debounce period.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "app/gateway/config.h"

namespace sluice::app::gateway {

class Watcher {
 public:
  using ConfigChanged = std::function<void()>;
  // `last`: when the last change of the burst was seen.
  using FilesChanged = std::function<void(const std::string& service, const std::string& what,
                                          std::chrono::steady_clock::time_point last)>;

  // On the control thread's io_context; `config_file` empty: the command line's service, no file.
  Watcher(boost::asio::io_context& control, std::string config_file, Millis debounce, ConfigChanged on_config,
          FilesChanged on_files);
  ~Watcher();
  // (Re)computes what to watch from the services' `watch:` globs and the config's other input files
  // (GatewayConfig::inputs: environment files), whose changes are config changes.
  void watch(const std::vector<ServiceConfig>& services, const std::vector<std::string>& inputs = {});
  void start();
  void stop();

  // Whether `relative` (a path under the base directory) matches `glob` (`*` within a name, `**` across
  // directories, `?`); exposed for tests.
  static bool matches(const std::string& glob, const std::string& relative);

 private:
  void add_tree(const std::filesystem::path& dir, int depth);
  void read();
  void event(const std::filesystem::path& path, bool is_dir_created);
  void arm();

  boost::asio::io_context& control_;
  std::string config_file_;
  std::filesystem::path base_;
  Millis debounce_;
  ConfigChanged on_config_;
  FilesChanged on_files_;
  int fd_ = -1;
  boost::asio::posix::stream_descriptor stream_;
  boost::asio::steady_timer timer_;
  std::map<int, std::filesystem::path> dirs_;              // watch descriptor → directory
  std::map<std::string, std::vector<std::string>> globs_;  // service → its globs
  std::set<std::filesystem::path> inputs_;                 // read with the config file (normalized)
  bool config_pending_ = false;
  // service → a changed file, and when the last change was seen
  std::map<std::string, std::pair<std::string, std::chrono::steady_clock::time_point>> files_pending_;
  char buffer_[8192];
  bool stopped_ = false;
};

}  // namespace sluice::app::gateway
