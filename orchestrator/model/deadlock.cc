#include "model/deadlock.h"

#include <algorithm>
#include <functional>
#include <set>

namespace rocelab::model {

namespace {

struct Edge {
  size_t from, to;
  uint64_t key;
};

// A simple cycle through each strongly connected part (Tarjan) of one priority's wait-for
// graph: from its least node, the least-keyed edge that stays inside, until a node repeats.
std::vector<std::vector<uint64_t>> cycles(std::vector<Edge> edges) {
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.key < b.key; });
  std::map<size_t, std::vector<const Edge*>> out;
  for (const Edge& e : edges) out[e.from].push_back(&e);
  std::map<size_t, int> index, low;
  std::map<size_t, size_t> part;
  std::vector<size_t> stack;
  std::set<size_t> on_stack;
  int next = 0;
  size_t parts = 0;
  std::function<void(size_t)> visit = [&](size_t v) {
    index[v] = low[v] = next++;
    stack.push_back(v);
    on_stack.insert(v);
    for (const Edge* e : out[v]) {
      if (!index.count(e->to)) {
        visit(e->to);
        low[v] = std::min(low[v], low[e->to]);
      } else if (on_stack.count(e->to)) {
        low[v] = std::min(low[v], index[e->to]);
      }
    }
    if (low[v] != index[v]) return;
    for (size_t w = SIZE_MAX; w != v;) {
      w = stack.back();
      stack.pop_back();
      on_stack.erase(w);
      part[w] = parts;
    }
    ++parts;
  };
  for (const Edge& e : edges)
    if (!index.count(e.from)) visit(e.from);

  std::vector<std::vector<uint64_t>> found;
  std::set<size_t> done;
  for (const auto& [v, p] : part) {  // nodes in order: each part's walk starts at its least
    if (done.count(p)) continue;
    std::vector<uint64_t> keys;  // the walk's edges; at: where each node's edge sits in it
    std::map<size_t, size_t> at;
    for (size_t u = v; !at.count(u);) {
      const Edge* step = nullptr;
      for (const Edge* e : out[u])
        if (part.count(e->to) && part[e->to] == p) {
          step = e;
          break;
        }
      if (!step) break;  // a part of one node without a self-loop: no cycle
      at[u] = keys.size();
      keys.push_back(step->key);
      u = step->to;
      if (at.count(u)) {
        std::vector<uint64_t> cycle(keys.begin() + long(at[u]), keys.end());
        std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
        found.push_back(std::move(cycle));
      }
    }
    done.insert(p);
  }
  return found;
}

}  // namespace

size_t DeadlockWatch::sample(int64_t t, const std::vector<WaitQueue>& queues) {
  std::map<uint64_t, State> next;
  std::map<uint32_t, std::vector<Edge>> graphs;  // per priority: edges of queues stuck long enough
  std::set<uint64_t> stuck;                      // waiting, unmoved since the last look
  for (const WaitQueue& q : queues) {
    State s = state_.count(q.key) ? state_[q.key] : State{};
    const bool waiting = q.paused && q.holds, moved = q.dequeued != s.dequeued;
    const bool still = waiting && !moved && s.since >= 0;  // waiting since the last look, unmoved
    if (!still) s.since = waiting ? t : -1;
    s.dequeued = q.dequeued;
    next[q.key] = s;
    if (!waiting) continue;
    if (still) stuck.insert(q.key);
    if (t - s.since >= q.hold) graphs[q.prio].push_back({q.node, q.peer, q.key});
  }
  state_ = std::move(next);

  size_t changes = 0;
  for (Deadlock& d : found_) {  // a deadlock ends when any member moves or is released
    if (d.ended >= 0) continue;
    for (uint64_t k : d.members)
      if (!stuck.count(k)) {
        d.ended = t;
        ++changes;
        break;
      }
  }
  for (auto& [prio, edges] : graphs)
    for (auto& cycle : cycles(edges)) {
      const bool known = std::any_of(found_.begin(), found_.end(),
                                     [&](const Deadlock& d) { return d.ended < 0 && d.members == cycle; });
      if (known) continue;
      int64_t since = 0;
      for (uint64_t k : cycle) since = std::max(since, state_[k].since);
      found_.push_back({prio, std::move(cycle), since, t, -1});
      ++changes;
    }
  return changes;
}

}  // namespace rocelab::model
