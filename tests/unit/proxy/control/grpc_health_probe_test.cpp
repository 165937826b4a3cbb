// grpc.health.v1's messages as the readiness probe encodes and decodes them by hand.
#include "proxy/control/grpc_health_probe.h"

#include <gtest/gtest.h>

namespace sluice::proxy {
namespace {

using namespace std::string_literals;

TEST(GrpcHealthMessages, RequestCarriesTheServiceNameAsField1) {
  EXPECT_EQ(encode_health_check_request(""), "");  // proto3 leaves the default out
  EXPECT_EQ(encode_health_check_request("app"), "\x0a\x03" "app"s);
  const std::string long_name(200, 's');  // a two-byte length
  EXPECT_EQ(encode_health_check_request(long_name), "\x0a\xc8\x01"s + long_name);
}

TEST(GrpcHealthMessages, ResponseStatusIsField1AndUnknownFieldsAreSkipped) {
  EXPECT_EQ(decode_health_check_status(""), 0u);  // UNKNOWN, left out
  EXPECT_EQ(decode_health_check_status("\x08\x01"s), kHealthServing);
  EXPECT_EQ(decode_health_check_status("\x08\x02"s), 2u);  // NOT_SERVING
  EXPECT_EQ(decode_health_check_status("\x08\x03"s), 3u);  // SERVICE_UNKNOWN
  // A newer server's extra fields: varint, fixed64, length-delimited, fixed32; the last status wins.
  EXPECT_EQ(decode_health_check_status("\x10\x05\x08\x02\x19" "12345678" "\x22\x02xy\x2d" "abcd\x08\x01"s),
            kHealthServing);
}

TEST(GrpcHealthMessages, BytesThatAreNotAMessageAreRejected) {
  EXPECT_FALSE(decode_health_check_status("\x08"s));               // a varint cut short
  EXPECT_FALSE(decode_health_check_status("\x08\x80"s));           // likewise
  EXPECT_FALSE(decode_health_check_status("\x12\x05" "ab"s));      // a length past the end
  EXPECT_FALSE(decode_health_check_status("\x0b\x01"s));           // wire type 3 (groups)
  EXPECT_FALSE(decode_health_check_status("\x19" "1234"s));        // a fixed64 cut short
}

}  // namespace
}  // namespace sluice::proxy
