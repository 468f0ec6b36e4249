#include "model/expect.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <stdexcept>

#include "model/diagnostics.h"
#include "model/units.h"

namespace rocelab::model {

namespace {

// Faults and RC under them (FAULTS.md; the counters by rxe's names).
std::vector<MetricInfo> fault_metrics() {
  return {
    {"link_down_time", MetricKind::kScalar, "s", {},
     "seconds links were down under link_down, link_flap and node_crash faults, summed over links (a crash "
     "counts each of the node's links)"},
    {"link_downed", MetricKind::kCounter, "count", {"node", "port"},
     "times a host NIC lost its link to a fault (rxe's name; runs with faults)"},
    {"path_changes", MetricKind::kScalar, "count", {},
     "route entries (node, prefix) the fabric's reconvergence changed as links went down and came back"},
    {"flows_failed", MetricKind::kScalar, "count", {},
     "flows that did not complete: a QP failed (retry exceeded: no path, a crashed peer) or its collective "
     "stopped at another rank's failure"},
    {"flows_unfinished", MetricKind::kScalar, "count", {},
     "flows neither completed nor failed when the run stopped them (its deadline, a dead agent, a cancel)"},
    {"flow_failed_at", MetricKind::kSeries, "s", {"workload", "from", "to"},
     "when a failed flow's first QP failed, from the first workload's start (failed flows only)"},
    {"retry_exceeded_err", MetricKind::kScalar, "count", {},
     "QPs that failed after hosts.rc retry_cnt + 1 timeouts without progress (rxe's counter name)"},
    {"completer_retry_err", MetricKind::kScalar, "count", {}, "requester timeouts that retried, every QP (rxe's name)"},
    {"rcvd_seq_err", MetricKind::kScalar, "count", {}, "PSN sequence error NAKs requesters received (rxe's name)"},
    {"out_of_seq_request", MetricKind::kScalar, "count", {},
     "request packets responders received beyond the expected PSN (rxe's name)"},
    {"duplicate_request", MetricKind::kScalar, "count", {},
     "request packets responders received again, already applied (rxe's name)"},
    {"flow_goodput_in_fault", MetricKind::kSeries, "bit/s", {"workload", "from", "to", "fault"},
     "a flow's goodput while a fault was in force (fault: its index in the scenario's faults), from the bytes it "
     "delivered in order then; times the flow was not running are left out"},
    {"storm_frames", MetricKind::kScalar, "count", {}, "PFC frames pause_storm faults sent, every storm"},
    {"pfcwd_storms", MetricKind::kCounter, "count", {"node", "port", "prio"},
     "PFC watchdog: storms detected on a switch queue (SONiC's STORM DETECTED; runs with qos.pfc.watchdog)"},
    {"pfcwd_restored", MetricKind::kCounter, "count", {"node", "port", "prio"},
     "PFC watchdog: storms restored on a switch queue (STORM RESTORED)"},
    {"pfcwd_tx_ok", MetricKind::kCounter, "count", {"node", "port", "prio"},
     "PFC watchdog: packets a queue sent while stormed (TX OK)"},
    {"pfcwd_tx_dropped", MetricKind::kCounter, "count", {"node", "port", "prio"},
     "PFC watchdog: packets dropped on their way into a stormed queue, action drop (TX DROP; drop reason pfcwd)"},
    {"pfcwd_rx_ok", MetricKind::kCounter, "count", {"node", "port", "prio"},
     "PFC watchdog: packets a stormed queue's port received on its priority and kept (RX OK)"},
    {"pfcwd_rx_dropped", MetricKind::kCounter, "count", {"node", "port", "prio"},
     "PFC watchdog: packets a stormed queue's port received on its priority and dropped, action drop (RX DROP; pfcwd_rx)"},
    {"pfcwd_detected_at", MetricKind::kSeries, "s", {"node", "port", "prio"},
     "PFC watchdog: when each storm was detected, physical seconds from the workloads' start"},
    {"pfcwd_restored_at", MetricKind::kSeries, "s", {"node", "port", "prio"},
     "PFC watchdog: when each storm was restored, likewise"},
    {"pfc_deadlocks", MetricKind::kScalar, "count", {},
     "PFC deadlocks: cycles in the pause wait-for graph whose every queue was paused, held packets and sent none for a pause time"},
    {"pfc_deadlock_at", MetricKind::kSeries, "s", {"prio", "cycle"},
     "PFC deadlocks: when each was seen, physical seconds from the workloads' start (cycle: its queues in wait order)"},
    {"pfc_deadlock_time", MetricKind::kSeries, "s", {"prio", "cycle"},
     "PFC deadlocks: how long each held, from its last queue stopping to its first moving (or the run's end), physical"},
  };
}

// The machine's stalls as the agent's loop saw them (telemetry/agent.cc).
std::vector<MetricInfo> stall_metrics() {
  return {
    {"agent_stalled", MetricKind::kScalar, "ratio", {},
     "share of the traffic phase the fabric lost to stalls of the machine: the PFC agent's real-time loop "
     "kept off its CPU past its 1 ms poll (steal, kernel work) while PFC's work came due (a pause to put in "
     "force or lift, an XON to send), each delay beyond the two frame times at the fastest port a shaper "
     "makes up; above 0.01 the run is invalid"},
    {"agent_stall_max", MetricKind::kScalar, "s", {}, "the longest such delay (physical: wall / D)"},
    {"agent_held_max", MetricKind::kScalar, "s", {},
     "the longest the scheduler kept the runnable PFC loop waiting in the traffic phase (its schedstat run delay "
     "between two readings 5 ms apart; physical: wall / D): an RT throttle or another thread on its core"},
    {"agent_rt_steps", MetricKind::kScalar, "count", {},
     "times the PFC loop left real-time priority in the traffic phase, its CPU near half of what the kernel lets "
     "real-time threads run (never the kernel's throttle)"},
    {"line_lost", MetricKind::kSeries, "ratio", {"node", "port"},
     "share of the traffic phase a port's line idled with packets waiting and no priority paused, past two of "
     "its frames a run (what the shapers' buckets make up): line time the machine took (its shaper's timer run "
     "late), measured at every dequeue; ports that lost none are not listed"},
    {"line_lost_max", MetricKind::kScalar, "ratio", {},
     "the most line_lost of any port; above 0.01 the run is invalid"},
    {"machine_held_max", MetricKind::kScalar, "s", {},
     "the longest the machine held a CPU from the run in the traffic phase, 0.5 ms of wall clock or more: another "
     "program (not rocelab's, not the kernel's threads that do the fabric's work; the kernel's others, kdamond, kswapd, "
     "are the machine's) running on it without a switch, or the hypervisor taking it "
     "(steal) whatever ran (physical: wall / D); an invalid run names the one that overlapped what broke"},
  };
}

// A pause's path, stage by stage (bench/pfc_reaction), and what a PG let past XOFF, then the
// stalls that stretch them: listed after pfc_reaction_p99.
std::vector<MetricInfo> pause_path_metrics() {
  std::vector<MetricInfo> m = {
    {"pfc_headroom_needed", MetricKind::kScalar, "bytes", {},
     "the fastest switch port's physical headroom (qos.pfc.headroom or 2 x MTU) + its emulated rate x "
     "pfc_reaction_p99: what may still arrive through it after XOFF"},
    {"pfc_headroom", MetricKind::kScalar, "bytes", {},
     "the headroom the run declares for that port: physical + what it carries in the 500 ns (physical) a port "
     "may take to react (one frame at least); a switch's PGs running past it make the run invalid "
     "(pfc_overshoot_excess)"},
    {"pfc_reaction_budget", MetricKind::kScalar, "s", {},
     "the agent reaction (wall clock) the data plane's lossless limits make room for, beyond pfc_headroom, so "
     "a run the machine held drops nothing: 50 ms, raised to the measured p99 when that is larger"},
    {"pfc_reaction_quantiles", MetricKind::kSeries, "s", {"q"},
     "the agent's reaction at percentiles q = 0, 5, ..., 95, 98, 99, 99.5, 99.8, 99.9, 100 (wall clock)"},
    {"pfc_transit_p50", MetricKind::kScalar, "s", {},
     "a pause's way to the port it pauses: the switch deciding XOFF to the frame's arrival (BPF clocks, wall), "
     "median over the pauses put in force"},
    {"pfc_transit_p99", MetricKind::kScalar, "s", {}, "the same, 99th percentile"},
    {"pfc_path_max", MetricKind::kScalar, "s", {},
     "the longest way a pause took from the switch deciding XOFF to the pause in force at the port it pauses "
     "(wall): the frame's transit and the agent's reaction of one pause; what its PG took past XOFF meanwhile "
     "came in at the link's rate"},
    {"pfc_overshoot", MetricKind::kSeries, "bytes", {"node", "port", "prio"},
     "how far an ingress port's priority group ran past XOFF per pause, mean over its pause episodes: what "
     "arrived after the switch decided XOFF (ingress trigger)"},
    {"pfc_overshoot_max", MetricKind::kSeries, "bytes", {"node", "port", "prio"}, "the same, the most in one episode"},
    {"pfc_xon_late", MetricKind::kSeries, "bytes", {"node", "port", "prio"},
     "how far below XON an ingress port's priority group had drained when the switch sent it XON, mean over its "
     "XONs (physical ports send XON at the dequeue that crosses it: 0)"},
    {"pfc_xon_late_max", MetricKind::kSeries, "bytes", {"node", "port", "prio"}, "the same, the most at one XON"},
    {"pfc_refill", MetricKind::kSeries, "bytes", {"node", "port", "prio"},
     "how far below XON an ingress port's priority group had drained when its sender's first frame after XON "
     "arrived, mean over its XONs: the resume's whole path (physical ports: what the PG's share of the line "
     "drains in a round trip and one frame)"},
    {"pfc_refill_max", MetricKind::kSeries, "bytes", {"node", "port", "prio"}, "the same, the most after one XON"},
    {"pfc_resume_lag", MetricKind::kSeries, "s", {"node", "port", "prio"},
     "an ingress port's XON leaving the switch to its sender's next frame joining its priority group, less that "
     "frame's own time at the link's rate: the resume's way, mean (wall clock; physical ports: a round trip)"},
    {"pfc_resume_lag_max", MetricKind::kSeries, "s", {"node", "port", "prio"}, "the same, the longest"},
    {"pfc_resume_lag_mean", MetricKind::kScalar, "s", {},
     "pfc_resume_lag over every refill of the run, physical (a sender with nothing to send counts as late)"},
    {"pfc_resume_lag_frames", MetricKind::kScalar, "ratio", {},
     "the largest mean pfc_resume_lag of a priority group with 20 refills or more, in frames at its port's rate"},
    {"pfc_frame_time", MetricKind::kScalar, "s", {},
     "one frame (MTU + 14 B) at the rate of the fastest port a pause held, physical: a port's timescale"},
    {"pfc_reaction_frames", MetricKind::kScalar, "ratio", {},
     "pfc_reaction_p99 in frames of pfc_frame_time: within one, a physical port that stops within the frame it "
     "sends; more, a sender reacting that many frames late (bench/pfc_model.py --react-ns shows what it does)"},
    {"pfc_overshoot_excess", MetricKind::kScalar, "ratio", {},
     "per switch, what its priority groups ran past XOFF beyond a physical link's allowance (2 frames and a round "
     "trip) and what the port carries in a 500 ns reaction (one frame at least), each PG's mean over its pauses, "
     "summed, over their XOFF summed; the most of any switch. Past 0.05 the run is invalid"},
    {"pfc_overshoot_excess_max", MetricKind::kScalar, "ratio", {},
     "the same with each PG's most in one pause: past 0.25 the run is invalid (a stall let them run on)"},
  };
  for (auto& x : stall_metrics()) m.push_back(std::move(x));
  return m;
}

constexpr const char* kEcnMarkedHelp =
    "packets CE-marked, counted on the queue the mark reflects (at dequeue by default: decided by the next port's "
    "ingress; `qos.ecn.marking: enqueue` at admission)";

void insert_after(std::vector<MetricInfo>& m, std::string_view name, const std::vector<MetricInfo>& more) {
  auto at = std::find_if(m.begin(), m.end(), [&](const MetricInfo& i) { return i.name == name; });
  m.insert(at == m.end() ? at : at + 1, more.begin(), more.end());
}

}  // namespace

const std::vector<MetricInfo>& metric_registry() {
  static const std::vector<MetricInfo> kMetrics = [] {
    std::vector<MetricInfo> m = {
      {"switches", MetricKind::kScalar, "count", {}, "switch nodes in the fabric"},
      {"hosts", MetricKind::kScalar, "count", {}, "host nodes (GPU servers) in the fabric"},
      {"links", MetricKind::kScalar, "count", {}, "links (veth pairs), host NIC links included"},
      {"nics", MetricKind::kScalar, "count", {}, "host NICs"},
      {"namespaces", MetricKind::kScalar, "count", {}, "network namespaces the fabric needs"},
      {"oversubscription", MetricKind::kScalar, "ratio", {},
       "largest leaf host-facing/spine-facing capacity ratio (0 without such leaves)"},
      {"scale", MetricKind::kScalar, "ratio", {}, "time scale D (rates / D, times x D)"},
      {"link_rate", MetricKind::kSeries, "bit/s", {"a", "b", "tier"},
       "physical rate of each link; tier is host or fabric"},
      {"run_seconds", MetricKind::kScalar, "s", {}, "wall-clock length of the run"},
      {"up_seconds", MetricKind::kScalar, "s", {}, "wall-clock time to bring the fabric up"},
      {"down_seconds", MetricKind::kScalar, "s", {}, "wall-clock time to take the fabric down"},
      {"tx_packets", MetricKind::kCounter, "count", {"node", "port", "prio"},
       "packets admitted to a port's egress queue (the programs' count)"},
      {"tx_bytes", MetricKind::kCounter, "bytes", {"node", "port", "prio"}, "bytes admitted to a port's egress queue"},
      {"rx_packets", MetricKind::kCounter, "count", {"node", "port", "prio"}, "packets a port received"},
      {"rx_bytes", MetricKind::kCounter, "bytes", {"node", "port", "prio"}, "bytes a port received"},
      {"ecn_marked", MetricKind::kCounter, "count", {"node", "port", "prio"}, kEcnMarkedHelp},
      {"drops", MetricKind::kCounter, "count", {"node", "port", "prio", "reason"},
       "packets dropped, by reason: queue_full, wred, headroom, buffer (shared pool), fault_loss (a loss fault), mtu (an mtu_mismatch fault), pfcwd and pfcwd_rx (the PFC watchdog's drop action, out of and into a stormed queue)"},
      {"pfc_tx", MetricKind::kCounter, "count", {"node", "port", "prio"},
       "PFC frames (XOFF and XON) a port sent for a priority"},
      {"pfc_rx", MetricKind::kCounter, "count", {"node", "port", "prio"},
       "PFC frames a port received naming a priority (consumed, never forwarded)"},
      {"pfc_xoff_tx", MetricKind::kCounter, "count", {"node", "port", "prio"}, "XOFF frames a port sent for a priority"},
      {"pfc_xon_tx", MetricKind::kCounter, "count", {"node", "port", "prio"}, "XON frames (pause time 0) a port sent"},
      {"pfc_xoff_rx", MetricKind::kCounter, "count", {"node", "port", "prio"}, "XOFF frames a port received"},
      {"pfc_xon_rx", MetricKind::kCounter, "count", {"node", "port", "prio"}, "XON frames a port received"},
      {"pfc_refresh_tx", MetricKind::kCounter, "count", {"node", "port", "prio"},
       "of the XOFF frames a port sent, those that renewed a pause already in force"},
      {"corrupted", MetricKind::kCounter, "count", {"node", "port", "prio"},
       "RoCEv2 packets a corruption fault flipped a bit of as they left a port (the receiver's ICRC drops them: bad_icrc)"},
      {"queue_max", MetricKind::kSeries, "bytes", {"node", "port", "prio"},
       "the most a port's priority queue held during the run (after a packet joined it)"},
      {"captured_packets", MetricKind::kCounter, "count", {"node", "port"},
       "packets written to a capture: port's file (capture-NODE-PORT.pcap), both directions"},
      {"series_samples", MetricKind::kScalar, "count", {},
       "samples the time series took while the traffic ran (series-*.csv; 0 or absent with telemetry.series: off)"},
      {"port_pause_time", MetricKind::kCounter, "s", {"node", "port", "prio"},
       "time a port's priority spent paused by received PFC (physical: emulated / D)"},
      {"agent_pauses", MetricKind::kScalar, "count", {}, "pauses the agent put in force on received PFC"},
      {"pause_time", MetricKind::kScalar, "s", {},
       "time port priorities spent paused by received PFC, summed over ports (physical: emulated / D)"},
      {"pfc_leaks", MetricKind::kScalar, "count", {},
       "data packets a port sent on a paused priority beyond one frame per pause: leaks of the pause mechanism, "
       "counted at the qdisc's dequeue from when the pause took effect (outside the mechanism)"},
      {"pfc_pause_tail", MetricKind::kScalar, "count", {},
       "data packets a port sent on a paused priority within one frame per pause (the reaction allowance; "
       "the pausing TBF refills its one-frame bucket at each change)"},
      {"pfc_reaction_p50", MetricKind::kScalar, "s", {},
       "agent reaction: PFC frame arrival (BPF timestamp) to pause in effect, median"},
      {"pfc_reaction_p99", MetricKind::kScalar, "s", {}, "the same, 99th percentile"},
      {"lossless_drops", MetricKind::kScalar, "count", {}, "packets the switches and NICs dropped on lossless priorities, any reason but an injected loss fault or the PFC watchdog's drop action"},
      {"shaper_tx_bytes", MetricKind::kCounter, "bytes", {"node", "port", "prio"},
       "bytes each HTB priority class sent (the shaper's own count)"},
      {"host_pairs", MetricKind::kScalar, "count", {},
       "(source NIC, destination NIC) pairs of different hosts that the topology connects"},
      {"reachable_pairs", MetricKind::kScalar, "count", {}, "of host_pairs, those the connectivity check reached"},
      {"unreachable_pairs", MetricKind::kScalar, "count", {}, "host_pairs - reachable_pairs"},
      // Workloads on the built-in engine, in physical units (emulated x D for rates, / D for times).
      {"flow_goodput", MetricKind::kSeries, "bit/s", {"workload", "from", "to"},
       "a flow's acknowledged message bytes over its completion time"},
      {"flow_fct", MetricKind::kSeries, "s", {"workload", "from", "to"}, "flow completion time"},
      {"flow_slowdown", MetricKind::kSeries, "ratio", {"workload", "from", "to"},
       "FCT over the ideal: the same wire bytes at the slower NIC's line rate"},
      {"flow_retransmits", MetricKind::kCounter, "count", {"workload", "from", "to"}, "packets a flow sent again"},
      {"workload_goodput", MetricKind::kSeries, "bit/s", {"workload"}, "the workload's bytes over its job time (aggregate)"},
      {"rx_utilization", MetricKind::kSeries, "ratio", {"workload"},
       "the busiest receiving NIC: wire bytes / (job time x line rate); an incast's bottleneck"},
      {"bottleneck_utilization", MetricKind::kSeries, "ratio", {"workload"},
       "the busiest receiving NIC while every sender still sends (start to the first flow's end): "
       "an incast's bottleneck without the tail where one flow climbs back alone"},
      {"fct_spread", MetricKind::kSeries, "ratio", {"workload"},
       "a streaming workload's slowest flow completion time over its fastest (1: all alike)"},
      {"jain_index", MetricKind::kSeries, "ratio", {"workload"},
       "Jain's fairness index of a streaming workload's flow goodputs (1: equal shares)"},
      {"rc_timeouts", MetricKind::kScalar, "count", {}, "RC retransmission timeouts, every QP"},
      {"algbw", MetricKind::kSeries, "bit/s", {"workload"}, "collectives: message size / operation time (nccl-tests)"},
      {"busbw", MetricKind::kSeries, "bit/s", {"workload"},
       "collectives: algbw x 2(n-1)/n (all-reduce) or (n-1)/n (all-to-all), as nccl-tests"},
      {"busbw_efficiency", MetricKind::kSeries, "ratio", {"workload"},
       "collectives: busbw / (the slowest edge's line rate x payload efficiency at its MTU)"},
      {"iteration_time", MetricKind::kSeries, "s", {"workload"}, "collectives: mean time of one operation"},
      {"jct", MetricKind::kSeries, "s", {"workload"}, "job completion time: start to the last completion"},
      {"latency_p50", MetricKind::kSeries, "s", {"workload"}, "latency workloads: one-way latency (ping sent to ping received; RTT / 2 across machines) over the probe's time (each ping weighted by the time it samples: half its round trip and half the one before), median"},
      {"latency_p99", MetricKind::kSeries, "s", {"workload"}, "latency workloads: one-way latency over the probe's time, 99th percentile"},
      {"fairness_time", MetricKind::kSeries, "s", {"to", "window"},
       "flows streaming into one host: time from the last one's start until every window (100us, 200us, "
       "500us, 1ms, 2ms) of every flow stays within ±10 % of the fair share (line rate x payload efficiency / "
       "flows); infinite when it never does"},
      {"fair_share_ratio", MetricKind::kSeries, "ratio", {"workload", "from", "to", "window"},
       "a flow's mean goodput from fairness_time on (the later half if never) / the fair share"},
      {"retransmits", MetricKind::kScalar, "count", {}, "packets the engine sent again, all QPs"},
      {"cnp_sent", MetricKind::kScalar, "count", {}, "CNPs the engine's notification points sent"},
      {"cnp_received", MetricKind::kScalar, "count", {}, "CNPs the engine's reaction points received"},
      {"bad_icrc", MetricKind::kScalar, "count", {}, "RoCEv2 packets the engine dropped for a bad ICRC"},
      {"host_rx_overflow", MetricKind::kScalar, "count", {},
       "packets lost in full host receive sockets (the engine read too late); > 0 makes the run invalid"},
      {"digest_errors", MetricKind::kScalar, "count", {},
       "flows whose responder-side CRC of delivered payload differs from what was sent, or, for a failed flow, that lack bytes they acknowledged (must be 0)"},
    };
    auto f = fault_metrics();
    m.insert(m.end(), f.begin(), f.end());
    insert_after(m, "pfc_reaction_p99", pause_path_metrics());
    return m;
  }();
  return kMetrics;
}

const MetricInfo* find_metric(std::string_view name) {
  for (const auto& m : metric_registry())
    if (m.name == name) return &m;
  return nullptr;
}

namespace {

constexpr std::string_view kAggregates[] = {"min", "max", "sum", "avg", "count",
                                            "p50", "p90", "p95", "p99", "pct"};

bool is_aggregate(std::string_view s) {
  return std::find(std::begin(kAggregates), std::end(kAggregates), s) != std::end(kAggregates);
}

bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }

struct ParseFailure {
  ExprError error;
};

// An assertion is a line a person writes: these bounds are far above any real one and keep
// a hostile file from exhausting the stack (recursive descent) or memory (each node keeps
// its own text, so a long chain costs its length squared).
constexpr size_t kMaxExpressionChars = 4096;
constexpr int kMaxNesting = 64;

// A subtree with no metric in it, folded: a divisor that is always 0 is an error at once.
std::optional<double> constant(const Expr& e) {
  auto arg = [&](size_t i) { return constant(*e.args[i]); };
  switch (e.op) {
    case Expr::Op::kNumber: return e.number;
    case Expr::Op::kNeg: if (auto a = arg(0)) return -*a; return std::nullopt;
    case Expr::Op::kAdd: case Expr::Op::kSub: case Expr::Op::kMul: case Expr::Op::kDiv: {
      auto a = arg(0), b = arg(1);
      if (!a || !b) return std::nullopt;
      if (e.op == Expr::Op::kAdd) return *a + *b;
      if (e.op == Expr::Op::kSub) return *a - *b;
      if (e.op == Expr::Op::kMul) return *a * *b;
      if (*b == 0) return std::nullopt;
      return *a / *b;
    }
    default: return std::nullopt;
  }
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  std::unique_ptr<Expr> parse_all(bool value = false) {
    auto e = parse_or();
    skip();
    if (i_ != s_.size()) fail(i_, "unexpected '" + std::string(s_.substr(i_, 1)) + "'");
    if (value && e->type == Expr::Type::kSeries)
      fail(0, "'" + e->text + "' is a series: take an aggregate of it (max(...), min(...), sum(...), avg(...), p99(...))");
    if (value && e->type != Expr::Type::kNumber) fail(0, "a figure is one number (e.g. 'max(queue_max)'), not a comparison");
    if (!value && e->type != Expr::Type::kBool)
      fail(0, "an assertion must be a comparison (e.g. 'links >= 4'), got a value");
    return e;
  }

 private:
  [[noreturn]] void fail(size_t at, std::string msg, bool unknown_metric = false) {
    throw ParseFailure{ExprError{unknown_metric, at, std::move(msg)}};
  }
  // Held by each rule that recurses: '(', an aggregate's argument, not, unary minus.
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser, size_t at) : p(parser) {
      if (++p.depth_ > kMaxNesting)
        p.fail(at, "nested more than " + std::to_string(kMaxNesting) + " levels deep (parentheses, not, unary minus)");
    }
    ~Nest() { --p.depth_; }
  };
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  bool eat(std::string_view tok) {
    skip();
    if (s_.substr(i_, tok.size()) != tok) return false;
    // A word operator must not be the start of a longer identifier ("order" is not "or").
    if (ident_start(tok[0]) && i_ + tok.size() < s_.size() && ident_char(s_[i_ + tok.size()]))
      return false;
    i_ += tok.size();
    return true;
  }
  std::unique_ptr<Expr> node(Expr::Op op, Expr::Type t, size_t at) {
    auto e = std::make_unique<Expr>();
    e->op = op;
    e->type = t;
    e->offset = at;
    return e;
  }
  void finish_text(Expr& e) {
    size_t end = i_;
    while (end > e.offset && (s_[end - 1] == ' ' || s_[end - 1] == '\t')) --end;
    e.text = std::string(s_.substr(e.offset, end - e.offset));
  }
  void need(const Expr& e, Expr::Type t, std::string_view role) {
    if (e.type == t) return;
    if (e.type == Expr::Type::kSeries)
      fail(e.offset, "'" + e.text + "' is a series (one value per sample): aggregate it with min, "
                     "max, sum, avg, count or pXX before " + std::string(role));
    if (t == Expr::Type::kBool) fail(e.offset, "'" + e.text + "' is a value, not a condition");
    fail(e.offset, "'" + e.text + "' is a condition, not a value");
  }
  std::unique_ptr<Expr> binary(Expr::Op op, Expr::Type t, std::unique_ptr<Expr> l, std::unique_ptr<Expr> r) {
    auto e = node(op, t, l->offset);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    finish_text(*e);
    return e;
  }

  std::unique_ptr<Expr> parse_or() {
    auto l = parse_and();
    while (eat("||") || eat("or")) {
      need(*l, Expr::Type::kBool, "'or'");
      auto r = parse_and();
      need(*r, Expr::Type::kBool, "'or'");
      l = binary(Expr::Op::kOr, Expr::Type::kBool, std::move(l), std::move(r));
    }
    return l;
  }
  std::unique_ptr<Expr> parse_and() {
    auto l = parse_not();
    while (eat("&&") || eat("and")) {
      need(*l, Expr::Type::kBool, "'and'");
      auto r = parse_not();
      need(*r, Expr::Type::kBool, "'and'");
      l = binary(Expr::Op::kAnd, Expr::Type::kBool, std::move(l), std::move(r));
    }
    return l;
  }
  std::unique_ptr<Expr> parse_not() {
    skip();
    size_t at = i_;
    if ((s_.substr(i_, 1) == "!" && s_.substr(i_, 2) != "!=") || eat("not")) {
      if (s_[at] == '!') ++i_;
      Nest nest(*this, at);
      auto inner = parse_not();
      need(*inner, Expr::Type::kBool, "'not'");
      auto e = node(Expr::Op::kNot, Expr::Type::kBool, at);
      e->args.push_back(std::move(inner));
      finish_text(*e);
      return e;
    }
    return parse_cmp();
  }
  std::unique_ptr<Expr> parse_cmp() {
    auto l = parse_sum();
    static constexpr std::pair<std::string_view, Expr::Op> kOps[] = {
        {"==", Expr::Op::kEq}, {"!=", Expr::Op::kNe}, {"<=", Expr::Op::kLe},
        {">=", Expr::Op::kGe}, {"<", Expr::Op::kLt},  {">", Expr::Op::kGt}};
    for (auto [tok, op] : kOps) {
      if (eat(tok)) {
        need(*l, Expr::Type::kNumber, "comparing");
        auto r = parse_sum();
        need(*r, Expr::Type::kNumber, "comparing");
        auto e = binary(op, Expr::Type::kBool, std::move(l), std::move(r));
        skip();
        for (auto [t2, op2] : kOps)
          if (s_.substr(i_, t2.size()) == t2)
            fail(i_, "chained comparison: write 'a <= x && x <= b'");
        return e;
      }
    }
    return l;
  }
  std::unique_ptr<Expr> parse_sum() {
    auto l = parse_prod();
    for (;;) {
      Expr::Op op;
      if (eat("+")) op = Expr::Op::kAdd;
      else if (eat("-")) op = Expr::Op::kSub;
      else return l;
      need(*l, Expr::Type::kNumber, "arithmetic");
      auto r = parse_prod();
      need(*r, Expr::Type::kNumber, "arithmetic");
      l = binary(op, Expr::Type::kNumber, std::move(l), std::move(r));
    }
  }
  std::unique_ptr<Expr> parse_prod() {
    auto l = parse_unary();
    for (;;) {
      Expr::Op op;
      if (eat("*")) op = Expr::Op::kMul;
      else if (eat("/")) op = Expr::Op::kDiv;
      else return l;
      need(*l, Expr::Type::kNumber, "arithmetic");
      auto r = parse_unary();
      need(*r, Expr::Type::kNumber, "arithmetic");
      if (op == Expr::Op::kDiv)
        if (auto d = constant(*r); d && *d == 0) fail(r->offset, "division by zero: '" + r->text + "' is always 0");
      l = binary(op, Expr::Type::kNumber, std::move(l), std::move(r));
    }
  }
  std::unique_ptr<Expr> parse_unary() {
    skip();
    size_t at = i_;
    if (eat("-")) {
      Nest nest(*this, at);
      auto inner = parse_unary();
      need(*inner, Expr::Type::kNumber, "negating");
      auto e = node(Expr::Op::kNeg, Expr::Type::kNumber, at);
      e->args.push_back(std::move(inner));
      finish_text(*e);
      return e;
    }
    return parse_atom();
  }

  std::unique_ptr<Expr> parse_number() {
    size_t at = i_;
    while (i_ < s_.size() && ((s_[i_] >= '0' && s_[i_] <= '9') || s_[i_] == '.')) ++i_;
    if (i_ + 1 < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E') &&
        ((s_[i_ + 1] >= '0' && s_[i_ + 1] <= '9') || s_[i_ + 1] == '-' || s_[i_ + 1] == '+')) {
      i_ += 2;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    }
    size_t num_end = i_;
    // A unit: letters, '/', '%' or µ glued to the number.
    while (i_ < s_.size() && (ident_char(s_[i_]) || s_[i_] == '/' || s_[i_] == '%' ||
                              static_cast<unsigned char>(s_[i_]) >= 0x80))
      ++i_;
    std::string_view num = s_.substr(at, num_end - at);
    std::string_view unit = s_.substr(num_end, i_ - num_end);
    std::string_view all = s_.substr(at, i_ - at);
    auto e = node(Expr::Op::kNumber, Expr::Type::kNumber, at);
    e->text = std::string(all);
    auto plain = model::parse_number(num);
    if (!plain) fail(at, "'" + std::string(num) + "' is not a number");
    if (unit.empty()) {
      e->number = *plain.value;
    } else if (unit == "%") {
      e->number = *plain.value / 100.0;
    } else if (auto d = parse_duration(all)) {
      e->number = static_cast<double>(d.value->ns) * 1e-9;
    } else if (auto b = parse_bytes(all); b && unit != "") {
      e->number = static_cast<double>(b.value->n);
    } else if (auto r = parse_rate(all)) {
      e->number = static_cast<double>(r.value->bps);
    } else {
      fail(num_end, "unknown unit '" + std::string(unit) +
                        "' (rates: G, Gbit/s; sizes: KB, MB; times: us, ms, s; or %)");
    }
    return e;
  }

  std::unique_ptr<Expr> parse_atom() {
    skip();
    if (i_ >= s_.size()) fail(i_, "expression ends early: expected a value");
    size_t at = i_;
    char c = s_[i_];
    if ((c >= '0' && c <= '9') || c == '.') return parse_number();
    if (c == '(') {
      Nest nest(*this, at);
      ++i_;
      auto inner = parse_or();
      if (!eat(")")) fail(i_, "expected ')'");
      inner->offset = at;
      finish_text(*inner);
      return inner;
    }
    if (!ident_start(c)) fail(at, "unexpected '" + std::string(1, c) + "'");
    while (i_ < s_.size() && ident_char(s_[i_])) ++i_;
    std::string name(s_.substr(at, i_ - at));
    if (is_aggregate(name)) {
      if (!eat("(")) fail(i_, "'" + name + "' is an aggregate: write " + name + "(series)");
      Nest nest(*this, at);
      auto arg = parse_or();
      if (arg->type != Expr::Type::kSeries && !arg->counter)
        fail(arg->offset, name + "() takes a series; '" + arg->text + "' is a single value");
      auto e = node(Expr::Op::kAggregate, Expr::Type::kNumber, at);
      e->name = name;
      if (name == "pct") {
        if (!eat(",")) fail(i_, "pct(series, q) needs the percentile q");
        skip();
        auto q = parse_number();
        if (q->number < 0 || q->number > 100) fail(q->offset, "percentile must be within 0..100");
        e->number = q->number;
      } else if (name[0] == 'p') {
        e->number = std::stod(name.substr(1));
      }
      if (!eat(")")) fail(i_, "expected ')'");
      e->args.push_back(std::move(arg));
      finish_text(*e);
      return e;
    }
    const MetricInfo* m = find_metric(name);
    if (!m) {
      std::vector<std::string_view> names;
      for (const auto& mi : metric_registry()) names.push_back(mi.name);
      std::string msg = "unknown metric '" + name + "'";
      std::string hint = closest(name, names);
      if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
      fail(at, msg, true);
    }
    auto e = node(Expr::Op::kMetric, m->kind == MetricKind::kSeries ? Expr::Type::kSeries
                                                                     : Expr::Type::kNumber, at);
    e->name = name;
    e->counter = m->kind == MetricKind::kCounter;
    if (eat("(")) {
      do {
        skip();
        size_t lat = i_;
        while (i_ < s_.size() && ident_char(s_[i_])) ++i_;
        std::string label(s_.substr(lat, i_ - lat));
        if (label.empty()) fail(lat, "expected a label name");
        if (std::find(m->labels.begin(), m->labels.end(), label) == m->labels.end()) {
          std::string allowed;
          for (auto l : m->labels) allowed += (allowed.empty() ? "" : ", ") + std::string(l);
          fail(lat, "metric '" + name + "' has no label '" + label + "'" +
                        (allowed.empty() ? " (it has no labels)" : " (labels: " + allowed + ")"));
        }
        if (!eat("=")) fail(i_, "expected '=' after label '" + label + "'");
        skip();
        size_t vat = i_;
        while (i_ < s_.size() && (ident_char(s_[i_]) || s_[i_] == '-' || s_[i_] == ':' || s_[i_] == '.')) ++i_;
        if (vat == i_) fail(vat, "expected a value for label '" + label + "'");
        e->labels.emplace_back(label, std::string(s_.substr(vat, i_ - vat)));
      } while (eat(","));
      if (!eat(")")) fail(i_, "expected ')' after labels");
    }
    finish_text(*e);
    return e;
  }

  std::string_view s_;
  size_t i_ = 0;
  int depth_ = 0;
};

struct EvalFailure {
  std::string why;
};

class Evaluator {
 public:
  explicit Evaluator(const MetricSet& m) : m_(m) {}
  std::vector<std::pair<std::string, double>> observed;

  double num(const Expr& e) {
    switch (e.op) {
      case Expr::Op::kNumber: return e.number;
      case Expr::Op::kNeg: return -num(*e.args[0]);
      case Expr::Op::kAdd: return num(*e.args[0]) + num(*e.args[1]);
      case Expr::Op::kSub: return num(*e.args[0]) - num(*e.args[1]);
      case Expr::Op::kMul: return num(*e.args[0]) * num(*e.args[1]);
      case Expr::Op::kDiv: {
        double d = num(*e.args[1]);
        if (d == 0) throw EvalFailure{"division by zero in '" + e.text + "'"};
        return num(*e.args[0]) / d;
      }
      case Expr::Op::kMetric: {
        double v = 0;
        if (e.counter) {
          for (double x : series(e)) v += x;  // no sample selected: nothing was counted
        } else {
          v = lookup(e).scalar;
        }
        observed.emplace_back(e.text, v);
        return v;
      }
      case Expr::Op::kAggregate: {
        double r = aggregate(e, series(*e.args[0]));
        observed.emplace_back(e.text, r);
        return r;
      }
      default: throw EvalFailure{"internal: not a value: " + e.text};
    }
  }

  bool cond(const Expr& e) {
    switch (e.op) {
      case Expr::Op::kNot: return !cond(*e.args[0]);
      case Expr::Op::kAnd: return cond(*e.args[0]) && cond(*e.args[1]);
      case Expr::Op::kOr: return cond(*e.args[0]) || cond(*e.args[1]);
      case Expr::Op::kLt: return num(*e.args[0]) < num(*e.args[1]);
      case Expr::Op::kLe: return num(*e.args[0]) <= num(*e.args[1]);
      case Expr::Op::kGt: return num(*e.args[0]) > num(*e.args[1]);
      case Expr::Op::kGe: return num(*e.args[0]) >= num(*e.args[1]);
      case Expr::Op::kEq: return num(*e.args[0]) == num(*e.args[1]);
      case Expr::Op::kNe: return num(*e.args[0]) != num(*e.args[1]);
      default: throw EvalFailure{"internal: not a condition: " + e.text};
    }
  }

 private:
  const MetricValue& lookup(const Expr& e) {
    auto it = m_.find(e.name);
    if (it == m_.end()) throw EvalFailure{"metric '" + e.name + "' was not produced by this run"};
    return it->second;
  }
  std::vector<double> series(const Expr& e) {
    const MetricValue& v = lookup(e);
    std::vector<double> out;
    for (const auto& s : v.samples) {
      bool match = true;
      for (const auto& [k, want] : e.labels) {
        auto l = s.labels.find(k);
        match = match && l != s.labels.end() && l->second == want;
      }
      if (match) out.push_back(s.value);
    }
    return out;
  }
  static double aggregate(const Expr& e, std::vector<double> xs) {
    if (e.name == "count") return static_cast<double>(xs.size());
    if (e.name == "sum") {
      double s = 0;
      for (double x : xs) s += x;
      return s;
    }
    if (xs.empty()) throw EvalFailure{"'" + e.text + "': no samples to aggregate"};
    if (e.name == "min") return *std::min_element(xs.begin(), xs.end());
    if (e.name == "max") return *std::max_element(xs.begin(), xs.end());
    if (e.name == "avg") {
      double s = 0;
      for (double x : xs) s += x;
      return s / static_cast<double>(xs.size());
    }
    // Percentiles by the nearest-rank method: the smallest sample with at least q % at or below.
    std::sort(xs.begin(), xs.end());
    double rank = std::ceil(e.number / 100.0 * static_cast<double>(xs.size()));
    size_t idx = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
    return xs[std::min(idx, xs.size() - 1)];
  }

  const MetricSet& m_;
};

}  // namespace

namespace {
ParsedExpr parse_text(std::string_view text, bool value) {
  ParsedExpr out;
  const char* what = value ? "figure" : "assertion";
  if (text.find_first_not_of(" \t") == std::string_view::npos) {
    out.error = ExprError{false, 0, std::string("empty ") + what};
    return out;
  }
  if (text.size() > kMaxExpressionChars) {
    out.error = ExprError{false, 0, std::string(what) + " longer than " + std::to_string(kMaxExpressionChars) +
                                        " characters: split it into several"};
    return out;
  }
  try {
    out.root = Parser(text).parse_all(value);
  } catch (const ParseFailure& f) {
    out.error = f.error;
    out.root.reset();
  }
  return out;
}
}  // namespace

ParsedExpr parse_expression(std::string_view text) { return parse_text(text, false); }
ParsedExpr parse_value(std::string_view text) { return parse_text(text, true); }

std::optional<double> evaluate_value(const Expr& e, const MetricSet& metrics, std::string& why) {
  Evaluator ev(metrics);
  try {
    return ev.num(e);
  } catch (const EvalFailure& f) {
    why = f.why;
    return std::nullopt;
  }
}

Evaluation evaluate(const Expr& e, const MetricSet& metrics) {
  Evaluation r;
  Evaluator ev(metrics);
  try {
    r.outcome = ev.cond(e) ? Evaluation::Outcome::kPass : Evaluation::Outcome::kFail;
  } catch (const EvalFailure& f) {
    r.outcome = Evaluation::Outcome::kError;
    r.error = f.why;
  }
  r.observed = std::move(ev.observed);
  return r;
}

}  // namespace rocelab::model
