// Helpers shared by the unit tests.
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "run/kinds.h"

namespace rocelab::testing {

// Loads as `rocelab` does: the model, then the kinds this build has (run/kinds.h).

inline model::Scenario must_load(const std::string& yaml) {
  auto r = run::load_scenario_text(yaml, "test.yaml");
  std::string errs;
  for (const auto& d : r.diags.sorted()) errs += d.format() + "\n";
  EXPECT_TRUE(r.ok()) << errs;
  if (!r.ok()) throw std::runtime_error("scenario did not load:\n" + errs);
  return std::move(*r.scenario);
}

// The model's own parse alone (reserved sections, kinds not checked).
inline model::Scenario must_load_model(const std::string& yaml) {
  auto r = model::load_scenario_text(yaml, "test.yaml");
  if (!r.ok()) throw std::runtime_error("scenario did not load");
  return std::move(*r.scenario);
}

inline std::vector<std::string> errors_of(const std::string& yaml) {
  auto r = run::load_scenario_text(yaml, "test.yaml");
  std::vector<std::string> out;
  for (const auto& d : r.diags.sorted()) out.push_back(d.format());
  return out;
}

// The next hops of `node`'s route to `dst` in table 0, as "via@dev" strings.
inline std::set<std::string> nexthops(const model::Scenario& s, const std::string& node, const std::string& dst,
                                      int table = 0) {
  std::set<std::string> out;
  auto i = s.find_node(node);
  if (!i) return {"<no node " + node + ">"};
  // The kernel's answer: the longest prefix in the table that holds dst.
  auto want = model::parse_prefix(dst);
  const model::Route* best = nullptr;
  for (const auto& r : s.routes[*i].routes)
    if (want && r.table == table && r.dst.contains(*want) && (!best || r.dst.len > best->dst.len)) best = &r;
  if (best)
    for (const auto& h : best->nexthops) out.insert(model::format_ipv4(h.via) + "@" + h.dev);
  return out;
}

inline const model::Link& link_between(const model::Scenario& s, const std::string& a, const std::string& b) {
  for (const auto& l : s.links) {
    const auto& na = s.nodes[l.a.node].name;
    const auto& nb = s.nodes[l.b.node].name;
    if ((na == a && nb == b) || (na == b && nb == a)) return l;
  }
  throw std::runtime_error("no link " + a + " - " + b);
}

inline size_t route_count(const model::Scenario& s, const std::string& node) {
  return s.routes[*s.find_node(node)].routes.size();
}

}  // namespace rocelab::testing
