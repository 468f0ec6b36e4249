// The write-ahead state file: appears complete or not at all, refuses a second creator,
// survives torn writes, and teardown sees what was appended.
#include <gtest/gtest.h>

#include <thread>
#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "sys/host_info.h"
#include "sys/state_log.h"

using namespace rocelab;
namespace fs = std::filesystem;

class StateLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rocelab-statelog-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/x.state";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_, path_;
};

TEST_F(StateLogTest, CreateAppendReadRemove) {
  std::string why;
  auto log = sys::StateLog::create(path_, "head 1\nhead 2\n", why);
  ASSERT_TRUE(log) << why;
  ASSERT_TRUE(log->append({"netns a", "netns b"}, why)) << why;
  auto reader = sys::StateLog::open(path_, false, why);
  ASSERT_TRUE(reader) << why;
  EXPECT_EQ(reader->lines(), (std::vector<std::string>{"head 1", "head 2", "netns a", "netns b"}));
  EXPECT_FALSE(reader->removed());
  ASSERT_TRUE(log->remove(why));
  EXPECT_TRUE(reader->removed());
  EXPECT_FALSE(fs::exists(path_));
}

// `down` replays every line as root: a record with a line break in it (a scenario path with
// a newline, say) would add records nobody wrote. Refused, and nothing of it is written.
TEST_F(StateLogTest, ARecordWithALineBreakIsRefused) {
  std::string why;
  auto log = sys::StateLog::create(path_, "a\n", why);
  ASSERT_TRUE(log);
  EXPECT_FALSE(log->append({"netns ok", "file x\nnetns rl-evil"}, why));
  EXPECT_NE(why.find("line break"), std::string::npos) << why;
  EXPECT_EQ(log->lines(), std::vector<std::string>{"a"});
}

TEST_F(StateLogTest, ASecondCreatorIsRefused) {
  std::string why;
  auto first = sys::StateLog::create(path_, "a\n", why);
  ASSERT_TRUE(first);
  auto second = sys::StateLog::create(path_, "b\n", why);
  EXPECT_FALSE(second);
  EXPECT_NE(why.find("exists"), std::string::npos) << why;
  EXPECT_EQ(first->lines(), std::vector<std::string>{"a"});
}

TEST_F(StateLogTest, TheFileIsLockedFromTheMomentItAppears) {
  std::string why;
  auto log = sys::StateLog::create(path_, "a\n", why);
  ASSERT_TRUE(log);
  int fd = ::open(path_.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_NE(flock(fd, LOCK_EX | LOCK_NB), 0) << "an up in progress holds the lock";
  log.reset();  // the creator is gone (as if killed): the lock goes with it
  EXPECT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  close(fd);
}

// A bounded wait for the lock gives up when it says, naming who holds it (an epilog's down);
// once the holder lets go, the same call takes it.
TEST_F(StateLogTest, ABoundedWaitForTheLockNamesItsHolder) {
  std::string why;
  auto log = sys::StateLog::create(path_, "a\n", why);
  ASSERT_TRUE(log) << why;
  bool held = false;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(sys::StateLog::open(path_, true, why, 300, &held));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(300));
  EXPECT_TRUE(held);
  EXPECT_NE(why.find("by PID " + std::to_string(getpid()) + " ("), std::string::npos) << why;
  log.reset();  // the holder goes
  held = false;
  auto again = sys::StateLog::open(path_, true, why, 300, &held);
  EXPECT_TRUE(again) << why;
  EXPECT_FALSE(held);
}

TEST_F(StateLogTest, ATornLastLineIsIgnored) {
  std::string why;
  auto log = sys::StateLog::create(path_, "a\n", why);
  ASSERT_TRUE(log);
  std::ofstream(path_, std::ios::app) << "netns half-writ";
  auto reader = sys::StateLog::open(path_, false, why);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->lines(), std::vector<std::string>{"a"});
}

// The run's contention check reads this: the calling thread's CPU time grows with work done
// on it, and a thread that sleeps does not wait for a CPU meanwhile.
TEST(ThreadCpu, CountsThisThreadsTimeOnACpu) {
  auto before = sys::thread_cpu();
  if (!before) GTEST_SKIP() << "this kernel keeps no /proc/thread-self/schedstat";
  volatile uint64_t x = 0;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(50)) x = x + 1;
  auto after = sys::thread_cpu();
  ASSERT_TRUE(after);
  EXPECT_GE(after->on_cpu_ns - before->on_cpu_ns, 20'000'000u);  // most of 50 ms busy
  EXPECT_LE(after->on_cpu_ns - before->on_cpu_ns, 1'000'000'000u);
  EXPECT_GE(after->waiting_ns, before->waiting_ns);
}

// The run's steal check reads this: one count over every CPU the machine has, never going
// back, and (over 100 ms) no more than the time that passed on all of them.
TEST(MachineSteal, CountsEveryCpuAndOnlyGrows) {
  auto a = sys::machine_steal();
  ASSERT_TRUE(a) << "/proc/stat has a cpu line on every Linux";
  EXPECT_EQ(a->cpus, std::thread::hardware_concurrency());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto b = sys::machine_steal();
  ASSERT_TRUE(b);
  EXPECT_GE(b->steal_ns, a->steal_ns);
  EXPECT_LE(b->steal_ns - a->steal_ns, 200'000'000ull * a->cpus);  // 100 ms of each CPU, with a tick's slack
}
