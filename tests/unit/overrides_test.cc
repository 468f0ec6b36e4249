// `--set KEY=VALUE` (issue 35): one knob changed over a file, validated as the file, with the
// path and the reason when the key or the value is wrong.
#include "model/overrides.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "model/loader.h"

using namespace rocelab::model;

namespace {

const char* kFile =
    "name: o\nscale: 1000\nfabric: {type: leaf-spine, spines: 1, leaves: 1, hosts_per_leaf: 3}\n"
    "qos: {profile: roce-lossless, ecn: {kmin: 32KB, kmax: 160KB, pmax: 0.05}}\n"
    "workloads:\n  - {name: in, type: incast, hosts: [host1, host2], to: host3, message: 1MB}\n";

class Overrides : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rocelab-set-XXXXXX.yaml";
    const int fd = mkstemps(tmpl, 5);
    ASSERT_GE(fd, 0);
    close(fd);
    path_ = tmpl;
    std::ofstream(path_) << kFile;
  }
  void TearDown() override { std::remove(path_.c_str()); }
  LoadResult load(const std::vector<std::string>& sets) { return load_scenario_file(path_, sets); }
  std::string first_error(const LoadResult& r) {
    auto d = r.diags.sorted();
    return d.empty() ? "" : d.front().format();
  }
  std::string path_;
};

TEST_F(Overrides, SetsChangeTheScenarioAsTheFileWould) {
  auto r = load({"qos.ecn.kmin=64KB", "hosts.dcqcn=paper", "workloads.0.message=4MB", "seed=9"});
  ASSERT_TRUE(r.ok()) << first_error(r);
  EXPECT_EQ(r.scenario->qos.ecn.kmin.n, 64u * 1024);
  EXPECT_EQ(r.scenario->qos.ecn.kmax.n, 160u * 1024) << "the rest of the section stays";
  EXPECT_EQ(r.scenario->hosts.dcqcn, "paper") << "a section the file lacks is made";
  EXPECT_EQ(r.scenario->workloads.at(0).message.n, 4u << 20);
  EXPECT_EQ(r.scenario->seed, 9u);
  EXPECT_EQ(r.scenario->sets, (std::vector<std::string>{"qos.ecn.kmin=64KB", "hosts.dcqcn=paper",
                                                        "workloads.0.message=4MB", "seed=9"}));
  // Later sets win, as a later line of a file would.
  auto twice = load({"qos.ecn.kmin=64KB", "qos.ecn.kmin=96KB"});
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice.scenario->qos.ecn.kmin.n, 96u * 1024);
}

TEST_F(Overrides, AWrongKeyOrValueIsRefusedWithThePathAndWhy) {
  auto unknown = load({"qos.ecn.kmn=64KB"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(first_error(unknown).find("kmn"), std::string::npos) << first_error(unknown);
  EXPECT_NE(first_error(unknown).find("with --set"), std::string::npos) << "the text that was checked is named";
  auto bad = load({"qos.ecn.kmin=lots"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(first_error(bad).find("qos.ecn"), std::string::npos) << first_error(bad);
  auto inconsistent = load({"qos.ecn.kmin=1MB"});
  ASSERT_FALSE(inconsistent.ok());
  EXPECT_NE(first_error(inconsistent).find("above kmax"), std::string::npos) << first_error(inconsistent);
  for (const auto& [set, why] : std::vector<std::pair<std::string, std::string>>{
           {"qos.ecn.kmin", "expected KEY=VALUE"},
           {"=3", "expected KEY=VALUE"},
           {"qos..kmin=1", "an empty name"},
           {"workloads.5.message=1MB", "is a list of 1"},
           {"workloads.x=1", "is a list of 1"},
           {"scale.x=1", "is a value, not a section"}}) {
    auto r = load({set});
    ASSERT_FALSE(r.ok()) << set;
    EXPECT_NE(first_error(r).find("--set " + set), std::string::npos) << first_error(r);
    EXPECT_NE(first_error(r).find(why), std::string::npos) << first_error(r);
  }
}

TEST(OverrideText, NoSetsLeavesTheTextAsItIs) {
  std::string why;
  EXPECT_EQ(apply_overrides("a: [1\n", {}, why), std::optional<std::string>("a: [1\n"));
  EXPECT_EQ(apply_overrides("a: [1\n", {"a=2"}, why), std::optional<std::string>("a: [1\n"))
      << "a syntax error is left for the loader to report where it is";
}

}  // namespace
