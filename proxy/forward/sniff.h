// The Content-Type a response without one is given, from its first bytes: the WHATWG MIME Sniffing
// standard's table for an unknown type (HTML and XML by their first tag, PDF, PostScript, text by its byte
// order mark, images, audio and video, fonts, archives, WebAssembly, then text unless a byte is binary),
// as queue-proxy's net/http labels an app's answer that names no type. Only what a proxy needs: no
// charset detection beyond the BOM, no Content-Type given to a body that says its Content-Encoding.
#pragma once

#include <string_view>

namespace sluice::proxy::forwarding {

// How many leading bytes sniffing looks at.
inline constexpr std::size_t kSniffBytes = 512;

// The media type for a body that starts with `data` (only its first kSniffBytes count);
// "application/octet-stream" when nothing matches and a byte is binary.
std::string_view sniff_content_type(std::string_view data);

}  // namespace sluice::proxy::forwarding
