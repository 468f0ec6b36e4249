#include "run/kinds.h"

#include <algorithm>
#include <climits>
#include <numeric>

#include "fabric/kernel_plan.h"
#include "fault/registry.h"
#include "workload/backend.h"
#include "workload/kinds.h"

namespace rocelab::run {

namespace {

using model::ErrorKind;

std::string did_you_mean(std::string_view word, const std::vector<std::string>& names) {
  std::vector<std::string_view> v(names.begin(), names.end());
  const std::string c = model::closest(word, v);
  return c.empty() ? "" : " (did you mean '" + c + "'?)";
}

// "a write_bw", "an incast".
std::string a(const std::string& noun) {
  return (noun.empty() || std::string_view("aeiou").find(noun[0]) == std::string_view::npos ? "a " : "an ") + noun;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

// The keys an item set against what its kind requires and takes.
void check_keys(const model::KeysSet& keys, model::Position pos, const std::string& what, const std::string& type,
                const std::vector<std::string>& common, const std::vector<std::string>& required,
                const std::vector<std::string>& takes, model::Diagnostics& d) {
  for (const auto& k : required)
    if (!keys.count(k)) d.add(ErrorKind::kMissingKey, pos, what + ": " + a(type) + " needs '" + k + "'");
  std::vector<std::string> allowed = common;
  allowed.insert(allowed.end(), required.begin(), required.end());
  allowed.insert(allowed.end(), takes.begin(), takes.end());
  for (const auto& [k, kpos] : keys)
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
      d.add(ErrorKind::kUnknownKey, kpos, what + ": '" + k + "' does not apply to " + a(type) + " (it takes " +
                                              joined(allowed) + ")");
}

void check_workload_kinds(const model::Scenario& s, model::Diagnostics& d) {
  const std::vector<std::string> built = workload::kinds().types();
  for (const auto& w : s.workloads) {
    const std::string what = "workloads." + w.name;
    const workload::Kind* k = workload::kinds().find(w.type);
    if (!k) {
      d.add(ErrorKind::kUnknownKind, w.type_pos, what + ".type: '" + w.type + "' is not a workload this rocelab has" +
                                                     did_you_mean(w.type, built) + " (built: " + joined(built) + ")");
      continue;
    }
    check_keys(w.keys, w.pos, what, w.type, workload::kCommonKeys, k->required, k->takes, d);
    if (k->validate)
      for (const auto& e : k->validate(w, s)) d.add(ErrorKind::kInconsistent, w.pos, what + ": " + e);
  }
}

void check_fault_kinds(const model::Scenario& s, model::Diagnostics& d) {
  const std::vector<std::string> built = fault::kinds().types();
  for (size_t i = 0; i < s.faults.size(); ++i) {
    const auto& f = s.faults[i];
    const std::string what = "faults[" + std::to_string(i) + "]";
    const fault::Kind* k = fault::kinds().find(f.type);
    if (!k) {
      d.add(ErrorKind::kUnknownKind, f.type_pos, what + ".type: fault type '" + f.type + "' is not built in this rocelab" +
                                                     did_you_mean(f.type, built) + " (built: " + joined(built) + ")");
      continue;
    }
    check_keys(f.keys, f.pos, what, f.type + " fault", fault::kCommonKeys, k->required, k->takes, d);
    if (k->validate)
      for (const auto& e : k->validate(f, s)) d.add(ErrorKind::kInconsistent, f.pos, what + ": " + e);
  }
}

size_t find_root(std::vector<size_t>& parent, size_t x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

// Every flow the workloads will make must have a path: hosts never forward, so two NICs
// reach each other through switches joined by links, or by a link of their own.
void check_paths(const model::Scenario& s, model::Diagnostics& d) {
  const fabric::KernelPlan plan = fabric::plan_kernel(s);
  const workload::Ranks ranks(plan);
  auto jobs = workload::plan_jobs(s, ranks);
  if (!jobs) {
    d.add(ErrorKind::kInconsistent, s.workloads.empty() ? model::Position{} : s.workloads.front().pos, jobs.error().what);
    return;
  }
  std::vector<size_t> parent(plan.nodes.size());
  std::iota(parent.begin(), parent.end(), 0);
  for (const auto& v : plan.veths)
    if (!plan.nodes[v.a_node].host && !plan.nodes[v.b_node].host) parent[find_root(parent, v.a_node)] = find_root(parent, v.b_node);
  auto connected = [&](size_t a, size_t b) {
    const auto &na = ranks.nic(a), &nb = ranks.nic(b);
    if (na.peer_node == ranks[b].node) return na.peer_ifname == nb.ifname;  // a link of their own
    if (plan.nodes[na.peer_node].host || plan.nodes[nb.peer_node].host) return false;
    return find_root(parent, na.peer_node) == find_root(parent, nb.peer_node);
  };
  for (size_t j = 0; j < jobs->size(); ++j)
    for (const auto& f : (*jobs)[j].flows) {
      if (f.src == SIZE_MAX || f.dst == SIZE_MAX || connected(f.src, f.dst)) continue;
      const auto& w = s.workloads[j];
      d.add(ErrorKind::kNoPath, w.pos, "workloads." + w.name + ": no path from " + ranks.label(f.src) + " (" +
                                           ranks.nic(f.src).ifname + ", on " + plan.nodes[ranks.nic(f.src).peer_node].node +
                                           ") to " + ranks.label(f.dst) + " (" + ranks.nic(f.dst).ifname + ", on " +
                                           plan.nodes[ranks.nic(f.dst).peer_node].node +
                                           "): no link joins their parts of the fabric");
      break;  // one pair per workload says enough
    }
}

model::LoadResult checked(model::LoadResult r) {
  if (!r.ok()) return r;
  check_kinds(*r.scenario, r.diags);
  if (!r.diags.empty()) r.scenario.reset();
  return r;
}

}  // namespace

void check_kinds(const model::Scenario& s, model::Diagnostics& d) {
  if (!workload::backends().find(s.hosts.engine)) {
    const std::vector<std::string> built = workload::backends().types();
    d.add(ErrorKind::kUnknownKind, s.hosts.engine_pos,
          "hosts.engine: '" + s.hosts.engine + "' is not built in this rocelab" + did_you_mean(s.hosts.engine, built) +
              " (built: " + joined(built) + ")");
  }
  check_workload_kinds(s, d);
  check_fault_kinds(s, d);
  if (d.empty()) check_paths(s, d);
}

model::LoadResult load_scenario_file(const std::string& path, const std::vector<std::string>& sets) {
  return checked(model::load_scenario_file(path, sets));
}

model::LoadResult load_scenario_bytes(const std::string& text, const std::string& path,
                                      const std::vector<std::string>& sets) {
  return checked(model::load_scenario_bytes(text, path, sets));
}

model::LoadResult load_scenario_text(std::string_view text, const std::string& file_label) {
  return checked(model::load_scenario_text(text, file_label));
}

}  // namespace rocelab::run
