#include "model/hostlist.h"

#include <algorithm>
#include <cctype>

namespace rocelab::model {

namespace {

// One bracket's contents ("01-03,7") as the numbers' texts, widths kept.
std::optional<std::vector<std::string>> expand_ranges(const std::string& body, std::string& why, size_t limit) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= body.size()) {
    const size_t comma = std::min(body.find(',', at), body.size());
    const std::string item = body.substr(at, comma - at);
    const size_t dash = item.find('-');
    const std::string lo = item.substr(0, dash), hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    auto digits = [](const std::string& s) {
      if (s.empty() || s.size() > 9) return false;
      for (char c : s)
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
      return true;
    };
    if (!digits(lo) || !digits(hi)) {
      why = "'[" + body + "]': '" + item + "' is not a number or a lo-hi range";
      return std::nullopt;
    }
    const unsigned long a = std::stoul(lo), b = std::stoul(hi);
    if (b < a) {
      why = "'[" + body + "]': the range " + item + " runs backwards";
      return std::nullopt;
    }
    if (b - a + out.size() >= limit) {
      why = "more than " + std::to_string(limit) + " names";
      return std::nullopt;
    }
    for (unsigned long n = a; n <= b; ++n) {
      std::string s = std::to_string(n);
      if (s.size() < lo.size()) s.insert(0, lo.size() - s.size(), '0');  // the lower bound's width
      out.push_back(std::move(s));
    }
    at = comma + 1;
  }
  return out;
}

// One name with brackets ("r[1-2]n[01-02]"), every combination, left bracket outermost.
bool expand_one(const std::string& item, std::vector<std::string>& out, std::string& why, size_t limit) {
  std::vector<std::string> names{""};
  size_t at = 0;
  while (at < item.size()) {
    const size_t open = item.find('[', at);
    const std::string text = item.substr(at, open == std::string::npos ? std::string::npos : open - at);
    if (text.find(']') != std::string::npos) {
      why = "'" + item + "': a ']' without its '['";
      return false;
    }
    for (auto& n : names) n += text;
    if (open == std::string::npos) break;
    const size_t close = item.find(']', open);
    if (close == std::string::npos) {
      why = "'" + item + "': a '[' without its ']'";
      return false;
    }
    auto nums = expand_ranges(item.substr(open + 1, close - open - 1), why, limit);
    if (!nums) return false;
    if (names.size() * nums->size() + out.size() > limit) {
      why = "more than " + std::to_string(limit) + " names";
      return false;
    }
    std::vector<std::string> next;
    for (const auto& n : names)
      for (const auto& k : *nums) next.push_back(n + k);
    names = std::move(next);
    at = close + 1;
  }
  for (auto& n : names) {
    if (n.empty()) {
      why = "an empty name";
      return false;
    }
    out.push_back(std::move(n));
  }
  return true;
}

std::optional<size_t> count_of(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty() || it->second.size() > 9) return std::nullopt;
  for (char c : it->second)
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  return std::stoul(it->second);
}

}  // namespace

std::optional<std::vector<std::string>> expand_hostlist(const std::string& expr, std::string& why, size_t limit) {
  std::vector<std::string> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= expr.size(); ++i) {
    const char c = i < expr.size() ? expr[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) {
      why = "'" + expr + "': brackets do not pair (or nest)";
      return std::nullopt;
    }
    if (c == ',' && depth == 0) {
      const std::string item = expr.substr(start, i - start);
      if (item.empty() || !expand_one(item, out, why, limit)) {
        if (item.empty()) why = "'" + expr + "': an empty name between commas";
        return std::nullopt;
      }
      start = i + 1;
    }
    if (c != ',' && c != '[' && c != ']' && c != '-' && c != '.' && c != '_' &&
        !std::isalnum(static_cast<unsigned char>(c))) {
      why = "'" + expr + "': '" + std::string(1, c) + "' is in no host name";
      return std::nullopt;
    }
  }
  if (depth != 0) {
    why = "'" + expr + "': a '[' without its ']'";
    return std::nullopt;
  }
  return out;
}

std::optional<SlurmStep> slurm_step(const std::map<std::string, std::string>& env, std::string& why) {
  const auto procid = count_of(env, "SLURM_PROCID");
  auto tasks = count_of(env, "SLURM_STEP_NUM_TASKS");
  if (!tasks) tasks = count_of(env, "SLURM_NTASKS");
  auto list = env.find("SLURM_STEP_NODELIST");
  if (list == env.end()) list = env.find("SLURM_JOB_NODELIST");
  if (!procid || !tasks || list == env.end()) {
    why = "not in a Slurm job step (SLURM_PROCID, SLURM_STEP_NUM_TASKS and SLURM_STEP_NODELIST are unset): "
          "start it with srun, or give --part I/M and --peers";
    return std::nullopt;
  }
  auto nodes = expand_hostlist(list->second, why);
  if (!nodes) {
    why = list->first + ": " + why;
    return std::nullopt;
  }
  if (*tasks != nodes->size() || *tasks < 2) {
    why = "the step has " + std::to_string(*tasks) + " tasks on " + std::to_string(nodes->size()) +
          " nodes: a split run is one task per node on two nodes or more (srun -N M --ntasks-per-node=1)";
    return std::nullopt;
  }
  if (*tasks > kMaxParts) {
    why = "the step has " + std::to_string(*tasks) + " tasks: a split run has 2 to " + std::to_string(kMaxParts) + " parts";
    return std::nullopt;
  }
  if (*procid >= *tasks) {
    why = "SLURM_PROCID " + std::to_string(*procid) + " is not below the step's " + std::to_string(*tasks) + " tasks";
    return std::nullopt;
  }
  // One task per node, block distribution: task i runs on the step's node i.
  if (auto nodeid = count_of(env, "SLURM_NODEID"); nodeid && *nodeid != *procid) {
    why = "task " + std::to_string(*procid) + " runs on the step's node " + std::to_string(*nodeid) +
          ": a split run needs task I on node I (srun --distribution=block, one task per node)";
    return std::nullopt;
  }
  return SlurmStep{*procid, *tasks, std::move(*nodes)};
}

bool is_dns_label(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max || s.front() == '-' || s.back() == '-') return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

std::optional<SlurmStep> k8s_pod(const std::map<std::string, std::string>& env, std::string& why) {
  const auto index = count_of(env, "JOB_COMPLETION_INDEX"), parts = count_of(env, "ROCELAB_PARTS");
  auto job = env.find("ROCELAB_K8S_JOB"), svc = env.find("ROCELAB_K8S_SERVICE");
  if (!index || !parts || job == env.end() || svc == env.end()) {
    why = "not in a pod of rocelab's Indexed Job (JOB_COMPLETION_INDEX, ROCELAB_PARTS, ROCELAB_K8S_JOB and "
          "ROCELAB_K8S_SERVICE are unset): make it with 'rocelab k8s', or give --part I/M and --peers";
    return std::nullopt;
  }
  // The pod's hostname JOB-I is at most 63 characters, so the job's name leaves room for I.
  if (!is_dns_label(job->second, 56) || !is_dns_label(svc->second)) {
    why = "ROCELAB_K8S_JOB and ROCELAB_K8S_SERVICE must be DNS labels (a-z, 0-9, '-')";
    return std::nullopt;
  }
  if (*parts < 2 || *parts > kMaxParts || *index >= *parts) {
    why = "JOB_COMPLETION_INDEX " + std::to_string(*index) + " of ROCELAB_PARTS " + std::to_string(*parts) +
          ": 2 to " + std::to_string(kMaxParts) + " parts, the index below them";
    return std::nullopt;
  }
  SlurmStep out{*index, *parts, {}};
  for (size_t i = 0; i < *parts; ++i) out.nodes.push_back(job->second + "-" + std::to_string(i) + "." + svc->second);
  return out;
}

}  // namespace rocelab::model
