// Rendering a request-log template: values as Go's fmt prints them (%v), Go's template functions
// (js, html, urlquery, index, len, print, printf, comparisons, not/and/or), header maps keyed by
// canonical names as net/http's.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <stdexcept>

#include "proxy/request_log/go_format.h"
#include "proxy/request_log/program.h"
#include "proxy/request_log/template.h"

namespace sluice::proxy {
namespace request_log {
namespace {

struct Value {
  enum class Kind { nil, string, integer, real, boolean, strings, header, revision, response, request };
  Kind kind = Kind::nil;
  std::string s;
  std::int64_t i = 0;
  double d = 0;
  bool b = false;
  std::vector<std::string> list;
};

Value str(std::string_view v) { return Value{.kind = Value::Kind::string, .s = std::string(v)}; }
Value integer(std::int64_t v) { return Value{.kind = Value::Kind::integer, .i = v}; }

struct EvalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Evaluator {
 public:
  explicit Evaluator(const RequestLogInput& in) : in_(in) {}

  void run(const NodeList& nodes, std::string& out) {
    for (const auto& n : nodes) {
      switch (n.kind) {
        case Node::Kind::text: out += n.text; break;
        case Node::Kind::action: print(out, pipeline(n.pipeline)); break;
        case Node::Kind::if_: run(truth(pipeline(n.pipeline)) ? n.then : n.otherwise, out); break;
      }
    }
  }

 private:
  std::string_view header(std::string_view name) const {
    if (!in_.request) return {};
    auto it = in_.request->find(name);
    return it == in_.request->end() ? std::string_view{} : std::string_view(it->value());
  }
  std::vector<std::string> header_values(std::string_view canonical_name) const {
    std::vector<std::string> v;
    if (!in_.request || canonical_name == "Host") return v;  // Go moves Host out of the header map
    for (const auto& f : *in_.request)
      if (canonical(f.name_string()) == canonical_name) v.emplace_back(f.value());
    return v;
  }
  std::string_view target() const {
    return in_.request ? std::string_view(in_.request->target()) : std::string_view(in_.record.target);
  }

  Value field(Field f) const {
    const auto& r = in_.record;
    const auto& rev = in_.revision;
    switch (f) {
      case Field::dot:
      case Field::request: return Value{.kind = Value::Kind::request};
      case Field::response: return Value{.kind = Value::Kind::response};
      case Field::revision: return Value{.kind = Value::Kind::revision};
      case Field::trace_id: return str(in_.trace_id);
      case Field::method: return str(in_.request ? std::string_view(in_.request->method_string()) : r.method);
      case Field::url:
      case Field::request_uri: return str(target());
      case Field::url_path: return str(target().substr(0, target().find('?')));
      case Field::url_raw_query: {
        auto q = target().find('?');
        return str(q == std::string_view::npos ? std::string_view{} : target().substr(q + 1));
      }
      case Field::host: return str(header("Host"));
      case Field::header: return Value{.kind = Value::Kind::header};
      case Field::header_get: throw EvalError(".Request.Header.Get needs an argument");
      case Field::remote_addr: return str(r.peer);
      case Field::content_length: {
        // Go's Request.ContentLength: the declared length, -1 when unknown (chunked), 0 without a body.
        auto cl = header("Content-Length");
        std::int64_t n = 0;
        if (!cl.empty()) std::from_chars(cl.data(), cl.data() + cl.size(), n);
        else if (!header("Transfer-Encoding").empty()) n = -1;
        return integer(n);
      }
      case Field::proto: return str(r.protocol);
      case Field::proto_major: return integer(r.protocol == "HTTP/2.0" ? 2 : 1);
      case Field::proto_minor: return integer(r.protocol == "HTTP/2.0" ? 0 : r.protocol == "HTTP/1.0" ? 0 : 1);
      case Field::user_agent: return str(in_.request ? header("User-Agent") : std::string_view(r.user_agent));
      case Field::referer: return str(in_.request ? header("Referer") : std::string_view(r.referer));
      case Field::code: return integer(r.status);
      case Field::size: return integer(static_cast<std::int64_t>(r.response_bytes));
      case Field::latency:
        return Value{.kind = Value::Kind::real, .d = std::chrono::duration<double>(in_.end - r.start).count()};
      case Field::rev_name: return str(rev.name);
      case Field::rev_namespace: return str(rev.namespace_name);
      case Field::rev_service: return str(rev.service);
      case Field::rev_configuration: return str(rev.configuration);
      case Field::rev_pod_name: return str(rev.pod_name);
      case Field::rev_pod_ip: return str(rev.pod_ip);
    }
    return {};
  }

  Value operand(const Operand& o) {
    switch (o.kind) {
      case Operand::Kind::field: return field(o.field);
      case Operand::Kind::string: return str(o.text);
      case Operand::Kind::integer: return integer(o.integer);
      case Operand::Kind::real: return Value{.kind = Value::Kind::real, .d = o.real};
      case Operand::Kind::boolean: return Value{.kind = Value::Kind::boolean, .b = o.boolean};
      case Operand::Kind::nil: return {};
      case Operand::Kind::pipeline: return pipeline(*o.nested);
    }
    return {};
  }

  Value pipeline(const Pipeline& p) {
    Value last;
    bool have_last = false;
    for (const auto& c : p.commands) {
      std::vector<Value> args;
      for (const auto& o : c.operands)  // a method names itself: it is not a value
        args.push_back(o.kind == Operand::Kind::field && o.field == Field::header_get ? Value{} : operand(o));
      if (have_last) args.push_back(std::move(last));
      if (c.function.empty()) {
        const auto& first = c.operands.front();
        if (first.kind == Operand::Kind::field && first.field == Field::header_get) {
          if (args.size() != 2 || args[1].kind != Value::Kind::string)
            throw EvalError(".Request.Header.Get takes one string");
          auto v = header_values(canonical(args[1].s));
          last = str(v.empty() ? std::string() : v.front());
        } else {
          if (args.size() != 1) throw EvalError("can't give argument to non-function");
          last = std::move(args.front());
        }
      } else {
        last = call(c.function, args);
      }
      have_last = true;
    }
    return last;
  }

  static bool truth(const Value& v) {
    switch (v.kind) {
      case Value::Kind::nil: return false;
      case Value::Kind::string: return !v.s.empty();
      case Value::Kind::integer: return v.i != 0;
      case Value::Kind::real: return v.d != 0;
      case Value::Kind::boolean: return v.b;
      case Value::Kind::strings: return !v.list.empty();
      default: return true;
    }
  }

  void print(std::string& out, const Value& v) const {
    switch (v.kind) {
      case Value::Kind::nil: out += "<no value>"; break;
      case Value::Kind::string: out += v.s; break;
      case Value::Kind::integer: out += std::to_string(v.i); break;
      case Value::Kind::real: append_go_float(out, v.d); break;
      case Value::Kind::boolean: out += v.b ? "true" : "false"; break;
      case Value::Kind::strings: print_list(out, v.list); break;
      case Value::Kind::header: {
        std::vector<std::string> names;
        if (in_.request)
          for (const auto& f : *in_.request) names.push_back(canonical(f.name_string()));
        std::sort(names.begin(), names.end());
        names.erase(std::unique(names.begin(), names.end()), names.end());
        names.erase(std::remove(names.begin(), names.end(), "Host"), names.end());
        out += "map[";
        for (std::size_t i = 0; i < names.size(); ++i) {
          if (i) out += ' ';
          out += names[i] + ':';
          print_list(out, header_values(names[i]));
        }
        out += ']';
        break;
      }
      case Value::Kind::revision: {
        const auto& r = in_.revision;
        out += "&{" + r.name + " " + r.namespace_name + " " + r.service + " " + r.configuration + " " +
               r.pod_name + " " + r.pod_ip + "}";
        break;
      }
      case Value::Kind::response:
        out += "&{" + std::to_string(in_.record.status) + " " + std::to_string(in_.record.response_bytes) + " ";
        append_go_float(out, std::chrono::duration<double>(in_.end - in_.record.start).count());
        out += '}';
        break;
      case Value::Kind::request: out += "&{...}"; break;
    }
  }
  static void print_list(std::string& out, const std::vector<std::string>& l) {
    out += '[';
    for (std::size_t i = 0; i < l.size(); ++i) {
      if (i) out += ' ';
      out += l[i];
    }
    out += ']';
  }

  // fmt.Sprint: a space between operands when neither is a string.
  std::string sprint(const std::vector<Value>& args, bool always_space) const {
    std::string out;
    for (std::size_t i = 0; i < args.size(); ++i) {
      bool is_str = args[i].kind == Value::Kind::string;
      if (i > 0 && (always_space || (!is_str && args[i - 1].kind != Value::Kind::string))) out += ' ';
      print(out, args[i]);
    }
    return out;
  }

  Value call(const std::string& fn, std::vector<Value>& args);
  Value printf(const std::vector<Value>& args) const;
  static int compare(const Value& a, const Value& b);

  const RequestLogInput& in_;
};

int Evaluator::compare(const Value& a, const Value& b) {
  auto number = [](const Value& v, double& out) {
    if (v.kind == Value::Kind::integer) out = static_cast<double>(v.i);
    else if (v.kind == Value::Kind::real) out = v.d;
    else return false;
    return true;
  };
  double x, y;
  if (number(a, x) && number(b, y)) return x < y ? -1 : x > y ? 1 : 0;
  if (a.kind == Value::Kind::string && b.kind == Value::Kind::string) return a.s.compare(b.s) < 0 ? -1 : a.s == b.s ? 0 : 1;
  if (a.kind == Value::Kind::boolean && b.kind == Value::Kind::boolean) return a.b == b.b ? 0 : a.b ? 1 : -1;
  throw EvalError("incompatible types for comparison");
}

Value Evaluator::call(const std::string& fn, std::vector<Value>& args) {
  auto escaped = [&](void (*esc)(std::string&, std::string_view)) {
    Value v{.kind = Value::Kind::string};
    esc(v.s, sprint(args, false));
    return v;
  };
  if (fn == "js") return escaped(js_escape);
  if (fn == "html") return escaped(html_escape);
  if (fn == "urlquery") return escaped(query_escape);
  if (fn == "print") return str(sprint(args, false));
  if (fn == "println") return str(sprint(args, true) + "\n");
  if (fn == "printf") return printf(args);
  if (fn == "not") {
    if (args.size() != 1) throw EvalError("not takes one argument");
    return Value{.kind = Value::Kind::boolean, .b = !truth(args[0])};
  }
  if (fn == "and" || fn == "or") {
    for (auto& a : args)
      if (truth(a) == (fn == "or")) return std::move(a);
    return std::move(args.back());
  }
  if (fn == "len") {
    if (args.size() != 1) throw EvalError("len takes one argument");
    const auto& a = args[0];
    if (a.kind == Value::Kind::string) return integer(static_cast<std::int64_t>(a.s.size()));
    if (a.kind == Value::Kind::strings) return integer(static_cast<std::int64_t>(a.list.size()));
    throw EvalError("len of this type");
  }
  if (fn == "index") {
    Value v = std::move(args.at(0));
    for (std::size_t k = 1; k < args.size(); ++k) {
      const auto& key = args[k];
      if (v.kind == Value::Kind::header && key.kind == Value::Kind::string) {
        // A map lookup by exact key: net/http keeps canonical names, so "x-b3-traceid" finds nothing.
        Value list{.kind = Value::Kind::strings};
        if (key.s == canonical(key.s)) list.list = header_values(key.s);
        v = std::move(list);
      } else if (v.kind == Value::Kind::strings && key.kind == Value::Kind::integer) {
        if (key.i < 0 || static_cast<std::size_t>(key.i) >= v.list.size()) throw EvalError("index out of range");
        v = str(v.list[static_cast<std::size_t>(key.i)]);
      } else if (v.kind == Value::Kind::string && key.kind == Value::Kind::integer) {
        if (key.i < 0 || static_cast<std::size_t>(key.i) >= v.s.size()) throw EvalError("index out of range");
        v = integer(static_cast<unsigned char>(v.s[static_cast<std::size_t>(key.i)]));
      } else {
        throw EvalError("can't index item of this type");
      }
    }
    return v;
  }
  if (args.size() < 2) throw EvalError(fn + " needs two arguments");
  int c = compare(args[0], args[1]);
  bool r = fn == "eq" ? c == 0 : fn == "ne" ? c != 0 : fn == "lt" ? c < 0 : fn == "le" ? c <= 0 : fn == "gt" ? c > 0 : c >= 0;
  if (fn == "eq")  // eq a b c: a equals any of the others
    for (std::size_t k = 2; !r && k < args.size(); ++k) r = compare(args[0], args[k]) == 0;
  return Value{.kind = Value::Kind::boolean, .b = r};
}

// The verbs request logs use: %s %v %d %q %f (with a precision) and %%.
Value Evaluator::printf(const std::vector<Value>& args) const {
  if (args.empty() || args[0].kind != Value::Kind::string) throw EvalError("printf needs a format string");
  const std::string& f = args[0].s;
  std::string out;
  std::size_t next = 1;
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%' || i + 1 >= f.size()) {
      out += f[i];
      continue;
    }
    std::size_t j = i + 1;
    int precision = -1;
    if (f[j] == '.') {
      precision = 0;
      while (++j < f.size() && std::isdigit(static_cast<unsigned char>(f[j]))) precision = precision * 10 + (f[j] - '0');
    }
    if (j >= f.size()) break;
    char verb = f[j];
    i = j;
    if (verb == '%') {
      out += '%';
      continue;
    }
    if (next >= args.size()) {
      out += std::string("%!") + verb + "(MISSING)";
      continue;
    }
    const Value& a = args[next++];
    if (verb == 'q' && a.kind == Value::Kind::string) {
      out += '"';
      for (char c : a.s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
      }
      out += '"';
    } else if (verb == 'f' && (a.kind == Value::Kind::real || a.kind == Value::Kind::integer)) {
      char buf[64];
      double d = a.kind == Value::Kind::real ? a.d : static_cast<double>(a.i);
      std::snprintf(buf, sizeof buf, "%.*f", precision < 0 ? 6 : precision, d);
      out += buf;
    } else {
      print(out, a);
    }
  }
  return str(out);
}

}  // namespace

}  // namespace request_log

RequestLogTemplate::RequestLogTemplate(std::string_view text)
    : program_(std::make_unique<request_log::Program>(request_log::parse(text))) {}
RequestLogTemplate::~RequestLogTemplate() = default;
RequestLogTemplate::RequestLogTemplate(RequestLogTemplate&&) noexcept = default;
RequestLogTemplate& RequestLogTemplate::operator=(RequestLogTemplate&&) noexcept = default;

bool RequestLogTemplate::render(std::string& out, const RequestLogInput& in) const {
  const auto size = out.size();
  try {
    request_log::Evaluator(in).run(program_->nodes, out);
    return true;
  } catch (const std::exception&) {
    out.resize(size);
    out += "Invalid request log template: method: ";
    out += in.request ? std::string_view(in.request->method_string()) : std::string_view(in.record.method);
    out += ", response code: " + std::to_string(in.record.status) + ", latency: ";
    request_log::append_go_float(out, std::chrono::duration<double>(in.end - in.record.start).count());
    out += ", url: ";
    out += in.request ? std::string_view(in.request->target()) : std::string_view(in.record.target);
    return false;
  }
}

std::string_view trace_id_of(const http::request_header<>& req) {
  if (auto it = req.find("traceparent"); it != req.end()) {
    // version-traceid-parentid-flags
    std::string_view v = it->value();
    auto a = v.find('-');
    if (a != std::string_view::npos) {
      auto b = v.find('-', a + 1);
      return v.substr(a + 1, b == std::string_view::npos ? std::string_view::npos : b - a - 1);
    }
  }
  if (auto it = req.find("x-b3-traceid"); it != req.end()) return std::string_view(it->value());
  return {};
}

}  // namespace sluice::proxy
