// One malformed file per validation error kind, each with its exact expected messages in a
// sidecar (<kind>.err). Walking kAllErrorKinds makes a new kind without a file a failure.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "run/kinds.h"

using namespace rocelab::model;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = fs::path(ROCELAB_SOURCE_DIR) / "tests" / "malformed";

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Diagnostics name the file as given; loading by bare name keeps the sidecars path-free.
class InMalformedDir : public ::testing::Test {
 protected:
  void SetUp() override {
    old_ = fs::current_path();
    fs::current_path(kDir);
  }
  void TearDown() override { fs::current_path(old_); }
  fs::path old_;
};

}  // namespace

TEST_F(InMalformedDir, EveryErrorKindHasAFileWithItsExactMessages) {
  for (ErrorKind kind : kAllErrorKinds) {
    std::string name(error_kind_name(kind));
    SCOPED_TRACE(name);
    fs::path yaml = name + ".yaml", err = name + ".err";
    ASSERT_TRUE(fs::exists(fs::symlink_status(yaml))) << "no malformed file for error kind " << name;
    ASSERT_TRUE(fs::exists(err)) << "no sidecar " << err;

    auto r = rocelab::run::load_scenario_file(yaml.string());
    ASSERT_FALSE(r.ok()) << name << ".yaml was accepted";
    std::string got;
    for (const auto& d : r.diags.sorted()) got += d.format() + "\n";
    EXPECT_EQ(got, slurp(err));
    // The file exercises its kind, not some other error first.
    EXPECT_EQ(r.diags.sorted().front().kind, kind) << got;
  }
}

TEST_F(InMalformedDir, NoStrayFiles) {
  std::set<std::string> kinds;
  for (ErrorKind k : kAllErrorKinds) kinds.insert(std::string(error_kind_name(k)));
  for (const auto& e : fs::directory_iterator(".")) {
    std::string stem = e.path().stem().string();
    EXPECT_TRUE(kinds.count(stem)) << e.path() << " names no error kind";
  }
}

TEST(ErrorKinds, NamesAreUniqueSnakeCase) {
  std::set<std::string_view> seen;
  for (ErrorKind k : kAllErrorKinds) {
    auto n = error_kind_name(k);
    EXPECT_TRUE(seen.insert(n).second) << n;
    EXPECT_EQ(n.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string_view::npos) << n;
  }
}
