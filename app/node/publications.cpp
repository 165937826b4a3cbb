// Pods' sockets and their records; see publications.h.
#include "app/node/publications.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/node/node_socket.h"

namespace sluice::app::node {
namespace {

namespace fs = std::filesystem;

bool plain_name(std::string_view s) {
  if (s.empty() || s.size() > 200 || s.front() == '.') return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

bool one_line(std::string_view s) { return s.find('\n') == std::string_view::npos && s.find('\0') == std::string_view::npos; }

}  // namespace

std::string publication_error(const Publication& p) {
  if (!plain_name(p.volume)) return "volume id \"" + p.volume + "\": expected letters, digits, '-', '_' and '.'";
  if (p.pod.namespace_name.empty() || p.pod.name.empty() || p.pod.uid.empty())
    return "the pod's namespace, name and UID are required (the CSIDriver's podInfoOnMount: true)";
  for (const auto* s : {&p.pod.namespace_name, &p.pod.name, &p.pod.uid, &p.target})
    if (!one_line(*s) || s->find(' ') != std::string::npos) return "\"" + *s + "\": spaces and line breaks are not allowed";
  if (p.target.empty() || p.target.front() != '/' || p.target.find("/../") != std::string::npos || p.target.ends_with("/.."))
    return "target path \"" + p.target + "\": expected an absolute path without \"..\"";
  return {};
}

std::string record_text(const Publication& p) {
  return "volume " + p.volume + "\nnamespace " + p.pod.namespace_name + "\nname " + p.pod.name + "\nuid " + p.pod.uid +
         "\ntarget " + p.target + "\n";
}

std::optional<Publication> parse_record(std::string_view text) {
  Publication p;
  std::istringstream in{std::string(text)};
  std::string key, value;
  while (in >> key >> value) {
    if (key == "volume") p.volume = value;
    else if (key == "namespace") p.pod.namespace_name = value;
    else if (key == "name") p.pod.name = value;
    else if (key == "uid") p.pod.uid = value;
    else if (key == "target") p.target = value;
    else return std::nullopt;
  }
  if (!publication_error(p).empty()) return std::nullopt;
  return p;
}

bool save_record(const std::string& dir, const Publication& p, std::string& error) {
  const fs::path file = fs::path(dir) / p.volume, temporary = fs::path(dir) / ("." + p.volume);
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << record_text(p);
    if (!out.flush()) {
      error = "writing " + temporary.string() + ": " + std::strerror(errno);
      return false;
    }
  }
  std::error_code ec;
  fs::rename(temporary, file, ec);
  if (ec) error = "renaming " + temporary.string() + ": " + ec.message();
  return !ec;
}

std::vector<Publication> load_records(const std::string& dir) {
  std::vector<Publication> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().front() == '.') continue;
    std::ifstream in(it->path());
    std::stringstream text;
    text << in.rdbuf();
    if (auto p = parse_record(text.str()); p && p->volume == it->path().filename().string()) out.push_back(*p);
  }
  return out;
}

void remove_record(const std::string& dir, const std::string& volume) {
  std::error_code ec;
  fs::remove(fs::path(dir) / volume, ec);
}

int make_pod_socket(const Publication& p, std::string& error) {
  std::error_code ec;
  fs::create_directories(p.target, ec);
  if (ec) {
    error = "making " + p.target + ": " + ec.message();
    return -1;
  }
  ::chmod(p.target.c_str(), 0755);
  const std::string path = p.socket_path();
  const int fd = unix_listen_in_place(path, 0666);
  if (fd < 0) error = "making " + path + ": " + std::strerror(errno);
  return fd;
}

}  // namespace sluice::app::node
