// sys/files.h: run directories as root where other users may reach (issue 34): a planted
// link is never followed, a directory another user owns or may write to is refused, and JSON
// nested beyond what rocelab writes is measured before anything parses it.
#include "sys/files.h"

#include "model/percentile.h"
#include "run/vm.h"

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

// A held run directory (issue 49): renamed and replaced by a link to another directory, it
// still takes every file through its descriptor, and it knows it was renamed.
TEST_F(Files, AHeldDirectoryTakesItsFilesWhereverItWasMoved) {
  const fs::path dir = root_ / "run", moved = root_ / "moved", elsewhere = root_ / "elsewhere";
  auto held = sys::hold_private_dir(dir.string());
  ASSERT_TRUE(held) << held.error().what;
  EXPECT_TRUE((*held)->still_named());
  EXPECT_EQ((*held)->path(), dir.string());
  fs::create_directory(elsewhere);
  fs::rename(dir, moved);
  fs::create_directory_symlink(elsewhere, dir);
  EXPECT_FALSE((*held)->still_named());
  std::string why;
  ASSERT_TRUE(sys::write_file((*held)->at() + "/results.json", "{}\n", why)) << why;
  EXPECT_TRUE(fs::exists(moved / "results.json"));
  EXPECT_TRUE(fs::is_empty(elsewhere));
  // A link where the directory is to be made is refused; so is one not empty.
  EXPECT_FALSE(sys::hold_private_dir(dir.string()));
  EXPECT_FALSE(sys::hold_private_dir(moved.string()));
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

// `run --vm`'s job directory is the guest's to write (9p, its root): what it left is read
// back as untrusted. A job.log that is a link to a host file, links inside run/, and a run/
// that is itself a link leave their targets unread and untouched.
TEST_F(Files, AGuestsJobDirectoryIsTakenBackWithoutFollowingItsLinks) {
  const fs::path job = root_ / "job", out = root_ / "out";
  fs::create_directories(job / "run" / "plots");
  fs::create_symlink(target_, job / "job.log");
  std::ofstream(job / "run" / "results.json") << "{}\n";
  std::ofstream(job / "run" / "plots" / "q.svg") << "<svg/>\n";
  fs::create_symlink(target_, job / "run" / "events.jsonl");
  fs::create_symlink("/", job / "run" / "root");
  auto g = run::take_guest_run(job.string(), out.string());
  ASSERT_TRUE(g) << g.error().what;
  EXPECT_NE(g->output.find("a symbolic link (not followed)"), std::string::npos) << g->output;
  EXPECT_EQ(g->output.find("keep me"), std::string::npos) << "the host file's text came back as the guest's log";
  EXPECT_TRUE(g->copied);
  EXPECT_EQ(g->skipped, 2u);
  EXPECT_TRUE(fs::is_regular_file(out / "results.json"));
  EXPECT_TRUE(fs::is_regular_file(out / "plots" / "q.svg"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(out / "events.jsonl")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(out / "root")));
  EXPECT_EQ(precious(), "keep me\n");
  // A run/ that is a link (to a directory of the host's) is not taken at all.
  const fs::path job2 = root_ / "job2", host_dir = root_ / "host-dir", out2 = root_ / "out2";
  fs::create_directories(job2);
  fs::create_directories(host_dir);
  std::ofstream(host_dir / "secret") << "host\n";
  std::ofstream(job2 / "job.log") << "guest log\n";
  fs::create_symlink(host_dir, job2 / "run");
  auto g2 = run::take_guest_run(job2.string(), out2.string());
  ASSERT_TRUE(g2) << g2.error().what;
  EXPECT_EQ(g2->output, "guest log\n");
  EXPECT_FALSE(g2->copied);
  EXPECT_FALSE(fs::exists(out2));
  EXPECT_TRUE(fs::is_regular_file(host_dir / "secret"));
}

// A guest that powered off without its job: its console says why (`rocelab run --vm` boots
// again only for TCG's known fault, run::kTcgOops).
TEST(GuestConsole, TheLineThatSaysTheKernelDiedIsFound) {
  const std::string oops =
      "[   41.2] int3: 0000 [#1] PREEMPT SMP NOPTI\r\n[   41.2] Oops: int3: 0000 [#1] SMP NOPTI\r\n"
      "[   41.3] RIP: 0010:sched_clock_cpu+0x10/0x1a0\r\n[   41.9] Kernel panic - not syncing: Fatal exception\r\n";
  EXPECT_EQ(run::guest_kernel_death(oops), "Oops: int3: 0000 [#1] SMP NOPTI");
  EXPECT_NE(run::guest_kernel_death(oops).find(run::kTcgOops), std::string::npos);
  EXPECT_EQ(run::guest_kernel_death("[    0.9] Kernel panic - not syncing: Attempted to kill init!\n"),
            "Kernel panic - not syncing: Attempted to kill init!");
  EXPECT_EQ(run::guest_kernel_death("[    1.0] random: crng init done\n"), "");
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

// The whole tree is held to one total (each directory counted against it, not its own), and
// a file past what is left is skipped whole; the copies are streamed, so a large one is fine.
TEST_F(Files, CopyTreeCapsTheWholeTreeAndStreams) {
  const fs::path from = root_ / "guest", to = root_ / "back";
  fs::create_directories(from / "a");
  fs::create_directories(from / "b");
  std::ofstream(from / "a" / "one") << std::string(600, 'x');
  std::ofstream(from / "b" / "two") << std::string(600, 'y');
  size_t skipped = 0;
  ASSERT_TRUE(sys::copy_tree(from.string(), to.string(), 1u << 20, 1000, skipped));
  EXPECT_EQ(int(fs::exists(to / "a" / "one")) + int(fs::exists(to / "b" / "two")), 1) << "1,200 bytes, 1,000 allowed";
  EXPECT_EQ(skipped, 1u);
  const fs::path big = root_ / "big", back = root_ / "big-back";
  fs::create_directories(big);
  std::ofstream(big / "capture.pcap") << std::string(3u << 20, 'z');
  skipped = 0;
  ASSERT_TRUE(sys::copy_tree(big.string(), back.string(), 4u << 20, 4u << 20, skipped));
  EXPECT_EQ(fs::file_size(back / "capture.pcap"), 3u << 20) << "copied whole";
  EXPECT_EQ(skipped, 0u);
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

// A probe's pings each stand for the time they sample: with equal weights the same nearest
// rank as percentile(); a ping that stood for most of the time is the median whatever the
// count of quick ones (a ping-pong's many pings through an empty queue, issue 48).
TEST(Percentile, WeightedGivesEachSampleItsShare) {
  std::vector<double> v;
  for (int i = 0; i < 1000; ++i) v.push_back(double((i * 7919) % 1000));
  const std::vector<double> ones(v.size(), 1.0);
  for (double q : {0.0, 1.0, 50.0, 99.0, 100.0}) EXPECT_EQ(model::weighted_percentile(v, ones, q), model::percentile(v, q)) << q;
  // Nine quick pings of 1 us each beside one that waited 10 us: per ping the median is 1, over
  // the 19 us they took it is 10 (10 of 19 at or below it), and p25 still 1.
  const std::vector<double> one_way{1, 1, 1, 1, 10, 1, 1, 1, 1, 1}, took{1, 1, 1, 1, 10, 1, 1, 1, 1, 1};
  EXPECT_EQ(model::percentile(one_way, 50), 1);
  EXPECT_EQ(model::weighted_percentile(one_way, took, 50), 10);
  EXPECT_EQ(model::weighted_percentile(one_way, took, 25), 1);
  EXPECT_EQ(model::weighted_percentile({}, {}, 50), 0);
  EXPECT_EQ(model::weighted_percentile({3, 4}, {0, 0}, 50), 0);  // weightless
}

// The agent's latencies in bounded space: the nearest rank's bucket, never below the sorted
// sample's and within 1/64 above it, exact below 128, the largest kept exact.
TEST(Percentile, TheLogHistogramReadsTheNearestRankWithinOneBucket) {
  model::LogHistogram h;
  EXPECT_EQ(h.percentile(99), 0u);
  std::vector<uint64_t> v;
  uint64_t x = 12345;
  for (int i = 0; i < 100000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t s = (x >> 33) % (i % 3 ? 200'000 : 5'000'000) + (i % 7 ? 0 : 3);  // 3 ns .. 5 ms
    v.push_back(s);
    h.add(s);
  }
  std::sort(v.begin(), v.end());
  EXPECT_EQ(h.count(), v.size());
  EXPECT_EQ(h.max(), v.back());
  for (double q : {0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 100.0}) {
    const uint64_t want = model::percentile_sorted(v, q), got = h.percentile(q);
    EXPECT_GE(got, want) << q;
    EXPECT_LE(double(got), double(want) * (1 + 1.0 / 64) + 1) << q;
  }
  model::LogHistogram small;
  for (uint64_t s : {5, 100, 127, 3}) small.add(s);
  EXPECT_EQ(small.percentile(50), 5u);
  EXPECT_EQ(small.percentile(100), 127u);
  EXPECT_EQ(model::LogHistogram::index(~uint64_t{0}), model::LogHistogram::kBuckets - 1);
  EXPECT_EQ(model::LogHistogram::upper(model::LogHistogram::kBuckets - 1), ~uint64_t{0});
  for (uint64_t s : {128ull, 129ull, 1000ull, 1ull << 40, (1ull << 40) + 12345}) {
    const size_t i = model::LogHistogram::index(s);
    EXPECT_GE(model::LogHistogram::upper(i), s);
    EXPECT_LT(model::LogHistogram::upper(i - 1), s) << "the bucket below ends before " << s;
  }
}

TEST(JsonDepth, CountsNestingOutsideStrings) {
  EXPECT_EQ(sys::json_depth("{}"), 1u);
  EXPECT_EQ(sys::json_depth(R"({"a": [1, {"b": "[[[[\"]]"}]})"), 3u);
  EXPECT_EQ(sys::json_depth(std::string(100000, '[')), 100000u);
  EXPECT_EQ(sys::json_depth("42"), 0u);
}

}  // namespace
