// The agent's channel (DESIGN.md §1: the fabric's "switch CPU"). `up` hands the agent its
// configuration over the start handshake; afterwards anyone holding the fabric (a Testbed)
// asks it over its unix socket, one JSON line per request and reply. The types are here,
// and so is their serialisation, in one place for both ends.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "rocelab_abi.h"

namespace rocelab::fabric {

struct AgentNode {
  std::string node, netns;
  // Where in each watchdog poll this node's poll falls (a switch polls on its own timer, so
  // switches do not poll in step): seeded from the scenario and the node's name.
  int64_t wd_phase_ns = 0;
};

struct AgentPort {
  uint32_t node = 0;  // index into AgentConfig::nodes
  uint32_t slot = 0;
  int ifindex = 0;
  std::string name;
  uint64_t rate_bps = 0;  // emulated line rate: what a resumed priority goes back to
  uint32_t mtu = 0;
  uint8_t pausable = 0;   // priorities whose leaf is a TBF (PFC priorities)
  std::array<uint32_t, RL_NUM_PRIO> limit{};  // each TBF leaf's queue limit, bytes
  int32_t peer = -1;  // the switch at the link's other end (index into nodes); -1: a host or none
};

// The PFC watchdog the agent runs on every switch port x PFC priority (model/pfcwd.h).
struct AgentWatchdog {
  bool enabled = false;
  int64_t detection_ns = 0, restoration_ns = 0, poll_ns = 0;  // wall clock: physical x D
  std::string action = "drop";
  std::string predicate = "mellanox";
};

struct AgentConfig {
  std::string instance;
  std::string state_path;   // the agent stops when this file is gone (the fabric was taken down)
  std::string socket_path;  // where it answers requests
  std::vector<AgentNode> nodes;
  std::vector<AgentPort> ports;
  AgentWatchdog watchdog;
  double scale = 1;       // D: the metrics it serves are physical
  uint16_t metrics_port = 0;  // serve Prometheus text on 127.0.0.1:PORT/metrics (0: not at all)
};

struct PortPauseFigures {
  std::string node, port;
  uint32_t prio = 0;
  uint64_t pauses = 0, paused_ns = 0;  // pauses of this port-priority and their time, one in force included
};

// A port's line against its rate (rl_line_state): the time it idled with packets waiting
// (past what its shaper's bucket makes up), summed, and the most one run of dequeues lost.
struct PortLineFigures {
  std::string node, port;
  uint64_t lost_ns = 0, longest_ns = 0, runs = 0;
  uint64_t gap_ns = 0;     // the longest wait between two dequeues with packets waiting: one stall
  uint64_t gap_at_ns = 0;  // when it began (CLOCK_MONOTONIC), to place it in the run
};

// A task ran on a CPU for `dur_ns` from `start_ns` (CLOCK_MONOTONIC) without a switch
// (rl_cpu_hold): another program's, or any whose stretch the hypervisor took `steal_ns` of.
// The machine's contention, named.
struct CpuHoldFigures {
  uint32_t cpu = 0, pid = 0;  // pid: the process (tgid); 0: the CPU was idle
  std::string thread;         // its thread's name
  uint64_t start_ns = 0, dur_ns = 0;
  uint64_t steal_ns = 0;
  bool other = true;     // another program's task (not ours, not the kernel's)
  bool softirq = false;  // softirq work (pid 0): the fabric's packets most of it; no task ran
  bool loop = false;     // not another program's, kept because the woken PFC loop waited through it
  bool kthread = false;  // a kernel thread's
  uint64_t waited_ns = 0;  // loop: of it, from the loop's wake-up to the switch to it
  std::string work;        // a kworker's: the function of the longest work item it ran ("": none)
  uint64_t work_ns = 0;    // how long that item ran
};

struct PortLeakFigures {
  std::string node, port;
  uint32_t prio = 0;
  uint64_t packets = 0, bytes = 0;
};

// A watched queue's record, SONiC's PFC_WD counters: packets sent and dropped by the queue
// (TX) and received on its port with its priority (RX) while stormed, all storms and the
// last one (a storm in force counts up to now).
struct WatchdogQueueFigures {
  std::string node, port;
  uint32_t prio = 0;
  bool stormed = false;
  uint64_t detected = 0, restored = 0;
  uint64_t tx_ok = 0, tx_drop = 0, rx_ok = 0, rx_drop = 0;
  uint64_t last_tx_ok = 0, last_tx_drop = 0, last_rx_ok = 0, last_rx_drop = 0;
};
struct WatchdogEvent {
  uint64_t t_ns = 0;  // CLOCK_MONOTONIC (the Testbed clock)
  std::string node, port;
  uint32_t prio = 0;
  bool detected = true;  // else restored
};

// A PFC deadlock the agent saw (model/deadlock.h): the cycle's queues in wait order, each
// "node:port" waiting for the next one's node. Times CLOCK_MONOTONIC; ended 0 while it holds.
struct DeadlockFigures {
  uint32_t prio = 0;
  std::vector<std::string> members;
  uint64_t since_ns = 0, detected_ns = 0, ended_ns = 0;
};

// A pause taking effect or ending on a port-priority (the HPCC simulator's pfc.txt events).
// The PFC loop kept off its CPU: its 1 ms poll returned this much later than asked (the
// hypervisor ran another guest, or the kernel's own work held the CPU). A real-time thread
// that oversleeps means every shaper and timer of the fabric overslept with it.
struct AgentStall {
  uint64_t t_ns = 0;    // CLOCK_MONOTONIC when the loop woke
  uint64_t late_ns = 0;  // past the poll's timeout
  // How long PFC's work waited on it: a received PFC frame put in force or lifted late (from
  // its arrival), a pause whose time ran out (from its end), an XON sent late (all of the
  // stall: when the queue drained within it is not known). 0: nothing of PFC's was due.
  uint64_t delayed_ns = 0;
};

// The scheduler kept the PFC loop waiting while it was runnable (its schedstat run delay
// grew this much between two readings `span_ns` apart): an RT throttle, a higher-priority
// thread on its core, or, once it left real-time priority, time-shared threads beside it.
struct AgentHeld {
  uint64_t t_ns = 0, wait_ns = 0, span_ns = 0;
};
// The loop left real-time priority (up = false) or took it again, its CPU over the last RT
// period then `used_ns` (agent/cpu_watch.h).
struct AgentStep {
  uint64_t t_ns = 0;
  bool up = false;
  uint64_t used_ns = 0;
};

struct PauseEvent {
  uint64_t t_ns = 0;  // CLOCK_MONOTONIC
  uint32_t slot = 0, prio = 0;
  bool paused = true;  // else resumed
};

// What the agent did, as of the moment it was asked. Times are emulated nanoseconds.
struct AgentFigures {
  uint64_t events = 0;      // PFC events the ingress programs handed over
  uint64_t ignored = 0;     // for priorities the port does not pause
  uint64_t pauses = 0, refreshes = 0, resumes = 0, expired = 0;
  uint64_t paused_ns = 0;   // summed over port-priorities
  uint64_t xon_sent = 0, xoff_refreshed = 0, kicks = 0;
  struct Reaction {
    uint64_t count = 0, p50 = 0, p99 = 0, max = 0;  // BPF arrival -> pause in effect (nearest rank)
    // At kReactionQuantiles (empty: not kept): the whole distribution, its tail finer, which
    // bench/pfc_model.py draws a physical sender's reaction from.
    std::vector<uint64_t> quantiles;
  } reaction_ns;
  Reaction transit_ns;  // the link's other end deciding XOFF -> its frame arriving here (BPF clocks)
  Reaction path_ns;     // the same decision -> the pause in force here: a pause's whole way, per pause
  // The longest of those ways, split: when its XOFF was decided (CLOCK_MONOTONIC), the frame's
  // way to here, and from its arrival to the pause in force (0: none timed).
  struct WorstPath {
    uint64_t at_ns = 0, transit_ns = 0, reaction_ns = 0;
  } path_worst;
  uint64_t reaction_budget_ns = 0, budget_raises = 0;
  uint64_t pause_tail_packets = 0, leaked_packets = 0, leaked_bytes = 0;
  uint64_t storm_frames = 0;  // pause-storm frames sent, every storm
  uint64_t wd_ignored = 0;    // PFC frames ignored on stormed queues (watchdog drop / forward)
  std::vector<WatchdogQueueFigures> watchdog;  // every watched queue (empty: no watchdog)
  std::vector<WatchdogEvent> wd_events;
  std::vector<DeadlockFigures> deadlocks;
  std::vector<AgentStall> stalls;     // in order, the first kStallLogMax of the run
  uint64_t stalls_dropped = 0;
  std::vector<AgentHeld> held;        // in order, the first kStallLogMax of the run
  uint64_t held_dropped = 0;
  std::vector<AgentStep> rt_steps;    // in order, every one
  bool realtime = false;              // the loop ran at a real-time priority (as last asked)
  uint64_t loop_cpu_ns = 0, loop_wait_ns = 0;  // the loop's time on a CPU and waiting, since it began
  std::vector<PauseEvent> pause_log;  // in order, the first kPauseLogMax of the run
  uint64_t pause_log_dropped = 0;     // events beyond it
  std::vector<PortLeakFigures> leaks;
  std::vector<PortPauseFigures> paused;
  std::vector<PortLineFigures> lines;  // ports whose line lost time (lost_ns > 0)
  std::vector<CpuHoldFigures> holds;   // the last RL_HOLD_RING per CPU, in order per CPU
};

inline constexpr size_t kPauseLogMax = 200'000;
// The percentiles AgentFigures::Reaction::quantiles are taken at.
inline constexpr double kReactionQuantiles[] = {0,  5,  10, 15, 20, 25, 30, 35, 40, 45, 50,   55,   60,  65,
                                                70, 75, 80, 85, 90, 95, 98, 99, 99.5, 99.8, 99.9, 100};
inline constexpr size_t kStallLogMax = 20'000;

nlohmann::ordered_json to_json(const AgentConfig& c);
std::optional<AgentConfig> config_from_json(const nlohmann::json& j, std::string& why);
nlohmann::ordered_json to_json(const AgentFigures& f);
std::optional<AgentFigures> figures_from_json(const nlohmann::json& j, std::string& why);

// Requests the agent takes; each gets one reply object: {"ok": true, ...} or {"ok": false,
// "error": "..."}. `ping` answers at once: the run's liveness probe (figures build every
// pause of the run, too much for the PFC loop four times a second).
enum class AgentRequest { kFigures, kStop, kStorm, kStormStop, kPing };
std::string_view request_name(AgentRequest r);
std::optional<AgentRequest> request_named(std::string_view name);

// A pause storm (FAULTS.md): a port sends XOFF frames naming `vector` with pause time
// `quanta`, one every `interval_ns` (wall clock), `frames` of them (0: until stopped). The
// agent sends them; "storm" answers {"id": N}, "storm_stop" {"id": N} answers {"frames": sent}.
struct StormSpec {
  uint32_t slot = 0;
  uint8_t vector = 0;
  uint16_t quanta = 0;
  uint64_t interval_ns = 0;
  uint64_t frames = 0;
};
nlohmann::ordered_json to_json(const StormSpec& s);
std::optional<StormSpec> storm_from_json(const nlohmann::json& j, std::string& why);

// The client side: one request on a fresh connection, its reply (nullopt with why: no
// agent listening, or it failed to answer within `timeout_ms`).
std::optional<nlohmann::json> agent_call(const std::string& socket_path, AgentRequest r, std::string& why,
                                         int timeout_ms = 2000);
// The same with the request's own fields (`fields` is an object; "request" is set here).
std::optional<nlohmann::json> agent_call(const std::string& socket_path, AgentRequest r, nlohmann::ordered_json fields,
                                         std::string& why, int timeout_ms = 2000);
std::optional<AgentFigures> agent_figures(const std::string& socket_path, std::string& why);

// Where an instance's agent listens.
std::string agent_socket_path(const std::string& instance);

}  // namespace rocelab::fabric
