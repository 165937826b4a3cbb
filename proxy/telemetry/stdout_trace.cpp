// stdouttrace's span lines; see stdout_trace.h. Field order and spelling are the Go SpanStub's (exported
// field names, zero values written out, nil slices as null), so tools that read queue-proxy's lines read these.
#include "proxy/telemetry/stdout_trace.h"

#include <cstdio>
#include <ctime>

namespace sluice::proxy::telemetry {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// The length of the valid UTF-8 sequence at the start of `s` (Go's utf8.DecodeRuneInString rules:
// no overlongs, no surrogates, nothing above U+10FFFF), or 0.
std::size_t utf8_length(std::string_view s, char32_t& rune) {
  auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  std::size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  if (c < 0xC2 || c > 0xF4 || s.size() < n) return 0;
  rune = c & (0xFF >> (n + 1));
  for (std::size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xC0) != 0x80) return 0;
    rune = rune << 6 | (b(i) & 0x3F);
  }
  if ((n == 3 && rune < 0x800) || (n == 4 && (rune < 0x10000 || rune > 0x10FFFF)) ||
      (rune >= 0xD800 && rune <= 0xDFFF))
    return 0;
  return n;
}

void append_hex(std::string& out, const std::uint8_t* bytes, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(kHex[bytes[i] >> 4]);
    out.push_back(kHex[bytes[i] & 15]);
  }
}

// {"TraceID":…,"SpanID":…,"TraceFlags":…,"TraceState":…,"Remote":…}; a null `span` is Go's zero value.
void append_span_context(std::string& out, const TraceId& trace, const SpanId* span, std::uint8_t flags,
                         std::string_view trace_state, bool remote) {
  static constexpr TraceId kNoTrace{};
  static constexpr SpanId kNoSpan{};
  out += "{\"TraceID\":\"";
  append_hex(out, span ? trace.data() : kNoTrace.data(), 16);
  out += "\",\"SpanID\":\"";
  append_hex(out, span ? span->data() : kNoSpan.data(), 8);
  out += "\",\"TraceFlags\":\"";
  append_hex(out, &flags, 1);
  out += "\",\"TraceState\":";
  append_go_json_string(out, span ? trace_state : std::string_view{});
  out += remote ? ",\"Remote\":true}" : ",\"Remote\":false}";
}

void append_text_value(std::string& out, std::string_view key, std::string_view value) {
  out += "{\"Key\":";
  append_go_json_string(out, key);
  out += ",\"Value\":{\"Type\":\"STRING\",\"Value\":";
  append_go_json_string(out, value);
  out += "}}";
}

void append_attributes(std::string& out, const std::vector<SpanAttribute>& attributes) {
  if (attributes.empty()) {
    out += "null";
    return;
  }
  out.push_back('[');
  for (const auto& a : attributes) {
    if (out.back() != '[') out.push_back(',');
    if (!a.is_number) {
      append_text_value(out, a.key, a.text);
      continue;
    }
    out += "{\"Key\":";
    append_go_json_string(out, a.key);
    out += ",\"Value\":{\"Type\":\"INT64\",\"Value\":" + std::to_string(a.number) + "}}";
  }
  out.push_back(']');
}

void append_scope(std::string& out, SpanScope scope) {
  auto name = scope_name(scope);
  out += "{\"Name\":";
  append_go_json_string(out, name.name);
  out += ",\"Version\":";
  append_go_json_string(out, name.version);
  out += ",\"SchemaURL\":\"\",\"Attributes\":null}";
}

long utc_offset_at(std::uint64_t unix_nano) {
  auto secs = static_cast<std::time_t>(unix_nano / 1'000'000'000);
  std::tm tm{};
  if (!localtime_r(&secs, &tm)) return 0;
  return tm.tm_gmtoff;
}

}  // namespace

void append_go_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '<':
        case '>':
        case '&':
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 15]);
          break;
        default:
          if (c < 0x20) {
            out += "\\u00";
            out.push_back(kHex[c >> 4]);
            out.push_back(kHex[c & 15]);
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    char32_t rune = 0;
    const std::size_t n = utf8_length(s.substr(i), rune);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
    } else if (rune == 0x2028 || rune == 0x2029) {
      out += rune == 0x2028 ? "\\u2028" : "\\u2029";
      i += n;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  out.push_back('"');
}

void append_go_time(std::string& out, std::uint64_t unix_nano, long utc_offset_seconds) {
  const auto local = static_cast<std::time_t>(unix_nano / 1'000'000'000) + utc_offset_seconds;
  std::tm tm{};
  gmtime_r(&local, &tm);
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "\"%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                        tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  out.append(buf, static_cast<std::size_t>(n));
  if (auto frac = unix_nano % 1'000'000'000; frac != 0) {
    n = std::snprintf(buf, sizeof buf, ".%09u", static_cast<unsigned>(frac));
    while (buf[n - 1] == '0') --n;
    out.append(buf, static_cast<std::size_t>(n));
  }
  if (utc_offset_seconds == 0) {
    out += "Z\"";
    return;
  }
  const long minutes = (utc_offset_seconds < 0 ? -utc_offset_seconds : utc_offset_seconds) / 60;
  n = std::snprintf(buf, sizeof buf, "%c%02ld:%02ld\"", utc_offset_seconds < 0 ? '-' : '+', minutes / 60, minutes % 60);
  out.append(buf, static_cast<std::size_t>(n));
}

std::string encode_stdout_span(const FinishedSpan& s, const Attributes& resource) {
  std::string out;
  out.reserve(2048);
  out += "{\"Name\":";
  append_go_json_string(out, s.name);
  out += ",\"SpanContext\":";
  append_span_context(out, s.trace_id, &s.span_id, s.trace_flags, s.trace_state, false);
  out += ",\"Parent\":";
  append_span_context(out, s.trace_id, s.has_parent ? &s.parent_span_id : nullptr, s.has_parent ? s.parent_flags : 0,
                      s.trace_state, s.remote_parent);
  out += ",\"SpanKind\":" + std::to_string(static_cast<int>(s.kind));
  out += ",\"StartTime\":";
  append_go_time(out, s.start_unix_nano, utc_offset_at(s.start_unix_nano));
  out += ",\"EndTime\":";
  append_go_time(out, s.end_unix_nano, utc_offset_at(s.end_unix_nano));
  out += ",\"Attributes\":";
  append_attributes(out, s.attributes);
  out += ",\"Events\":null,\"Links\":null,\"Status\":{\"Code\":";
  out += s.error ? "\"Error\"" : "\"Unset\"";
  out += ",\"Description\":";
  append_go_json_string(out, s.error ? std::string_view(s.status_description) : std::string_view{});
  out += "},\"DroppedAttributes\":0,\"DroppedEvents\":0,\"DroppedLinks\":0,\"ChildSpanCount\":" +
         std::to_string(s.child_spans);
  out += ",\"Resource\":";
  if (resource.empty()) {
    out += "null";
  } else {
    out.push_back('[');
    for (const auto& [k, v] : resource) {
      if (out.back() != '[') out.push_back(',');
      append_text_value(out, k, v);
    }
    out.push_back(']');
  }
  out += ",\"InstrumentationScope\":";
  append_scope(out, s.scope);
  out += ",\"InstrumentationLibrary\":";
  append_scope(out, s.scope);
  out.push_back('}');
  return out;
}

}  // namespace sluice::proxy::telemetry
