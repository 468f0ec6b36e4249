// A split run's part files (run/split.h, merge_part_file): each part's ports, switches and
// pauses become one run's, as the report of a single machine would read them.
#include <gtest/gtest.h>

#include "model/partition.h"
#include "run/kinds.h"
#include "run/split.h"

using rocelab::run::merge_part_file;

TEST(SplitFiles, ACsvKeepsOneHeaderAndOrdersEveryPartsRowsByTime) {
  const std::string a = "t_s,node,port\n0.000010,leaf1,host1\n0.000030,leaf1,host1\n";
  const std::string b = "t_s,node,port\n0.000010,leaf2,host3\n0.000020,leaf2,host3\n";
  auto m = merge_part_file("series-ports.csv", {a, b});
  ASSERT_TRUE(m) << m.error().what;
  EXPECT_EQ(*m,
            "t_s,node,port\n0.000010,leaf1,host1\n0.000010,leaf2,host3\n0.000020,leaf2,host3\n0.000030,leaf1,host1\n")
      << "one time: part order";
}

TEST(SplitFiles, APartWithoutTheFileAddsNothing) {
  auto m = merge_part_file("series-switches.csv", {"", "t_s,node\n1.5,spine1\n"});
  ASSERT_TRUE(m) << m.error().what;
  EXPECT_EQ(*m, "t_s,node\n1.5,spine1\n");
}

TEST(SplitFiles, PauseEventsByTimeAndQlenUnderTheLatestTime) {
  auto p = merge_part_file("pfc.txt", {"200 1 1 3 1\n900 1 1 3 0\n", "100 4 0 1 1\n500 4 0 1 0\n"});
  ASSERT_TRUE(p) << p.error().what;
  EXPECT_EQ(*p, "100 4 0 1 1\n200 1 1 3 1\n500 4 0 1 0\n900 1 1 3 0\n");
  auto q = merge_part_file("qlen.txt", {"time: 1500\n0 1 7\n", "time: 1700\n2 3 9\n"});
  ASSERT_TRUE(q) << q.error().what;
  EXPECT_EQ(*q, "time: 1700\n0 1 7\n2 3 9\n");
}

TEST(SplitFiles, TextOfAnotherFormIsRefusedNamingThePart) {
  auto cols = merge_part_file("series-ports.csv", {"t_s,node\n1,a\n", "t_s,port\n1,b\n"});
  ASSERT_FALSE(cols);
  EXPECT_NE(cols.error().what.find("part 1's series-ports.csv"), std::string::npos) << cols.error().what;
  EXPECT_FALSE(merge_part_file("pfc.txt", {"100 1 1 3 1\n", "soon 1 1 3 1\n"}));
  EXPECT_FALSE(merge_part_file("qlen.txt", {"0 1 7\n"})) << "no time line";
}

// Which faults a part applies (run/split.h, fault_here): a port or node fault on the part that
// holds its node; a link or node fault on every part (each downs the ends it holds and
// reconverges its own switches); an MTU mismatch on a cut link refused, naming it.
TEST(SplitFaults, LinkAndNodeFaultsRunOnEveryPartOthersWhereTheirNodeIs) {
  const auto r = rocelab::run::load_scenario_text(
      "name: f\nscale: 1000\nfabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 2}\nfaults:\n"
      "  - {type: link_flap, target: 'leaf1:spine2', at: 1ms, train: [1ms]}\n"
      "  - {type: node_crash, target: host2, at: 1ms, duration: 1ms}\n"
      "  - {type: loss, target: 'host3:nic0', at: 0s, probability: 0.01}\n"
      "  - {type: mtu_mismatch, target: 'leaf1:spine2', at: 0s, mtu: 1000}\n",
      "f.yaml");
  ASSERT_TRUE(r.scenario) << (r.diags.empty() ? "" : r.diags.items()[0].format());
  const auto& s = *r.scenario;
  std::string why;
  const auto p = rocelab::model::partition(s, 2, why);
  ASSERT_TRUE(p) << why;
  for (size_t part = 0; part < 2; ++part) {
    for (size_t f = 0; f < 2; ++f) {
      const auto here = rocelab::run::fault_here(s.faults[f], f, s, *p, part);
      ASSERT_TRUE(here.ok()) << here.error().what;
      EXPECT_TRUE(*here) << s.faults[f].type << " on part " << part;
    }
    const auto loss = rocelab::run::fault_here(s.faults[2], 2, s, *p, part);
    ASSERT_TRUE(loss.ok());
    EXPECT_EQ(*loss, part == 1) << "host3 is part 1's";
    const auto mtu = rocelab::run::fault_here(s.faults[3], 3, s, *p, part);
    ASSERT_FALSE(mtu.ok());
    EXPECT_NE(mtu.error().what.find("cut between machines"), std::string::npos) << mtu.error().what;
  }
}

// A peer's fault record (run/split.h, typed_fault_record): each known field only with its
// type, so the merge's sort and the events series never throw on a part gone wrong.
TEST(SplitFaults, APeersFaultRecordKeepsOnlyTypedFields) {
  const auto good = nlohmann::ordered_json::parse(
      R"({"t_s": 0.001, "fault": 0, "type": "link_flap", "target": "leaf1:spine2", "action": "start", "ok": true,
          "parameters": {"train_s": [0.001]}})");
  EXPECT_EQ(rocelab::run::typed_fault_record(good), good) << "a record as the timeline writes it passes whole";
  const auto bad = nlohmann::ordered_json::parse(
      R"({"t_s": "soon", "fault": 1.5, "type": 7, "target": "x", "action": ["start"], "ok": "yes", "error": {},
          "extra": 1, "parameters": []})");
  EXPECT_EQ(rocelab::run::typed_fault_record(bad), nlohmann::ordered_json::parse(R"({"target": "x"})"));
}
