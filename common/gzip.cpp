// gzip; see gzip.h.
#include "common/gzip.h"

#include <zlib.h>

#include <charconv>

#include "common/ascii.h"

namespace sluice::net {
namespace {

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if ((a[i] | 0x20) != (b[i] | 0x20)) return false;
  return true;
}

}  // namespace

std::optional<std::string> gzip(std::string_view data) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16 /* gzip wrapper */, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return std::nullopt;
  std::string out(deflateBound(&z, static_cast<uLong>(data.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return std::nullopt;
  return out;
}

bool prefers_gzip(std::string_view accept_encoding) {
  double identity_q = -1, gzip_q = -1;
  while (!accept_encoding.empty()) {
    auto comma = accept_encoding.find(',');
    auto item = accept_encoding.substr(0, comma);
    accept_encoding = comma == std::string_view::npos ? std::string_view{} : accept_encoding.substr(comma + 1);
    auto semi = item.find(';');
    auto value = trim(item.substr(0, semi));
    double q = 1;
    if (semi != std::string_view::npos) {
      auto param = trim(item.substr(semi + 1));
      if (param.size() > 2 && (param[0] | 0x20) == 'q' && param[1] == '=') {
        auto num = param.substr(2);
        std::from_chars(num.data(), num.data() + num.size(), q);
      }
    }
    const bool any = value == "*";
    if (any || iequal(value, "identity")) identity_q = std::max(identity_q, q);
    if (any || iequal(value, "gzip")) gzip_q = std::max(gzip_q, q);
  }
  return gzip_q > identity_q && gzip_q > 0;
}

}  // namespace sluice::net
