// Images from this machine, in the CRI ImageService's place: an OCI image layout directory, or an image in
// the local podman store, unpacked once into a cache of root filesystems for the OCI handlers (runc, crun).
// Nothing is pulled from a registry: sluice runs what was built or saved here.
//
// References:
//   oci:DIR[:TAG]   an OCI image layout (skopeo's syntax); TAG picks index.json's
//                   org.opencontainers.image.ref.name, and may be left out when the layout holds one image
//   /DIR, ./DIR     the same, written as a path
//   NAME[:TAG]      an image in the local podman store (`podman image inspect`, then `podman save`)
//
// The cache holds <cache>/<config digest hex>/{rootfs/, config.json}; an entry appears whole (made aside and
// renamed into place), so an interrupted unpack leaves nothing that looks usable, and what it did leave is
// removed by the first pull of the next sluice. Blobs are checked against
// their sha256 digests before use.
#pragma once

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/instance.h"

namespace sluice::runtime {

// What the image's config says about running it (the OCI image spec's `config` object).
struct ImageConfig {
  std::vector<std::string> entrypoint, cmd;
  std::vector<std::string> env;  // "KEY=VALUE"
  std::string working_dir;
  std::string user;              // "uid", "uid:gid", "name" or "name:group"; empty: root
};

struct Image {
  std::string ref;        // as given
  std::string id;         // the config's digest, "sha256:<hex>"
  std::filesystem::path rootfs;
  ImageConfig config;
  bool unpacked = false;  // by this pull (false: it came from the cache)
  double unpack_ms = 0;
};

// Kubernetes' rule for a container's argv over an image: `command` replaces the entrypoint (and drops the
// image's cmd), `args` replaces cmd. Empty when neither gives a program.
std::vector<std::string> container_argv(const ImageConfig& image, const std::vector<std::string>& command,
                                        const std::optional<std::vector<std::string>>& args);

// The image's `user` as numeric ids, names looked up in the rootfs's /etc/passwd and /etc/group.
bool image_user_ids(const Image& image, int& uid, int& gid, std::string& error);

// What a container says over its image (a pod spec's container fields).
struct ContainerOverImage {
  std::string ref;                               // the image, for error messages
  std::string handler;                           // "process" (no rootfs of its own) runs it under runc
  std::vector<std::string> command;              // replaces the entrypoint
  std::optional<std::vector<std::string>> args;  // replaces cmd
  std::optional<int> run_as_user, run_as_group;
};

// An instance of `image` as the kubelet makes a container of it: the image's rootfs, its argv under the
// container's command and args, the image's environment under the values `spec` has already (the
// container's own win; PATH defaults to the usual one), its working dir unless `spec` has one, its user
// unless the container gives one. False with `error` when the image names no program or an unknown user.
bool apply_image(const Image& image, const ContainerOverImage& container, InstanceSpec& spec, std::string& error);

class ImageStore {
 public:
  explicit ImageStore(std::filesystem::path cache_dir);

  // $XDG_CACHE_HOME/sluice/images, else $HOME/.cache/sluice/images, else /var/cache/sluice/images.
  static std::filesystem::path default_cache_dir();

  // Resolves `ref` and returns its unpacked root filesystem, unpacking it first when the cache lacks it.
  // Thread-safe; one unpack at a time. nullopt with `error` saying what was looked for and why it failed.
  std::optional<Image> pull(const std::string& ref, std::string& error);

  const std::filesystem::path& cache_dir() const { return cache_; }

 private:
  std::optional<Image> from_layout(const std::string& ref, const std::filesystem::path& dir, const std::string& tag,
                                   std::string& error);
  std::optional<Image> from_podman(const std::string& ref, std::string& error);
  std::optional<Image> cached(const std::string& ref, const std::string& id) const;
  void sweep();

  bool swept_ = false;

  std::filesystem::path cache_;
  std::mutex mu_;
};

}  // namespace sluice::runtime
