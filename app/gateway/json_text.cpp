// JSON text with plain numbers; see json_text.h.
#include "app/gateway/json_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "common/log.h"

namespace sluice::app::gateway {
namespace {

void append(std::string& out, const boost::json::value& v) {
  switch (v.kind()) {
    case boost::json::kind::null: out += "null"; break;
    case boost::json::kind::bool_: out += v.get_bool() ? "true" : "false"; break;
    case boost::json::kind::int64: out += std::to_string(v.get_int64()); break;
    case boost::json::kind::uint64: out += std::to_string(v.get_uint64()); break;
    case boost::json::kind::double_: {
      double d = v.get_double();
      if (!std::isfinite(d)) {
        out += "null";
        break;
      }
      // Three decimals at most (milliseconds, rates): enough for a person, and no exponent.
      char buf[64];
      int n = std::snprintf(buf, sizeof buf, "%.3f", d);
      std::string_view text(buf, static_cast<std::size_t>(n));
      if (text.find('.') != std::string_view::npos) {
        while (text.back() == '0') text.remove_suffix(1);
        if (text.back() == '.') text.remove_suffix(1);
      }
      if (text == "-0") text = "0";
      out += text;
      break;
    }
    case boost::json::kind::string: log::append_json_string(out, v.get_string()); break;
    case boost::json::kind::array: {
      out += '[';
      bool first = true;
      for (const auto& e : v.get_array()) {
        if (!first) out += ',';
        first = false;
        append(out, e);
      }
      out += ']';
      break;
    }
    case boost::json::kind::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, e] : v.get_object()) {
        if (!first) out += ',';
        first = false;
        log::append_json_string(out, k);
        out += ':';
        append(out, e);
      }
      out += '}';
      break;
    }
  }
}

}  // namespace

std::string json_text(const boost::json::value& v) {
  std::string out;
  append(out, v);
  return out;
}

}  // namespace sluice::app::gateway
