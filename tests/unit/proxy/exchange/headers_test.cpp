#include "proxy/exchange/headers.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

namespace sluice::proxy {
namespace {

TEST(ForwardedNode, LeavesIPv4AsItIs) { EXPECT_EQ(forwarded_node("10.1.2.3"), "10.1.2.3"); }

TEST(ForwardedNode, QuotesAndBracketsIPv6) {
  EXPECT_EQ(forwarded_node("::1"), "\"[::1]\"");
  EXPECT_EQ(forwarded_node("2001:db8::7"), "\"[2001:db8::7]\"");
}

TEST(ForwardedNode, QuotesAlreadyBracketedIPv6WithoutDoubleBrackets) {
  EXPECT_EQ(forwarded_node("[2001:db8::7]:4711"), "\"[2001:db8::7]:4711\"");
}

TEST(ForwardedFromXForwarded, NothingWhenNoXForwardedHeaders) {
  EXPECT_EQ(forwarded_from_x_forwarded("", "", ""), "");
}

TEST(ForwardedFromXForwarded, FirstElementCarriesForHostAndProto) {
  EXPECT_EQ(forwarded_from_x_forwarded("1.1.1.1", "example.com", "https"),
            "for=1.1.1.1;host=example.com;proto=https");
}

TEST(ForwardedFromXForwarded, EachFurtherNodeIsItsOwnElement) {
  EXPECT_EQ(forwarded_from_x_forwarded("1.1.1.1, 2.2.2.2,3.3.3.3", "", "http"),
            "for=1.1.1.1;proto=http, for=2.2.2.2, for=3.3.3.3");
}

TEST(ForwardedFromXForwarded, IPv6NodesAreQuotedAndBracketed) {
  EXPECT_EQ(forwarded_from_x_forwarded("2001:db8:cafe::17, 1.2.3.4", "", ""),
            "for=\"[2001:db8:cafe::17]\", for=1.2.3.4");
}

TEST(ForwardedFromXForwarded, HostOrProtoAloneMakeOneElement) {
  EXPECT_EQ(forwarded_from_x_forwarded("", "a.example", ""), "host=a.example");
  EXPECT_EQ(forwarded_from_x_forwarded("", "", "https"), "proto=https");
}

TEST(ForwardedHop, AppendsThisHopAfterExistingElements) {
  std::string f = "for=1.1.1.1;proto=https";
  append_forwarded_hop(f, "127.0.0.1", "http");
  EXPECT_EQ(f, "for=1.1.1.1;proto=https, for=127.0.0.1;proto=http");
}

TEST(ForwardedHop, StartsTheHeaderWhenThereIsNone) {
  std::string f;
  append_forwarded_hop(f, "::1", "https");
  EXPECT_EQ(f, "for=\"[::1]\";proto=https");
}

TEST(XForwardedFor, ChainsPeers) {
  std::string xff;
  append_x_forwarded_for(xff, "1.2.3.4");
  EXPECT_EQ(xff, "1.2.3.4");
  append_x_forwarded_for(xff, "::1");
  EXPECT_EQ(xff, "1.2.3.4, ::1");
}

TEST(HopByHop, RecognisesConnectionSpecificFieldsInAnyCase) {
  for (auto name : {"Connection", "keep-alive", "PROXY-CONNECTION", "Transfer-Encoding", "TE",
                    "Upgrade", "Proxy-Authorization"})
    EXPECT_TRUE(is_hop_by_hop(name)) << name;
  for (auto name : {"Host", "Trailer", "traceparent", "X-Forwarded-For", "Content-Length"})
    EXPECT_FALSE(is_hop_by_hop(name)) << name;
}

TEST(ConnectionTokens, FindsListedFieldNames) {
  EXPECT_TRUE(listed_in_connection("keep-alive, X-Secret , upgrade", "x-secret"));
  EXPECT_TRUE(listed_in_connection("Upgrade", "upgrade"));
  EXPECT_FALSE(listed_in_connection("keep-alive, X-Secret-2", "x-secret"));
  EXPECT_FALSE(listed_in_connection("", "x"));
}

TEST(RequestId, IsAVersion4Uuid) {
  RequestIdGenerator gen(42);
  std::regex uuid4("^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$");
  for (int i = 0; i < 100; ++i) {
    auto id = gen.next();
    EXPECT_TRUE(std::regex_match(id, uuid4)) << id;
  }
}

TEST(RequestId, DoesNotRepeat) {
  RequestIdGenerator gen(7);
  std::set<std::string> seen;
  for (int i = 0; i < 10000; ++i) EXPECT_TRUE(seen.insert(gen.next()).second);
}

}  // namespace
}  // namespace sluice::proxy
