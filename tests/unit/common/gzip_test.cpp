// gzip of a scrape, and promhttp's choice of it from Accept-Encoding.
#include "common/gzip.h"

#include <gtest/gtest.h>
#include <zlib.h>

namespace sluice::net {
namespace {

std::string gunzip(const std::string& packed) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::string out(1 << 20, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
  z.avail_in = static_cast<uInt>(packed.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  inflateEnd(&z);
  return out;
}

TEST(Gzip, RoundTrips) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "http_server_request_duration_seconds_bucket{le=\"" + std::to_string(i) + "\"} 1\n";
  auto packed = gzip(text);
  ASSERT_TRUE(packed);
  EXPECT_EQ(packed->substr(0, 2), "\x1f\x8b");
  EXPECT_LT(packed->size(), text.size() / 4);
  EXPECT_EQ(gunzip(*packed), text);
  EXPECT_EQ(gunzip(*gzip("")), "");
}

TEST(Gzip, ChosenAsPromhttpNegotiatesIt) {
  EXPECT_TRUE(prefers_gzip("gzip"));  // what Prometheus sends
  EXPECT_TRUE(prefers_gzip("deflate, gzip;q=0.8"));
  EXPECT_TRUE(prefers_gzip("identity;q=0.5, GZIP"));
  EXPECT_FALSE(prefers_gzip(""));
  EXPECT_FALSE(prefers_gzip("gzip, identity"));  // a tie goes to identity, offered first
  EXPECT_FALSE(prefers_gzip("*"));
  EXPECT_FALSE(prefers_gzip("gzip;q=0"));
  EXPECT_FALSE(prefers_gzip("br"));
}

}  // namespace
}  // namespace sluice::net
