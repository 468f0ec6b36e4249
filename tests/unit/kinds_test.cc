// Workload kinds (pure generators) and the load-time check of every kind a scenario names.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "fabric/kernel_plan.h"
#include "fabric/realiser.h"
#include "run/kinds.h"
#include "test_util.h"
#include "workload/backend.h"
#include "workload/kinds.h"

namespace rocelab {
namespace {

constexpr const char* kLeafSpine =
    "name: k\nscale: 1000\nseed: 3\nfabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 3}\n";

std::vector<std::string> errors(const std::string& yaml) {
  auto r = run::load_scenario_text(yaml, "k.yaml");
  std::vector<std::string> out;
  for (const auto& d : r.diags.sorted()) out.push_back(d.format());
  return out;
}

struct Planned {
  model::Scenario s;
  fabric::KernelPlan plan;
  std::unique_ptr<workload::Ranks> ranks;
  std::vector<workload::JobSpec> jobs;
};

Planned plan_of(const std::string& yaml) {
  Planned p{testing::must_load(yaml), {}, nullptr, {}};
  p.plan = fabric::plan_kernel(p.s);
  p.ranks = std::make_unique<workload::Ranks>(p.plan);
  auto j = workload::plan_jobs(p.s, *p.ranks);
  EXPECT_TRUE(j) << j.error().what;
  if (j) p.jobs = *j;
  return p;
}

TEST(WorkloadKinds, IncastSendsFromEveryOtherHostToOne) {
  auto p = plan_of(std::string(kLeafSpine) + "workloads:\n  - {type: incast, to: host4, qps: 2, iterations: 3}\n");
  ASSERT_EQ(p.jobs.size(), 1u);
  const auto& j = p.jobs[0];
  EXPECT_FALSE(j.lockstep);
  ASSERT_EQ(j.flows.size(), 5u);
  for (const auto& f : j.flows) {
    EXPECT_EQ(p.ranks->label(f.dst), "host4");
    EXPECT_NE(p.ranks->label(f.src), "host4");
    EXPECT_EQ(f.qps, 2);
    EXPECT_EQ(f.per_qp, 3u);
  }
}

TEST(WorkloadKinds, PermutationIsADerangementAcrossHostsAndTheSameForTheSameSeed) {
  const std::string y = std::string(kLeafSpine) + "workloads:\n  - {type: permutation}\n";
  auto a = plan_of(y), b = plan_of(y);
  std::set<size_t> srcs, dsts;
  ASSERT_EQ(a.jobs[0].flows.size(), 6u);
  for (size_t i = 0; i < a.jobs[0].flows.size(); ++i) {
    const auto& f = a.jobs[0].flows[i];
    EXPECT_TRUE(a.ranks->apart(f.src, f.dst));
    srcs.insert(f.src);
    dsts.insert(f.dst);
    EXPECT_EQ(f.dst, b.jobs[0].flows[i].dst) << "same seed, same permutation";
  }
  EXPECT_EQ(srcs.size(), 6u);
  EXPECT_EQ(dsts.size(), 6u);
}

TEST(WorkloadKinds, AllreduceRingKeepsEdgesInsideALeafWherePossible) {
  auto p = plan_of(std::string(kLeafSpine) + "workloads:\n  - {type: allreduce, message: 6MB, iterations: 2}\n");
  const auto& j = p.jobs[0];
  EXPECT_TRUE(j.lockstep);
  EXPECT_EQ(j.steps_per_op, 10u);  // 2 (H - 1), H = 6
  EXPECT_EQ(j.rounds, 20u);
  ASSERT_EQ(j.flows.size(), 6u);
  size_t across = 0;  // ring edges between hosts of different leaves
  for (const auto& f : j.flows) across += p.ranks->nic(f.src).peer_node != p.ranks->nic(f.dst).peer_node;
  EXPECT_EQ(across, 2u);
  EXPECT_EQ(j.flows[0].message, 1u << 20);  // 6 MB / 6 hosts
}

TEST(WorkloadKinds, AlltoallSendsAShareToEveryOtherRankInLockStep) {
  auto p = plan_of(std::string(kLeafSpine) + "workloads:\n  - {type: alltoall, message: 6MB}\n");
  const auto& j = p.jobs[0];
  EXPECT_TRUE(j.lockstep);
  EXPECT_EQ(j.flows.size(), 30u);  // 6 x 5
  EXPECT_EQ(j.ranks, 6u);
}

TEST(Kinds, EveryBuiltKindIsFoundByItsTypeString) {
  for (const auto& k : workload::kinds().all()) EXPECT_EQ(workload::kinds().find(k.type), &k);
  EXPECT_EQ(workload::kinds().find("allreduse"), nullptr);
  EXPECT_NE(workload::backends().find("builtin"), nullptr);
  EXPECT_NE(workload::backends().find("rxe"), nullptr);
  EXPECT_EQ(workload::backends().find("mlx5"), nullptr);
}

TEST(Kinds, ABackendOrSectionNotBuiltIsAnErrorThatListsWhatIs) {
  auto e = errors(std::string(kLeafSpine) + "hosts: {engine: mlx5}\ncapture: {ports: [leaf1]}\n");
  ASSERT_EQ(e.size(), 1u);  // capture is built
  EXPECT_EQ(e[0], "k.yaml:5:17: hosts.engine: 'mlx5' is not built in this rocelab (built: builtin, rxe)");
}

// Issue 34: every captured port pins a 32 MiB kernel ring; `ports: all` on a k = 4 fat-tree
// (96 ports, 3 GiB) is refused at load with the sums, a few named ports are not.
TEST(Kinds, ACaptureBeyondItsBudgetIsRefusedWithTheSums) {
  auto e = errors("name: k\nscale: 1000\nfabric: {type: fat-tree, k: 4}\ncapture: {ports: all}\n");
  ASSERT_EQ(e.size(), 1u) << ::testing::PrintToString(e);
  EXPECT_NE(e[0].find("capture: 96 ports x 32MiB of kernel ring each = 3GiB, over the budget of 512MiB"),
            std::string::npos) << e[0];
  EXPECT_TRUE(errors(std::string(kLeafSpine) + "capture: {ports: [leaf1, 'spine1:leaf1']}\n").empty());
  auto d = errors(std::string(kLeafSpine) + "capture: {ports: [leaf1, leaf2], size: 2GB}\n");
  ASSERT_EQ(d.size(), 1u) << ::testing::PrintToString(d);
  EXPECT_NE(d[0].find("of files, over the budget of 8GiB"), std::string::npos) << d[0];
}

TEST(Kinds, EachKindChecksItsOwnKeys) {
  auto e = errors(std::string(kLeafSpine) +
                  "workloads:\n"
                  "  - {name: a, type: write_bw, from: host1, to: host2, ring: as_listed}\n"
                  "  - {name: b, type: latency, to: host1}\n"
                  "  - {name: c, type: incast, to: host1, hosts: [host1]}\n");
  ASSERT_EQ(e.size(), 3u) << ::testing::PrintToString(e);
  EXPECT_NE(e[0].find("workloads.a: 'ring' does not apply to a write_bw"), std::string::npos) << e[0];
  EXPECT_NE(e[1].find("workloads.b: a latency needs 'from'"), std::string::npos) << e[1];
  EXPECT_NE(e[2].find("workloads.c: incast needs at least 2 hosts"), std::string::npos) << e[2];
}

TEST(Kinds, AWorkloadBetweenPartsNoLinkJoinsHasNoPath) {
  // Isolated rails: GPU 0 of host1 and GPU 1 of host2 sit on rails with no spine between.
  auto e = errors("name: r\nscale: 1000\nfabric: {type: rail-optimized, rails: 2, hosts: 2, spines: 0}\n"
                  "workloads:\n  - {name: x, type: write_bw, from: host1, to: 'host2:gpu1'}\n"
                  "  - {name: ok, type: write_bw, from: 'host1:gpu1', to: 'host2:gpu1'}\n");
  ASSERT_EQ(e.size(), 1u) << ::testing::PrintToString(e);
  EXPECT_NE(e[0].find("workloads.x: no path from host1:gpu0"), std::string::npos) << e[0];
}

TEST(Kinds, AFaultTypeNotBuiltSaysWhichAre) {
  auto e = errors(std::string(kLeafSpine) + "faults:\n  - {type: los, target: 'leaf1:spine1', at: 0s, probability: 0.1}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("fault type 'los' is not built in this rocelab (did you mean 'loss'?) (built: loss, corruption, link_down, link_flap, node_crash, pfc_off, ecn_off, dscp_remap, slow_receiver, mtu_mismatch, pause_storm)"),
            std::string::npos)
      << e[0];
}

// The link kinds (issue 37): one registry, each kind its own state-file record, read back
// for `status` as what each end reaches.
TEST(LinkKinds, EachKindHasItsOwnRecordAndSaysWhatItsEndsReach) {
  std::map<std::string, const fabric::Fabric::LinkKind*> by_type;
  std::set<std::string> records;
  for (const auto& k : fabric::Fabric::link_kinds()) {
    by_type[k.type] = &k;
    EXPECT_TRUE(records.insert(k.record).second) << k.record;
    EXPECT_NE(k.make, nullptr) << k.type;
    EXPECT_FALSE(k.summary.empty()) << k.type;
  }
  ASSERT_EQ(by_type.size(), 3u);
  ASSERT_TRUE(by_type.count("veth") && by_type.count("delayed") && by_type.count("vxlan"));
  EXPECT_EQ(by_type["veth"]->configure, nullptr);
  EXPECT_NE(by_type["delayed"]->configure, nullptr);  // netem and the wire program, after the nodes
  const std::map<std::string, std::string> node_of{{"", "host1"}, {"rl-k.leaf1", "leaf1"}};
  fabric::Fabric::LinkKind::Peers peers;
  by_type["veth"]->peers({"-", "eth0", "rl-k.leaf1", "swp1"}, node_of, peers);  // "-": the machine's own namespace
  EXPECT_EQ(peers[""]["eth0"], "leaf1:swp1");
  EXPECT_EQ(peers["rl-k.leaf1"]["swp1"], "host1:eth0");
  by_type["vxlan"]->peers({"rl-k.leaf1", "swp3", "spine2:swp1", "10.9.0.2"}, node_of, peers);
  EXPECT_EQ(peers["rl-k.leaf1"]["swp3"], "spine2:swp1 (VXLAN to 10.9.0.2)");
}

}  // namespace
}  // namespace rocelab
