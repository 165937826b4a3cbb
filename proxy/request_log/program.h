// The parsed form of a request-log template (internal to proxy/request_log/).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sluice::proxy::request_log {

// Every data path a template may name, resolved at parse time.
enum class Field {
  dot, request, response, revision, trace_id,
  method, url, url_path, url_raw_query, host, header, header_get, remote_addr, request_uri, content_length,
  proto, proto_major, proto_minor, user_agent, referer,
  code, size, latency,
  rev_name, rev_namespace, rev_service, rev_configuration, rev_pod_name, rev_pod_ip,
};

struct Pipeline;

struct Operand {
  enum class Kind { field, string, integer, real, boolean, nil, pipeline };
  Kind kind = Kind::nil;
  Field field = Field::dot;
  std::string text;
  std::int64_t integer = 0;
  double real = 0;
  bool boolean = false;
  std::shared_ptr<Pipeline> nested;  // Kind::pipeline: (a parenthesised pipeline)
};

// A function applied to operands, or a single operand (function empty; a method's arguments follow it).
struct Command {
  std::string function;
  std::vector<Operand> operands;
};

struct Pipeline {
  std::vector<Command> commands;  // each one's result is the last argument of the next
};

struct Node;
using NodeList = std::vector<Node>;

struct Node {
  enum class Kind { text, action, if_ };
  Kind kind = Kind::text;
  std::string text;
  Pipeline pipeline;
  NodeList then, otherwise;  // if: the branches
};

struct Program {
  NodeList nodes;
};

// Parses `text`; throws std::invalid_argument naming the problem and its byte offset.
Program parse(std::string_view text);

}  // namespace sluice::proxy::request_log
