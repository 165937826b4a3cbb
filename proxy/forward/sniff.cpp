// Content-Type sniffing; see sniff.h.
#include "proxy/forward/sniff.h"

#include <array>
#include <cstdint>

namespace sluice::proxy::forwarding {
namespace {

constexpr std::string_view kHtml = "text/html; charset=utf-8";
constexpr std::string_view kText = "text/plain; charset=utf-8";

constexpr bool is_space(unsigned char c) { return c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == ' '; }

// A tag name that makes a body HTML when it opens the body (after whitespace), compared without case,
// then a space or '>'.
constexpr std::array<std::string_view, 17> kHtmlOpenings = {
    "<!DOCTYPE HTML", "<HTML", "<HEAD", "<SCRIPT", "<IFRAME", "<H1", "<DIV", "<FONT", "<TABLE",
    "<A", "<STYLE", "<TITLE", "<B", "<BODY", "<BR", "<P", "<!--"};

bool opens_with_tag(std::string_view data, std::string_view tag) {
  if (data.size() < tag.size() + 1) return false;
  for (std::size_t i = 0; i < tag.size(); ++i) {
    auto c = static_cast<unsigned char>(data[i]);
    if (tag[i] >= 'A' && tag[i] <= 'Z') c &= 0xDF;  // upper-case a letter of the body to compare
    if (c != static_cast<unsigned char>(tag[i])) return false;
  }
  return data[tag.size()] == ' ' || data[tag.size()] == '>';
}

// A signature: the body's first bytes, each ANDed with `mask` (when given), equal `pattern`.
struct Signature {
  std::string_view pattern;
  std::string_view mask;  // empty: every byte compared whole
  std::string_view type;
};

using namespace std::string_view_literals;

// In the standard's order: the first that matches wins.
constexpr Signature kSignatures[] = {
    {"%PDF-", {}, "application/pdf"},
    {"%!PS-Adobe-", {}, "application/postscript"},
    {"\xFE\xFF\x00\x00"sv, "\xFF\xFF\x00\x00"sv, "text/plain; charset=utf-16be"},
    {"\xFF\xFE\x00\x00"sv, "\xFF\xFF\x00\x00"sv, "text/plain; charset=utf-16le"},
    {"\xEF\xBB\xBF\x00"sv, "\xFF\xFF\xFF\x00"sv, kText},
    {"\x00\x00\x01\x00"sv, {}, "image/x-icon"},
    {"\x00\x00\x02\x00"sv, {}, "image/x-icon"},
    {"BM", {}, "image/bmp"},
    {"GIF87a", {}, "image/gif"},
    {"GIF89a", {}, "image/gif"},
    {"RIFF\x00\x00\x00\x00WEBPVP"sv, "\xFF\xFF\xFF\xFF\x00\x00\x00\x00\xFF\xFF\xFF\xFF\xFF\xFF"sv, "image/webp"},
    {"\x89PNG\r\n\x1A\n", {}, "image/png"},
    {"\xFF\xD8\xFF", {}, "image/jpeg"},
    {"FORM\x00\x00\x00\x00" "AIFF"sv, "\xFF\xFF\xFF\xFF\x00\x00\x00\x00\xFF\xFF\xFF\xFF"sv, "audio/aiff"},
    {"ID3", {}, "audio/mpeg"},
    {"OggS\x00"sv, {}, "application/ogg"},
    {"MThd\x00\x00\x00\x06"sv, {}, "audio/midi"},
    {"RIFF\x00\x00\x00\x00" "AVI "sv, "\xFF\xFF\xFF\xFF\x00\x00\x00\x00\xFF\xFF\xFF\xFF"sv, "video/avi"},
    {"RIFF\x00\x00\x00\x00WAVE"sv, "\xFF\xFF\xFF\xFF\x00\x00\x00\x00\xFF\xFF\xFF\xFF"sv, "audio/wave"},
    {{}, {}, "video/mp4"},  // no fixed bytes: the ftyp box (is_mp4)
    {"\x1A\x45\xDF\xA3", {}, "video/webm"},
    {"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
     "\x00\x00\x00\x00\x00\x00\x00\x00LP"sv,
     "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
     "\x00\x00\x00\x00\x00\x00\x00\x00\xFF\xFF"sv,
     "application/vnd.ms-fontobject"},
    {"\x00\x01\x00\x00"sv, {}, "font/ttf"},
    {"OTTO", {}, "font/otf"},
    {"ttcf", {}, "font/collection"},
    {"wOFF", {}, "font/woff"},
    {"wOF2", {}, "font/woff2"},
    {"\x1F\x8B\x08", {}, "application/x-gzip"},
    {"PK\x03\x04", {}, "application/zip"},
    {"Rar!\x1A\x07\x00"sv, {}, "application/x-rar-compressed"},
    {"Rar!\x1A\x07\x01\x00"sv, {}, "application/x-rar-compressed"},
    {"\x00" "asm"sv, {}, "application/wasm"},
};

bool matches(std::string_view data, const Signature& s) {
  if (data.size() < s.pattern.size()) return false;
  for (std::size_t i = 0; i < s.pattern.size(); ++i) {
    auto c = static_cast<unsigned char>(data[i]);
    if (!s.mask.empty()) c &= static_cast<unsigned char>(s.mask[i]);
    if (c != static_cast<unsigned char>(s.pattern[i])) return false;
  }
  return true;
}

std::uint32_t big_endian32(std::string_view d) {
  return (std::uint32_t{static_cast<unsigned char>(d[0])} << 24) | (std::uint32_t{static_cast<unsigned char>(d[1])} << 16) |
         (std::uint32_t{static_cast<unsigned char>(d[2])} << 8) | std::uint32_t{static_cast<unsigned char>(d[3])};
}

// An ISO BMFF "ftyp" box whose major or a compatible brand starts with "mp4".
bool is_mp4(std::string_view data) {
  if (data.size() < 12) return false;
  const std::size_t box = big_endian32(data);
  if (data.size() < box || box % 4 != 0 || data.substr(4, 4) != "ftyp") return false;
  for (std::size_t at = 8; at < box; at += 4) {
    if (at == 12) continue;  // the minor version, not a brand
    if (data.substr(at, 3) == "mp4") return true;
  }
  return false;
}

// No byte that text does not hold (controls other than tab, line ends, form feed and ESC).
bool is_text(std::string_view data) {
  for (char ch : data) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= 0x08 || c == 0x0B || (c >= 0x0E && c <= 0x1A) || (c >= 0x1C && c <= 0x1F)) return false;
  }
  return true;
}

}  // namespace

std::string_view sniff_content_type(std::string_view data) {
  if (data.size() > kSniffBytes) data = data.substr(0, kSniffBytes);
  std::size_t first = 0;
  while (first < data.size() && is_space(static_cast<unsigned char>(data[first]))) ++first;
  const auto opening = data.substr(first);
  for (auto tag : kHtmlOpenings)
    if (opens_with_tag(opening, tag)) return kHtml;
  if (opening.starts_with("<?xml")) return "text/xml; charset=utf-8";
  for (const auto& s : kSignatures) {
    if (s.pattern.empty() ? is_mp4(data) : matches(data, s)) return s.type;
  }
  if (is_text(opening)) return kText;
  return "application/octet-stream";
}

}  // namespace sluice::proxy::forwarding
