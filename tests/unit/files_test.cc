// sys/files.h: run directories as root where other users may reach (issue 34): a planted
// link is never followed, a directory another user owns or may write to is refused, and JSON
// nested beyond what rocelab writes is measured before anything parses it.
#include "sys/files.h"

#include "model/percentile.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace rocelab;
namespace fs = std::filesystem;

namespace {

class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rocelab-files-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    target_ = root_ / "precious";
    std::ofstream(target_) << "keep me\n";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string precious() const {
    std::ifstream f(target_);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
  fs::path root_, target_;
};

TEST_F(Files, APlantedLinkIsNotFollowedAndItsTargetIsUntouched) {
  const fs::path dir = root_ / "run";
  ASSERT_TRUE(sys::make_private_dir(dir.string()));
  fs::create_symlink(target_, dir / "results.json");
  std::string why;
  EXPECT_FALSE(sys::write_file((dir / "results.json").string(), "overwritten\n", why));
  EXPECT_NE(why.find("symbolic link"), std::string::npos) << why;
  EXPECT_EQ(precious(), "keep me\n");
  EXPECT_LT(sys::open_for_write((dir / "results.json").string(), why, /*append=*/true), 0);
  EXPECT_FALSE(sys::read_file((dir / "results.json").string(), 100, why)) << "a link is not read either";
  EXPECT_EQ(precious(), "keep me\n");
  // The directory now holds something: a run refuses it.
  EXPECT_FALSE(sys::make_private_dir(dir.string()));
}

TEST_F(Files, ADirectoryIsOursOnlyIfNoOneElseCanWriteIt) {
  const fs::path mine = root_ / "mine", open = root_ / "open", link = root_ / "link";
  ASSERT_TRUE(sys::make_private_dir(mine.string())) << "made fresh";
  struct stat st {};
  ASSERT_EQ(stat(mine.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 022, 0u);
  EXPECT_TRUE(sys::make_private_dir(mine.string())) << "existing, empty, ours";
  fs::create_directory(open);
  chmod(open.c_str(), 0777);
  auto r = sys::make_private_dir(open.string());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().what.find("others may write"), std::string::npos) << r.error().what;
  fs::create_directory_symlink(mine, link);
  r = sys::make_private_dir(link.string());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().what.find("symbolic link"), std::string::npos) << r.error().what;
  EXPECT_TRUE(sys::make_own_dir(mine.string())) << "make_own_dir takes a non-empty one of ours";
}

TEST_F(Files, ADirectoryAnotherUserOwnsIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  const fs::path theirs = root_ / "theirs";
  fs::create_directory(theirs);
  chmod(theirs.c_str(), 0755);
  ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);  // nobody
  auto r = sys::make_private_dir(theirs.string());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().what.find("belongs to uid 65534"), std::string::npos) << r.error().what;
}

TEST_F(Files, CopyTreeTakesRegularFilesOnly) {
  const fs::path from = root_ / "guest", to = root_ / "back";
  fs::create_directories(from / "sub");
  std::ofstream(from / "results.json") << "{}\n";
  std::ofstream(from / "sub" / "a.csv") << "x\n";
  fs::create_symlink(target_, from / "leak");
  fs::create_directory_symlink("/etc", from / "etc");
  size_t skipped = 0;
  ASSERT_TRUE(sys::copy_tree(from.string(), to.string(), 1 << 20, 1 << 20, skipped));
  EXPECT_TRUE(fs::exists(to / "results.json"));
  EXPECT_TRUE(fs::exists(to / "sub" / "a.csv"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(to / "leak")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(to / "etc")));
  EXPECT_EQ(skipped, 2u);
}

// The agent's figures select their percentiles rather than sort (its PFC loop must not sort a
// million samples): the same nearest rank as the sort.
TEST(Percentile, SelectionGivesTheSortsNearestRank) {
  std::vector<uint64_t> v;
  for (uint64_t i = 0; i < 1000; ++i) v.push_back((i * 7919) % 1000);  // 0..999 shuffled
  for (double q : {0.0, 1.0, 50.0, 99.0, 99.9, 100.0}) {
    auto copy = v;
    EXPECT_EQ(model::percentile_select(copy, q), model::percentile(v, q)) << q;
  }
  std::vector<uint64_t> none;
  EXPECT_EQ(model::percentile_select(none, 99), 0u);
}

TEST(JsonDepth, CountsNestingOutsideStrings) {
  EXPECT_EQ(sys::json_depth("{}"), 1u);
  EXPECT_EQ(sys::json_depth(R"({"a": [1, {"b": "[[[[\"]]"}]})"), 3u);
  EXPECT_EQ(sys::json_depth(std::string(100000, '[')), 100000u);
  EXPECT_EQ(sys::json_depth("42"), 0u);
}

}  // namespace
