// The parsed form of a request-log template (internal to proxy/request_log/): Go text/template's parse tree,
// with function names and field names resolved to enums once, at start-up.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "proxy/request_log/literal.h"

namespace sluice::proxy::request_log {

// text/template's predefined functions.
enum class Builtin : std::uint8_t {
  and_, or_, not_, len, index, slice, print, printf, println, html, js, urlquery, eq, ne, lt, le, gt, ge, call,
};

// Every field or method name of the data a template reaches (Knative's input, net/http's Request, net/url's
// URL, ...); any other name is `other` and means a map key or an error, found when the template runs.
enum class Member : std::uint8_t {
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
Member member_of(std::string_view name);  // defined with the data, in data.cpp

struct Name {
  Member member;
  std::string text;
};

struct Pipeline;

// An operand of a command (Go's parse nodes that can be arguments).
struct Arg {
  enum class Kind : std::uint8_t { dot, nil, boolean, number, string, field, variable, chain, function, pipeline };
  Kind kind = Kind::nil;
  bool boolean = false;
  Number number;
  std::string text;         // string: its value; for messages, the operand as written
  int variable = -1;        // variable: the index of its name in Program::variables ("$" is 0)
  Builtin function{};       // function, or a chain's base when `pipe` is empty
  std::vector<Name> names;  // field: .A.B; variable: $x.A.B (after the variable); chain: (…).A.B
  std::shared_ptr<const Pipeline> pipe;  // pipeline; chain: its base when it is a pipeline
};

struct Command {
  std::vector<Arg> args;  // args[0]: the function, field, variable, ... the others are its arguments
};

struct Pipeline {
  std::vector<int> decl;  // variables declared ($x := …) or assigned ($x = …)
  bool is_assign = false;
  std::vector<Command> commands;  // each one's result is the last argument of the next
};

struct Node;
using NodeList = std::vector<Node>;

struct Node {
  enum class Kind : std::uint8_t { text, action, if_, with, range, template_, break_, continue_ };
  Kind kind = Kind::text;
  std::string text;    // text; template_: the name called
  bool has_pipe = false;  // template_: {{template "x" pipeline}}
  Pipeline pipe;
  NodeList list, else_list;
};

struct Program {
  std::map<std::string, NodeList, std::less<>> templates;  // "requestLog" and the {{define}}d ones
  std::vector<std::string> variables;                       // names, "$" first
};

// Parses `text` as template.New("requestLog").Parse does; throws std::invalid_argument with Go's
// message ("template: requestLog:1: unexpected EOF").
Program parse(std::string_view text);

inline constexpr std::string_view kMainTemplate = "requestLog";

}  // namespace sluice::proxy::request_log
