// net/url as net/http fills and prints a server request's URL: url.ParseRequestURI of the request target,
// URL.String / EscapedPath / RequestURI, and url.ParseQuery / Values.Encode. Kept with the engine, below
// both of its users (the request log's data model and the tracer's url.full): it reads into the engine's
// scratch space and maps, and escapes with go_format.h.
#pragma once

#include <string>
#include <string_view>

#include "gotemplate/value.h"

namespace sluice::gotemplate {

struct RequestUrl {
  std::string_view scheme, user, host;
  std::string_view path;      // unescaped (in scratch when it had escapes)
  std::string_view raw_path;  // the target's path when it is not the default encoding of `path`
  std::string_view raw_query;
  std::string_view opaque;
  bool has_user = false;
  bool force_query = false;  // the target ends in a lone "?"
};

RequestUrl parse_request_uri(std::string_view target, Scratch& scratch);

void append_escaped_path(std::string& out, const RequestUrl& u);
void append_url_string(std::string& out, const RequestUrl& u);  // URL.String()
void append_request_uri(std::string& out, const RequestUrl& u);  // URL.RequestURI()
std::string_view url_hostname(std::string_view host);
std::string_view url_port(std::string_view host);

// url.ParseQuery: pairs it cannot read (bad escapes, ';') are left out, as URL.Query() leaves them.
void parse_query(std::string_view raw, StringsMap& out, Scratch& scratch);
void append_query_encode(std::string& out, const StringsMap& values);  // Values.Encode()

// Sorts `m`'s pairs (key, item per entry of one item each) into entries with their items, keeping the
// order of a key's values.
void group_by_key(StringsMap& m, std::vector<std::pair<std::string_view, std::string_view>>& pairs);

}  // namespace sluice::gotemplate
