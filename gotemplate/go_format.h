// Go's spellings of values and escapes, as templates and their data print them: strconv's float formats (fmt's
// %v is 'g' with the shortest digits), strconv.Quote, text/template's js/html/urlquery escapers, net/http's
// canonical header names.
#pragma once

#include <string>
#include <string_view>

namespace sluice::gotemplate {

// net/http's CanonicalMIMEHeaderKey: "x-b3-traceid" -> "X-B3-Traceid"; a name with a byte that is not a
// token character stays as it is.
bool is_canonical(std::string_view name);
// `name` itself when canonical already, else its canonical form written into `buf`.
std::string_view canonical_view(std::string_view name, std::string& buf);

// fmt's %v of a float64: strconv's 'g' with the shortest digits that read back the same, in %e form for
// exponents below -4 or from 6 up (0.0001, 1e-05, 123456, 1.234567e+06).
void append_go_float(std::string& out, double d);
// strconv.AppendFloat(out, d, fmt, prec, 64) for fmt in e E f g G x X; prec -1 is the shortest.
void append_float(std::string& out, double d, char fmt, int prec);

// strconv.Quote (ascii_only: QuoteToASCII) and QuoteRune.
void quote(std::string& out, std::string_view s, bool ascii_only);
void quote_rune(std::string& out, char32_t r, bool ascii_only);

void js_escape(std::string& out, std::string_view s);    // template.JSEscape
void html_escape(std::string& out, std::string_view s);  // template.HTMLEscape
void query_escape(std::string& out, std::string_view s);  // url.QueryEscape

}  // namespace sluice::gotemplate
