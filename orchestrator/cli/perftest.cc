#include "cli/perftest.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "fabric/kernel_plan.h"
#include "model/ipv4.h"
#include "model/port_target.h"
#include "run/results.h"
#include "sys/netns.h"

namespace rocelab::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct End {
  std::string label, device;
  uint32_t addr = 0;
  int gid_index = -1;
  int netns_fd = -1;
  std::string peer_node;  // the switch the NIC is cabled to, and its port's ifindex
  int peer_ifindex = 0;
};

// "host" or "host:nic" → the NIC's rxe device and its IPv4 RoCEv2 GID index.
std::optional<End> resolve(const model::Scenario& s, const fabric::KernelPlan& kp, fabric::Testbed& t,
                           const std::string& spec, std::string& why) {
  const auto target = model::PortTarget::parse(spec);
  const std::string &node = target.node, &nic = target.port_or_empty();
  for (const auto& np : kp.nodes) {
    if (np.node != node) continue;
    if (!np.host) return why = node + " is not a host", std::nullopt;
    for (const auto& p : np.ports) {
      if (!nic.empty() && p.ifname != nic && p.ifname != node + "-" + nic) continue;
      End e;
      e.label = node + ":" + p.ifname;
      e.device = fabric::rxe_device_name(s.name, p.slot);
      e.addr = p.addr;
      e.netns_fd = t.netns_fd(t.node_index(node));
      e.peer_node = kp.nodes[p.peer_node].node;
      e.peer_ifindex = p.peer_ifindex;
      // The GID of the NIC's address (::ffff:a.b.c.d), RoCE v2.
      const std::string dir = "/sys/class/infiniband/" + e.device + "/ports/1/";
      char want[48];
      std::snprintf(want, sizeof want, "0000:0000:0000:0000:0000:ffff:%04x:%04x", p.addr >> 16, p.addr & 0xffff);
      for (int i = 0; i < 64 && e.gid_index < 0; ++i) {
        std::ifstream g(dir + "gids/" + std::to_string(i)), ty(dir + "gid_attrs/types/" + std::to_string(i));
        std::string gid, type;
        if (!(g >> gid)) break;
        std::getline(ty, type);
        if (gid == want && type == "RoCE v2") e.gid_index = i;
      }
      if (e.gid_index < 0)
        return why = e.label + ": no rxe device " + e.device + " with its address (is the fabric up with hosts.engine: rxe?)",
               std::nullopt;
      return e;
    }
    return why = "host " + node + " has no NIC " + nic, std::nullopt;
  }
  return why = "the scenario has no node " + node, std::nullopt;
}

struct Child {
  pid_t pid = -1;
  int out = -1;  // its stdout and stderr
};

// ib_write_bw in the host's namespace, its output on a pipe.
std::optional<Child> spawn(const std::vector<std::string>& args, int netns_fd, std::string& why) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return why = std::string("pipe: ") + std::strerror(errno), std::nullopt;
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return why = std::string("fork: ") + std::strerror(errno), std::nullopt;
  if (pid == 0) {
    dup2(p[1], 1);
    dup2(p[1], 2);
    if (setns(netns_fd, CLONE_NEWNET) != 0) _exit(126);
    execv(argv[0], argv.data());  // an absolute path: never one found through root's PATH
    _exit(127);
  }
  close(p[1]);
  return Child{pid, p[0]};
}

std::pair<int, std::string> finish(Child c) {
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(c.out, buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
  close(c.out);
  int st = 0;
  waitpid(c.pid, &st, 0);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), text};
}

// Bytes on the wire (as the port programs count: Ethernet without FCS) for one WRITE
// message: per packet Ethernet, IPv4, UDP, BTH and ICRC; RETH on the first.
double wire_per_message(uint32_t size, uint32_t mtu) {
  const uint32_t packets = std::max<uint32_t>(1, (size + mtu - 1) / mtu);
  return double(size) + packets * (14 + 20 + 8 + 12 + 4) + 16;
}

// The port's transmitted bytes at time `at` (seconds), linear between the samples around it.
double bytes_at(const std::vector<std::pair<double, uint64_t>>& samples, double at) {
  for (size_t i = 1; i < samples.size(); ++i)
    if (samples[i].first >= at) {
      const auto& [t0, b0] = samples[i - 1];
      const auto& [t1, b1] = samples[i];
      return t1 > t0 ? double(b0) + double(b1 - b0) * std::clamp((at - t0) / (t1 - t0), 0.0, 1.0) : double(b1);
    }
  return samples.empty() ? 0 : double(samples.back().second);
}

// What the switch port carried of the WRITEs. The first WRITE falls in the first sampling
// interval that moved more than 2 KB (perftest's TCP handshake and its closing exchange are a
// few hundred bytes), the last in the last such interval; within either, traffic began (or
// ended) as far from its edge as the neighbouring interval's rate says its bytes took.
struct PortWindow {
  double start = 0, end = 0;  // seconds since sampling began
  double rdma_bytes = 0;      // bytes the port sent from the first to the last WRITE interval
  bool found = false;
};

PortWindow find_writes(const std::vector<std::pair<double, uint64_t>>& samples) {
  PortWindow w;
  auto moved = [&](size_t i) { return double(samples[i].second - samples[i - 1].second); };
  auto rate = [&](size_t i) { return moved(i) / std::max(1e-9, samples[i].first - samples[i - 1].first); };
  size_t k = 1, e = samples.size() - 1;
  while (k + 1 < samples.size() && moved(k) <= 2048) ++k;
  while (e > k + 1 && moved(e) <= 2048) --e;
  if (samples.size() < 3 || k + 1 >= e) return w;
  w.start = std::clamp(samples[k].first - moved(k) / std::max(1.0, rate(k + 1)), samples[k - 1].first, samples[k].first);
  w.end = std::clamp(samples[e - 1].first + moved(e) / std::max(1.0, rate(e - 1)), samples[e - 1].first, samples[e].first);
  w.rdma_bytes = double(samples[e].second - samples[k - 1].second);
  w.found = w.end > w.start;
  return w;
}

// The port's rate (bits/s) over the window ib_write_bw itself measures. With -n it times
// its first post to its last completion: the WRITEs' whole stretch. With -D D it posts for
// D seconds from its first WRITE and counts only [margin, D - margin], margin = D / 4
// (perftest's default): comparing any other seconds compares a rate that moves with the
// host's load (a guest under TCG). `span` is the window; 0 when the samples miss it.
double perftest_window_rate(const std::vector<std::pair<double, uint64_t>>& samples, const PortWindow& w,
                            int duration, double& span) {
  span = 0;
  if (!w.found) return 0;
  double lo = w.start, hi = w.end;
  if (duration > 0) {
    lo = w.start + duration / 4;
    hi = w.start + duration - duration / 4;
    if (hi > samples.back().first) return 0;
  }
  span = hi - lo;
  return (bytes_at(samples, hi) - bytes_at(samples, lo)) * 8 / span;
}

// The port's transmitted bytes every 20 ms while process `pid` runs, each stamped (seconds
// from the first) at the middle of its read. Past `limit` (a perftest that hangs: a QP never
// connects) the process is killed; it is the caller's to reap.
std::vector<std::pair<double, uint64_t>> sample_port(fabric::Testbed& t, const fabric::PortRef& port, pid_t pid,
                                                     std::chrono::seconds limit) {
  std::vector<std::pair<double, uint64_t>> samples;
  const auto t0 = Clock::now();
  for (int st = 0; waitpid(pid, &st, WNOHANG) == 0;) {
    if (Clock::now() > t0 + limit) {
      kill(pid, SIGKILL);  // ours, not reaped yet
      break;
    }
    const auto before = Clock::now();
    auto c = t.counters({port});
    if (c && !c->empty()) {
      uint64_t bytes = 0;
      for (const auto& p : c->front().prio) bytes += p.c.tx_bytes;
      samples.emplace_back(std::chrono::duration<double>(before - t0 + (Clock::now() - before) / 2).count(), bytes);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return samples;
}

}  // namespace

int run_perftest(const model::Scenario& s, fabric::Testbed& t, const PerftestOptions& o) {
  auto in_init = fabric::hosts_in_init_netns(s);
  if (!in_init) {
    std::cerr << "rocelab perf: " << in_init.error().what << "\n";
    return run::kExitEnvironment;
  }
  const auto kp = fabric::plan_kernel(s, *in_init);
  std::string why;
  auto a = resolve(s, kp, t, o.from, why);
  auto b = a ? resolve(s, kp, t, o.to, why) : std::nullopt;
  if (!a || !b) {
    std::cerr << "rocelab perf: " << why << "\n";
    return run::kExitBadInput;
  }
  // The switch port that carries the WRITEs to the responder.
  const size_t sw = t.node_index(b->peer_node);
  std::optional<fabric::PortRef> port;
  for (size_t i = 0; sw != SIZE_MAX && i < t.nodes()[sw].ports.size(); ++i)
    if (t.nodes()[sw].ports[i].ifindex == b->peer_ifindex) port = fabric::PortRef{sw, i, t.nodes()[sw].ports[i].slot};
  if (!port) {
    std::cerr << "rocelab perf: the fabric has no port toward " << b->label << "\n";
    return run::kExitEnvironment;
  }
  // perftest's -D is whole seconds; 0: -n messages instead.
  const int duration = o.iterations ? 0 : std::max(1, int(std::lround(o.seconds)));
  // perftest from Debian's package, by its path (the command runs as root).
  static constexpr const char* kIbWriteBw = "/usr/bin/ib_write_bw";
  if (access(kIbWriteBw, X_OK) != 0) {
    std::cerr << "rocelab perf: " << kIbWriteBw << " is not installed (Debian's perftest)\n";
    return run::kExitEnvironment;
  }
  std::vector<std::string> common = {kIbWriteBw, "-F", "--report_gbits", "-s", std::to_string(o.size),
                                     duration ? "-D" : "-n", duration ? std::to_string(duration) : std::to_string(o.iterations),
                                     "-q", std::to_string(o.qps)};
  auto server_args = common;
  server_args.insert(server_args.end(), {"-d", b->device, "-x", std::to_string(b->gid_index)});
  auto client_args = common;
  client_args.insert(client_args.end(), {"-d", a->device, "-x", std::to_string(a->gid_index), model::format_ipv4(b->addr)});
  auto server = spawn(server_args, b->netns_fd, why);
  if (!server) {
    std::cerr << "rocelab perf: " << why << "\n";
    return run::kExitEnvironment;
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the server listens (its TCP handshake port)
  auto client = spawn(client_args, a->netns_fd, why);
  if (!client) {
    kill(server->pid, SIGTERM);
    (void)finish(*server);
    std::cerr << "rocelab perf: " << why << "\n";
    return run::kExitEnvironment;
  }
  const auto samples = sample_port(t, *port, client->pid, std::chrono::seconds((duration ? duration : 600) + 60));
  auto [crc, ctext] = finish(*client);  // reaped above: its output is what remains
  (void)crc;
  // The server ends by itself once the client is done: killed while its QPs still hold
  // packets, Debian 6.12's rxe can oops receiving for a QP being torn down.
  bool ended = false;
  for (int waited = 0; waited < 150 && !ended; ++waited) {
    ended = waitpid(server->pid, nullptr, WNOHANG) == server->pid;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!ended) kill(server->pid, SIGTERM);  // still ours: not reaped
  auto [src, stext] = finish(*server);
  (void)src;
  // perftest's row: #bytes #iterations BW peak BW average MsgRate (it can exit 0 after 0
  // iterations: the figures are what count).
  std::smatch m;
  const std::regex row(R"(\n\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+))");
  if (!std::regex_search(ctext, m, row) || std::stoull(m[2]) == 0) {
    std::cerr << "rocelab perf: ib_write_bw gave no figures:\n" << ctext << stext;
    return run::kExitEnvironment;
  }
  const uint64_t iterations = std::stoull(m[2]);
  const double bw_avg = std::stod(m[4]) * 1e9;  // bits/s of message bytes
  const uint32_t mtu = [&] {
    std::smatch mm;
    static const std::regex r(R"(Mtu\s*:\s*(\d+))");
    return std::regex_search(ctext, mm, r) ? uint32_t(std::stoul(mm[1])) : 1024u;
  }();
  const PortWindow writes = find_writes(samples);
  double span = 0;
  const double wire_bps = perftest_window_rate(samples, writes, duration, span);
  // With -n the port must have carried every message, each once: exact but for perftest's
  // few TCP bytes in the first and last intervals.
  const double posted_wire = duration ? 0 : double(o.iterations) * o.qps * wire_per_message(o.size, mtu);
  const double payload_bps = wire_bps * o.size / wire_per_message(o.size, mtu);
  const double ratio = bw_avg > 0 ? payload_bps / bw_avg : 0;
  const std::string sw_port = t.nodes()[sw].name + ":" + t.nodes()[sw].ports[port->port].name;
  if (o.json) {
    auto j = nlohmann::ordered_json{{"test", "WRITE BW"}, {"engine", "rxe"}, {"tool", "ib_write_bw"},
                                        {"from", a->label}, {"to", b->label}, {"from_device", a->device},
                                        {"to_device", b->device}, {"bytes", o.size}, {"mtu", mtu}, {"qps", o.qps},
                                        {"iterations", iterations}, {"bw_average_gbps", bw_avg / 1e9},
                                        {"scale", s.scale.factor()},
                                        {"switch_port", sw_port}, {"switch_wire_gbps", wire_bps / 1e9},
                                        {"switch_payload_gbps", payload_bps / 1e9}, {"switch_window_s", span},
                                        {"switch_over_perftest", ratio}};
    if (!duration) {
      j["posted_wire_bytes"] = posted_wire;
      j["switch_rdma_wire_bytes"] = writes.rdma_bytes;
    }
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << ctext;
    fmt::print(" fabric: {} toward {} carried {:.4f} Gb/s on the wire = {:.4f} Gb/s of WRITE payload over its "
               "measured {:.1f} s (ib_write_bw's own window); ib_write_bw: {:.4f} Gb/s average (ratio {:.3f}). Wall-clock rates: physical = x D "
               "({:g}): {:.2f} Gb/s\n",
               sw_port, b->label, wire_bps / 1e9, payload_bps / 1e9, span, bw_avg / 1e9, ratio, s.scale.factor(),
               bw_avg * s.scale.factor() / 1e9);
    if (!duration)
      fmt::print(" {} messages of {} B are {:.0f} B on the wire; the port carried {:.0f} B from the first WRITE to the "
                 "last\n", o.iterations * o.qps, o.size, posted_wire, writes.rdma_bytes);
  }
  return 0;
}

}  // namespace rocelab::cli
