// The engine: one process, one thread, serving many emulated RNICs. Each endpoint (a host
// NIC) has a UDP 4791 socket made inside its host's namespace; each QP sends from its own
// socket bound to its UDP source port. Data leaves paced at min(DCQCN rate, line rate) on
// DSCP 26 with ECT(0); CE-marked arrivals make CNPs (DSCP 48) through the notification
// point; a received CNP drives the QP's reaction point. Bad ICRCs are counted drops.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sys/clock.h"
#include "engine/dcqcn.h"
#include "engine/transport.h"

namespace rocelab::engine {

struct EndpointSpec {
  std::string name;   // for reports, e.g. "h1:nic0"
  int netns_fd = -1;  // the host's namespace (the caller's; must outlive the engine's sockets' making)
  uint32_t addr = 0;  // the NIC's IPv4 address, host order
  double line_bps = 0;  // emulated line rate: the pacer's ceiling
  // True while the host is down (a node_crash fault): its NIC neither sends nor receives, and
  // the QPs that were at work lose their state as a crashed host's do — they fail, and never
  // answer again. QPs that had not begun survive (as if made after the host came back).
  std::function<bool()> halted;
};

struct EndpointStats {
  uint64_t rx_packets = 0, rx_bytes = 0, bad_icrc = 0, malformed = 0, unknown_qp = 0;
  uint64_t ce_marked = 0, cnp_sent = 0, cnp_received = 0;
  uint64_t send_blocked = 0;  // batches the host's full queue held back (sent later, never lost)
  uint64_t rx_overflow = 0;   // datagrams the kernel dropped because the receive socket was full
  uint64_t send_errors = 0;   // packets the kernel refused (not a full queue): a bug, never expected
  uint64_t unroutable = 0;    // packets the kernel had no route or link for (a link fault): lost
  uint64_t crashes = 0;       // times the host went down (node_crash)
  int last_send_error = 0;    // its errno
  double pacing_error = 0;    // the NIC as a whole: data sent / what its ready QPs' rates allowed, - 1
  std::vector<std::pair<std::string, uint64_t>> hw_counters;  // a kernel RNIC's own (rxe), since the run began
};

struct QpReport {
  size_t endpoint = 0;
  uint32_t qpn = 0;
  uint16_t sport = 0;
  RcStats rc;
  double rate_bps = 0, alpha = 0;
  uint64_t cuts = 0, data_wire_bytes = 0;
  uint64_t cnp_sent = 0, cnp_received = 0;  // as notification point (for its peer), as reaction point
  double pacing_error = 0;  // data sent / what the pacing rate allowed while backlogged, − 1
  uint64_t send_blocked = 0;  // batches its paused NIC's full queue held back: then the pacing
                              // error is not a measure of the pacer (PFC was the limit)
  std::string failure;        // why the QP is in the error state (empty: it is not)
};

class Engine {
 public:
  Engine(const DcqcnParams& emulated_dcqcn, const Clock& clock);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  std::optional<size_t> add_endpoint(const EndpointSpec& spec, std::string& why);
  // A QP on endpoint `ep` whose peer is QP `remote_qpn` at `remote_addr`; `sport` in
  // 0xC000–0xFFFF is its UDP source port.
  std::optional<size_t> add_qp(size_t ep, uint32_t qpn, uint32_t remote_addr, uint32_t remote_qpn,
                               uint16_t sport, uint32_t send_psn, uint32_t expect_psn, const RcConfig& rc,
                               std::string& why, uint8_t tos = kTosData,  // data and ACKs leave with `tos`
                               std::function<PauseReading()> paused = {});  // PFC on its NIC's priority
  RcQp& qp(size_t id);
  const RcQp& qp(size_t id) const;

  // One turn: receive what is waiting, fire timers, send what pacing allows.
  void turn();
  // Turns until `done()` or the deadline; sleeps in ppoll when nothing is due.
  // `wake`: other descriptors whose input ends a wait (a split run's rendezvous).
  bool run(const std::function<bool()>& done, Nanos deadline, const std::vector<int>& wake = {});

  // For a caller that drives several engines, each on its own thread (the builtin backend's
  // shards): the receive sockets to wait on, when the next timer or packet is due, and
  // whether a QP holds completions or received messages its owner has not taken.
  std::vector<int> rx_fds() const;
  Nanos next_due(Nanos now) const;
  bool has_news() const;

  const EndpointStats& endpoint_stats(size_t ep) const;
  QpReport qp_report(size_t id) const;
  size_t qp_count() const;

 private:
  struct Endpoint;
  struct Qp;
  void receive(Endpoint& ep, Nanos now);
  bool halted(Endpoint& ep, Nanos now);
  bool follow_pause(Qp& q, Endpoint& ep, Nanos now);
  bool frame_on_wire(const Qp& q) const;
  void transmit(Qp& q, Nanos now);
  double pace(Qp& q, Nanos now, double rate);
  struct TxBatch;
  bool send_held(Qp& q, TxBatch& b);
  void send_batch(Qp& q, TxBatch& b);

  DcqcnParams dcqcn_;
  const Clock& clock_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::vector<std::unique_ptr<Qp>> qps_;
  std::vector<size_t> ep_order_;  // the order endpoints are served in this turn (see turn())
  uint64_t turns_ = 0;
};

// UDP source port of a QP, from the scenario seed (DESIGN.md §2: 0xC000–0xFFFF).
uint16_t qp_source_port(uint64_t seed, uint32_t host_index, uint32_t qpn);

}  // namespace rocelab::engine
