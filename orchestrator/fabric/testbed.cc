#include "fabric/testbed.h"

#include <climits>

#include "model/port_target.h"

namespace rocelab::fabric {

size_t Testbed::node_index(std::string_view name) const {
  const auto& ns = nodes();
  for (size_t n = 0; n < ns.size(); ++n)
    if (ns[n].name == name) return n;
  return SIZE_MAX;
}

Result<PortRef> Testbed::port(std::string_view target) const {
  const auto t = model::PortTarget::parse(target);
  if (!t.port) return error(Errc::kBadInput, "expected NODE:PORT, got '" + std::string(target.substr(0, 64)) + "'");
  const std::string_view node = t.node, port = *t.port;
  const auto& ns = nodes();
  for (size_t n = 0; n < ns.size(); ++n) {
    if (ns[n].name != node) continue;
    if (ns[n].elsewhere)
      return error(Errc::kBadInput, "node " + std::string(node) + " is on another machine of this split fabric (its part reaches it)");
    std::string names;
    for (size_t p = 0; p < ns[n].ports.size(); ++p) {
      if (ns[n].ports[p].name == port) return PortRef{n, p, ns[n].ports[p].slot};
      names += (names.empty() ? "" : ", ") + ns[n].ports[p].name;
    }
    return error(Errc::kBadInput, "node " + std::string(node) + " has no port '" + std::string(port.substr(0, 64)) +
                                      "' (its ports: " + names + ")");
  }
  return error(Errc::kBadInput, "instance " + instance() + " has no node '" + std::string(node.substr(0, 64)) + "'");
}

std::string Testbed::name(const PortRef& p) const {
  const auto& n = nodes().at(p.node);
  return n.name + ":" + n.ports.at(p.port).name;
}

Result<std::vector<PortRef>> Testbed::select(std::string_view only) const {
  std::vector<PortRef> out;
  if (model::PortTarget::parse(only).is_port()) {
    auto p = port(only);
    if (!p) return p.error();
    out.push_back(*p);
    return out;
  }
  const auto& ns = nodes();
  for (size_t n = 0; n < ns.size(); ++n) {
    if (!only.empty() && ns[n].name != only) continue;
    for (size_t p = 0; p < ns[n].ports.size(); ++p) out.push_back({n, p, ns[n].ports[p].slot});
  }
  if (!only.empty() && out.empty())
    return error(Errc::kBadInput, "no node '" + std::string(only.substr(0, 64)) + "' in instance " + instance() +
                                      " (NODE or NODE:PORT)");
  return out;
}

std::shared_ptr<std::atomic<int>> Testbed::halted_flag(size_t node) {
  auto& f = halted_[node];
  if (!f) f = std::make_shared<std::atomic<int>>(0);
  return f;
}

Result<Change> Testbed::fail_link_named(std::string_view target) {
  auto p = port(target);
  if (!p) return p.error();
  return fail_link(*p);
}

Result<Change> Testbed::crash_node_named(std::string_view node) {
  const size_t n = node_index(node);
  if (n == SIZE_MAX) return error(Errc::kBadInput, "instance " + instance() + " has no node '" + std::string(node.substr(0, 64)) + "'");
  return crash_node(n);
}

std::function<bool()> Testbed::node_halted(size_t node) {
  return [f = halted_flag(node)] { return f->load(std::memory_order_relaxed) > 0; };
}

Result<Change> Testbed::crash_node(size_t node) {
  if (node >= nodes().size()) return error(Errc::kBadInput, "no node " + std::to_string(node));
  auto flag = halted_flag(node);
  // Halt first: the endpoints stop before the links go, as a host that dies takes its NIC with it.
  flag->fetch_add(1);
  std::vector<Change> links;
  for (size_t p = 0; p < nodes()[node].ports.size(); ++p) {
    auto c = fail_link(PortRef{node, p, nodes()[node].ports[p].slot});
    if (!c) {
      (void)combined("", std::move(links)).undo();
      flag->fetch_sub(1);
      return c.error();
    }
    links.push_back(std::move(*c));
  }
  auto held = std::make_shared<Change>(combined("links of " + nodes()[node].name, std::move(links)));
  return Change("crash " + nodes()[node].name, [held, flag]() -> Status {
    Status st = held->undo();
    flag->fetch_sub(1);  // up again once its links are: it answers what reaches it
    return st;
  });
}

Change combined(std::string what, std::vector<Change> parts) {
  auto held = std::make_shared<std::vector<Change>>(std::move(parts));
  return Change(std::move(what), [held]() -> Status {
    Status first = ok();
    for (auto it = held->rbegin(); it != held->rend(); ++it)
      if (auto st = it->undo(); !st && first) first = st;
    return first;
  });
}

}  // namespace rocelab::fabric
