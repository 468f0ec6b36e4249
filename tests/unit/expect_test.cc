#include <gtest/gtest.h>

#include "model/expect.h"

using namespace rocelab::model;

namespace {
MetricSet sample_metrics() {
  MetricSet m;
  m["links"] = MetricValue{MetricKind::kScalar, 12, {}};
  m["hosts"] = MetricValue{MetricKind::kScalar, 4, {}};
  MetricValue rates{MetricKind::kSeries, 0, {}};
  rates.samples.push_back({{{"tier", "host"}}, 100e9});
  rates.samples.push_back({{{"tier", "host"}}, 200e9});
  rates.samples.push_back({{{"tier", "fabric"}}, 400e9});
  m["link_rate"] = rates;
  MetricValue drops{MetricKind::kCounter, 0, {}};
  drops.samples.push_back({{{"node", "leaf1"}, {"port", "host1"}, {"prio", "0"}, {"reason", "queue_full"}}, 5});
  drops.samples.push_back({{{"node", "leaf1"}, {"port", "spine1"}, {"prio", "0"}, {"reason", "wred"}}, 2});
  drops.samples.push_back({{{"node", "leaf2"}, {"port", "host3"}, {"prio", "3"}, {"reason", "headroom"}}, 1});
  m["drops"] = drops;
  return m;
}

Evaluation::Outcome eval(const std::string& text) {
  auto p = parse_expression(text);
  EXPECT_FALSE(p.error) << text << ": " << (p.error ? p.error->message : "");
  if (p.error) return Evaluation::Outcome::kError;
  return evaluate(*p.root, sample_metrics()).outcome;
}
}  // namespace

TEST(Expect, ComparisonsArithmeticAndLogic) {
  EXPECT_EQ(eval("links == 12"), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("links != 12"), Evaluation::Outcome::kFail);
  EXPECT_EQ(eval("links >= 3 * hosts"), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("links / hosts < 2"), Evaluation::Outcome::kFail);
  EXPECT_EQ(eval("-links + 13 == 1"), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("links == 12 && hosts == 5"), Evaluation::Outcome::kFail);
  EXPECT_EQ(eval("links == 12 or hosts == 5"), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("not (hosts == 5)"), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("!(hosts == 4)"), Evaluation::Outcome::kFail);
}

TEST(Expect, SeriesAggregatesLabelsAndUnits) {
  EXPECT_EQ(eval("min(link_rate) == 100G"), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("max(link_rate(tier=host)) == 200Gbit/s"), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("count(link_rate(tier=fabric)) == 1"), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("sum(link_rate) == 700G"), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("avg(link_rate) >= 0.9 * 233G"), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("p50(link_rate) == 200G"), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("pct(link_rate, 100) == 400G"), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("min(link_rate(tier=host)) >= 95% * 200G"), Evaluation::Outcome::kFail);
}

// A counter stands alone as the sum of the samples its labels select, and aggregates too.
TEST(Expect, CountersSumWhatTheirLabelsSelect) {
  EXPECT_EQ(eval("drops == 8"), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("drops(prio=0) == 7"), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("drops(prio=3) == 0"), Evaluation::Outcome::kFail);
  EXPECT_EQ(eval("drops(prio=3, reason=headroom) == 1"), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("drops(node=spine9) == 0"), Evaluation::Outcome::kPass);  // nothing counted there
  EXPECT_EQ(eval("max(drops) == 5 && count(drops(prio=0)) == 2"), Evaluation::Outcome::kPass);
  auto bad = parse_expression("drops(queue=3) == 0");
  ASSERT_TRUE(bad.error);
  EXPECT_NE(bad.error->message.find("labels: node, port, prio, reason"), std::string::npos) << bad.error->message;
}

TEST(Expect, UnitsConvertToBaseUnits) {
  auto p = parse_expression("links < 200ms");
  ASSERT_FALSE(p.error);
  EXPECT_DOUBLE_EQ(p.root->args[1]->number, 0.2);
  p = parse_expression("links < 128KB");
  ASSERT_FALSE(p.error);
  EXPECT_DOUBLE_EQ(p.root->args[1]->number, 131072);
}

TEST(Expect, ErrorsSayWhereAndWhy) {
  struct Case {
    const char* text;
    bool unknown_metric;
    size_t offset;
    const char* fragment;
  };
  const Case cases[] = {
      {"lossless_dorps == 0", true, 0, "unknown metric 'lossless_dorps'"},
      {"linkz == 3", true, 0, "did you mean 'links'"},
      {"links >= ", false, 9, "ends early"},
      {"link_rate > 3", false, 0, "is a series"},
      {"min(links) > 3", false, 4, "takes a series"},
      {"links", false, 0, "must be a comparison"},
      {"links == 1 == 1", false, 11, "chained comparison"},
      {"link_rate(prio=3) > 1", false, 10, "has no label 'prio'"},
      {"links > 3 furlongs", false, 10, "unexpected"},
      {"links > 3Q", false, 9, "unknown unit"},
      {"(links > 3", false, 10, "expected ')'"},
      {"", false, 0, "empty"},
  };
  for (const auto& c : cases) {
    auto p = parse_expression(c.text);
    ASSERT_TRUE(p.error) << c.text;
    EXPECT_EQ(p.error->unknown_metric, c.unknown_metric) << c.text;
    EXPECT_EQ(p.error->offset, c.offset) << c.text << ": " << p.error->message;
    EXPECT_NE(p.error->message.find(c.fragment), std::string::npos) << c.text << ": " << p.error->message;
  }
}

TEST(Expect, MissingMetricOrEmptySeriesIsUndecidedNotPassed) {
  auto p = parse_expression("run_seconds < 10s");
  ASSERT_FALSE(p.error);
  auto e = evaluate(*p.root, sample_metrics());
  EXPECT_EQ(e.outcome, Evaluation::Outcome::kError);
  EXPECT_NE(e.error.find("not produced"), std::string::npos);
  p = parse_expression("min(link_rate(tier=spine)) > 0");
  ASSERT_FALSE(p.error);
  e = evaluate(*p.root, sample_metrics());
  EXPECT_EQ(e.outcome, Evaluation::Outcome::kError);
  EXPECT_NE(e.error.find("no samples"), std::string::npos);
}

TEST(Expect, ObservedValuesAreReported) {
  auto p = parse_expression("min(link_rate) >= 150G && links == 12");
  ASSERT_FALSE(p.error);
  auto e = evaluate(*p.root, sample_metrics());
  EXPECT_EQ(e.outcome, Evaluation::Outcome::kFail);
  ASSERT_EQ(e.observed.size(), 1u);  // && stops at the first false term
  EXPECT_EQ(e.observed[0].first, "min(link_rate)");
  EXPECT_DOUBLE_EQ(e.observed[0].second, 100e9);
}

// Hostile assertions (issue 17): deep nesting once overflowed the stack, a long chain of
// unary minus took gigabytes, and a constant divisor of 0 validated.
TEST(Expect, HostileAssertionsAreRefusedNotCrashedOn) {
  const std::string deep_parens = std::string(6400, '(') + "links > 1" + std::string(6400, ')');
  const std::string bangs = std::string(43500, '!') + "(links > 1)";
  const std::string minus = "links > " + std::string(100000, '-') + "1";
  std::string long_sum = "links > 1";
  while (long_sum.size() < 5000) long_sum += " + 1";
  const struct {
    std::string text;
    const char* fragment;
  } cases[] = {
      {deep_parens, "longer than 4096"},
      {std::string(100, '(') + "links > 1" + std::string(100, ')'), "nested more than 64"},
      {std::string(100, '!') + "(links > 1)", "nested more than 64"},
      {bangs, "longer than 4096"},
      {"links > " + std::string(100, '-') + "1", "nested more than 64"},
      {minus, "longer than 4096"},
      {long_sum, "longer than 4096"},
      {"hosts > 1 / 0", "division by zero"},
      {"hosts > 1 / (2 - 2 * 1)", "division by zero"},
      {"max(" + std::string(70, '(') + "link_rate" + std::string(70, ')') + ") > 1", "nested more than 64"},
  };
  for (const auto& c : cases) {
    auto p = parse_expression(c.text);
    ASSERT_TRUE(p.error) << c.text.substr(0, 40);
    EXPECT_NE(p.error->message.find(c.fragment), std::string::npos) << p.error->message;
  }
  // Within the bounds, nesting and a metric divisor still work: 0 there is undecided at run time.
  EXPECT_EQ(eval(std::string(60, '(') + "links > 1" + std::string(60, ')')), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("links / hosts == 3"), Evaluation::Outcome::kPass);
  EXPECT_EQ(eval("- - links < 13"), Evaluation::Outcome::kPass);
}
