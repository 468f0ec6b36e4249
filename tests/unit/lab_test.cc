// The lab track (issue 35): every lab in the repository loads, its objectives parse as expect:
// assertions, its solution's --set entries apply to its starting file and the result
// validates; a broken lab.yaml is refused with the file, the line and the reason.
#include "model/lab.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/loader.h"
#include "model/overrides.h"

using namespace rocelab::model;
namespace fs = std::filesystem;

namespace {

const std::string kLabs = std::string(ROCELAB_SOURCE_DIR) + "/labs";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class LabDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rocelab-lab-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  // A lab folder with `lab` as its lab.yaml and a small valid starting scenario.
  std::string make(const std::string& folder, const std::string& lab) {
    const std::string dir = root_ + "/" + folder;
    fs::create_directories(dir);
    std::ofstream(dir + "/lab.yaml") << lab;
    std::ofstream(dir + "/scenario.yaml")
        << "name: l\nscale: 1000\nfabric: {type: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 2}\n";
    return dir;
  }
  std::string root_;
};

const char* kGood =
    "title: T\ntopic: PFC\nlevel: beginner\nminutes: 3\nsituation: S\ntask: K\n"
    "objectives:\n  - {expect: retransmits == 0, why: W}\n  - {name: named, expect: \"sum(drops) == 0\", why: W2}\n"
    "hints: [one, two]\nsolution: {explain: E, set: [qos.profile=pfc-only]}\n";

}  // namespace

TEST(Labs, EveryLabInTheRepositoryLoadsAndItsSolutionValidates) {
  auto cat = load_labs(kLabs);
  for (const auto& e : cat.errors) ADD_FAILURE() << e;
  ASSERT_GE(cat.labs.size(), 8u) << "the first track has at least eight labs";
  int last = 0;
  for (const auto& lab : cat.labs) {
    SCOPED_TRACE(lab.folder_name());
    EXPECT_GT(lab.number, last) << "numbered in order, each once";
    last = lab.number;
    EXPECT_FALSE(lab.hints.empty());
    EXPECT_FALSE(lab.solution_set.empty());
    const std::string start = slurp(lab.start_path());
    auto s = load_scenario_text(start, lab.start_path());
    ASSERT_TRUE(s.ok()) << (s.diags.sorted().empty() ? "" : s.diags.sorted().front().format());
    EXPECT_TRUE(s.scenario->expect.empty()) << "the objectives live in lab.yaml, not in the learner's file";
    EXPECT_FALSE(apply_objectives(lab, *s.scenario).has_value());
    EXPECT_EQ(s.scenario->expect.size(), lab.objectives.size());
    std::string why;
    auto solved = apply_overrides(start, lab.solution_set, why);
    ASSERT_TRUE(solved.has_value()) << why;
    EXPECT_NE(*solved, start);
    auto t = load_scenario_text(*solved, "solution");
    EXPECT_TRUE(t.ok()) << (t.diags.sorted().empty() ? "" : t.diags.sorted().front().format());
  }
}

TEST_F(LabDir, LoadsTheFieldsAndFindsByNumberIdOrFolder) {
  make("03-small", kGood);
  make("notalab", kGood);  // no NN- prefix: not part of the track
  auto cat = load_labs(root_);
  ASSERT_TRUE(cat.errors.empty()) << cat.errors.front();
  ASSERT_EQ(cat.labs.size(), 1u);
  const Lab& l = cat.labs[0];
  EXPECT_EQ(l.number, 3);
  EXPECT_EQ(l.id, "small");
  EXPECT_EQ(l.folder_name(), "03-small");
  EXPECT_EQ(l.minutes, 3);
  ASSERT_EQ(l.objectives.size(), 2u);
  EXPECT_EQ(l.objectives[0].name, "retransmits == 0");  // the expression when unnamed
  EXPECT_EQ(l.objectives[1].name, "named");
  EXPECT_EQ(l.objectives[1].pos.line, 9);
  EXPECT_EQ(find_lab(cat.labs, "3"), &l);
  EXPECT_EQ(find_lab(cat.labs, "03"), &l);
  EXPECT_EQ(find_lab(cat.labs, "small"), &l);
  EXPECT_EQ(find_lab(cat.labs, "03-small"), &l);
  EXPECT_EQ(find_lab(cat.labs, "4"), nullptr);
  EXPECT_EQ(find_lab(cat.labs, ""), nullptr);
}

TEST_F(LabDir, ABrokenLabIsRefusedWithTheLineAndTheReason) {
  std::string bad = kGood;
  bad.replace(bad.find("minutes: 3"), 10, "minutes: 3\ncolour: red");
  make("01-bad-key", bad);
  std::string expr = kGood;
  expr.replace(expr.find("retransmits == 0"), 16, "retransmitz == 0");
  make("02-bad-expr", expr);
  std::string level = kGood;
  level.replace(level.find("beginner"), 8, "guru");
  make("04-bad-level", level);
  make("05-no-solution", std::string(kGood).substr(0, std::string(kGood).find("solution:")));
  auto cat = load_labs(root_);
  EXPECT_TRUE(cat.labs.empty());
  ASSERT_EQ(cat.errors.size(), 4u);
  EXPECT_NE(cat.errors[0].find("01-bad-key/lab.yaml:5: unknown key 'colour'"), std::string::npos) << cat.errors[0];
  EXPECT_NE(cat.errors[1].find("02-bad-expr/lab.yaml:8: objectives[0].expect:"), std::string::npos) << cat.errors[1];
  EXPECT_NE(cat.errors[1].find("retransmitz"), std::string::npos) << cat.errors[1];
  EXPECT_NE(cat.errors[2].find("'guru' is not beginner"), std::string::npos) << cat.errors[2];
  EXPECT_NE(cat.errors[3].find("missing 'solution'"), std::string::npos) << cat.errors[3];
}

TEST_F(LabDir, TwoLabsWithOneNumberAreRefused) {
  make("01-a", kGood);
  make("1-b", kGood);
  auto cat = load_labs(root_);
  EXPECT_EQ(cat.labs.size(), 1u);
  ASSERT_EQ(cat.errors.size(), 1u);
  EXPECT_NE(cat.errors[0].find("number 1 is taken"), std::string::npos) << cat.errors[0];
}

TEST(Labs, AnswersCompareWithoutCaseOrSpaces) {
  LabQuestion q{"which host?", {"host2", "host2:nic0"}, "w"};
  EXPECT_TRUE(answer_matches(q, "host2"));
  EXPECT_TRUE(answer_matches(q, "  Host2 \n"));
  EXPECT_TRUE(answer_matches(q, "HOST2:NIC0"));
  EXPECT_FALSE(answer_matches(q, "host3"));
  EXPECT_FALSE(answer_matches(q, ""));
  EXPECT_FALSE(answer_matches(q, "host"));
}
