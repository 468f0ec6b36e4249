// Slurm's hostlist expressions, as SLURM_STEP_NODELIST and SLURM_JOB_NODELIST carry them:
// "gpu[01-03,7],login1" is gpu01 gpu02 gpu03 gpu7 login1. `run --part auto` expands the
// step's node list into the parts' machines, in Slurm's order (a task's SLURM_NODEID indexes
// it), and reads its part and count from the step's environment.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rocelab::model {

// The names, in order. A bracket holds comma-separated numbers and lo-hi ranges; a range's
// numbers keep the lower bound's width ("01-10": 01 ... 10); several brackets in one name
// multiply ("r[1-2]n[1-2]": r1n1 r1n2 r2n1 r2n2). nullopt, with why, for what Slurm would
// not write, or beyond `limit` names.
std::optional<std::vector<std::string>> expand_hostlist(const std::string& expr, std::string& why,
                                                        size_t limit = 4096);

// This task's share of a Slurm job step with one task per node: its part (SLURM_PROCID), the
// parts (SLURM_STEP_NUM_TASKS, else SLURM_NTASKS) and the machines in part order (the step's
// node list, SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST, expanded). `env` is the process
// environment by name. nullopt, with why, outside a step or with other than one task per node.
// A split run's parts: 2 to this many, however they are given (--part, a Slurm step, a pod).
inline constexpr size_t kMaxParts = 64;

struct SlurmStep {
  size_t part = 0, parts = 0;
  std::vector<std::string> nodes;
};
std::optional<SlurmStep> slurm_step(const std::map<std::string, std::string>& env, std::string& why);

// A pod of the Indexed Job `rocelab k8s` writes: its part from JOB_COMPLETION_INDEX (which
// Kubernetes sets in an Indexed Job's pods), the parts from ROCELAB_PARTS, and the parts'
// names JOB-I.SERVICE (ROCELAB_K8S_JOB, ROCELAB_K8S_SERVICE): the hostname an Indexed Job
// gives pod I under the headless Service its pods name as their subdomain. nullopt, with why,
// outside such a pod.
std::optional<SlurmStep> k8s_pod(const std::map<std::string, std::string>& env, std::string& why);

// Kubernetes' names for objects (RFC 1123 labels: a-z, 0-9, '-', starting and ending with an
// alphanumeric, at most `max` characters).
bool is_dns_label(const std::string& s, size_t max = 63);

}  // namespace rocelab::model
