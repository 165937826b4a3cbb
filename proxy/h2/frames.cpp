// Shared nghttp2 helpers; see frames.h.
#include "proxy/h2/frames.h"

#include <cstring>
#include <vector>

namespace sluice::proxy::h2 {

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

ssize_t take_body(nghttp2_session* ng, std::int32_t id, std::uint8_t* buf, std::size_t length, std::uint32_t* flags,
                  beast::flat_buffer& pending, bool done, const FieldList& trailers, bool& deferred) {
  std::size_t n = std::min(length, pending.size());
  if (n > 0) {
    std::memcpy(buf, pending.data().data(), n);
    pending.consume(n);
  }
  if (pending.size() == 0 && done) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (!trailers.empty()) {
      std::vector<std::string> names;
      std::vector<nghttp2_nv> nva;
      names.reserve(trailers.size());
      nva.reserve(trailers.size());
      for (const auto& [name, value] : trailers) {
        names.push_back(lowercase(name));
        nva.push_back({reinterpret_cast<std::uint8_t*>(names.back().data()),
                       reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), names.back().size(),
                       value.size(), NGHTTP2_NV_FLAG_NONE});
      }
      if (nghttp2_submit_trailer(ng, id, nva.data(), nva.size()) == 0) *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    return static_cast<ssize_t>(n);
  }
  if (n == 0) {
    deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  return static_cast<ssize_t>(n);
}

}  // namespace sluice::proxy::h2
