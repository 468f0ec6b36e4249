#include <gtest/gtest.h>

#include "model/port_target.h"
#include "model/units.h"

using namespace rocelab::model;

TEST(Units, RatesParseExactlyInBitsPerSecond) {
  EXPECT_EQ(parse_rate("100G").value->bps, 100000000000ULL);
  EXPECT_EQ(parse_rate("25Gbit/s").value->bps, 25000000000ULL);
  EXPECT_EQ(parse_rate("400Mbps").value->bps, 400000000ULL);
  EXPECT_EQ(parse_rate("1.1G").value->bps, 1100000000ULL);  // exact, no float rounding
  EXPECT_EQ(parse_rate("40 Mb/s").value->bps, 40000000ULL);
  EXPECT_EQ(parse_rate("12345").value->bps, 12345ULL);
  EXPECT_EQ(parse_rate("1.6T").value->bps, 1600000000000ULL);
  EXPECT_EQ(parse_rate("2e9").value->bps, 2000000000ULL);
}

TEST(Units, RatesRejectBytesAndFractionsOfABit) {
  EXPECT_FALSE(parse_rate("100GB"));
  EXPECT_NE(parse_rate("100GB/s").error.find("not bytes"), std::string::npos);
  EXPECT_FALSE(parse_rate("0.5"));
  EXPECT_FALSE(parse_rate("-1G"));
  EXPECT_FALSE(parse_rate("fast"));
  EXPECT_FALSE(parse_rate("10Q"));
}

TEST(Units, KBIsKiBAndkBIsSI) {
  EXPECT_EQ(parse_bytes("128KB").value->n, 128u * 1024);
  EXPECT_EQ(parse_bytes("128KiB").value->n, 128u * 1024);
  EXPECT_EQ(parse_bytes("128kB").value->n, 128000u);
  EXPECT_EQ(parse_bytes("16MB").value->n, 16u * 1024 * 1024);
  EXPECT_EQ(parse_bytes("1500").value->n, 1500u);
  EXPECT_EQ(parse_bytes("1500B").value->n, 1500u);
  EXPECT_EQ(parse_bytes("1.5KB").value->n, 1536u);
  EXPECT_FALSE(parse_bytes("128kb"));  // ambiguous: kilobit or kilobyte?
  EXPECT_NE(parse_bytes("128kb").error.find("ambiguous"), std::string::npos);
  EXPECT_FALSE(parse_bytes("0.3B"));
}

TEST(Units, TimesNeedAUnit) {
  EXPECT_EQ(parse_duration("55us").value->ns, 55000);
  EXPECT_EQ(parse_duration("55\xC2\xB5s").value->ns, 55000);
  EXPECT_EQ(parse_duration("200ms").value->ns, 200000000);
  EXPECT_EQ(parse_duration("1.5s").value->ns, 1500000000);
  EXPECT_EQ(parse_duration("4ns").value->ns, 4);
  EXPECT_FALSE(parse_duration("200"));
  EXPECT_FALSE(parse_duration("0.5ns"));
  EXPECT_FALSE(parse_duration("3min"));
}

TEST(Units, FormattingIsLossless) {
  for (uint64_t v : {100000000000ULL, 1500000000ULL, 12345ULL, 40000000ULL, 1ULL, 0ULL, 999999999999ULL})
    EXPECT_EQ(parse_rate(format_rate(Rate{v})).value->bps, v) << v;
  for (uint64_t v : {131072ULL, 16777216ULL, 1000ULL, 1500ULL, 0ULL, 3ULL << 30})
    EXPECT_EQ(parse_bytes(format_bytes(Bytes{v})).value->n, v) << v;
  for (int64_t v : {55000LL, 200000000LL, 1500LL, 1LL, 0LL, 3600LL * 1000000000})
    EXPECT_EQ(parse_duration(format_duration(Duration{v})).value->ns, v) << v;
  EXPECT_EQ(format_rate(Rate{100000000000ULL}), "100Gbit/s");
  EXPECT_EQ(format_bytes(Bytes{128 * 1024}), "128KiB");
  EXPECT_EQ(format_duration(Duration{55000}), "55us");
}

TEST(Units, TimeScaleDividesRatesMultipliesTimesKeepsBytes) {
  TimeScale d(1000);
  EXPECT_EQ(d.emulate(Rate{100000000000ULL}).bps, 100000000ULL);  // 100G -> 100M
  EXPECT_EQ(d.emulate(Rate{40000000ULL}).bps, 40000ULL);          // R_AI 40M -> 40k
  EXPECT_EQ(d.emulate(Duration{55000}).ns, 55000000);             // 55us -> 55ms
  EXPECT_EQ(d.emulate(Bytes{128 * 1024}).n, 128u * 1024);         // XOFF unchanged
  // rate x time is invariant, so the bytes a link carries in a window do not change.
  Rate r{100000000000ULL};
  Duration t{1000};
  double physical = static_cast<double>(r.bps) * static_cast<double>(t.ns);
  double emulated = static_cast<double>(d.emulate(r).bps) * static_cast<double>(d.emulate(t).ns);
  EXPECT_DOUBLE_EQ(physical, emulated);
}

// "NODE" or "NODE:PORT" (and a workload end's "HOST:gpuN"), split at the first ':' in the one
// place every layer uses.
TEST(PortTarget, SplitsANodeFromItsPortAtTheFirstColon) {
  const auto node = PortTarget::parse("leaf1");
  EXPECT_EQ(node.node, "leaf1");
  EXPECT_FALSE(node.is_port());
  EXPECT_EQ(node.port_or_empty(), "");
  EXPECT_EQ(node.text(), "leaf1");
  const auto port = PortTarget::parse("leaf1:spine2");
  EXPECT_EQ(port.node, "leaf1");
  ASSERT_TRUE(port.is_port());
  EXPECT_EQ(*port.port, "spine2");
  EXPECT_EQ(port.text(), "leaf1:spine2");
  const auto odd = PortTarget::parse("h1:a:b");  // no port is named so: the rest is the port's, to be refused there
  EXPECT_EQ(odd.node, "h1");
  EXPECT_EQ(odd.port_or_empty(), "a:b");
  const auto empty = PortTarget::parse("h1:");
  EXPECT_TRUE(empty.is_port());
  EXPECT_EQ(empty.port_or_empty(), "");
}
