// Trace context parsing and the sampler, against the W3C and B3 formats and OTel's ratio rule.
#include "proxy/telemetry/trace_context.h"

#include <gtest/gtest.h>

namespace sluice::proxy::telemetry {
namespace {

TEST(TraceContext, ParsesTraceparentAndRefusesMalformedOnes) {
  auto c = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  ASSERT_TRUE(c);
  EXPECT_EQ(hex(c->trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(hex(c->parent_span_id), "00f067aa0ba902b7");
  EXPECT_TRUE(c->sampled);
  EXPECT_FALSE(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")->sampled);
  for (const char* bad : {"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
                          "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                          "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                          "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                          "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
                          "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
                          "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // Go: lower case only
                          "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-04"})  // version 00: up to 03
    EXPECT_FALSE(parse_traceparent(bad)) << bad;
  // The random bit is kept, the rest of the flags are not.
  EXPECT_EQ(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03")->flags, 3);
  EXPECT_EQ(parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-81")->flags, 1);
  EXPECT_EQ(format_traceparent(c->trace_id, c->parent_span_id, 2),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-02");
  // A later version may append fields.
  EXPECT_TRUE(parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"));
}

TEST(TraceContext, ParsesB3SingleAndMultiHeaders) {
  auto single = parse_b3("80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90");
  ASSERT_TRUE(single);
  EXPECT_EQ(hex(single->parent_span_id), "e457b5a2e4d86bd1");
  EXPECT_TRUE(single->sampled);
  auto short_id = parse_b3("a3ce929d0e0e4736-00f067aa0ba902b7-0");  // a 64-bit trace id
  ASSERT_TRUE(short_id);
  EXPECT_EQ(hex(short_id->trace_id), "0000000000000000a3ce929d0e0e4736");
  EXPECT_FALSE(short_id->sampled);

  http::request_header<> req;
  req.set("X-B3-TraceId", "4bf92f3577b34da6a3ce929d0e0e4736");
  req.set("X-B3-SpanId", "00f067aa0ba902b7");
  req.set("X-B3-Sampled", "1");
  EXPECT_FALSE(extract_parent(req, false));  // from v1.19 on queue-proxy reads W3C trace context only
  auto multi = extract_parent(req, true);
  ASSERT_TRUE(multi);
  EXPECT_TRUE(multi->sampled);
  req.set("traceparent", "00-11111111111111111111111111111111-2222222222222222-00");
  req.set("tracestate", "k=v");
  auto w3c = extract_parent(req, true);  // traceparent wins
  EXPECT_EQ(hex(w3c->trace_id), "11111111111111111111111111111111");
  EXPECT_EQ(w3c->trace_state, "k=v");
}

TEST(TraceContext, SamplingIsKnativesRateRuleWithParentBasedRatio) {
  TraceId low{}, high{};
  low[15] = 1;     // (x >> 1) == 0: sampled by any positive rate
  high.fill(0xff);  // the largest: sampled only at rate 1
  EXPECT_TRUE(ratio_samples(low, 0.0001));
  EXPECT_FALSE(ratio_samples(high, 0.9999));
  TraceContext sampled_parent{.sampled = true}, unsampled_parent{.sampled = false};
  EXPECT_TRUE(should_sample(1, unsampled_parent, high));  // >= 1: always
  EXPECT_FALSE(should_sample(0, sampled_parent, low));    // <= 0: never
  EXPECT_TRUE(should_sample(0.5, sampled_parent, high));  // the parent decides
  EXPECT_FALSE(should_sample(0.5, unsampled_parent, low));
  EXPECT_TRUE(should_sample(0.5, std::nullopt, low));  // a root: the ratio decides
  EXPECT_FALSE(should_sample(0.5, std::nullopt, high));
  EXPECT_NE(new_span_id(), new_span_id());
}

}  // namespace
}  // namespace sluice::proxy::telemetry
