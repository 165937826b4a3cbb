// Go's spellings of values and escapes, as request-log templates print them: fmt's %v for floats,
// text/template's js/html/urlquery escapers, net/http's canonical header names.
#pragma once

#include <string>
#include <string_view>

namespace sluice::proxy::request_log {

// net/http's CanonicalMIMEHeaderKey: "x-b3-traceid" -> "X-B3-Traceid".
std::string canonical(std::string_view name);
// fmt's %v of a float64: the shortest digits that round-trip, %e below 1e-4 and from 1e21.
void append_go_float(std::string& out, double d);
void js_escape(std::string& out, std::string_view s);
void html_escape(std::string& out, std::string_view s);
void query_escape(std::string& out, std::string_view s);  // url.QueryEscape

}  // namespace sluice::proxy::request_log
