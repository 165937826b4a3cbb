// OCI image layouts and the local podman store, unpacked into a cache of root filesystems.
#include "runtime/image_store.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <signal.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/ascii.h"
#include "runtime/layer_unpack.h"
#include "runtime/exec.h"
#include "runtime/spawn.h"

extern char** environ;

namespace sluice::runtime {
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

constexpr std::uintmax_t kMaxJson = 4u << 20;  // index, manifest and config blobs are small documents
constexpr std::string_view kRefName = "org.opencontainers.image.ref.name";

// A tool's last line of output, which says the most.
std::string last_line(const std::string& s) {
  const auto text = trim(s, kLineSpace);
  const auto nl = text.rfind('\n');
  return std::string(nl == std::string_view::npos ? text : text.substr(nl + 1));
}

bool is_hex_digest(std::string_view d) {
  if (!d.starts_with("sha256:") || d.size() != 7 + 64) return false;
  for (char c : d.substr(7))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string hex_of(std::string_view digest) { return std::string(digest.substr(7)); }

std::optional<std::string> sha256_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  char buf[64 * 1024];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) EVP_DigestUpdate(ctx, buf, static_cast<std::size_t>(in.gcount()));
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "sha256:";
  for (unsigned i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

std::optional<std::string> read_small(const fs::path& p, std::string& error) {
  std::error_code ec;
  auto size = fs::file_size(p, ec);
  if (ec) {
    error = p.string() + ": " + ec.message();
    return std::nullopt;
  }
  if (size > kMaxJson) {
    error = p.string() + ": " + std::to_string(size) + " bytes is not a metadata document";
    return std::nullopt;
  }
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<json::object> parse_object(const std::string& text, const std::string& what, std::string& error) {
  boost::system::error_code ec;
  auto v = json::parse(text, ec);
  if (ec || !v.is_object()) {
    error = what + " is not a JSON object" + (ec ? ": " + ec.message() : "");
    return std::nullopt;
  }
  return v.as_object();
}

std::string str(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

std::vector<std::string> strings(const json::object& o, std::string_view key) {
  std::vector<std::string> out;
  if (auto* v = o.if_contains(key); v && v->is_array())
    for (const auto& e : v->as_array())
      if (e.is_string()) out.emplace_back(e.as_string());
  return out;
}

std::string host_architecture() {
  utsname u{};
  ::uname(&u);
  std::string m = u.machine;
  if (m == "x86_64") return "amd64";
  if (m == "aarch64") return "arm64";
  if (m.starts_with("arm")) return "arm";
  return m;
}

std::optional<ImageConfig> parse_config(const std::string& text, std::string& error) {
  auto doc = parse_object(text, "the image config", error);
  if (!doc) return std::nullopt;
  ImageConfig c;
  if (auto* cfg = doc->if_contains("config"); cfg && cfg->is_object()) {
    const auto& o = cfg->as_object();
    c.entrypoint = strings(o, "Entrypoint");
    c.cmd = strings(o, "Cmd");
    c.env = strings(o, "Env");
    c.working_dir = str(o, "WorkingDir");
    c.user = str(o, "User");
  }
  return c;
}

// A layer blob into the root: gzip and zstd streams through their decompressors, plain tar directly.
bool apply_layer(const fs::path& blob, int root_fd, UnpackStats& stats, std::string& error) {
  int file = ::open(blob.c_str(), O_RDONLY | O_CLOEXEC);
  if (file < 0) {
    error = blob.string() + ": " + std::strerror(errno);
    return false;
  }
  unsigned char magic[4] = {};
  const bool got = ::pread(file, magic, sizeof magic, 0) == static_cast<ssize_t>(sizeof magic);
  const char* tool = nullptr;
  if (got && magic[0] == 0x1f && magic[1] == 0x8b) tool = "gzip";
  else if (got && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd) tool = "zstd";
  if (!tool) {
    bool ok = unpack_layer(file, root_fd, stats, error);
    ::close(file);
    return ok;
  }
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(file);
    error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  SpawnRequest req;
  req.argv = {tool, "-dc"};
  for (char** e = environ; *e; ++e) req.env.emplace_back(*e);
  req.stdin_fd = file;
  req.stdout_fd = out[1];
  const auto spawned = spawn_process(req);
  ::close(out[1]);
  ::close(file);
  if (spawned.pid < 0) {
    ::close(out[0]);
    error = "cannot run " + std::string(tool) + " to decompress a layer: " + spawned.error;
    return false;
  }
  ::close(spawned.pidfd);
  const pid_t pid = spawned.pid;
  bool ok = unpack_layer(out[0], root_fd, stats, error);
  if (!ok) ::kill(pid, SIGKILL);
  // The tar's end is padded to a record: read the rest, so the decompressor finishes rather than blocks.
  char sink[16 * 1024];
  while (ok) {
    ssize_t n = ::read(out[0], sink, sizeof sink);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (ok && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    error = std::string(tool) + " could not decompress the layer (a damaged blob?)";
    return false;
  }
  return ok;
}

// The lines of the image's /etc/passwd or /etc/group, split at ':' (read inside the image's root).
std::vector<std::vector<std::string>> colon_file(const fs::path& rootfs, const char* file) {
  std::vector<std::vector<std::string>> out;
  int root = ::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return out;
  int fd = open_in_root(root, file, O_RDONLY);
  ::close(root);
  if (fd < 0) return out;
  std::string text;
  char buf[8192];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0 && text.size() < kMaxJson;) text.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    std::istringstream split(line);
    for (std::string f; std::getline(split, f, ':');) fields.push_back(f);
    out.push_back(std::move(fields));
  }
  return out;
}

bool numeric(const std::string& s) { return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos; }

}  // namespace

std::vector<std::string> container_argv(const ImageConfig& image, const std::vector<std::string>& command,
                                        const std::optional<std::vector<std::string>>& args) {
  std::vector<std::string> argv = command.empty() ? image.entrypoint : command;
  const auto& rest = args ? *args : command.empty() ? image.cmd : std::vector<std::string>{};
  argv.insert(argv.end(), rest.begin(), rest.end());
  return argv;
}

bool image_user_ids(const Image& image, int& uid, int& gid, std::string& error) {
  uid = gid = 0;
  const std::string& u = image.config.user;
  if (u.empty()) return true;
  auto colon = u.find(':');
  const std::string user = u.substr(0, colon), group = colon == std::string::npos ? "" : u.substr(colon + 1);
  const auto passwd = colon_file(image.rootfs, "/etc/passwd");
  const std::vector<std::string>* entry = nullptr;
  for (const auto& f : passwd)
    if (f.size() > 3 && numeric(f[2]) && numeric(f[3]) && (numeric(user) ? f[2] == user : f[0] == user)) {
      entry = &f;
      break;
    }
  if (!numeric(user) && !entry) {
    error = "the image's user '" + user + "' is not in its /etc/passwd";
    return false;
  }
  uid = std::stoi(numeric(user) ? user : (*entry)[2]);
  // runc's rule: the group given, else the passwd entry's, else 0.
  if (group.empty()) {
    gid = entry ? std::stoi((*entry)[3]) : 0;
  } else if (numeric(group)) {
    gid = std::stoi(group);
  } else {
    bool found = false;
    for (const auto& f : colon_file(image.rootfs, "/etc/group"))
      if (f.size() > 2 && f[0] == group && numeric(f[2])) {
        gid = std::stoi(f[2]);
        found = true;
        break;
      }
    if (!found) {
      error = "the image's group '" + group + "' is not in its /etc/group";
      return false;
    }
  }
  return true;
}

bool apply_image(const Image& image, const ContainerOverImage& c, InstanceSpec& spec, std::string& error) {
  spec.handler = c.handler == "process" ? "runc" : c.handler;
  spec.rootfs = image.rootfs;
  spec.command = container_argv(image.config, c.command, c.args);
  if (spec.command.empty()) {
    error = "image " + c.ref + " has no entrypoint or cmd: give the container a command:";
    return false;
  }
  for (const auto& kv : image.config.env)
    if (auto eq = kv.find('='); eq != std::string::npos) spec.env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  spec.env.emplace("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  if (spec.working_dir.empty() && !image.config.working_dir.empty()) spec.working_dir = image.config.working_dir;
  if (!c.run_as_user && !image.config.user.empty()) {
    int uid = 0, gid = 0;
    if (!image_user_ids(image, uid, gid, error)) return false;
    spec.run_as_user = uid;
    if (!c.run_as_group) spec.run_as_group = gid;
  }
  return true;
}

ImageStore::ImageStore(fs::path cache_dir) : cache_(std::move(cache_dir)) {}

fs::path ImageStore::default_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "sluice" / "images";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "sluice" / "images";
  return "/var/cache/sluice/images";
}

// What a killed sluice left half-made: `.unpacking-<hex>-<pid>` and `.podman-<hex>-<pid>` whose pid is gone.
void ImageStore::sweep() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cache_, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(".unpacking-") && !name.starts_with(".podman-")) continue;
    const auto dash = name.rfind('-');
    const std::string pid = name.substr(dash + 1);
    if (!numeric(pid)) continue;
    if (::kill(std::stoi(pid), 0) == 0 || errno != ESRCH) continue;  // its maker is still at work
    std::error_code ignored;
    fs::remove_all(e.path(), ignored);
  }
}

std::optional<Image> ImageStore::pull(const std::string& ref, std::string& error) {
  std::lock_guard lock(mu_);
  if (!swept_) {
    sweep();
    swept_ = true;
  }
  std::string where = ref;
  const bool oci = where.starts_with("oci:");
  if (oci) where = where.substr(4);
  if (oci || where.starts_with('/') || where.starts_with("./") || where.starts_with("../")) {
    // oci:DIR[:TAG]: a tag is what follows the last ':' after the last '/'.
    std::string tag;
    auto colon = where.rfind(':');
    auto slash = where.rfind('/');
    if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
      tag = where.substr(colon + 1);
      where = where.substr(0, colon);
    }
    return from_layout(ref, where, tag, error);
  }
  return from_podman(ref, error);
}

std::optional<Image> ImageStore::cached(const std::string& ref, const std::string& id) const {
  auto dir = cache_ / hex_of(id);
  std::error_code ec;
  if (!fs::is_directory(dir / "rootfs", ec) || !fs::exists(dir / "config.json", ec)) return std::nullopt;
  std::string error;
  auto text = read_small(dir / "config.json", error);
  if (!text) return std::nullopt;
  auto config = parse_config(*text, error);
  if (!config) return std::nullopt;
  return Image{ref, id, dir / "rootfs", std::move(*config), false, 0};
}

std::optional<Image> ImageStore::from_layout(const std::string& ref, const fs::path& dir, const std::string& tag,
                                             std::string& error) {
  std::error_code ec;
  if (!fs::exists(dir / "oci-layout", ec)) {
    error = "image '" + ref + "': " + dir.string() + " is not an OCI image layout (no oci-layout file)";
    return std::nullopt;
  }
  auto fail = [&](const std::string& why) {
    error = "image '" + ref + "': " + why;
    return std::nullopt;
  };
  auto blob = [&](const std::string& digest) { return dir / "blobs" / "sha256" / hex_of(digest); };
  // A blob named by a descriptor, checked against its digest.
  auto verified = [&](const std::string& digest, const std::string& what) -> std::optional<fs::path> {
    if (!is_hex_digest(digest)) {
      error = "image '" + ref + "': the " + what + " digest '" + digest + "' is not sha256:<64 hex>";
      return std::nullopt;
    }
    auto p = blob(digest);
    auto actual = sha256_file(p);
    if (!actual) {
      error = "image '" + ref + "': the " + what + " blob " + p.string() + " is missing";
      return std::nullopt;
    }
    if (*actual != digest) {
      error = "image '" + ref + "': the " + what + " blob " + p.string() + " does not match its digest (" + *actual + ")";
      return std::nullopt;
    }
    return p;
  };

  auto index_text = read_small(dir / "index.json", error);
  if (!index_text) return fail(error);
  auto index = parse_object(*index_text, "index.json", error);
  if (!index) return fail(error);
  // Pick the manifest: by tag, or the only one; an image index (multi-platform) picks this machine's.
  json::object descriptor;
  {
    auto* m = index->if_contains("manifests");
    if (!m || !m->is_array() || m->as_array().empty()) return fail("index.json lists no manifests");
    std::vector<std::string> names;
    bool found = false;
    for (const auto& d : m->as_array()) {
      if (!d.is_object()) continue;
      std::string name;
      if (auto* a = d.as_object().if_contains("annotations"); a && a->is_object()) name = str(a->as_object(), kRefName);
      names.push_back(name.empty() ? "(untagged)" : name);
      if (!tag.empty() && name == tag) {
        descriptor = d.as_object();
        found = true;
      }
    }
    if (tag.empty() && m->as_array().size() == 1 && m->as_array()[0].is_object()) {
      descriptor = m->as_array()[0].as_object();
      found = true;
    }
    if (!found) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      return fail(tag.empty() ? "the layout holds " + std::to_string(names.size()) + " images (" + list +
                                    "): name one as oci:" + dir.string() + ":TAG"
                              : "no image tagged '" + tag + "' in " + dir.string() + " (it has: " + list + ")");
    }
  }
  json::object manifest;
  for (int depth = 0;; ++depth) {
    std::string digest = str(descriptor, "digest");
    auto path = verified(digest, "manifest");
    if (!path) return std::nullopt;
    auto text = read_small(*path, error);
    if (!text) return fail(error);
    auto doc = parse_object(*text, "the manifest " + digest, error);
    if (!doc) return fail(error);
    if (!doc->contains("manifests")) {
      manifest = std::move(*doc);
      break;
    }
    if (depth == 2) return fail("image indexes nested too deep");
    // An index: this machine's platform.
    const std::string arch = host_architecture();
    bool found = false;
    for (const auto& d : doc->at("manifests").as_array()) {
      if (!d.is_object()) continue;
      auto* p = d.as_object().if_contains("platform");
      if (p && p->is_object() && str(p->as_object(), "os") == "linux" && str(p->as_object(), "architecture") == arch) {
        descriptor = d.as_object();
        found = true;
        break;
      }
    }
    if (!found) return fail("no linux/" + arch + " image in its index");
  }
  auto* config_desc = manifest.if_contains("config");
  auto* layers = manifest.if_contains("layers");
  if (!config_desc || !config_desc->is_object() || !layers || !layers->is_array())
    return fail("the manifest has no config or no layers");
  const std::string id = str(config_desc->as_object(), "digest");
  if (!is_hex_digest(id)) return fail("the config digest '" + id + "' is not sha256:<64 hex>");
  if (auto hit = cached(ref, id)) return hit;

  const auto started = std::chrono::steady_clock::now();
  auto config_path = verified(id, "config");
  if (!config_path) return std::nullopt;
  auto config_text = read_small(*config_path, error);
  if (!config_text) return fail(error);
  auto config = parse_config(*config_text, error);
  if (!config) return fail(error);

  fs::create_directories(cache_, ec);
  if (ec) return fail("cannot make the image cache " + cache_.string() + ": " + ec.message());
  const fs::path aside = cache_ / (".unpacking-" + hex_of(id) + "-" + std::to_string(::getpid()));
  fs::remove_all(aside, ec);
  fs::create_directories(aside / "rootfs", ec);
  if (ec) return fail("cannot make " + (aside / "rootfs").string() + ": " + ec.message());
  auto discard = [&] {
    std::error_code ignored;
    fs::remove_all(aside, ignored);
  };
  int root = ::open((aside / "rootfs").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  UnpackStats stats;
  std::size_t n = 0;
  for (const auto& l : layers->as_array()) {
    ++n;
    std::string digest = l.is_object() ? str(l.as_object(), "digest") : "";
    auto path = verified(digest, "layer " + std::to_string(n));
    if (!path) {
      ::close(root);
      discard();
      return std::nullopt;
    }
    std::string why;
    if (!apply_layer(*path, root, stats, why)) {
      ::close(root);
      discard();
      return fail("layer " + std::to_string(n) + " (" + digest + "): " + why);
    }
  }
  ::close(root);
  {
    std::ofstream out(aside / "config.json", std::ios::binary);
    out << *config_text;
    if (!out.flush()) {
      discard();
      return fail("cannot write " + (aside / "config.json").string());
    }
  }
  const fs::path final_dir = cache_ / hex_of(id);
  fs::rename(aside, final_dir, ec);
  if (ec) {
    discard();  // another sluice finished the same image first: use that one
    if (auto hit = cached(ref, id)) return hit;
    return fail("cannot move the unpacked image to " + final_dir.string() + ": " + ec.message());
  }
  Image image{ref, id, final_dir / "rootfs", std::move(*config), true,
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count()};
  return image;
}

std::optional<Image> ImageStore::from_podman(const std::string& ref, std::string& error) {
  std::string out;
  int rc = run_helper({"podman", "image", "inspect", "--format", "{{.Id}}", ref}, out);
  if (rc != 0) {
    error = "image '" + ref + "' is not an OCI layout path (oci:DIR or /DIR) and " +
            (rc < 0 && out.find("No such file") != std::string::npos
                 ? std::string("podman, for the local image store, is not installed")
                 : "not in the local podman store (" + last_line(out) + ")") +
            "; build it with podman, or give the container a command:";
    return std::nullopt;
  }
  const std::string id = "sha256:" + last_line(out);
  if (!is_hex_digest(id)) {
    error = "image '" + ref + "': podman gave the id '" + last_line(out) + "'";
    return std::nullopt;
  }
  if (auto hit = cached(ref, id)) return hit;
  // Not unpacked yet: podman saves it as an OCI archive (a tar of a layout), which is read as a layout.
  std::error_code ec;
  fs::create_directories(cache_, ec);
  const fs::path aside = cache_ / (".podman-" + hex_of(id) + "-" + std::to_string(::getpid()));
  fs::remove_all(aside, ec);
  fs::create_directories(aside / "layout", ec);
  auto discard = [&] { fs::remove_all(aside, ec); };
  out.clear();
  rc = run_helper({"podman", "save", "--format", "oci-archive", "-o", (aside / "image.tar").string(), ref}, out);
  if (rc != 0) {
    discard();
    error = "image '" + ref + "': podman save failed: " + last_line(out);
    return std::nullopt;
  }
  int archive = ::open((aside / "image.tar").c_str(), O_RDONLY | O_CLOEXEC);
  int layout = ::open((aside / "layout").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  UnpackStats stats;
  std::string why;
  bool ok = archive >= 0 && layout >= 0 && unpack_layer(archive, layout, stats, why);
  if (archive >= 0) ::close(archive);
  if (layout >= 0) ::close(layout);
  if (!ok) {
    discard();
    error = "image '" + ref + "': the archive podman saved cannot be read: " + why;
    return std::nullopt;
  }
  auto image = from_layout(ref, aside / "layout", "", error);
  discard();
  return image;
}

}  // namespace sluice::runtime
