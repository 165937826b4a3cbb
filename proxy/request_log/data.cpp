// Knative's request-log input as Go's server would have filled it (see data.h). A field costs a switch and
// a view into the request; only the URL (once per line), a query's values and a whole header map are built.
#include "proxy/request_log/data.h"

#include <chrono>
#include <charconv>
#include <span>

#include "gotemplate/go_format.h"
#include "proxy/io/field_value.h"

namespace sluice::proxy::request_log {
namespace {

using gotemplate::Param;
using gotemplate::Type;

constexpr MemberId id(Member m) { return static_cast<MemberId>(m); }

constexpr std::string_view kHeaderType = "http.Header", kValuesType = "url.Values";

Value pointer(Kind k) {
  static constexpr std::string_view kNames[] = {"", "*http.RequestLogTemplateInput", "*http.Request", "*url.URL",
                                                "*http.RequestLogResponse", "*http.RequestLogRevision"};
  return Value::of(Type::pointer, kNames[k], k);
}

constexpr MethodSig kRequestMethods[] = {
    {id(Member::UserAgent), 0, {}}, {id(Member::Referer), 0, {}},
    {id(Member::ProtoAtLeast), 2, {Param::integer, Param::integer}}};
constexpr MethodSig kUrlMethods[] = {
    {id(Member::String), 0, {}},   {id(Member::EscapedPath), 0, {}}, {id(Member::EscapedFragment), 0, {}},
    {id(Member::Hostname), 0, {}}, {id(Member::Port), 0, {}},        {id(Member::Query), 0, {}},
    {id(Member::RequestURI), 0, {}}, {id(Member::IsAbs), 0, {}},     {id(Member::Redacted), 0, {}}};
constexpr MethodSig kHeaderMethods[] = {{id(Member::Get), 1, {Param::string}},
                                        {id(Member::Values), 1, {Param::string}}};
constexpr MethodSig kValuesMethods[] = {
    {id(Member::Get), 1, {Param::string}}, {id(Member::Has), 1, {Param::string}}, {id(Member::Encode), 0, {}}};

template <std::size_t N>
const MethodSig* find(const MethodSig (&table)[N], MemberId m) {
  for (const auto& sig : table)
    if (sig.member == m) return &sig;
  return nullptr;
}

const std::vector<std::string_view> kChunked = {"chunked"};
const StringsMap kEmptyMap;

Value int64_value(std::int64_t v) { return Value{.type = Type::integer, .i = v, .s = "int64"}; }

// "HTTP/1.1" -> {1, 1}
std::pair<int, int> proto_version(std::string_view proto) {
  if (proto.size() == 8 && proto.starts_with("HTTP/") && proto[6] == '.') return {proto[5] - '0', proto[7] - '0'};
  return {1, 1};
}

}  // namespace

MemberId member_of(std::string_view name) {
  static constexpr std::pair<std::string_view, Member> kNames[] = {
      {"Request", Member::Request}, {"Response", Member::Response}, {"Revision", Member::Revision},
      {"TraceID", Member::TraceID}, {"Method", Member::Method}, {"URL", Member::URL}, {"Proto", Member::Proto},
      {"ProtoMajor", Member::ProtoMajor}, {"ProtoMinor", Member::ProtoMinor}, {"Header", Member::Header},
      {"ContentLength", Member::ContentLength}, {"TransferEncoding", Member::TransferEncoding},
      {"Close", Member::Close}, {"Host", Member::Host}, {"Form", Member::Form}, {"PostForm", Member::PostForm},
      {"MultipartForm", Member::MultipartForm}, {"Trailer", Member::Trailer}, {"RemoteAddr", Member::RemoteAddr},
      {"RequestURI", Member::RequestURI}, {"TLS", Member::TLS}, {"Pattern", Member::Pattern},
      {"UserAgent", Member::UserAgent}, {"Referer", Member::Referer}, {"ProtoAtLeast", Member::ProtoAtLeast},
      {"Scheme", Member::Scheme}, {"Opaque", Member::Opaque}, {"User", Member::User}, {"Path", Member::Path},
      {"RawPath", Member::RawPath}, {"OmitHost", Member::OmitHost}, {"ForceQuery", Member::ForceQuery},
      {"RawQuery", Member::RawQuery}, {"Fragment", Member::Fragment}, {"RawFragment", Member::RawFragment},
      {"String", Member::String}, {"EscapedPath", Member::EscapedPath}, {"EscapedFragment", Member::EscapedFragment},
      {"Hostname", Member::Hostname}, {"Port", Member::Port}, {"Query", Member::Query}, {"IsAbs", Member::IsAbs},
      {"Redacted", Member::Redacted}, {"Code", Member::Code}, {"Size", Member::Size}, {"Latency", Member::Latency},
      {"Name", Member::Name}, {"Namespace", Member::Namespace}, {"Service", Member::Service},
      {"Configuration", Member::Configuration}, {"PodName", Member::PodName}, {"PodIP", Member::PodIP},
      {"Get", Member::Get}, {"Values", Member::Values}, {"Has", Member::Has}, {"Encode", Member::Encode},
  };
  for (const auto& [n, m] : kNames)
    if (n == name) return id(m);
  return id(Member::other);
}

Value InputData::root() { return pointer(Kind::input); }

std::string_view InputData::method_name() const {
  return in_.request ? std::string_view(in_.request->method_string()) : std::string_view(in_.record.method);
}
std::string_view InputData::target() const {
  return in_.request ? std::string_view(in_.request->target()) : std::string_view(in_.record.target);
}

const gotemplate::RequestUrl& InputData::url() {
  if (!url_) url_ = gotemplate::parse_request_uri(target(), scratch());
  return *url_;
}

void InputData::append_url(std::string& out) { gotemplate::append_url_string(out, url()); }
void InputData::append_string(const Value&, std::string& out) { append_url(out); }

std::string_view InputData::header_get(std::string_view name) const {
  if (!in_.request || iequals(name, "Host")) return {};  // Go's server moves Host out of the header map
  return field_value(*in_.request, name);
}

Value InputData::header_values(std::string_view name, bool exact) {
  // A map lookup by exact key: net/http keeps canonical names, so "x-b3-traceid" finds nothing.
  if (!in_.request || (exact && !gotemplate::is_canonical(name)) || iequals(name, "Host"))
    return Value::strings(nullptr, 0, 0);
  std::vector<std::string_view>* list = nullptr;
  for (const auto& f : *in_.request) {
    const std::string_view n = f.name_string();
    if (n.size() != name.size() || !iequals(n, name)) continue;
    if (!list) list = &scratch().list();
    list->push_back(f.value());
  }
  return list ? Value::strings(list, 0, list->size()) : Value::strings(nullptr, 0, 0);
}

std::int64_t InputData::content_length() const {
  // Go's Request.ContentLength: the declared length; -1 when unknown (chunked); 0 without a body.
  if (!in_.request) return static_cast<std::int64_t>(in_.record.request_bytes);
  auto cl = field_value(*in_.request, http::field::content_length);
  std::int64_t n = 0;
  if (!cl.empty()) std::from_chars(cl.data(), cl.data() + cl.size(), n);
  else if (!field_value(*in_.request, http::field::transfer_encoding).empty()) n = -1;
  return n;
}

const MethodSig* InputData::method(const Value& recv, MemberId m) const {
  switch (recv.kind) {
    case Kind::request: return find(kRequestMethods, m);
    case Kind::url: return find(kUrlMethods, m);
    case Kind::header: return find(kHeaderMethods, m);
    case Kind::values: return find(kValuesMethods, m);
    default: return nullptr;
  }
}

Value InputData::call(const MethodSig& sig, const Value& recv, const Value* args) {
  switch (static_cast<Member>(sig.member)) {
    case Member::UserAgent: return Value::string(header_get("User-Agent"));
    case Member::Referer: return Value::string(header_get("Referer"));
    case Member::ProtoAtLeast: {
      auto [major, minor] = proto_version(in_.record.protocol);
      return Value::boolean(major > args[0].i || (major == args[0].i && minor >= args[1].i));
    }
    case Member::String:
    case Member::Redacted: {
      auto& s = scratch().string();
      gotemplate::append_url_string(s, url());
      return Value::string(s);
    }
    case Member::EscapedPath: {
      auto& s = scratch().string();
      gotemplate::append_escaped_path(s, url());
      return Value::string(s);
    }
    case Member::RequestURI: {
      auto& s = scratch().string();
      gotemplate::append_request_uri(s, url());
      return Value::string(s);
    }
    case Member::EscapedFragment: return Value::string({});
    case Member::Hostname: return Value::string(gotemplate::url_hostname(url().host));
    case Member::Port: return Value::string(gotemplate::url_port(url().host));
    case Member::IsAbs: return Value::boolean(!url().scheme.empty());
    case Member::Query: return Value::of(Type::map, kValuesType, Kind::values);
    case Member::Encode: {
      auto& s = scratch().string();
      gotemplate::append_query_encode(s, entries(recv));
      return Value::string(s);
    }
    case Member::Get: {
      // any case, as Get's canonical form
      if (recv.type == Type::map && recv.kind == Kind::header) return Value::string(header_get(args[0].s));
      Value v = key(recv, args[0].s);
      return Value::string(v.type == Type::strings && v.size() > 0 ? v.item(0) : std::string_view{});
    }
    case Member::Values:
      if (recv.type != Type::map) return Value::strings(nullptr, 0, 0);
      return header_values(args[0].s, false);
    case Member::Has: return Value::boolean(key(recv, args[0].s).type != Type::invalid);
    default: return {};
  }
}

bool InputData::field(const Value& recv, MemberId m, Value& out) {
  return recv.type == Type::pointer && field_of(static_cast<Kind>(recv.kind), static_cast<Member>(m), out);
}

bool InputData::field_of(Kind kind, Member m, Value& out) {
  const auto& r = in_.record;
  switch (kind) {
    case Kind::input:
      switch (m) {
        case Member::Request: out = pointer(Kind::request); return true;
        case Member::Response: out = pointer(Kind::response); return true;
        case Member::Revision: out = pointer(Kind::revision); return true;
        case Member::TraceID: out = Value::string(in_.trace_id); return true;
        default: return false;
      }
    case Kind::request:
      switch (m) {
        case Member::Method: out = Value::string(method_name()); return true;
        case Member::URL: out = pointer(Kind::url); return true;
        case Member::Proto: out = Value::string(r.protocol); return true;
        case Member::ProtoMajor: out = Value::integer(proto_version(r.protocol).first); return true;
        case Member::ProtoMinor: out = Value::integer(proto_version(r.protocol).second); return true;
        case Member::Header: out = Value::of(Type::map, kHeaderType, Kind::header); return true;
        case Member::ContentLength: out = int64_value(content_length()); return true;
        case Member::TransferEncoding: {
          const bool chunked = in_.request && r.protocol != "HTTP/2.0" &&
                               iequals(field_value(*in_.request, http::field::transfer_encoding), "chunked");
          out = chunked ? Value::strings(&kChunked, 0, 1) : Value::strings(nullptr, 0, 0);
          return true;
        }
        case Member::Close: {
          // net/http's shouldClose: HTTP/1.0 unless keep-alive, HTTP/1.1 with "Connection: close".
          auto connection = in_.request ? field_value(*in_.request, http::field::connection) : std::string_view{};
          bool close = false;
          if (r.protocol == "HTTP/1.0") close = connection.find("eep-alive") == std::string_view::npos;
          else if (r.protocol == "HTTP/1.1") close = iequals(connection, "close");
          out = Value::boolean(close);
          return true;
        }
        case Member::Host: {
          auto host = url().host;
          if (host.empty() && in_.request) host = field_value(*in_.request, http::field::host);
          out = Value::string(host);
          return true;
        }
        case Member::Form:
        case Member::PostForm: out = Value::of(Type::nil_map, kValuesType, Kind::values); return true;
        case Member::Trailer: out = Value::of(Type::nil_map, kHeaderType, Kind::header); return true;
        case Member::MultipartForm: out = Value::of(Type::nil_pointer, "*multipart.Form"); return true;
        case Member::TLS: out = Value::of(Type::nil_pointer, "*tls.ConnectionState"); return true;
        case Member::Response: out = Value::of(Type::nil_pointer, "*http.Response"); return true;
        case Member::RemoteAddr: out = Value::string(r.peer); return true;
        case Member::RequestURI: out = Value::string(target()); return true;
        case Member::Pattern: out = Value::string({}); return true;
        default: return false;
      }
    case Kind::url: {
      const auto& u = url();
      switch (m) {
        case Member::Scheme: out = Value::string(u.scheme); return true;
        case Member::Opaque: out = Value::string(u.opaque); return true;
        case Member::User:
          out = u.has_user ? Value::string(u.user) : Value::of(Type::nil_pointer, "*url.Userinfo");
          return true;
        case Member::Host: out = Value::string(u.host); return true;
        case Member::Path: out = Value::string(u.path); return true;
        case Member::RawPath: out = Value::string(u.raw_path); return true;
        case Member::OmitHost: out = Value::boolean(false); return true;
        case Member::ForceQuery: out = Value::boolean(u.force_query); return true;
        case Member::RawQuery: out = Value::string(u.raw_query); return true;
        case Member::Fragment:
        case Member::RawFragment: out = Value::string({}); return true;
        default: return false;
      }
    }
    case Kind::response:
      switch (m) {
        case Member::Code: out = Value::integer(r.status); return true;
        case Member::Size: out = Value::integer(static_cast<std::int64_t>(r.response_bytes)); return true;
        case Member::Latency:
          out = Value::floating(std::chrono::duration<double>(in_.end - r.start).count());
          return true;
        default: return false;
      }
    case Kind::revision: {
      const auto& rev = in_.revision;
      switch (m) {
        case Member::Name: out = Value::string(rev.name); return true;
        case Member::Namespace: out = Value::string(rev.namespace_name); return true;
        case Member::Service: out = Value::string(rev.service); return true;
        case Member::Configuration: out = Value::string(rev.configuration); return true;
        case Member::PodName: out = Value::string(rev.pod_name); return true;
        case Member::PodIP: out = Value::string(rev.pod_ip); return true;
        default: return false;
      }
    }
    default: return false;
  }
}

Value InputData::data_key(const Value& map, std::string_view k) {
  if (map.kind == Kind::header) {
    Value v = header_values(k, true);
    return v.list ? v : Value{};
  }
  return Data::data_key(map, k);
}

const StringsMap& InputData::data_entries(const Value& map) {
  switch (map.kind) {
    case Kind::header:
      if (!header_map_) {
        thread_local std::vector<std::pair<std::string_view, std::string_view>> pairs;
        pairs.clear();
        if (in_.request)
          for (const auto& f : *in_.request) {
            std::string_view name = f.name_string();
            if (iequals(name, "Host") || name.starts_with(':')) continue;
            pairs.emplace_back(gotemplate::canonical_view(name, scratch().string()), f.value());
          }
        auto& m = scratch().map();
        gotemplate::group_by_key(m, pairs);
        header_map_ = &m;
      }
      return *header_map_;
    case Kind::values:
      if (!query_map_) {
        auto& m = scratch().map();
        gotemplate::parse_query(url().raw_query, m, scratch());
        query_map_ = &m;
      }
      return *query_map_;
    default: return kEmptyMap;
  }
}

std::size_t InputData::fields(const Value& v, Field* out, std::size_t max) {
  static constexpr Member kInput[] = {Member::Request, Member::Response, Member::Revision, Member::TraceID};
  static constexpr Member kRequest[] = {
      Member::Method, Member::URL, Member::Proto, Member::ProtoMajor, Member::ProtoMinor, Member::Header,
      Member::ContentLength, Member::TransferEncoding, Member::Close, Member::Host, Member::Form,
      Member::PostForm, Member::MultipartForm, Member::Trailer, Member::RemoteAddr, Member::RequestURI,
      Member::TLS, Member::Response, Member::Pattern};
  static constexpr Member kResponse[] = {Member::Code, Member::Size, Member::Latency};
  static constexpr Member kRevision[] = {Member::Name, Member::Namespace, Member::Service,
                                         Member::Configuration, Member::PodName, Member::PodIP};
  static constexpr const char* kInputNames[] = {"Request", "Response", "Revision", "TraceID"};
  static constexpr const char* kRequestNames[] = {
      "Method", "URL", "Proto", "ProtoMajor", "ProtoMinor", "Header", "ContentLength", "TransferEncoding",
      "Close", "Host", "Form", "PostForm", "MultipartForm", "Trailer", "RemoteAddr", "RequestURI", "TLS",
      "Response", "Pattern"};
  static constexpr const char* kResponseNames[] = {"Code", "Size", "Latency"};
  static constexpr const char* kRevisionNames[] = {"Name", "Namespace", "Service", "Configuration", "PodName",
                                                   "PodIP"};
  std::span<const Member> members;
  const char* const* names = nullptr;
  if (v.type != Type::pointer) return 0;
  switch (v.kind) {
    case Kind::input: members = kInput, names = kInputNames; break;
    case Kind::request: members = kRequest, names = kRequestNames; break;
    case Kind::response: members = kResponse, names = kResponseNames; break;
    case Kind::revision: members = kRevision, names = kRevisionNames; break;
    default: return 0;
  }
  std::size_t n = 0;
  for (; n < members.size() && n < max; ++n) {
    out[n].name = names[n];
    field_of(static_cast<Kind>(v.kind), members[n], out[n].value);
  }
  return n;
}

}  // namespace sluice::proxy::request_log
