#include "agent/agent.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <netlink/cache.h>
#include <netlink/route/class.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/htb.h>
#include <netlink/route/qdisc/tbf.h>
#include <netlink/route/tc.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "bpf/headroom.h"
#include "bpf/pause_watch.h"
#include "bpf/port_programs.h"
#include "netlink/batch.h"
#include "netlink/route_socket.h"
#include "rocelab_abi.h"
#include "sys/netns.h"

namespace rocelab::agent {

namespace {

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // bpf_ktime_get_ns()'s clock
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// An 802.1Qbb frame from `mac`: `quanta` for priority `prio` when its bit is in `vector`.
std::array<uint8_t, RL_PFC_FRAME_LEN> pfc_frame(const uint8_t* mac, uint8_t vector, uint32_t prio, uint16_t quanta) {
  std::array<uint8_t, RL_PFC_FRAME_LEN> f{0x01, 0x80, 0xc2, 0x00, 0x00, 0x01};
  std::memcpy(f.data() + 6, mac, 6);
  f[12] = RL_PFC_ETHERTYPE >> 8;
  f[13] = RL_PFC_ETHERTYPE & 0xff;
  f[14] = RL_PFC_OPCODE >> 8;
  f[15] = RL_PFC_OPCODE & 0xff;
  f[17] = vector;
  f[18 + 2 * (prio & 7)] = static_cast<uint8_t>(quanta >> 8);
  f[19 + 2 * (prio & 7)] = static_cast<uint8_t>(quanta);
  return f;
}

struct Port {
  size_t node = 0;
  int ifindex = 0;
  uint32_t slot = 0;
  std::string name;
  netlink::PauseSpec pause[RL_NUM_PRIO];  // rate, MTU, limit of each PFC priority's TBF
  bool pausable[RL_NUM_PRIO] = {};
  rl_port_info info{};
  rl_port_headroom headroom{};  // as `up` wrote it: the physical part (base) is kept
  sys::Fd packet;  // AF_PACKET, bound to the port: the XON the agent sends leaves here
};

struct Node {
  std::string name;
  sys::Fd netns;
  std::unique_ptr<netlink::RouteSocket> rtnl;
  sys::Fd egress;  // the egress program, to read queue occupancy (probe)
  std::vector<uint32_t> slots;
};

struct Paused {
  bool on = false;
  uint64_t until_ns = 0;
  uint64_t since_ns = 0;  // when this pause took effect
  uint64_t count = 0, total_ns = 0;  // this port-priority's pauses, and their time once ended
};

class Agent {
 public:
  explicit Agent(const Options& o) : o_(o) {}

  bool setup(std::string& why) {
    for (const AgentNode& an : o_.nodes) {
      Node n;
      n.name = an.node;
      auto fd = sys::open_named_netns(an.netns, why);
      if (!fd) return false;
      n.netns = std::move(*fd);
      auto scope = sys::NetnsScope::enter(n.netns.get(), why);
      if (!scope) return false;
      netlink::Status st;
      n.rtnl = netlink::RouteSocket::open(st);
      if (!n.rtnl) {
        why = st.text;
        return false;
      }
      if (!scan_ports(n, nodes_.size(), why)) return false;
      nodes_.push_back(std::move(n));
    }
    if (ports_.empty()) {
      why = "the fabric has no ports";
      return false;
    }
    uint32_t zero = 0;
    if (bpf_map_lookup_elem(config_.get(), &zero, &cfg_) != 0) {
      why = "read port_config";
      return false;
    }
    for (auto& [slot, p] : ports_) {
      bpf_map_lookup_elem(info_.get(), &slot, &p.info);
      bpf_map_lookup_elem(headroom_.get(), &slot, &p.headroom);
      budget_ns_ = std::max<uint64_t>(budget_ns_, uint64_t{p.headroom.budget_us} * 1000);
    }
    // The watcher holds the agent to account: what a paused port still sends is counted.
    watch_ = bpf::PauseWatch::start(info_.get(), why);
    if (!watch_) {
      why = "pause watcher: " + why;
      return false;
    }
    rb_ = ring_buffer__new(events_.get(), &Agent::on_event, this, nullptr);
    if (!rb_) {
      why = "open the PFC event ring buffer";
      return false;
    }
    return true;
  }

  ~Agent() {
    if (rb_) ring_buffer__free(rb_);
  }

  bool loop(std::string& why) {
    write_stats();  // at once: a short run reads them before the first half second
    uint64_t last_write = now_ns(), last_alive = now_ns();
    while (!(o_.stop && o_.stop->load())) {
      ring_buffer__poll(rb_, 1);
      const uint64_t now = now_ns();
      expire(now);
      send_xon_where_drained(why);
      if (now - last_write > 500'000'000ull) {
        write_stats();
        last_write = now;
      }
      if (now - last_alive > 100'000'000ull) {
        struct stat st {};
        if (stat(o_.state_path.c_str(), &st) != 0) break;  // the fabric was taken down
        last_alive = now;
      }
    }
    write_stats();
    return true;
  }

 private:
  bool scan_ports(Node& n, size_t node_index, std::string& why) {
    nl_cache *links = nullptr, *classes = nullptr, *qdiscs = nullptr;
    if (rtnl_link_alloc_cache(n.rtnl->get(), AF_UNSPEC, &links) < 0 || rtnl_qdisc_alloc_cache(n.rtnl->get(), &qdiscs) < 0) {
      why = n.name + ": list interfaces";
      return false;
    }
    for (nl_object* o = nl_cache_get_first(links); o; o = nl_cache_get_next(o)) {
      auto* l = reinterpret_cast<rtnl_link*>(o);
      int ifindex = rtnl_link_get_ifindex(l);
      if (ifindex < RL_FIRST_PORT_IFINDEX) continue;
      Port p;
      p.node = node_index;
      p.ifindex = ifindex;
      p.slot = static_cast<uint32_t>(ifindex - RL_FIRST_PORT_IFINDEX);
      p.name = rtnl_link_get_name(l);
      uint64_t rate = 0;
      if (rtnl_class_alloc_cache(n.rtnl->get(), ifindex, &classes) >= 0) {
        if (auto* c = rtnl_class_get(classes, ifindex, TC_H_MAKE(RL_HTB_MAJOR << 16, 1))) {
          rtnl_htb_get_rate64(c, &rate);
          rtnl_class_put(c);
        }
        nl_cache_free(classes);
        classes = nullptr;
      }
      for (uint32_t q = 0; q < RL_NUM_PRIO; ++q) {
        rtnl_qdisc* leaf = rtnl_qdisc_get_by_parent(qdiscs, ifindex, TC_H_MAKE(RL_HTB_MAJOR << 16, RL_CLASS_BASE + q));
        if (!leaf) continue;
        if (std::string(rtnl_tc_get_kind(reinterpret_cast<rtnl_tc*>(leaf))) == "tbf") {
          p.pausable[q] = true;
          p.pause[q] = {ifindex, RL_HTB_MAJOR, RL_CLASS_BASE, q, true, rate * 8, rtnl_link_get_mtu(l),
                        static_cast<uint32_t>(rtnl_qdisc_tbf_get_limit(leaf))};
        }
        rtnl_qdisc_put(leaf);
      }
      p.packet = sys::Fd(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0));
      sockaddr_ll sll{};
      sll.sll_family = AF_PACKET;
      sll.sll_ifindex = ifindex;
      if (!p.packet.valid() || bind(p.packet.get(), reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) {
        why = n.name + ":" + p.name + ": packet socket: " + std::strerror(errno);
        nl_cache_free(links);
        nl_cache_free(qdiscs);
        return false;
      }
      if (!n.egress.valid()) n.egress = sys::Fd(bpf::attached_egress_fd(ifindex, why));
      if (!config_.valid()) {
        config_ = sys::Fd(bpf::attached_map_fd(ifindex, false, "port_config", why));
        info_ = sys::Fd(bpf::attached_map_fd(ifindex, false, "port_info", why));
        tx_state_ = sys::Fd(bpf::attached_map_fd(ifindex, false, "pfc_tx_state", why));
        headroom_ = sys::Fd(bpf::attached_map_fd(ifindex, false, "port_headroom", why));
        events_ = sys::Fd(bpf::attached_map_fd(ifindex, true, "pfc_events", why));
        if (!config_.valid() || !info_.valid() || !tx_state_.valid() || !events_.valid() || !headroom_.valid()) {
          nl_cache_free(links);
          nl_cache_free(qdiscs);
          return false;
        }
      }
      n.slots.push_back(p.slot);
      ports_.emplace(p.slot, std::move(p));
    }
    nl_cache_free(links);
    nl_cache_free(qdiscs);
    return true;
  }

  static int on_event(void* ctx, void* data, size_t len) {
    if (len >= sizeof(rl_pfc_event)) static_cast<Agent*>(ctx)->handle(*static_cast<rl_pfc_event*>(data));
    return 0;
  }

  bool set_pause(Port& p, uint32_t prio, bool on) {
    Node& n = nodes_[p.node];
    netlink::PauseSpec spec = p.pause[prio];
    spec.paused = on;
    // Unmarked before a resume, so the drain is not taken for a leak; marked once the
    // pause is acknowledged, so anything sent from then on is one.
    if (!on) watch_->mark(p.slot, prio, 0);
    netlink::Batch b(*n.rtnl);  // the socket lives in the node's namespace already
    b.set_pause(spec);
    if (!b.flush().ok()) return false;
    if (on) watch_->mark(p.slot, prio, now_ns(), spec.mtu + 14 + netlink::kPauseBucketMargin);  // TBF's bucket
    else kick(p);
    return true;
  }

  // After a resume HTB may not look at the class again until something is enqueued, and the
  // paused senders are blocked on full socket buffers: a MAC-control frame naming no
  // priority goes out through the direct queue, which runs the dequeue. The peer consumes
  // it; no counter counts it.
  void kick(Port& p) {
    auto f = pfc_frame(p.info.mac, 0, 0, 0);
    if (send(p.packet.get(), f.data(), f.size(), 0) == static_cast<ssize_t>(f.size())) ++kicks_;
  }

  void handle(const rl_pfc_event& e) {
    ++events_seen_;
    auto it = ports_.find(e.slot);
    if (it == ports_.end() || e.prio >= RL_NUM_PRIO || !it->second.pausable[e.prio]) {
      ++ignored_;  // a priority this port does not pause (not a PFC priority here)
      return;
    }
    Port& p = it->second;
    Paused& st = paused_[key(e.slot, e.prio)];
    if (e.quanta == 0) {
      if (st.on && set_pause(p, e.prio, false)) {
        st.on = false;
        ++resumes_;
        st.total_ns += now_ns() - st.since_ns;
      }
      return;
    }
    // Pause time: quanta x 512 bit-times at this port's emulated rate.
    st.until_ns = now_ns() + static_cast<uint64_t>(e.quanta) * p.info.quantum_ps / 1000;
    if (st.on) {
      ++refreshes_;
      return;
    }
    if (set_pause(p, e.prio, true)) {
      st.on = true;
      ++pauses_;
      ++st.count;
      uint64_t done = now_ns();
      st.since_ns = done;
      if (done > e.ts_ns && latencies_.size() < 1'000'000) latencies_.push_back(done - e.ts_ns);
    }
  }

  void expire(uint64_t now) {
    for (auto& [k, st] : paused_) {
      if (!st.on || now < st.until_ns) continue;
      auto it = ports_.find(static_cast<uint32_t>(k >> 3));
      if (it != ports_.end() && set_pause(it->second, k & 7, false)) {
        st.on = false;
        ++expired_;
        st.total_ns += now - st.since_ns;
      }
    }
  }

  // For every ingress port this switch paused: XON once the switch's queues of that priority
  // are all below XON, else a refreshed XOFF every Q/2.
  void send_xon_where_drained(std::string& why) {
    const size_t n = ports_.empty() ? 0 : (ports_.rbegin()->first + 1) * RL_NUM_PRIO;
    states_.resize(n);
    keys_.resize(n);
    uint32_t count = static_cast<uint32_t>(n), out_batch = 0;
    LIBBPF_OPTS(bpf_map_batch_opts, bo);
    int e = bpf_map_lookup_batch(tx_state_.get(), nullptr, &out_batch, keys_.data(), states_.data(), &count, &bo);
    if (e && errno != ENOENT) return;
    for (uint32_t i = 0; i < count; ++i) {
      if (!states_[i].paused) continue;
      uint32_t slot = keys_[i] / RL_NUM_PRIO, prio = keys_[i] % RL_NUM_PRIO;
      auto it = ports_.find(slot);
      if (it == ports_.end()) continue;
      Node& node = nodes_[it->second.node];
      auto scope = sys::NetnsScope::enter(node.netns.get(), why);
      if (!scope) continue;
      bool drained = true;
      for (uint32_t s : node.slots) {
        auto d = bpf::probe_depth(node.egress.get(), ports_.at(s).ifindex, prio, why);
        if (!d || *d >= cfg_.pfc_xon) {
          drained = false;
          break;
        }
      }
      const uint64_t now = now_ns();
      const uint64_t refresh_ns = static_cast<uint64_t>(it->second.info.quantum_ps) * cfg_.pfc_quanta / 2000;
      if (!drained && now - states_[i].last_sent_ns < refresh_ns) continue;
      // Drained: XON. Still congested and the pause half gone: refresh the XOFF (a paused
      // port sends nothing, so no packet of its would trigger the refresh in BPF).
      auto f = pfc_frame(it->second.info.mac, static_cast<uint8_t>(1u << prio), prio, drained ? 0 : cfg_.pfc_quanta);
      if (send(it->second.packet.get(), f.data(), f.size(), 0) == static_cast<ssize_t>(f.size())) {
        rl_pfc_tx_state next = states_[i];
        next.paused = drained ? 0 : 1;
        if (drained) next.congested = 0;  // every queue is below XON
        else next.last_sent_ns = now;
        bpf_map_update_elem(tx_state_.get(), &keys_[i], &next, BPF_ANY);
        ++(drained ? xon_sent_ : xoff_refreshed_);
      }
    }
  }

  static uint64_t key(uint32_t slot, uint32_t prio) { return static_cast<uint64_t>(slot) << 3 | prio; }

  void write_stats() {
    std::vector<uint64_t> l = latencies_;
    std::sort(l.begin(), l.end());
    auto pct = [&](double q) -> uint64_t {
      if (l.empty()) return 0;
      size_t i = static_cast<size_t>(q / 100.0 * static_cast<double>(l.size()));
      return l[std::min(i, l.size() - 1)];
    };
    raise_budget(pct(99));
    nlohmann::ordered_json j{{"events", events_seen_},   {"ignored", ignored_},   {"pauses", pauses_},
                             {"refreshes", refreshes_},  {"resumes", resumes_},   {"expired", expired_},
                             {"paused_ns", paused_now()}, {"xon_sent", xon_sent_}, {"xoff_refreshed", xoff_refreshed_},
                             {"kicks", kicks_}};
    j["reaction_ns"] = {{"count", l.size()}, {"p50", pct(50)}, {"p99", pct(99)}, {"max", l.empty() ? 0 : l.back()}};
    j["reaction_budget_ns"] = budget_ns_;
    j["budget_raises"] = budget_raises_;
    // What paused port-priorities still sent: within the one-frame allowance (the tail), and
    // beyond it (leaks: totals, and each port-priority that leaked).
    uint64_t packets = 0, bytes = 0, tail = 0;
    auto leaks = nlohmann::ordered_json::array();
    for (const auto& [slot, p] : ports_)
      for (uint32_t q = 0; q < RL_NUM_PRIO; ++q) {
        if (!p.pausable[q]) continue;
        const rl_pause_state st = watch_->read(slot, q);
        packets += st.leaked_packets;
        tail += st.tail_packets;
        bytes += st.leaked_bytes;
        if (st.leaked_packets)
          leaks.push_back({{"node", nodes_[p.node].name}, {"port", p.name}, {"prio", q},
                           {"packets", st.leaked_packets}, {"bytes", st.leaked_bytes}});
      }
    j["pause_tail_packets"] = tail;
    j["leaked_packets"] = packets;
    j["leaked_bytes"] = bytes;
    j["leaks"] = leaks;
    // Per port and priority: its pauses and their time, a pause still in force included.
    auto paused = nlohmann::ordered_json::array();
    const uint64_t now = now_ns();
    for (const auto& [k, st] : paused_) {
      auto it = ports_.find(static_cast<uint32_t>(k >> 3));
      if (it == ports_.end() || !st.count) continue;
      paused.push_back({{"node", nodes_[it->second.node].name}, {"port", it->second.name}, {"prio", k & 7},
                        {"pauses", st.count}, {"paused_ns", paused_of(st, now)}});
    }
    j["paused"] = paused;
    const std::string tmp = o_.stats_path + ".tmp";
    if (std::ofstream f(tmp, std::ios::trunc); !(f << j.dump() << "\n")) return;
    std::rename(tmp.c_str(), o_.stats_path.c_str());
  }

  // The measured reaction time fed into the headroom (DESIGN.md §2): once the p99 outgrows
  // the budget the switches' headroom and lossless limits were computed for, recompute them
  // for the p99. Hosts never drop their own lossless traffic: nothing to change there.
  void raise_budget(uint64_t p99_ns) {
    if (p99_ns <= budget_ns_) return;
    budget_ns_ = p99_ns;
    ++budget_raises_;
    for (const Node& n : nodes_) {
      std::vector<bpf::HeadroomPort> in;
      for (uint32_t s : n.slots) {
        const Port& p = ports_.at(s);
        in.push_back({p.info.quantum_ps ? 512'000'000'000'000ull / p.info.quantum_ps : 0, p.headroom.base});
      }
      if (n.slots.empty() || (ports_.at(n.slots.front()).info.flags & RL_PORT_HOST)) continue;
      auto h = bpf::node_headroom(in, cfg_.pfc_xoff, cfg_.buffer_size, budget_ns_);
      for (size_t i = 0; i < n.slots.size(); ++i) {
        uint32_t key = n.slots[i];
        if (bpf_map_update_elem(headroom_.get(), &key, &h[i], BPF_EXIST) == 0) ports_.at(key).headroom = h[i];
      }
    }
  }

  // Port-priority pause time so far, pauses still in force included (emulated ns).
  uint64_t paused_now() const {
    uint64_t t = 0;
    const uint64_t now = now_ns();
    for (const auto& [k, st] : paused_) t += paused_of(st, now);
    return t;
  }
  static uint64_t paused_of(const Paused& st, uint64_t now) {
    return st.total_ns + (st.on && now > st.since_ns ? now - st.since_ns : 0);
  }

  const Options& o_;
  std::vector<Node> nodes_;
  std::map<uint32_t, Port> ports_;
  std::map<uint64_t, Paused> paused_;
  sys::Fd config_, info_, tx_state_, events_, headroom_;
  rl_config cfg_{};
  ring_buffer* rb_ = nullptr;
  std::unique_ptr<bpf::PauseWatch> watch_;
  std::vector<uint32_t> keys_;
  std::vector<rl_pfc_tx_state> states_;
  std::vector<uint64_t> latencies_;
  uint64_t events_seen_ = 0, ignored_ = 0, pauses_ = 0, refreshes_ = 0, resumes_ = 0, expired_ = 0, xon_sent_ = 0,
           kicks_ = 0, xoff_refreshed_ = 0, budget_ns_ = 0, budget_raises_ = 0;
};

}  // namespace

bool run(const Options& o, std::string& why) {
  Agent a(o);
  if (a.setup(why)) return a.loop(why);
  // The agent's stdio is /dev/null: say why where `run` and `stats` look for its figures.
  nlohmann::json j{{"error", why}};
  if (std::ofstream f(o.stats_path + ".tmp", std::ios::trunc); f << j.dump() << "\n")
    std::rename((o.stats_path + ".tmp").c_str(), o.stats_path.c_str());
  return false;
}

}  // namespace rocelab::agent
