#include "run/graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>

namespace rocelab::run {

using namespace rocelab::model;

namespace {
std::string q(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Tier by role; a plain "switch" (explicit fabrics) sits one above its nearest host.
std::vector<int> tiers(const Scenario& s) {
  std::vector<int> t(s.nodes.size(), -1);
  std::deque<size_t> queue;
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    const std::string& r = s.nodes[i].role;
    if (r == "host") t[i] = 0;
    else if (r == "leaf" || r == "rail" || r == "edge") t[i] = 1;
    else if (r == "spine" || r == "agg") t[i] = 2;
    else if (r == "core") t[i] = 3;
    if (r == "host") queue.push_back(i);
  }
  std::vector<int> dist(s.nodes.size(), -1);
  for (size_t i : queue) dist[i] = 0;
  while (!queue.empty()) {
    size_t u = queue.front();
    queue.pop_front();
    for (size_t li : s.nodes[u].ports) {
      size_t v = s.links[li].peer_of(u).node;
      if (dist[v] < 0) {
        dist[v] = dist[u] + 1;
        queue.push_back(v);
      }
    }
  }
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] < 0) t[i] = dist[i] < 0 ? 1 : dist[i];
  return t;
}

std::string short_rate(Rate r) {
  std::string f = format_rate(r);
  return f.substr(0, f.size() - 5);  // "100Gbit/s" → "100G"
}
}  // namespace

std::string fabric_dot(const Scenario& s) {
  std::string d = "// rocelab graph: " + s.file + " (instance " + s.name + ", D = " +
                  fmt::format("{:g}", s.scale.factor()) + ")\n";
  d += "graph " + q(s.name) + " {\n";
  d += "  rankdir=BT;\n  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=8];\n";
  std::vector<int> t = tiers(s);
  std::map<int, std::vector<size_t>> by_tier;
  for (size_t i = 0; i < s.nodes.size(); ++i) by_tier[t[i]].push_back(i);
  for (const auto& [tier, ids] : by_tier) {
    d += "  { rank=same;";
    for (size_t i : ids) d += " " + q(s.nodes[i].name) + ";";
    d += " }\n";
  }
  for (const Node& n : s.nodes) {
    bool host = n.kind == NodeKind::kHost;
    d += "  " + q(n.name) + " [shape=" + (host ? "ellipse" : "box") + (host ? "" : ", style=filled, fillcolor=\"#dde8f5\"") +
         ", label=" + q(n.name + "\n" + format_ipv4(n.loopback.addr)) + "];\n";
  }
  for (const Link& l : s.links) {
    d += "  " + q(s.nodes[l.a.node].name) + " -- " + q(s.nodes[l.b.node].name) + " [label=" + q(short_rate(l.rate)) +
         ", taillabel=" + q(l.a.ifname) + ", headlabel=" + q(l.b.ifname) + "];\n";
  }
  d += "}\n";
  return d;
}

}  // namespace rocelab::run
