#include "model/partition.h"

#include <algorithm>
#include <deque>
#include <numeric>

namespace rocelab::model {

namespace {

size_t root(std::vector<size_t>& parent, size_t x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

}  // namespace

std::optional<Partition> partition(const Scenario& s, size_t parts, std::string& why) {
  const size_t n = s.nodes.size();
  if (parts < 1) {
    why = "a split needs at least one part";
    return std::nullopt;
  }
  Partition p;
  p.parts = parts;
  p.part_of.assign(n, SIZE_MAX);
  p.ports.assign(parts, 0);
  auto is_host = [&](size_t x) { return s.nodes[x].kind == NodeKind::kHost; };
  // Groups: a host and everything it links to, joined transitively through hosts.
  std::vector<size_t> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  for (const Link& l : s.links)
    if (is_host(l.a.node) || is_host(l.b.node)) parent[root(parent, l.a.node)] = root(parent, l.b.node);
  std::vector<std::vector<size_t>> groups;
  std::vector<size_t> group_of(n, SIZE_MAX);
  for (size_t x = 0; x < n; ++x) {
    if (!is_host(x)) continue;
    const size_t r = root(parent, x);
    if (group_of[r] == SIZE_MAX) {
      group_of[r] = groups.size();
      groups.emplace_back();
    }
  }
  for (size_t x = 0; x < n; ++x)
    if (const size_t g = group_of[root(parent, x)]; g != SIZE_MAX) groups[g].push_back(x);
  if (groups.size() < parts) {
    why = "the fabric splits into at most " + std::to_string(groups.size()) +
          " parts without cutting a host's link (its hosts and the switches they hang from form " +
          std::to_string(groups.size()) + " groups), not " + std::to_string(parts);
    return std::nullopt;
  }
  auto weight = [&](const std::vector<size_t>& g) {
    size_t w = 0;
    for (size_t x : g) w += s.nodes[x].ports.size();
    return w;
  };
  // Contiguous runs of groups in the scenario's order (a generator's pods and leaves come in
  // order, so a pod's edges stay together and only the links above them are cut), each
  // group where the middle of its ports falls in the fabric's running total.
  size_t total = 0, cum = 0;
  for (const auto& g : groups) total += weight(g);
  for (const auto& g : groups) {
    const size_t w = weight(g);
    const size_t to = total ? std::min(parts - 1, (2 * cum + w) * parts / (2 * total)) : 0;
    cum += w;
    for (size_t x : g) p.part_of[x] = to;
    p.ports[to] += w;
  }
  // The other switches, breadth first from the groups: each to the part most of its placed
  // neighbours are in.
  std::deque<size_t> queue;
  std::vector<char> queued(n, 0);
  for (size_t x = 0; x < n; ++x)
    if (p.part_of[x] != SIZE_MAX) queued[x] = 1, queue.push_back(x);
  while (!queue.empty()) {
    const size_t x = queue.front();
    queue.pop_front();
    if (p.part_of[x] == SIZE_MAX) {
      std::vector<size_t> links_to(parts, 0);
      for (size_t li : s.nodes[x].ports) {
        const size_t y = s.links[li].peer_of(x).node;
        if (p.part_of[y] != SIZE_MAX) ++links_to[p.part_of[y]];
      }
      size_t best = 0;
      for (size_t q = 1; q < parts; ++q)
        if (links_to[q] > links_to[best] || (links_to[q] == links_to[best] && p.ports[q] < p.ports[best])) best = q;
      p.part_of[x] = best;
      p.ports[best] += s.nodes[x].ports.size();
    }
    for (size_t li : s.nodes[x].ports) {
      const size_t y = s.links[li].peer_of(x).node;
      if (!queued[y]) queued[y] = 1, queue.push_back(y);
    }
  }
  // Switches no host reaches: the part with the fewest ports.
  for (size_t x = 0; x < n; ++x)
    if (p.part_of[x] == SIZE_MAX) {
      const size_t to = size_t(std::min_element(p.ports.begin(), p.ports.end()) - p.ports.begin());
      p.part_of[x] = to;
      p.ports[to] += s.nodes[x].ports.size();
    }
  for (size_t li = 0; li < s.links.size(); ++li)
    if (p.part_of[s.links[li].a.node] != p.part_of[s.links[li].b.node]) p.cut_links.push_back(li);
  return p;
}

}  // namespace rocelab::model
