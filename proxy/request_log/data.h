// Knative's RequestLogTemplateInput over sluice's exchange, as the template engine's data model
// (gotemplate/data.h): what a template reaches from `.` — the fields and methods of .Request (net/http's
// Request as Go's server fills it), .Request.URL, .Request.Header (and the query's url.Values), .Response,
// .Revision and .TraceID.
#pragma once

#include <optional>

#include "gotemplate/data.h"
#include "gotemplate/url.h"
#include "proxy/request_log/template.h"

namespace sluice::proxy::request_log {

using gotemplate::MemberId;
using gotemplate::MethodSig;
using gotemplate::Scratch;
using gotemplate::StringsMap;
using gotemplate::Value;

// Every field or method name of the input's types (Knative's input, net/http's Request, net/url's URL,
// ...); any other name is `other` and means a map key or an error, found when the template runs.
enum class Member : MemberId {
  other,
  // RequestLogTemplateInput
  Request, Response, Revision, TraceID,
  // *http.Request
  Method, URL, Proto, ProtoMajor, ProtoMinor, Header, ContentLength, TransferEncoding, Close, Host, Form,
  PostForm, MultipartForm, Trailer, RemoteAddr, RequestURI, TLS, Pattern, UserAgent, Referer, ProtoAtLeast,
  // *url.URL
  Scheme, Opaque, User, Path, RawPath, OmitHost, ForceQuery, RawQuery, Fragment, RawFragment, String,
  EscapedPath, EscapedFragment, Hostname, Port, Query, IsAbs, Redacted,
  // RequestLogResponse, RequestLogRevision
  Code, Size, Latency, Name, Namespace, Service, Configuration, PodName, PodIP,
  // http.Header, url.Values
  Get, Values, Has, Encode,
};
MemberId member_of(std::string_view name);  // the engine's MemberOf for this model

// The input's own types, as the engine's values name them (Value::kind).
enum Kind : std::uint8_t { input = 1, request, url, response, revision, header, values };

class InputData final : public gotemplate::Data {
 public:
  InputData(const RequestLogInput& in, Scratch& scratch) : Data(scratch), in_(in) {}

  static Value root();  // `.`: the *RequestLogTemplateInput

  const MethodSig* method(const Value& recv, MemberId m) const override;
  Value call(const MethodSig& sig, const Value& recv, const Value* args) override;
  bool field(const Value& recv, MemberId m, Value& out) override;
  std::size_t fields(const Value& v, Field* out, std::size_t max) override;
  bool is_stringer(const Value& v) const override { return v.kind == Kind::url; }  // *url.URL
  void append_string(const Value& v, std::string& out) override;

  void append_url(std::string& out);  // URL.String()
  std::string_view method_name() const;
  std::string_view target() const;

 protected:
  const StringsMap& data_entries(const Value& map) override;
  Value data_key(const Value& map, std::string_view key) override;  // a header by its exact name

 private:
  bool field_of(Kind kind, Member m, Value& out);
  const gotemplate::RequestUrl& url();
  std::string_view header_get(std::string_view name) const;  // Header.Get: the first value, any case
  Value header_values(std::string_view name, bool exact);      // nil when absent
  std::int64_t content_length() const;

  const RequestLogInput& in_;
  std::optional<gotemplate::RequestUrl> url_;
  const StringsMap* header_map_ = nullptr;
  const StringsMap* query_map_ = nullptr;
};

}  // namespace sluice::proxy::request_log
