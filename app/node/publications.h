// The pods the kubelet has given a volume of sluice's (CSI, app/node/control.h "publish"): each has a socket of
// its own, made in its volume's directory (TARGET/node.sock), on which only that pod's stub can join. The
// agent keeps a record of each in its state directory, which only root may enter, so that an agent started
// after one that died makes every pod's socket again.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app/node/pod_identity.h"

namespace sluice::app::node {

struct Publication {
  std::string volume;  // the kubelet's volume id: unique on the node, the record's file name
  PodIdentity pod;
  std::string target;  // the volume's directory; the pod's socket is TARGET/node.sock
  std::string socket_path() const { return target + "/node.sock"; }
};

inline constexpr std::string_view kPodSocketName = "node.sock";

// "" when `p` can be published: a volume id fit for a file name, a pod named in full, an absolute target
// without "..". Else why not.
std::string publication_error(const Publication& p);

// The record's text, and back (nullopt for a text that is not one).
std::string record_text(const Publication& p);
std::optional<Publication> parse_record(std::string_view text);

// Records in `dir`: written whole (a temporary file renamed into place), read back, removed.
bool save_record(const std::string& dir, const Publication& p, std::string& error);
std::vector<Publication> load_records(const std::string& dir);
void remove_record(const std::string& dir, const std::string& volume);

// Makes the pod's listening socket at p.socket_path() (the target directory made first when missing), any
// user allowed to connect (only the pod mounts the directory): made under a temporary name and renamed into
// place, so a socket an earlier agent made there is replaced without a moment with none. The descriptor, or
// -1 with `error`.
int make_pod_socket(const Publication& p, std::string& error);

}  // namespace sluice::app::node
