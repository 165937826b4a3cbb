// Content-Type sniffing (proxy/forward/sniff.h): the WHATWG table's rows, in its order, on the bodies
// apps send without a type.
#include "proxy/forward/sniff.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::proxy::forwarding {
namespace {

using namespace std::string_literals;

TEST(Sniff, NamesWhatTheFirstBytesShow) {
  const std::pair<std::string, std::string_view> cases[] = {
      {"<!DOCTYPE html><html>", "text/html; charset=utf-8"},
      {"\n\t  <HtMl lang=en>", "text/html; charset=utf-8"},  // whitespace first; any case
      {"<p>hi</p>", "text/html; charset=utf-8"},
      {"<!-- c -->", "text/html; charset=utf-8"},
      {"<pre>x</pre>", "text/plain; charset=utf-8"},  // <p must be followed by a space or '>'
      {"<html", "text/plain; charset=utf-8"},         // no byte after the tag yet
      {"<?xml version=\"1.0\"?>", "text/xml; charset=utf-8"},
      {"%PDF-1.7", "application/pdf"},
      {"%!PS-Adobe-3.0", "application/postscript"},
      {"\xFE\xFF\x00h"s, "text/plain; charset=utf-16be"},
      {"\xFF\xFEh\x00"s, "text/plain; charset=utf-16le"},
      {"\xEF\xBB\xBFhi", "text/plain; charset=utf-8"},
      {"GIF89a....", "image/gif"},
      {"\x89PNG\r\n\x1A\n....", "image/png"},
      {"\xFF\xD8\xFF\xE0", "image/jpeg"},
      {"RIFF\x10\x00\x00\x00WEBPVP8 "s, "image/webp"},
      {"RIFF\x10\x00\x00\x00WAVEfmt "s, "audio/wave"},
      {"ID3\x04", "audio/mpeg"},
      {"OggS\x00\x02"s, "application/ogg"},
      {"\x00\x00\x00\x18" "ftypmp42\x00\x00\x00\x00mp42isom"s, "video/mp4"},
      {"\x1A\x45\xDF\xA3", "video/webm"},
      {"wOF2....", "font/woff2"},
      {"\x1F\x8B\x08\x00", "application/x-gzip"},
      {"PK\x03\x04", "application/zip"},
      {"\x00" "asm\x01\x00\x00\x00"s, "application/wasm"},
      {"{\"a\": 1}", "text/plain; charset=utf-8"},
      {"plain words\r\n", "text/plain; charset=utf-8"},
      {"\x00\x01\x02\x03"s, "application/octet-stream"},
      {"text then \x01 a control"s, "application/octet-stream"},
  };
  for (const auto& [body, type] : cases) EXPECT_EQ(sniff_content_type(body), type) << body;
}

TEST(Sniff, LooksAtTheFirst512BytesOnly) {
  EXPECT_EQ(sniff_content_type(std::string(512, 'a') + "\x00"s), "text/plain; charset=utf-8");
  EXPECT_EQ(sniff_content_type(std::string(511, 'a') + "\x00"s), "application/octet-stream");
}

}  // namespace
}  // namespace sluice::proxy::forwarding
