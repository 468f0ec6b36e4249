// model/sonic: a scenario's qos exported as CONFIG_DB tables imports back to the same qos,
// whatever the profile; the tests/integration/sonic_test.py fixture covers a real file.
#include "model/sonic.h"

#include <gtest/gtest.h>

#include "test_util.h"

using namespace rocelab;
using namespace rocelab::testing;

namespace {

const char* kFabric = "name: s\nscale: 1000\nfabric: {type: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 2}\n";

// The scenario's qos, exported and imported, loaded again: what it resolves to.
model::Qos round_trip(const std::string& qos_yaml, std::vector<std::string>& unmapped) {
  const auto s = must_load(std::string(kFabric) + qos_yaml);
  const std::string db = model::export_sonic(s.qos, {"Ethernet0", "Ethernet4"}, 8400);
  std::string why;
  auto imp = model::import_sonic(db, why);
  EXPECT_TRUE(imp) << why;
  if (!imp) return {};
  unmapped = imp->unmapped;
  return must_load(std::string(kFabric) + imp->yaml).qos;
}

}  // namespace

TEST(Sonic, ALosslessProfileComesBackWithItsThresholdsCurveMapAndWatchdog) {
  std::vector<std::string> unmapped;
  const auto q = round_trip(
      "qos: {lossless: [3, 4], dscp_map: {26: 3, 34: 4}, ecn: {kmin: 20KB, kmax: 200KB, pmax: 0.2},\n"
      "      pfc: {xoff: 96KB, xon: 80KB, priorities: [3, 4], watchdog: {detection_time: 400ms, action: forward}},\n"
      "      buffer: {size: 8MB, dynamic_th: 2}}\n",
      unmapped);
  EXPECT_TRUE(unmapped.empty()) << unmapped.front();
  EXPECT_EQ(q.pfc_mask, (1u << 3) | (1u << 4));
  EXPECT_EQ(q.lossless_mask, (1u << 3) | (1u << 4));
  EXPECT_EQ(q.pfc.xoff.n, 96u * 1024);
  ASSERT_TRUE(q.pfc.xon && q.pfc.headroom);
  EXPECT_EQ(q.pfc.xon->n, 80u * 1024);
  EXPECT_EQ(q.pfc.headroom->n, 8400u);
  EXPECT_TRUE(q.ecn.enabled);
  EXPECT_EQ(q.ecn.kmin.n, 20u * 1024);
  EXPECT_EQ(q.ecn.kmax.n, 200u * 1024);
  EXPECT_DOUBLE_EQ(q.ecn.pmax, 0.2);
  EXPECT_EQ(q.dscp_to_prio[26], 3);
  EXPECT_EQ(q.dscp_to_prio[34], 4);
  EXPECT_EQ(q.dscp_to_prio[48], 6);  // the default map's CNP range, exported with the rest
  EXPECT_EQ(q.buffer.size.n, 8u << 20);
  EXPECT_EQ(q.buffer.dynamic_th, 2);
  ASSERT_TRUE(q.pfc.watchdog.enabled && q.pfc.watchdog.detection);
  EXPECT_EQ(q.pfc.watchdog.detection->ns, 400'000'000);
  EXPECT_EQ(q.pfc.watchdog.action, model::WdAction::kForward);
}

TEST(Sonic, ALossyFabricWithoutEcnStaysSo) {
  std::vector<std::string> unmapped;
  const auto q = round_trip("qos: {profile: lossy}\n", unmapped);
  EXPECT_FALSE(q.pfc_enabled);
  EXPECT_EQ(q.lossless_mask, 0u);
  EXPECT_FALSE(q.ecn.enabled);
  EXPECT_FALSE(q.pfc.watchdog.enabled);
}
