#include "fabric/realiser.h"

#include <poll.h>
#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <linux/if.h>
#include <linux/rtnetlink.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bpf/headroom.h"
#include "bpf/tc_hook.h"
#include "fabric/agent_protocol.h"
#include "bpf/port_programs.h"
#include "fabric/port_config.h"
#include "model/ipv4.h"
#include "model/partition.h"
#include "netlink/batch.h"
#include "netlink/datapath_probe.h"
#include "netlink/offload.h"
#include "netlink/query.h"
#include "netlink/rdma_link.h"
#include "sys/files.h"
#include "sys/host_info.h"
#include "sys/process.h"

namespace rocelab::fabric {

namespace {

constexpr const char* kMagic = "rocelab-state 1";
constexpr const char* kHashSeedSysctl = "net/ipv4/fib_multipath_hash_seed";
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string prefix_of(const std::string& instance) { return "rl-" + instance + "."; }

// What a state file says. Lines are "KEY VALUE..."; unknown keys are skipped so a newer
// log can still be torn down by an older binary as far as it understands it.
struct LogEntries {
  bool valid = false;
  std::string instance, scenario, started, job;
  int pid = 0;
  bool ready = false;
  std::vector<std::pair<std::string, std::string>> netns;  // (namespace, node)
  std::vector<std::string> wire_netns;                     // delayed links' middles (no node)
  // Each link's record, by its kind (the record's four fields are the kind's to read).
  std::vector<std::pair<const Fabric::LinkKind*, std::array<std::string, 4>>> links;
  std::vector<std::pair<int, uint64_t>> procs;             // (pid, start time)
  std::vector<std::string> files;
  std::vector<int> init_tables;  // routing tables (and their rules) of hosts in the init namespace
  // What hosts in the init namespace changed of the machine's own (ROCELAB_DEDICATED_MACHINE):
  // each sysctl's value before, and whether the local rule was moved; down puts them back.
  std::vector<std::pair<std::string, std::string>> init_sysctls;
  bool init_local_rule = false;
};

// A sysctl record is taken back only for the keys a fabric writes (net/...), with a value of
// one plain token: a damaged or hostile state file must not make down write elsewhere.
bool restorable_sysctl(const std::string& key, const std::string& value) {
  const auto plain = [](const std::string& t, const char* extra) {
    return !t.empty() && t.size() <= 128 && std::all_of(t.begin(), t.end(), [&](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || std::strchr(extra, c) != nullptr;
    });
  };
  return key.rfind("net/", 0) == 0 && key.find("..") == std::string::npos && plain(key, "/_-.") && plain(value, "-");
}

const Fabric::LinkKind* link_kind_of_record(const std::string& key) {
  for (const Fabric::LinkKind& k : Fabric::link_kinds())
    if (k.record == key) return &k;
  return nullptr;
}

LogEntries parse_log(const std::vector<std::string>& lines) {
  LogEntries e;
  e.valid = !lines.empty() && lines[0] == kMagic;
  for (size_t i = 1; e.valid && i < lines.size(); ++i) {
    std::istringstream in(lines[i]);
    std::string key;
    in >> key;
    if (key == "instance") in >> e.instance;
    else if (key == "pid") in >> e.pid;
    else if (key == "started") in >> e.started;
    else if (key == "job") in >> e.job;
    else if (key == "scenario") std::getline(in >> std::ws, e.scenario);
    else if (key == "ready") e.ready = true;
    else if (key == "netns") {
      std::string ns, node;
      in >> ns >> node;
      e.netns.emplace_back(ns, node);
    } else if (const Fabric::LinkKind* k = link_kind_of_record(key)) {  // the namespaces take links away
      std::array<std::string, 4> f;
      if (in >> f[0] >> f[1] >> f[2] >> f[3]) e.links.emplace_back(k, f);
    } else if (key == "wirens") {
      std::string ns;
      if (in >> ns) e.wire_netns.push_back(ns);
    } else if (key == "initnode") {  // a host in the init namespace: named "" below
      std::string node;
      if (in >> node) e.netns.emplace_back("", node);
    } else if (key == "inittable") {
      int t = 0;
      if (in >> t && t >= kInitFirstTable && t < kInitFirstTable + (1 << 20)) e.init_tables.push_back(t);
    } else if (key == "initsysctl") {
      std::string k, v;
      if (in >> k >> v && restorable_sysctl(k, v)) e.init_sysctls.emplace_back(k, v);
    } else if (key == "initlocalrule") {
      e.init_local_rule = true;
    } else if (key == "proc") {
      int pid = 0;
      uint64_t start = 0;
      if (in >> pid >> start) e.procs.emplace_back(pid, start);
    } else if (key == "file") {
      std::string f;
      if (in >> f) e.files.push_back(f);
    }
  }
  return e;
}

// A name from a state file is trusted only if it is one of this instance's: a damaged or
// hostile file must not make teardown unmount anything else under /run/netns.
bool owned_name(const std::string& ns, const std::string& prefix) {
  if (ns.size() <= prefix.size() || ns.size() > 255 || ns.rfind(prefix, 0) != 0) return false;
  return std::all_of(ns.begin() + static_cast<long>(prefix.size()), ns.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; });
}

// Removes every namespace the log names, newest first. Everything else the testbed made
// (veth pairs, addresses, routes, neighbours, sysctls) lives inside those namespaces and
// goes with them, so the log names the namespaces and pairs but only namespaces need undoing.
bool replay(const LogEntries& e, const std::string& instance, DownReport& rep, std::string& why) {
  const std::string prefix = prefix_of(instance);
  size_t& removed = rep.namespaces;
  bool ok = true;
  // Processes first (they act on the namespaces), each only if it is still the one started.
  const auto t0 = Clock::now();
  for (const auto& [pid, start] : e.procs)
    if (!sys::stop_process(pid, start, 1000, why, {"agent", "--instance", instance})) ok = false;
  rep.agent_seconds = since(t0);
  // In the order they were made: the kernel frees a batch of namespaces newest first, and
  // each tc block it unbinds is looked up in a machine-wide list that holds the newest
  // first, so the lookups stay short. (Removed newest first, the oldest blocks went first,
  // each a scan of the whole list: after a k = 16 fabric's `down` the next `up` waited for
  // the kernel's cleanup 3.1-9.3 s, median 8.0, against 3.0-7.1, median 3.3, now.)
  std::vector<std::string> order;
  for (const auto& [ns, node] : e.netns)
    if (!ns.empty()) order.push_back(ns);  // a host's NICs in the init namespace go with their switches' ends
  order.insert(order.end(), e.wire_netns.begin(), e.wire_netns.end());
  for (const std::string& ns : order) {
    if (!owned_name(ns, prefix)) {
      why = "state file names '" + ns + "', not a namespace of instance " + instance + ": left alone";
      ok = false;
      continue;
    }
    std::string w;
    if (!sys::named_netns_exists(ns)) continue;
    if (sys::remove_named_netns(ns, w)) ++removed;
    else {
      why = w;
      ok = false;
    }
  }
  // The init-namespace hosts' rules (their tables emptied when their NICs went). The local
  // rule stays behind them: as good as at 0 once no rule precedes it.
  if (!e.init_tables.empty()) {
    netlink::Status nst;
    auto sock = netlink::RouteSocket::open(nst);
    if (!sock) {
      why = nst.text;
      ok = false;
    } else {
      netlink::Batch b(*sock);
      for (int t : e.init_tables) {
        b.delete_rule({0, t, kInitNicRulePriority, "", ""});
        b.delete_rule({0, t, kInitNicRulePriority, "", ""});
      }
      if (e.init_local_rule) {  // the local rule back at 0, where the machine had it
        b.delete_rule({0, RT_TABLE_LOCAL, 0, "", ""});
        b.add_rule({0, RT_TABLE_LOCAL, 0, "", ""});
        b.delete_rule({0, RT_TABLE_LOCAL, kInitLocalRulePriority, "", ""});
      }
      if (auto r = b.flush(); !r.ok()) {
        why = r.text;
        ok = false;
      }
    }
  }
  for (const auto& [key, value] : e.init_sysctls) {
    std::string w;
    if (!sys::write_sysctl(key, value, w)) {
      why = "the machine's " + w + " (as before the fabric) failed";
      ok = false;
    }
  }
  // Files the testbed wrote beside the state file: only this instance's, only there.
  const std::string mine = std::string(sys::kStateDir) + "/" + instance + ".";
  for (const std::string& f : e.files) {
    if (f.rfind(mine, 0) != 0 || f.find("/", mine.size()) != std::string::npos || f.find("..") != std::string::npos) {
      why = "state file names '" + f + "', not a file of instance " + instance + ": left alone";
      ok = false;
      continue;
    }
    std::remove(f.c_str());
    std::remove((f + ".tmp").c_str());
  }
  return ok;
}

// A node's namespace as a link record names it ("-": the machine's own).
std::string ns_record(const NodePlan& np) { return np.in_init ? std::string("-") : np.netns; }

// A wire device's MAC: locally administered, never a port's (02:...); nothing is ever
// addressed to it.
netlink::Mac wire_mac(size_t link, bool toward_b) {
  return {0x06, 0x77, uint8_t(link >> 16), uint8_t(link >> 8), uint8_t(link), uint8_t(toward_b ? 1 : 0)};
}

std::string utc_now() {
  char buf[32];
  time_t t = time(nullptr);
  struct tm tm {};
  gmtime_r(&t, &tm);
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string state_path(const std::string& instance) {
  return std::string(sys::kStateDir) + "/" + instance + ".state";
}

std::unique_ptr<Fabric> Fabric::up(const model::Scenario& s, const UpOptions& o, std::string& why) {
  if (!model::is_instance_name(s.name)) {
    why = "'" + s.name + "' is not a valid instance name";
    return nullptr;
  }
  if (!sys::is_root()) {
    why = "bringing a fabric up needs root (namespaces, mounts under /run/netns, netlink)";
    return nullptr;
  }
  if (!sys::ensure_state_dir(why) || !sys::prepare_netns_dir(why)) return nullptr;
  const std::string path = state_path(s.name);
  if (!sys::path_exists(path)) {
    auto stale = sys::list_named_netns(prefix_of(s.name));
    if (!stale.empty()) {
      why = "namespace " + stale.front() + " (and " + std::to_string(stale.size() - 1) +
            " more) exists but no state file records it; not made by this tool's log, so left alone: "
            "remove it with 'ip netns del', or choose another name";
      return nullptr;
    }
  }
  auto in_init = hosts_in_init_netns(s);
  if (!in_init) {
    why = in_init.error().what;
    return nullptr;
  }
  KernelPlan plan = plan_kernel(s, *in_init);
  if (o.split) {
    if (plan.hosts_in_init) {
      why = "a fabric split over machines cannot put its hosts in the machine's own namespace (hosts.engine: rxe)";
      return nullptr;
    }
    if (o.split->underlay.size() != o.split->parts || o.split->index >= o.split->parts) {
      why = "a split needs the part's index below the number of parts and one address per part";
      return nullptr;
    }
    auto p = model::partition(s, o.split->parts, why);
    if (!p) return nullptr;
    take_part(plan, *p, o.split->index, o.split->underlay);
  }
  std::unique_ptr<Fabric> f(new Fabric(s.name, std::move(plan)));
  // The path as given, but never a line break: the header is lines `down` replays.
  std::string shown = o.scenario_path;
  for (char& ch : shown)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
  std::string header = std::string(kMagic) + "\ninstance " + s.name + "\npid " + std::to_string(getpid()) +
                       "\nstarted " + utc_now() + "\nscenario " + shown + "\n" +
                       (is_job_name(o.job) ? "job " + o.job + "\n" : "");
  f->log_ = sys::StateLog::create(path, header, why);
  if (!f->log_) {
    if (why.find("exists") != std::string::npos)
      why = "instance '" + s.name + "' is already up, or being brought up (" + path + "); 'rocelab down " + s.name +
            "' takes it away";
    return nullptr;
  }
  if (!o.scenario_record.empty() && !f->keep_scenario(o.scenario_record, why)) {
    std::string w;
    if (!f->down(w)) why += "; rollback: " + w;
    return nullptr;
  }
  if (!f->build(o, why) || !f->start_agent(o, why)) {
    std::string w;
    if (!f->down(w)) why += "; rollback: " + w;
    return nullptr;
  }
  return f;
}

std::string scenario_record_path(const std::string& instance) {
  return std::string(sys::kStateDir) + "/" + instance + ".scenario.json";
}

// Logged before written, so `down` removes it whatever happens after; written whole or not
// at all (a reader never sees half of it).
bool Fabric::keep_scenario(const std::string& text, std::string& why) {
  const std::string path = scenario_record_path(instance_);
  if (!log_->append({"file " + path}, why)) return false;
  const std::string tmp = path + ".tmp";
  if (!sys::write_file(tmp, text, why)) return false;  // never through a link left there
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    why = path + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

// The progress and cancellation of one `up`.
struct Fabric::Steps {
  const UpOptions& o;
  std::string& why;
  Clock::time_point last_report = Clock::now();
  bool cancelled() {
    if (!o.cancel || !o.cancel->load()) return false;
    why = "interrupted: rolled back";
    return true;
  }
  void report(const std::string& what) {
    if (o.progress && std::chrono::duration<double>(Clock::now() - last_report).count() > 0.5) {
      last_report = Clock::now();
      o.progress(what);
    }
  }
};

bool Fabric::build(const UpOptions& o, std::string& why) {
  const auto t0 = Clock::now();
  Steps st{o, why};
  sys::raise_fd_limit();
  plan_link_delay();  // before the programs: the headroom they are given counts the delay
  // The port programs load first: a kernel that refuses them fails before anything is made.
  if (!load_programs(why) || !make_namespaces(st)) return false;
  for (const LinkKind& k : link_kinds())
    if (!(this->*k.make)(st)) return false;
  for (size_t x = 0; x < plan_.nodes.size(); ++x) {
    if (!plan_.part.has(x)) continue;
    if (!configure_node(x, why) || st.cancelled()) return false;
    st.report("addresses and routes of " + std::to_string(x + 1) + "/" + std::to_string(plan_.nodes.size()) + " nodes");
  }
  for (const LinkKind& k : link_kinds())
    if (k.configure && !(this->*k.configure)(why)) return false;
  up_seconds_ = since(t0);
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3f", up_seconds_);
  return log_->append({std::string("ready ") + secs}, why);
}

bool Fabric::load_programs(std::string& why) {
  // The egress program reads HTB's own structures (CO-RE). Where sch_htb is a module (stock
  // distribution kernels), its types exist only once it is loaded, and the kernel loads it
  // for the first HTB qdisc made: a probe in a private namespace makes one first (found in
  // the VM image: Debian's 6.12 refused the program with "failed to resolve CO-RE
  // relocation struct htb_sched" until something had made an HTB qdisc).
  if (!sys::path_exists("/sys/module/sch_htb")) {
    std::string probe_why;
    (void)sys::run_in_private_netns([] { return netlink::encode(netlink::probe_datapath({"htb", "tbf", "clsact"})); },
                                    probe_why);
  }
  progs_ = bpf::PortPrograms::load(plan_.ports, plan_.port_config, why);
  if (!progs_) return false;
  for (const NodePlan& np : plan_.nodes) {
    for (const PortPlan& p : np.ports) {
      rl_port_info info{};
      std::copy(p.mac.begin(), p.mac.end(), info.mac);
      info.quantum_ps = quantum_ps(p.rate_bps);
      info.flags = np.host ? RL_PORT_HOST : 0;
      info.node_first_slot = static_cast<uint32_t>(np.ports.front().slot);
      info.node_ports = static_cast<uint32_t>(np.ports.size());
      // Dequeue ECN marks are decided at the peer's ingress: only where it is on this machine.
      if (p.cut < 0 && p.peer_ifindex >= kFirstPortIfindex)
        info.peer = static_cast<uint32_t>(p.peer_ifindex - kFirstPortIfindex) + 1;
      if (!progs_->set_port_info(p.slot, info, why)) return false;
    }
    const auto h = bpf::node_headroom(headroom_inputs(plan_, np), plan_.port_config.pfc_xoff,
                                      plan_.port_config.buffer_size, bpf::kInitialReactionBudgetNs,
                                      plan_.port_config.pfc_trigger == RL_PFC_TRIGGER_INGRESS);
    for (size_t i = 0; i < np.ports.size(); ++i)
      if (!progs_->set_port_headroom(np.ports[i].slot, h[i], why)) return false;
  }
  return true;
}

// Link delay needs netem (DESIGN.md §3): where the kernel has it, every delayed link runs
// through the wire namespace; where not, the run says so and what it costs.
void Fabric::plan_link_delay() {
  if (plan_.max_link_delay_ns <= 0) return;
  const std::string longest = model::format_duration(model::Duration{plan_.max_link_delay_ns});
  std::string probe_why;
  const auto probes = sys::run_in_private_netns(
      [] { return netlink::encode(netlink::probe_datapath({"netem"})); }, probe_why);
  const auto found = probes ? netlink::decode(*probes) : std::vector<netlink::Probe>{};
  const bool netem = std::any_of(found.begin(), found.end(), [](const netlink::Probe& p) { return p.name == "qdisc:netem" && p.ok; });
  if (!netem) {
    notes_.push_back("link delay (up to " + longest + " physical) is not applied: this kernel has no netem (sch_netem); "
                     "PFC headroom, pause counts and peak queues are those of links without propagation delay "
                     "(`rocelab run --vm` applies it in the project's VM image)");
    return;
  }
  apply_link_delay(plan_, prefix_of(instance_) + "_wire");
  size_t cut_delayed = 0;  // a cut link's delay is the underlay's, whatever the scenario says
  for (const CutLink& c : plan_.part.cuts) cut_delayed += plan_.nodes[c.node].ports[c.port].delay_ns > 0;
  if (cut_delayed)
    notes_.push_back("link delay is not applied to " + std::to_string(cut_delayed) +
                     " links cut between machines: their delay is the underlay's");
  if (plan_.wire.links.empty()) return;
  delay_summary_ = "link delay applied: " + std::to_string(plan_.wire.links.size()) + " links (up to " + longest +
                   " physical, " +
                   model::format_duration(model::Duration{int64_t(double(plan_.max_link_delay_ns) * plan_.scale)}) +
                   " of wall clock at D) run through netem in " + plan_.wire.netns +
                   "; PFC headroom counts their round trip";
}

// Delayed links: the wire namespace, then each link as two veth pairs through it (a's port
// to the wire, the wire to b's port), netem on the wire's devices (configure_wire). The
// namespace and the links are logged before any is made (`down` removes the namespace after
// the nodes'); IPv6 off in it before any device: nothing of its own may leave toward a port.
bool Fabric::make_delayed(Steps& st) {
  if (plan_.wire.netns.empty()) return true;
  std::vector<std::string> lines{"wirens " + plan_.wire.netns};
  for (const WirePlan::Link& l : plan_.wire.links) {
    const VethPlan& v = plan_.veths[l.link];
    const NodePlan &a = plan_.nodes[v.a_node], &b = plan_.nodes[v.b_node];
    lines.push_back("delayed " + ns_record(a) + " " + a.ports[v.a_port].ifname + " " + ns_record(b) + " " +
                    b.ports[v.b_port].ifname);
  }
  if (st.cancelled() || !log_->append(lines, st.why)) return false;
  auto inside = [&](std::string& w) {
    netlink::Status ns;
    wire_.rtnl = netlink::RouteSocket::open(ns);
    if (!wire_.rtnl) return w = ns.text, false;
    for (const char* key : {"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6"})
      if (sys::sysctl_exists(key) && !sys::write_sysctl(key, "1", w)) return false;
    wire_.inet = sys::Fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!wire_.inet.valid()) return w = std::string("socket: ") + std::strerror(errno), false;
    return true;
  };
  auto fd = sys::create_named_netns(plan_.wire.netns, inside, st.why);
  if (!fd) return st.why = plan_.wire.netns + ": " + st.why, false;
  wire_.netns = std::move(*fd);
  wire_prog_ = bpf::WireProgram::load(st.why);
  if (!wire_prog_) return false;
  // a's halves, made from a's namespace with the wire end put straight into the wire's.
  std::map<size_t, std::vector<size_t>> by_node;  // a node -> its delayed links
  for (size_t w = 0; w < plan_.wire.links.size(); ++w) by_node[plan_.veths[plan_.wire.links[w].link].a_node].push_back(w);
  for (const auto& [x, links] : by_node) {
    netlink::Batch b(*nodes_[x].rtnl);
    for (size_t w : links) {
      const PortPlan& pa = plan_.nodes[x].ports[plan_.veths[plan_.wire.links[w].link].a_port];
      b.add_veth({pa.ifname, WirePlan::device(w, false), pa.ifindex, WirePlan::ifindex(w, false), pa.mac, wire_mac(w, false),
                  pa.mtu, wire_.netns.get()});
    }
    if (auto r = b.flush(); !r.ok()) return st.why = plan_.nodes[x].node + ": " + r.text, false;
    if (st.cancelled()) return false;
  }
  // b's halves, made from the wire namespace with the far end put straight into b's.
  netlink::Batch b(*wire_.rtnl);
  for (size_t w = 0; w < plan_.wire.links.size(); ++w) {
    const VethPlan& v = plan_.veths[plan_.wire.links[w].link];
    const PortPlan& pb = plan_.nodes[v.b_node].ports[v.b_port];
    b.add_veth({WirePlan::device(w, true), pb.ifname, WirePlan::ifindex(w, true), pb.ifindex, wire_mac(w, true), pb.mac,
                pb.mtu, nodes_[v.b_node].netns.get()});
  }
  if (auto r = b.flush(); !r.ok()) return st.why = plan_.wire.netns + ": " + r.text, false;
  return true;
}

// The wire's devices up, each with its netem delay toward its end, and the wire program
// on one ingress block all of them share.
bool Fabric::configure_wire(std::string& why) {
  if (plan_.wire.netns.empty()) return true;
  netlink::Batch b(*wire_.rtnl);
  for (size_t i = 0; i < plan_.wire.links.size(); ++i)
    for (bool toward_b : {false, true}) {
      const int ifindex = WirePlan::ifindex(i, toward_b);
      b.set_up(ifindex);
      b.add_netem(ifindex, plan_.wire.links[i].delay_ns, plan_.wire.links[i].limit);
      b.add_shared_clsact(ifindex, bpf::kIngressBlock, bpf::kEgressBlock);
    }
  b.add_block_bpf(bpf::kIngressBlock, wire_prog_->fd(), "rl_wire");
  if (auto r = b.flush(); !r.ok()) return why = plan_.wire.netns + ": " + r.text, false;
  // Each wire device receives as a port does, into its one NAPI ring: without it a link's
  // packets joined the backlogs of whichever CPUs sent them, and a delayed lossless incast
  // in the VM image had a receiver NAK a swapped pair and go back 40 packets (3 runs in 10).
  for (size_t i = 0; i < plan_.wire.links.size(); ++i)
    for (bool toward_b : {false, true})
      if (!netlink::set_port_offloads(wire_.inet.get(), WirePlan::device(i, toward_b), why))
        return why = plan_.wire.netns + ": " + why, false;
  return true;
}

// One namespace per node, each logged before it is made, its sysctls set from inside.
bool Fabric::make_namespaces(Steps& st) {
  const bool seed_ok = sys::sysctl_exists(kHashSeedSysctl);
  if (!seed_ok)
    notes_.push_back("this kernel has no " + std::string(kHashSeedSysctl) +
                     " (Linux 6.11+): ECMP hashing is seeded at random, so flow placement differs between runs");
  const size_t n = plan_.nodes.size();
  if (!record_init_sysctls(st)) return false;
  nodes_.resize(n);
  for (size_t x = 0; x < n; ++x) {
    const NodePlan& np = plan_.nodes[x];
    if (!plan_.part.has(x)) continue;  // another machine's
    std::vector<std::string> lines{np.in_init ? "initnode " + np.node : "netns " + np.netns + " " + np.node};
    for (const PortPlan& p : np.ports)
      if (np.in_init) lines.push_back("inittable " + std::to_string(kInitFirstTable + p.slot));
    if (st.cancelled() || !log_->append(lines, st.why)) return false;
    NodeHandles& h = nodes_[x];
    auto inside = [&](std::string& w) {
      netlink::Status ns;
      h.rtnl = netlink::RouteSocket::open(ns);
      if (!h.rtnl) return w = ns.text, false;
      h.inet = sys::Fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
      if (!h.inet.valid()) return w = std::string("socket: ") + std::strerror(errno), false;
      for (const auto& [key, value] : np.sysctls) {
        if (key == kHashSeedSysctl && !seed_ok) continue;
        if (!sys::write_sysctl(key, value, w)) return false;
      }
      return true;
    };
    auto fd = np.in_init ? sys::open_named_netns("", st.why) : sys::create_named_netns(np.netns, inside, st.why);
    if (!fd || (np.in_init && !inside(st.why))) return st.why = np.node + ": " + st.why, false;
    h.netns = std::move(*fd);
    st.report("namespaces " + std::to_string(x + 1) + "/" + std::to_string(n));
  }
  if (plan_.hosts_in_init) {
    // The NICs' rules go ahead of the local table (a packet for another host's address must
    // leave on the wire): the local rule moves from 0 to behind them, once per machine.
    netlink::Status nst;
    auto sock = netlink::RouteSocket::open(nst);
    if (!sock) return st.why = nst.text, false;
    if (!log_->append({"initlocalrule"}, st.why)) return false;
    netlink::Batch b(*sock);
    b.delete_rule({0, RT_TABLE_LOCAL, kInitLocalRulePriority, "", ""});
    b.add_rule({0, RT_TABLE_LOCAL, kInitLocalRulePriority, "", ""});
    b.delete_rule({0, RT_TABLE_LOCAL, 0, "", ""});
    if (auto r = b.flush(); !r.ok()) return st.why = "init namespace: " + r.text, false;
  }
  return true;
}

// Hosts in the machine's own namespace write its sysctls: each key's value before any is
// written goes to the log first, so down (or a rollback) puts the machine back as it was.
bool Fabric::record_init_sysctls(Steps& st) {
  if (!plan_.hosts_in_init) return true;
  std::vector<std::string> lines, seen;
  for (size_t x = 0; x < plan_.nodes.size(); ++x) {
    const NodePlan& np = plan_.nodes[x];
    if (!np.in_init || !plan_.part.has(x)) continue;
    for (const auto& [key, value] : np.sysctls) {
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
      seen.push_back(key);
      auto before = sys::read_sysctl(key);
      if (before && restorable_sysctl(key, *before)) lines.push_back("initsysctl " + key + " " + *before);
    }
  }
  return lines.empty() || log_->append(lines, st.why);
}

// Veth pairs (links without delay, both ends on this machine): each made from its a-end's
// namespace with the peer placed straight into the b-end's, so no port ever exists in the
// machine's own namespace.
bool Fabric::make_veths(Steps& st) {
  const auto plain = [&](const VethPlan& v) { return v.wire < 0 && plan_.part.has(v.a_node) && plan_.part.has(v.b_node); };
  std::vector<std::string> lines;
  for (const VethPlan& v : plan_.veths) {
    if (!plain(v)) continue;  // delayed, cut, or another machine's
    const NodePlan &a = plan_.nodes[v.a_node], &b = plan_.nodes[v.b_node];
    lines.push_back("veth " + ns_record(a) + " " + a.ports[v.a_port].ifname + " " + ns_record(b) + " " + b.ports[v.b_port].ifname);
  }
  if (st.cancelled() || !log_->append(lines, st.why)) return false;
  const size_t n = plan_.nodes.size();
  std::vector<std::vector<const VethPlan*>> by_node(n);  // by the namespace that makes them
  for (const VethPlan& v : plan_.veths)
    if (plain(v)) by_node[v.a_node].push_back(&v);
  for (size_t x = 0; x < n; ++x) {
    if (by_node[x].empty()) continue;
    netlink::Batch b(*nodes_[x].rtnl);
    for (const VethPlan* v : by_node[x]) {
      const PortPlan& pa = plan_.nodes[x].ports[v->a_port];
      const PortPlan& pb = plan_.nodes[v->b_node].ports[v->b_port];
      b.add_veth({pa.ifname, pb.ifname, pa.ifindex, pb.ifindex, pa.mac, pb.mac, pa.mtu, nodes_[v->b_node].netns.get()});
    }
    if (auto r = b.flush(); !r.ok()) return st.why = plan_.nodes[x].node + ": " + r.text, false;
    if (st.cancelled()) return false;
    st.report("links of " + std::to_string(x + 1) + "/" + std::to_string(n) + " nodes");
  }
  return true;
}

// Cut links (a fabric split over machines): each local end a VXLAN port made from the
// namespace `up` runs in, where its socket stays on the underlay, and put straight into the
// node's. The underlay must carry the fabric's frames whole: its MTU is checked first.
bool Fabric::make_cuts(Steps& st) {
  if (plan_.part.cuts.empty()) return true;
  netlink::Status nst;
  auto sock = netlink::RouteSocket::open(nst);
  if (!sock) return st.why = nst.text, false;
  const std::string local = model::format_ipv4(plan_.part.local);
  auto under = netlink::link_with_address(*sock, plan_.part.local, nst);
  if (!under) {
    st.why = nst.ok() ? "no interface of this machine has the underlay address " + local + " (part " +
                            std::to_string(plan_.part.index) + "'s in the list of peers)"
                      : nst.text;
    return false;
  }
  for (const CutLink& c : plan_.part.cuts) {
    const PortPlan& p = plan_.nodes[c.node].ports[c.port];
    if (under->mtu < p.mtu + kVxlanOverhead) {
      st.why = "the underlay " + under->name + " (" + local + ") has MTU " + std::to_string(under->mtu) + ", and cut link " +
               plan_.nodes[c.node].node + ":" + p.ifname + " needs " + std::to_string(p.mtu + kVxlanOverhead) +
               " (the link's " + std::to_string(p.mtu) + " + " + std::to_string(kVxlanOverhead) + " of VXLAN)";
      return false;
    }
  }
  // Logged for `status` (the far end and its machine); the node's namespace takes it away.
  std::vector<std::string> lines;
  for (const CutLink& c : plan_.part.cuts) {
    const PortPlan& p = plan_.nodes[c.node].ports[c.port];
    lines.push_back("cut " + plan_.nodes[c.node].netns + " " + p.ifname + " " + plan_.nodes[p.peer_node].node + ":" +
                    p.peer_ifname + " " + model::format_ipv4(c.remote));
  }
  if (!log_->append(lines, st.why)) return false;
  netlink::Batch b(*sock);
  for (const CutLink& c : plan_.part.cuts) {
    const PortPlan& p = plan_.nodes[c.node].ports[c.port];
    b.add_vxlan({p.ifname, p.ifindex, p.mac, p.mtu, c.vni, plan_.part.local, c.remote, kVxlanPort,
                 nodes_[c.node].netns.get()});
  }
  if (auto r = b.flush(); !r.ok()) return st.why = r.text, false;
  return true;
}

const std::vector<Fabric::LinkKind>& Fabric::link_kinds() {
  // veth and delayed records: a's namespace and port, b's ("-": the machine's own namespace).
  static const auto both_ends = [](const std::array<std::string, 4>& f, const std::map<std::string, std::string>& node_of,
                                   LinkKind::Peers& out) {
    const auto ns = [&](size_t k) { return f[k] == "-" ? std::string() : f[k]; };
    const auto node = [&](size_t k) {
      auto it = node_of.find(ns(k));
      return it == node_of.end() ? std::string("?") : it->second;
    };
    out[ns(0)][f[1]] = node(2) + ":" + f[3];
    out[ns(2)][f[3]] = node(0) + ":" + f[1];
  };
  // A cut link's record: its namespace and port, NODE:PORT at the far end, that machine.
  static const auto far_end = [](const std::array<std::string, 4>& f, const std::map<std::string, std::string>&,
                                 LinkKind::Peers& out) { out[f[0]][f[1]] = f[2] + " (VXLAN to " + f[3] + ")"; };
  static const std::vector<LinkKind> kinds = {
      {"veth", "a veth pair between two nodes' namespaces (a link without delay:)", "veth", &Fabric::make_veths,
       nullptr, both_ends},
      {"delayed", "two veth pairs through the wire namespace, netem on each way (a link with delay:)", "delayed",
       &Fabric::make_delayed, &Fabric::configure_wire, both_ends},
      {"vxlan", "a VXLAN port toward another machine's end (a link cut by --part)", "cut", &Fabric::make_cuts, nullptr,
       far_end},
  };
  return kinds;
}

// A node's addresses, neighbours, routes, rules and schedulers in one batch; then its port
// programs attached and offloads off.
bool Fabric::configure_node(size_t x, std::string& why) {
  const NodePlan& np = plan_.nodes[x];
  netlink::Batch b(*nodes_[x].rtnl);
  b.set_up(kLoopbackIfindex);
  b.add_addr({kLoopbackIfindex, np.loopback, 32});
  for (const PortPlan& p : np.ports) {
    if (!p.made_here || p.cut >= 0) b.set_up(p.ifindex);
    b.add_addr({p.ifindex, p.addr, 31});
    b.add_neigh({p.ifindex, p.peer_addr, p.peer_mac});  // permanent: no ARP, ever, during a measured run
  }
  for (const auto& r : np.routes) b.add_route(r);
  for (const auto& r : np.rules) b.add_rule(r);
  for (const PortPlan& p : np.ports) b.add_scheduler(scheduler_of(plan_, np, p));
  // The port programs: in a node's own namespace on two tc blocks all its ports share (a
  // k = 16 fat-tree's switches hold 9,600 fewer blocks: see Batch::add_shared_clsact); in
  // the machine's own namespace, whose blocks are not ours to number, port by port.
  if (!np.in_init && !np.ports.empty()) {  // a node without links has no block to hold them
    for (const PortPlan& p : np.ports) b.add_shared_clsact(p.ifindex, bpf::kIngressBlock, bpf::kEgressBlock);
    b.add_block_bpf(bpf::kIngressBlock, progs_->ingress_fd(), "rl_ingress");
    b.add_block_bpf(bpf::kEgressBlock, progs_->egress_fd(), "rl_egress");
  }
  if (auto st = b.flush(); !st.ok()) return why = np.node + ": " + st.text, false;
  if (np.in_init || (np.host && plan_.rxe)) {
    auto scope = sys::NetnsScope::enter(nodes_[x].netns.get(), why);
    if (!scope) return false;
    if (np.in_init)
      for (const PortPlan& p : np.ports)
        if (!progs_->attach(p.ifindex, why)) return why = np.node + ":" + p.ifname + ": " + why, false;
    // Real soft-RoCE on each host NIC (gone with the NIC when the fabric goes).
    if (np.host && plan_.rxe)
      for (const PortPlan& p : np.ports)
        if (!netlink::add_rxe_link(rxe_device_name(instance_, p.slot), p.ifname, why))
          return why = np.node + ":" + p.ifname + ": " + why, false;
  }
  for (const PortPlan& p : np.ports)
    if (!netlink::set_port_offloads(nodes_[x].inet.get(), p.ifname, why)) return why = np.node + ": " + why, false;
  return true;
}

// The agent: logged as the socket it will make and a process, then handed its
// configuration. If we die before logging it, it reads EOF on the handshake and exits, so
// nothing unrecorded survives.
bool Fabric::start_agent(const UpOptions& o, std::string& why) {
  if (!plan_.port_config.pfc_mask && !o.metrics_port) return true;  // nothing to pause or serve: no agent needed
  AgentConfig cfg = agent_config(plan_, instance_);
  cfg.metrics_port = o.metrics_port;
  if (!log_->append({"file " + cfg.socket_path}, why)) return false;
  auto sp = sys::spawn_self({"agent", "--instance", instance_}, why);
  if (!sp) return false;
  sys::Fd hs(sp->handshake_fd);
  if (!log_->append({"proc " + std::to_string(sp->pid) + " " + std::to_string(sp->starttime)}, why)) return false;
  const auto t0 = Clock::now();
  const std::string text = to_json(cfg).dump();
  if (!sys::write_all(hs.get(), text, why) || shutdown(hs.get(), SHUT_WR) != 0) return why = "start the agent: " + why, false;
  // Ready once it has opened the maps, attached its watcher and listens: traffic sent
  // before then would meet nobody honouring PFC. If it failed, it says why.
  std::string reply;
  for (int waited_ms = 0; reply.find('\n') == std::string::npos; waited_ms += 10) {
    if (o.cancel && o.cancel->load()) return why = "interrupted: rolled back", false;
    if (waited_ms >= 30'000) return why = "the PFC agent was not ready after 30 s", false;
    pollfd p{hs.get(), POLLIN, 0};
    if (poll(&p, 1, 10) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(hs.get(), buf, sizeof buf);
    if (n <= 0) return why = "the PFC agent exited before it was ready", false;
    reply.append(buf, size_t(n));
  }
  auto j = nlohmann::json::parse(reply, nullptr, false);
  if (!j.is_object() || !j.value("ok", false))
    return why = "the PFC agent: " + (j.is_object() ? j.value("error", std::string("failed")) : reply), false;
  agent_socket_ = cfg.socket_path;
  agent_pid_ = sp->pid;
  agent_seconds_ = since(t0);
  return true;
}

Fabric::~Fabric() = default;

bool Fabric::down(std::string& why) {
  nodes_.clear();  // our sockets hold the namespaces too
  if (!log_) return true;
  LogEntries e = parse_log(log_->lines());
  DownReport rep;
  if (!replay(e, instance_, rep, why)) return false;
  if (!log_->remove(why)) return false;
  log_.reset();
  return true;
}

std::optional<DownReport> down_instance(const std::string& instance, std::string& why, int64_t lock_wait_ms) {
  DownReport rep;
  if (!model::is_instance_name(instance)) {
    why = "'" + instance.substr(0, 64) + "' is not an instance name (lower-case letters, digits and '-')";
    return std::nullopt;
  }
  const auto t0 = Clock::now();
  const std::string path = state_path(instance);
  if (!sys::path_exists(path)) return rep;
  if (!sys::is_root()) {
    why = "tearing a fabric down needs root";
    return std::nullopt;
  }
  bool held = false;
  auto log = sys::StateLog::open(path, true, why, lock_wait_ms, &held);
  if (!log) return held || sys::path_exists(path) ? std::nullopt : std::optional<DownReport>(rep);
  if (log->removed()) return rep;  // another `down` finished while we waited
  rep.found = true;
  LogEntries e = parse_log(log->lines());
  if (!e.valid || e.instance != instance) {
    // Deleting a record we cannot read would orphan whatever it recorded: touch nothing.
    why = path + " is damaged (" + (e.valid ? "it names instance '" + e.instance.substr(0, 64) + "'" : "no '" + std::string(kMagic) + "' header") +
          "): nothing was touched. Stop any `rocelab agent --instance " + instance +
          "` by its PID, delete the namespaces /run/netns/" + prefix_of(instance) +
          "* (ip netns delete NAME), then remove " + path;
    return std::nullopt;
  }
  if (!replay(e, instance, rep, why) || !log->remove(why)) return std::nullopt;
  rep.seconds = since(t0);
  return rep;
}

std::vector<std::string> list_instances() {
  std::vector<std::string> out;
  std::string dir = sys::kStateDir;
  auto names = sys::list_dir(dir);
  for (const auto& n : names) {
    const std::string suffix = ".state";
    if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
      std::string inst = n.substr(0, n.size() - suffix.size());
      if (model::is_instance_name(inst)) out.push_back(inst);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool is_job_name(const std::string& job) {
  const std::string kind = "slurm:";
  if (job.size() <= kind.size() || job.size() > kind.size() + 20 || job.compare(0, kind.size(), kind) != 0) return false;
  return std::all_of(job.begin() + kind.size(), job.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

std::vector<std::string> instances_of_job(const std::string& job) {
  std::vector<std::string> out;
  if (!is_job_name(job)) return out;
  for (const auto& inst : list_instances()) {
    std::string why;
    auto log = sys::StateLog::open(state_path(inst), false, why);
    if (log && parse_log(log->lines()).job == job) out.push_back(inst);
  }
  return out;
}

namespace {

template <class T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};

void fill_interfaces(NodeStatus& ns, const std::map<std::string, std::string>& peers) {
  netlink::Status st;
  auto sock = netlink::RouteSocket::open(st);
  if (!sock) {
    ns.error = st.text;
    return;
  }
  nl_cache *links = nullptr, *addrs = nullptr;
  if (int e = rtnl_link_alloc_cache(sock->get(), AF_UNSPEC, &links); e < 0) {
    ns.error = netlink::Status::from_nl(e, "list interfaces").text;
    return;
  }
  std::unique_ptr<nl_cache, Deleter<nl_cache, nl_cache_free>> lc(links);
  if (int e = rtnl_addr_alloc_cache(sock->get(), &addrs); e < 0) {
    ns.error = netlink::Status::from_nl(e, "list addresses").text;
    return;
  }
  std::unique_ptr<nl_cache, Deleter<nl_cache, nl_cache_free>> ac(addrs);
  for (nl_object* o = nl_cache_get_first(links); o; o = nl_cache_get_next(o)) {
    auto* l = reinterpret_cast<rtnl_link*>(o);
    IfaceStatus is;
    is.name = rtnl_link_get_name(l);
    if (ns.netns.empty() && is.name.rfind(ns.node + "-", 0) != 0) continue;  // the init namespace: this host's NICs
    is.mtu = rtnl_link_get_mtu(l);
    char buf[64];
    is.state = rtnl_link_operstate2str(rtnl_link_get_operstate(l), buf, sizeof buf);
    is.admin_up = rtnl_link_get_flags(l) & IFF_UP;
    is.carrier = rtnl_link_get_flags(l) & IFF_LOWER_UP;
    if (nl_addr* a = rtnl_link_get_addr(l)) is.mac = nl_addr2str(a, buf, sizeof buf);
    if (auto p = peers.find(is.name); p != peers.end()) is.peer = p->second;
    is.rx_packets = rtnl_link_get_stat(l, RTNL_LINK_RX_PACKETS);
    is.tx_packets = rtnl_link_get_stat(l, RTNL_LINK_TX_PACKETS);
    is.rx_bytes = rtnl_link_get_stat(l, RTNL_LINK_RX_BYTES);
    is.tx_bytes = rtnl_link_get_stat(l, RTNL_LINK_TX_BYTES);
    is.rx_dropped = rtnl_link_get_stat(l, RTNL_LINK_RX_DROPPED);
    is.tx_dropped = rtnl_link_get_stat(l, RTNL_LINK_TX_DROPPED);
    int ifindex = rtnl_link_get_ifindex(l);
    for (nl_object* ao = nl_cache_get_first(addrs); ao; ao = nl_cache_get_next(ao)) {
      auto* a = reinterpret_cast<rtnl_addr*>(ao);
      if (rtnl_addr_get_ifindex(a) == ifindex && rtnl_addr_get_family(a) == AF_INET)
        if (nl_addr* local = rtnl_addr_get_local(a)) is.addresses.push_back(nl_addr2str(local, buf, sizeof buf));
    }
    ns.interfaces.push_back(std::move(is));
  }
}

}  // namespace

std::optional<InstanceStatus> instance_status(const std::string& instance, bool with_nodes, std::string& why) {
  if (!model::is_instance_name(instance)) {
    why = "'" + instance.substr(0, 64) + "' is not an instance name (lower-case letters, digits and '-')";
    return std::nullopt;
  }
  const std::string path = state_path(instance);
  auto log = sys::StateLog::open(path, false, why);
  if (!log) {
    why = "no instance '" + instance + "' is up (no " + path + ")";
    return std::nullopt;
  }
  LogEntries e = parse_log(log->lines());
  InstanceStatus st;
  st.instance = instance;
  st.scenario = e.scenario;
  st.started = e.started;
  st.job = e.job;
  st.pid = e.pid;
  st.state = e.ready ? "up" : "incomplete";
  st.links = e.links.size();
  if (!e.procs.empty()) {
    st.agent_pid = e.procs.front().first;
    st.agent_running = sys::process_starttime(st.agent_pid) == e.procs.front().second;
  }
  Fabric::LinkKind::Peers peers;
  std::map<std::string, std::string> node_of;
  for (const auto& [ns, node] : e.netns) node_of[ns] = node;
  for (const auto& [kind, f] : e.links) kind->peers(f, node_of, peers);
  for (const auto& [ns, node] : e.netns) {
    NodeStatus n;
    n.node = node;
    n.netns = ns;
    n.present = ns.empty() || (owned_name(ns, prefix_of(instance)) && sys::named_netns_exists(ns));
    if (n.present && with_nodes) {
      std::string w;
      auto fd = sys::open_named_netns(ns, w);
      auto scope = fd ? sys::NetnsScope::enter(fd->get(), w) : std::nullopt;
      if (scope) fill_interfaces(n, peers[ns]);
      else n.error = w;
    }
    st.nodes.push_back(std::move(n));
  }
  return st;
}

}  // namespace rocelab::fabric
