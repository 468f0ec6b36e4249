// Slurm's hostlist expressions and a job step's environment, as `run --part auto` reads them.
#include <gtest/gtest.h>

#include "model/hostlist.h"

using namespace rocelab::model;

namespace {

std::vector<std::string> expand(const std::string& e) {
  std::string why;
  auto r = expand_hostlist(e, why);
  EXPECT_TRUE(r) << e << ": " << why;
  return r ? *r : std::vector<std::string>{};
}

std::string refused(const std::string& e, size_t limit = 4096) {
  std::string why;
  auto r = expand_hostlist(e, why, limit);
  EXPECT_FALSE(r) << e;
  return why;
}

}  // namespace

TEST(Hostlist, ExpandsAsSlurmWritesThem) {
  EXPECT_EQ(expand("node1"), (std::vector<std::string>{"node1"}));
  EXPECT_EQ(expand("gpu[01-03,7],login1"), (std::vector<std::string>{"gpu01", "gpu02", "gpu03", "gpu7", "login1"}));
  EXPECT_EQ(expand("n[8-11]"), (std::vector<std::string>{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand("n[008-010]"), (std::vector<std::string>{"n008", "n009", "n010"}));
  EXPECT_EQ(expand("r[1-2]n[1-2]"), (std::vector<std::string>{"r1n1", "r1n2", "r2n1", "r2n2"}));
  EXPECT_EQ(expand("a[1],b-2.lab,c[3]x"), (std::vector<std::string>{"a1", "b-2.lab", "c3x"}));
  EXPECT_EQ(expand("dgx[1-512]").size(), 512u);
}

TEST(Hostlist, RefusesWhatSlurmWouldNotWrite) {
  EXPECT_NE(refused("n[3-1]").find("runs backwards"), std::string::npos);
  EXPECT_NE(refused("n[1-2").find("without its ']'"), std::string::npos);
  EXPECT_NE(refused("n1-2]").find("do not pair"), std::string::npos);
  EXPECT_NE(refused("n[1-[2]]").find("do not pair"), std::string::npos);
  EXPECT_NE(refused("n[a-b]").find("not a number"), std::string::npos);
  EXPECT_NE(refused("n[]").find("not a number"), std::string::npos);
  EXPECT_NE(refused("a,,b").find("empty name"), std::string::npos);
  EXPECT_NE(refused("a b").find("is in no host name"), std::string::npos);
  EXPECT_NE(refused("n;rm").find("is in no host name"), std::string::npos);
  EXPECT_NE(refused("n[1-5000]").find("more than 4096 names"), std::string::npos);
  EXPECT_NE(refused("r[1-100]n[1-100]", 1000).find("more than 1000 names"), std::string::npos);
}

TEST(Hostlist, AJobStepGivesThePartTheCountAndTheMachines) {
  std::string why;
  auto s = slurm_step({{"SLURM_PROCID", "1"}, {"SLURM_STEP_NUM_TASKS", "3"}, {"SLURM_NODEID", "1"},
                       {"SLURM_STEP_NODELIST", "gpu[07-09]"}, {"SLURM_JOB_NODELIST", "gpu[01-09]"}},
                      why);
  ASSERT_TRUE(s) << why;
  EXPECT_EQ(s->part, 1u);
  EXPECT_EQ(s->parts, 3u);
  EXPECT_EQ(s->nodes, (std::vector<std::string>{"gpu07", "gpu08", "gpu09"}));
  // Without the step's own variables, the job's (sbatch -N2 with srun inheriting them).
  auto j = slurm_step({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "a,b"}}, why);
  ASSERT_TRUE(j) << why;
  EXPECT_EQ(j->nodes, (std::vector<std::string>{"a", "b"}));
}

TEST(Hostlist, AStepThatIsNotOneTaskPerNodeIsRefusedSayingHowToStartIt) {
  std::string why;
  EXPECT_FALSE(slurm_step({}, why));
  EXPECT_NE(why.find("not in a Slurm job step"), std::string::npos) << why;
  EXPECT_FALSE(slurm_step({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_STEP_NODELIST", "n[1-2]"}}, why));
  EXPECT_NE(why.find("--ntasks-per-node=1"), std::string::npos) << why;
  EXPECT_FALSE(slurm_step({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_STEP_NODELIST", "n1"}}, why));
  EXPECT_NE(why.find("two nodes or more"), std::string::npos) << why;
  EXPECT_FALSE(slurm_step({{"SLURM_PROCID", "1"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_NODEID", "0"},
                           {"SLURM_STEP_NODELIST", "n[1-2]"}},
                          why));
  EXPECT_NE(why.find("task I on node I"), std::string::npos) << why;
  EXPECT_FALSE(slurm_step({{"SLURM_PROCID", "x"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_STEP_NODELIST", "n[1-2]"}}, why));
  EXPECT_FALSE(slurm_step({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_STEP_NODELIST", "n[1-"}}, why));
  EXPECT_NE(why.find("SLURM_STEP_NODELIST: "), std::string::npos) << why;
  // As many parts as --part I/M takes, and no more (each is a connection and a share at part 0).
  EXPECT_TRUE(slurm_step({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "64"}, {"SLURM_STEP_NODELIST", "n[1-64]"}}, why)) << why;
  EXPECT_FALSE(slurm_step({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "65"}, {"SLURM_STEP_NODELIST", "n[1-65]"}}, why));
  EXPECT_NE(why.find("the step has 65 tasks: a split run has 2 to 64 parts"), std::string::npos) << why;
}

// A pod of rocelab's Indexed Job: its index is the part, the parts are named JOB-I.SERVICE
// (the hostname and subdomain Kubernetes gives an Indexed Job's pods under a headless Service).
TEST(Hostlist, AnIndexedJobsPodGivesThePartTheCountAndThePeersNames) {
  std::string why;
  const std::map<std::string, std::string> env{{"JOB_COMPLETION_INDEX", "2"}, {"ROCELAB_PARTS", "3"},
                                               {"ROCELAB_K8S_JOB", "rocelab-ring"}, {"ROCELAB_K8S_SERVICE", "ring"}};
  auto p = k8s_pod(env, why);
  ASSERT_TRUE(p) << why;
  EXPECT_EQ(p->part, 2u);
  EXPECT_EQ(p->parts, 3u);
  EXPECT_EQ(p->nodes, (std::vector<std::string>{"rocelab-ring-0.ring", "rocelab-ring-1.ring", "rocelab-ring-2.ring"}));
  EXPECT_FALSE(k8s_pod({}, why));
  EXPECT_NE(why.find("rocelab k8s"), std::string::npos) << why;
  auto with = [&](const char* k, const char* v) {
    auto e = env;
    e[k] = v;
    return k8s_pod(e, why);
  };
  EXPECT_FALSE(with("JOB_COMPLETION_INDEX", "3"));
  EXPECT_NE(why.find("JOB_COMPLETION_INDEX 3 of ROCELAB_PARTS 3"), std::string::npos) << why;
  EXPECT_FALSE(with("ROCELAB_PARTS", "1"));
  EXPECT_FALSE(with("ROCELAB_PARTS", "65"));
  EXPECT_FALSE(with("ROCELAB_K8S_JOB", "Ring"));
  EXPECT_NE(why.find("DNS labels"), std::string::npos) << why;
  EXPECT_FALSE(with("ROCELAB_K8S_SERVICE", "a.b"));
  EXPECT_FALSE(with("JOB_COMPLETION_INDEX", "-1"));
  EXPECT_TRUE(is_dns_label("rocelab-quickstart"));
  EXPECT_FALSE(is_dns_label("-a"));
  EXPECT_FALSE(is_dns_label(std::string(64, 'a')));
}
