// RequestLogTemplate: parse once, render per exchange into reused scratch space; see template.h.
#include "proxy/request_log/template.h"

#include "gotemplate/go_format.h"
#include "proxy/request_log/data.h"

namespace sluice::proxy {
namespace {

gotemplate::Template parse_request_log(std::string_view text) {
  std::string with_newline(text);
  // Knative's SetTemplate: "Make sure that the template ends with a newline."
  if (!with_newline.ends_with('\n')) with_newline += '\n';
  return gotemplate::Template("requestLog", with_newline, request_log::member_of);
}

}  // namespace

RequestLogTemplate::RequestLogTemplate(std::string_view text) : template_(parse_request_log(text)) {}

bool RequestLogTemplate::render(std::string& out, const RequestLogInput& in) const {
  thread_local gotemplate::Scratch scratch;
  scratch.reset();
  request_log::InputData data(in, scratch);
  const auto size = out.size();
  try {
    template_.execute(out, data, request_log::InputData::root());
    return true;
  } catch (const std::exception&) {
    // Knative's RequestLogHandler.write, when Execute fails: a line of its own, from the request alone.
    out.resize(size);
    out += "Invalid request log template: method: ";
    out += data.method_name();
    out += ", response code: " + std::to_string(in.record.status) + ", latency: ";
    gotemplate::append_go_float(out, std::chrono::duration<double>(in.end - in.record.start).count());
    out += ", url: ";
    data.append_url(out);
    out += '\n';
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
