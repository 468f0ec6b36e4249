#include "engine/engine.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>

#include "sys/inet.h"
#include "sys/netns.h"

namespace rocelab::engine {
namespace {

constexpr size_t kBatch = 32;
constexpr size_t kMaxDatagram = 9216;
constexpr int kRxBuffer = 4 << 20;
// A QP's share of its host's queue. An RNIC has no deep queue below its pacer: PFC stops the
// NIC and the send queue stalls. Here packets that wait in the host's qdisc while its NIC is
// paused were already paced and counted by DCQCN, and the switch keeps marking them long
// after the rate was cut (a 4 MB buffer drove rates to 1 % in a 7:1 incast). Linux doubles
// the value; veth frees a packet's charge once it leaves the qdisc.
constexpr int kTxBuffer = 8 << 10;
constexpr size_t kFrameOverhead = 14 + 20 + 8;  // Ethernet + IPv4 + UDP around a RoCE payload
constexpr Nanos kMaxSleep = 5'000'000;

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// A UDP socket made inside `netns`, bound to addr:port.
std::optional<sys::Fd> udp_socket(int netns_fd, uint32_t addr, uint16_t port, bool rx, std::string& why,
                                  uint8_t data_tos = kTosData) {
  auto scope = sys::NetnsScope::enter(netns_fd, why);
  if (!scope) return std::nullopt;
  sys::Fd fd(socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return why = errno_text("socket"), std::nullopt;
  const int one = 1, buf = rx ? kRxBuffer : kTxBuffer;
  // FORCE (CAP_NET_ADMIN) sizes the socket past net.core.rmem_max, a sysctl of the
  // machine's own that the testbed must not touch; plain SO_RCVBUF when not allowed.
  if (!rx || setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(fd.get(), SOL_SOCKET, rx ? SO_RCVBUF : SO_SNDBUF, &buf, sizeof buf);
  if (rx) {
    if (setsockopt(fd.get(), IPPROTO_IP, IP_RECVTOS, &one, sizeof one) != 0) return why = errno_text("IP_RECVTOS"), std::nullopt;
    // The socket's drop count with every datagram: a full receive queue is loss the
    // emulation made (the engine did not read in time), which a real RNIC would not have.
    if (setsockopt(fd.get(), SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof one) != 0) return why = errno_text("SO_RXQ_OVFL"), std::nullopt;
  } else {
    // DF set and unconnected: Linux writes IP ID 0, which the ICRC covers (wire.h Flow).
    const int df = IP_PMTUDISC_DO, tos = data_tos;
    if (setsockopt(fd.get(), IPPROTO_IP, IP_MTU_DISCOVER, &df, sizeof df) != 0 ||
        setsockopt(fd.get(), IPPROTO_IP, IP_TOS, &tos, sizeof tos) != 0 ||
        setsockopt(fd.get(), SOL_SOCKET, SO_NO_CHECK, &one, sizeof one) != 0) {
      return why = errno_text("socket options"), std::nullopt;
    }
  }
  auto a = sys::ipv4_sockaddr(addr, port);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    char ip[INET_ADDRSTRLEN];
    in_addr in{htonl(addr)};
    inet_ntop(AF_INET, &in, ip, sizeof ip);
    return why = errno_text(("bind " + std::string(ip) + ":" + std::to_string(port)).c_str()),
           std::nullopt;
  }
  return fd;
}

// A full data frame of a QP on the wire, in bits: its payload at the path MTU with every header.
double frame_bits(const RcQp& qp) { return double(qp.config().mtu + 64 + kFrameOverhead) * 8; }

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

uint16_t qp_source_port(uint64_t seed, uint32_t host_index, uint32_t qpn) {
  return uint16_t(0xC000 | (splitmix(seed ^ (uint64_t(host_index) << 32) ^ qpn) & 0x3FFF));
}

struct Engine::Endpoint {
  EndpointSpec spec;
  sys::Fd rx;
  EndpointStats stats;
  NotificationPoint np;
  std::unordered_map<uint32_t, size_t> qps;  // local QPN -> index into qps_
  std::vector<size_t> served;                // its QPs (indices into qps_) in the order they were made
  uint64_t rr = 0;                           // turns: which of them goes first
  Nanos next_at = 0;  // the NIC's own pacer: its QPs together never exceed line rate
  // The NIC's pacing, measured as a whole (QPs sharing it trade turns; only their sum says
  // whether the engine kept up): what its QPs with data ready were allowed, at their rates up
  // to the line, against what they sent, over turns that began with such QPs.
  Nanos last_turn = 0;
  double ready_bps = 0;  // as of the end of its last turn; 0 while its queue refused packets
  double allowed_bytes = 0, paced_bytes = 0;
  uint64_t sent_this_turn = 0;
  // The pause (its PauseReading::since) whose frame in progress this NIC has sent: a port
  // has one frame on the wire, whichever of its QPs it was.
  Nanos frame_of_pause = 0;
  bool down = false;  // halted as of its last turn
  Endpoint(EndpointSpec s, sys::Fd fd, Nanos cnp_interval) : spec(std::move(s)), rx(std::move(fd)), np(cnp_interval) {}
};

struct Engine::Qp {
  size_t ep;
  RcQp rc;
  ReactionPoint rp;
  sys::Fd tx;
  Flow flow;  // as sent: this endpoint to the peer's 4791
  double line_bps;
  bool cnp_due = false;
  uint64_t cnp_sent = 0;
  Nanos next_at = 0;  // pacing: the next data packet may leave at this time
  double pace_rate = 0;  // the rate next_at was booked at
  bool measured = false;  // this turn's sends count toward the pacing error
  // Pacing error: data sent against rate × time while the QP had data ready in its window.
  Nanos last_turn = 0;
  bool backlogged = false;  // had data ready and only its own pacer held it back
  // Packets the socket refused (the host's queue is full while its NIC is paused): they wait
  // here and go first, as an RNIC's send queue stalls; nothing is dropped.
  std::deque<std::pair<std::vector<uint8_t>, bool>> held;  // (bytes, is CNP)
  double allowed_bytes = 0;
  uint64_t paced_bytes = 0, data_wire_bytes = 0;
  uint64_t send_blocked = 0;
  // PFC on its NIC's priority, when the fabric can say (empty: it cannot, and the host's full
  // queue is the only sign). While it holds no data frame begins (802.1Qbb): packets put into
  // a paused host's queue would leave together at line rate on XON, each resume a burst that
  // runs the switch's PG straight back past XOFF, where an RNIC resumes at its QP's paced
  // rate. The frame already on the wire when XOFF arrived finishes (in_progress_at).
  std::function<PauseReading()> paused;
  bool pause_seen = false;  // the last turn found it paused
  PauseReading pause;       // that pause, as first read
  Nanos in_progress_at = -1;  // the frame on the wire as its XOFF arrived reaches the peer then (-1: none)
  Nanos idle_at = 0;          // the last turn that found no data ready: a frame begins after it
  bool lost = false;  // its host crashed while it was at work: it answers nothing, ever
};

Engine::Engine(const DcqcnParams& dcqcn, const Clock& clock) : dcqcn_(dcqcn), clock_(clock) {}
Engine::~Engine() = default;

std::optional<size_t> Engine::add_endpoint(const EndpointSpec& spec, std::string& why) {
  auto fd = udp_socket(spec.netns_fd, spec.addr, kRoceUdpPort, true, why);
  if (!fd) return why = spec.name + ": " + why, std::nullopt;
  endpoints_.push_back(std::make_unique<Endpoint>(spec, std::move(*fd), dcqcn_.cnp_interval.ns));
  ep_order_.push_back(endpoints_.size() - 1);
  return endpoints_.size() - 1;
}

std::optional<size_t> Engine::add_qp(size_t ep, uint32_t qpn, uint32_t remote_addr, uint32_t remote_qpn,
                                     uint16_t sport, uint32_t send_psn, uint32_t expect_psn, const RcConfig& rc,
                                     std::string& why, uint8_t tos, std::function<PauseReading()> paused) {
  Endpoint& e = *endpoints_.at(ep);
  if (e.qps.count(qpn)) return why = "QP " + std::to_string(qpn) + " exists on " + e.spec.name, std::nullopt;
  auto fd = udp_socket(e.spec.netns_fd, e.spec.addr, sport, false, why, tos);
  if (!fd) why = e.spec.name + ": " + why;
  if (!fd) return std::nullopt;
  auto q = std::unique_ptr<Qp>(new Qp{ep, RcQp(qpn, remote_qpn, send_psn, expect_psn, rc),
                                      ReactionPoint(dcqcn_, e.spec.line_bps), std::move(*fd),
                                      Flow{e.spec.addr, remote_addr, sport, kRoceUdpPort}, e.spec.line_bps});
  q->last_turn = clock_.now();
  q->paused = std::move(paused);
  qps_.push_back(std::move(q));
  e.qps[qpn] = qps_.size() - 1;
  e.served.push_back(qps_.size() - 1);
  return qps_.size() - 1;
}

RcQp& Engine::qp(size_t id) { return qps_.at(id)->rc; }
const RcQp& Engine::qp(size_t id) const { return qps_.at(id)->rc; }
size_t Engine::qp_count() const { return qps_.size(); }
const EndpointStats& Engine::endpoint_stats(size_t ep) const { return endpoints_.at(ep)->stats; }

QpReport Engine::qp_report(size_t id) const {
  const Qp& q = *qps_.at(id);
  QpReport r;
  r.endpoint = q.ep;
  r.qpn = q.rc.qpn();
  r.sport = q.flow.sport;
  r.rc = q.rc.stats();
  r.rate_bps = std::min(q.rp.rate(), q.line_bps);
  r.alpha = q.rp.alpha();
  r.cuts = q.rp.cuts();
  r.cnp_sent = q.cnp_sent;
  r.cnp_received = q.rp.cnps();
  r.data_wire_bytes = q.data_wire_bytes;
  r.send_blocked = q.send_blocked;
  r.failure = q.rc.failure();
  r.pacing_error = q.allowed_bytes > 0 ? double(q.paced_bytes) / q.allowed_bytes - 1 : 0;
  return r;
}

void Engine::receive(Endpoint& ep, Nanos now) {
  static thread_local std::vector<uint8_t> bufs(kBatch * kMaxDatagram);
  mmsghdr msgs[kBatch];
  iovec iov[kBatch];
  sockaddr_in from[kBatch];
  alignas(cmsghdr) char ctrl[kBatch][CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(uint32_t))];
  for (int round = 0; round < 8; ++round) {
    for (size_t i = 0; i < kBatch; ++i) {
      iov[i] = {bufs.data() + i * kMaxDatagram, kMaxDatagram};
      msgs[i].msg_hdr = {&from[i], sizeof from[i], &iov[i], 1, ctrl[i], sizeof ctrl[i], 0};
    }
    const int n = recvmmsg(ep.rx.get(), msgs, kBatch, MSG_DONTWAIT, nullptr);
    if (n <= 0) return;
    for (int i = 0; i < n; ++i) {
      uint8_t tos = 0;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) tos = *CMSG_DATA(c);
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
          uint32_t dropped;
          std::memcpy(&dropped, CMSG_DATA(c), sizeof dropped);
          ep.stats.rx_overflow = std::max<uint64_t>(ep.stats.rx_overflow, dropped);
        }
      }
      ++ep.stats.rx_packets;
      ep.stats.rx_bytes += msgs[i].msg_len;
      const Flow flow{ntohl(from[i].sin_addr.s_addr), ep.spec.addr, ntohs(from[i].sin_port), kRoceUdpPort};
      auto parsed = parse({bufs.data() + i * kMaxDatagram, msgs[i].msg_len}, flow);
      if (!parsed) {
        ++(parsed.error == ParseError::kBadIcrc ? ep.stats.bad_icrc : ep.stats.malformed);
        continue;
      }
      const Packet& p = *parsed.packet;
      auto it = ep.qps.find(p.bth.dest_qp);
      if (it == ep.qps.end()) {
        ++ep.stats.unknown_qp;
        continue;
      }
      Qp& q = *qps_[it->second];
      if (q.lost) {  // as a QP the crashed host no longer has
        ++ep.stats.unknown_qp;
        continue;
      }
      if (p.bth.opcode == Opcode::kCnp) {
        ++ep.stats.cnp_received;
        q.rp.on_cnp(now);
        continue;
      }
      if ((tos & 0x3) == 0x3) {
        ++ep.stats.ce_marked;
        if (dcqcn_.notification && ep.np.on_ce(q.rc.qpn(), now)) q.cnp_due = true;
      }
      q.rc.on_rx(p, now);
    }
    if (n < int(kBatch)) return;
  }
}

// One sendmmsg batch of a QP: its packets, CNPs with their DSCP 48 cmsg.
struct Engine::TxBatch {
  std::vector<std::vector<uint8_t>>& out;
  sockaddr_in to;
  mmsghdr msgs[kBatch];
  iovec iov[kBatch];
  bool is_cnp[kBatch];
  alignas(cmsghdr) char ctrl[kBatch][CMSG_SPACE(sizeof(int))];
  size_t n = 0;

  // out[n] holds the packet.
  void add(bool cnp) {
    std::memset(&msgs[n], 0, sizeof msgs[n]);
    is_cnp[n] = cnp;
    iov[n] = {out[n].data(), out[n].size()};
    msgs[n].msg_hdr.msg_name = &to;
    msgs[n].msg_hdr.msg_namelen = sizeof to;
    msgs[n].msg_hdr.msg_iov = &iov[n];
    msgs[n].msg_hdr.msg_iovlen = 1;
    if (cnp) {  // CNPs leave on DSCP 48 from the same socket
      msgs[n].msg_hdr.msg_control = ctrl[n];
      msgs[n].msg_hdr.msg_controllen = sizeof ctrl[n];
      cmsghdr* c = CMSG_FIRSTHDR(&msgs[n].msg_hdr);
      c->cmsg_level = IPPROTO_IP;
      c->cmsg_type = IP_TOS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      const int tos = kTosCnp;
      std::memcpy(CMSG_DATA(c), &tos, sizeof tos);
    }
    ++n;
  }
};

// Sends the batch; what the socket refused (the host's queue is full while its NIC is
// paused) waits in q.held, to go first. A packet the kernel refuses outright is counted and
// dropped, never retried forever (the transport's recovery sees it as loss).
void Engine::send_batch(Qp& q, TxBatch& b) {
  size_t done = 0;
  EndpointStats& st = endpoints_[q.ep]->stats;
  while (done < b.n) {
    const int k = sendmmsg(q.tx.get(), b.msgs + done, unsigned(b.n - done), MSG_DONTWAIT);
    if (k < 0 && (errno == ENETDOWN || errno == ENETUNREACH || errno == EHOSTUNREACH || errno == ECONNREFUSED)) {
      ++st.unroutable;  // the NIC's link is down or no route is left: lost, as on a dead port
      ++done;
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS) {
      ++st.send_errors;
      st.last_send_error = errno;
      ++done;
      continue;
    }
    if (k <= 0) break;
    done += size_t(k);
  }
  for (size_t i = done; i < b.n; ++i) q.held.emplace_back(b.out[i], b.is_cnp[i]);
  if (done < b.n) {
    ++st.send_blocked;
    ++q.send_blocked;
  }
  b.n = 0;
}

// The QP's pacer at a new turn: its allowance for the interval before (at the rate that held
// through it), counted only when that interval was limited by this QP's own pacer.
double Engine::pace(Qp& q, Nanos now, double rate) {
  // QPs sharing a NIC: when the others' packets pushed the NIC's schedule past this QP's own
  // since its last turn, the NIC, not this QP's pacer, held it back.
  const Endpoint& nic = *endpoints_[q.ep];
  q.measured = q.backlogged && nic.next_at <= std::max(q.next_at, now);
  const double paced_at = q.pace_rate > 0 ? q.pace_rate : rate;
  const double allowance = q.measured ? paced_at * double(now - q.last_turn) / 8e9 : 0;
  q.last_turn = now;
  // A new DCQCN rate takes effect now, as an RNIC's rate limiter does: the wait left before
  // the next packet shrinks or stretches with it (a slot booked at 1 Gb/s must not hold a QP
  // that fast recovery just raised to 50).
  if (q.pace_rate > 0 && rate != q.pace_rate && q.next_at > now)
    q.next_at = now + Nanos(double(q.next_at - now) * q.pace_rate / rate);
  q.pace_rate = rate;
  return allowance;
}

// Packets the socket refused before go first. False while it still refuses them.
bool Engine::send_held(Qp& q, TxBatch& b) {
  if (q.held.empty()) return true;
  const size_t held = std::min(q.held.size(), kBatch);
  for (size_t i = 0; i < held; ++i) {
    b.out[b.n] = std::move(q.held[i].first);
    b.add(q.held[i].second);
  }
  q.held.erase(q.held.begin(), q.held.begin() + long(held));
  const size_t before = q.held.size();
  send_batch(q, b);
  if (q.held.size() > before) {  // still blocked: what came back goes first next time
    std::rotate(q.held.begin(), q.held.begin() + long(before), q.held.end());
    q.backlogged = false;
    return false;
  }
  return q.held.empty();
}

// PFC at the sender, as 802.1Qbb has a port do it: the frame on the wire when XOFF arrived
// finishes, none begins after it, and the first frame after the pause reaches the peer one
// frame time after the resume. Here a frame reaches the peer the moment the engine sends it
// (veth; the host's HTB shapes the line), so a frame sent at t was on the wire for the frame
// time before t. An RNIC's rate limiter saves no credit meanwhile: after the pause the QP
// resumes at its rate. Measured against bench/pfc_model.py (physical ports, the 7:1 incast with
// PFC alone): with no frame after XOFF each PG stopped 1.9 KB past XOFF a pause against 6.0 KB
// and PFC paused 15-21 % more often. True while a pause holds the QP.
bool Engine::follow_pause(Qp& q, Endpoint& ep, Nanos now) {
  const PauseReading pr = q.paused ? q.paused() : PauseReading{};
  const Nanos frame = Nanos(frame_bits(q.rc) * 1e9 / q.line_bps);  // its own time at line rate
  if (q.pause_seen && pr.since != q.pause.since) {
    // The pause seen before ended (its length joined the total): the first frame after it
    // began at the resume. A pause that ended and another that began between two looks: the
    // first frame would have gone out in between, and the new pause finds it on the wire.
    // An XON ended it as the XON arrived (802.1Qbb), however late the agent's resume of the
    // host's queue took hold: dated from the agent's, each resume came its reaction late, and
    // the PG drained that much further below XON before its sender's next frame (at D = 1000
    // on the 7:1 PFC incast a PG 5.3 KB below XON against the physical ports' 2.7 KB, PFC
    // 15-20 % fewer times, issue 48). A pause that ran out, or one the watchdog ended, took
    // no XON since its XOFF arrived: dated from the agent's.
    Nanos resumed = pr.total > q.pause.total ? q.pause.since + (pr.total - q.pause.total) : now;
    if (pr.xon >= q.pause.arrived && pr.xon <= resumed) resumed = pr.xon;
    q.next_at = std::max(q.next_at, resumed + frame);
    if (!pr.on()) q.next_at = std::max(q.next_at, now);  // no credit saved while it held
    q.in_progress_at = -1;
    q.pause_seen = false;
  }
  if (pr.on() && !q.pause_seen) {
    // The QP's next frame was on the wire when XOFF arrived if it began before then: its end
    // less its own time at line rate, and not before the QP had data to send.
    q.pause = pr;
    const Nanos end = std::max(q.next_at, ep.next_at);
    const Nanos began = std::max(end - frame, q.idle_at);
    q.in_progress_at = q.rc.data_ready() && began < pr.arrived ? end : -1;
  }
  q.pause_seen = pr.on();
  return q.pause_seen;
}

// The paused QP still owes its port the frame on the wire as XOFF arrived: none of the NIC's
// QPs has sent it yet.
bool Engine::frame_on_wire(const Qp& q) const {
  return q.in_progress_at >= 0 && endpoints_[q.ep]->frame_of_pause != q.pause.since;
}

void Engine::transmit(Qp& q, Nanos now) {
  const double rate = std::min(q.rp.rate(), q.line_bps);
  const double allowance = pace(q, now, rate);
  static thread_local std::vector<std::vector<uint8_t>> out(kBatch);
  TxBatch b{out, sys::ipv4_sockaddr(q.flow.dst, kRoceUdpPort)};
  if (!send_held(q, b)) return;
  // Counted only once the socket takes packets again: an interval that ended with the NIC
  // paused (PFC) was not the pacer's to fill.
  q.allowed_bytes += allowance;
  Endpoint& ep = *endpoints_[q.ep];
  const bool paused = follow_pause(q, ep, now);
  if (q.cnp_due) {
    Bth bth;
    bth.opcode = Opcode::kCnp;
    bth.becn = true;
    bth.dest_qp = q.rc.dest_qpn();
    build(bth, std::nullopt, std::nullopt, {}, q.flow, out[b.n]);
    b.add(true);
    q.cnp_due = false;
    ++q.cnp_sent;
    ++endpoints_[q.ep]->stats.cnp_sent;
  }
  // The bucket holds 50 us of sending at the current rate, between 2 packets and a batch: full
  // batches at high rates, and at low rates no burst the DCQCN rate did not allow.
  const double packet_bits = frame_bits(q.rc);
  auto depth = [&](double bps) { return std::clamp(bps * 50e-6 / packet_bits, 2.0, double(kBatch)) * packet_bits * 1e9 / bps; };
  q.next_at = std::max(q.next_at, now - Nanos(depth(rate)));
  ep.next_at = std::max(ep.next_at, now - Nanos(depth(q.line_bps)));
  bool nic_limited = false;
  while (b.n < kBatch) {
    const bool response = q.rc.response_pending();
    if (!response && q.rc.data_ready() && q.next_at <= now && ep.next_at > now) nic_limited = true;
    const bool may_begin = !paused || frame_on_wire(q);
    if (!response && (!may_begin || !(q.rc.data_ready() && q.next_at <= now && ep.next_at <= now))) break;
    auto t = q.rc.next_tx(now);
    if (!t) break;
    const size_t len = build(t->bth, t->reth, t->aeth, t->payload, q.flow, out[b.n]);
    b.add(false);
    if (response) continue;
    const size_t wire = len + kFrameOverhead;
    q.next_at += Nanos(double(wire) * 8e9 / rate);
    ep.next_at += Nanos(double(wire) * 8e9 / q.line_bps);
    q.data_wire_bytes += wire;
    ep.sent_this_turn += wire;
    if (q.measured) q.paced_bytes += wire;
    q.rp.on_sent(wire, now);
    if (paused) {  // the frame in progress: the port's one for this pause
      ep.frame_of_pause = q.pause.since;
      q.in_progress_at = -1;
      break;
    }
  }
  if (!q.rc.data_ready()) q.idle_at = now;
  // The pacing error counts only time when this QP's own rate was the limit: not the window
  // (waiting for ACKs), not the NIC (other QPs using the line).
  q.backlogged = !paused && q.rc.data_ready() && !nic_limited && ep.next_at <= q.next_at;
  send_batch(q, b);
  // A socket that refused packets means the NIC is paused (PFC): not the pacer's doing.
  if (!q.held.empty()) q.backlogged = false;
}


Nanos Engine::next_due(Nanos now) const {
  Nanos due = now + kMaxSleep;
  for (const auto& q : qps_) {
    if (q->lost || endpoints_[q->ep]->down) continue;
    if (q->cnp_due || q->rc.response_pending()) return now;
    if (q->pause_seen && frame_on_wire(*q)) {
      due = std::min(due, q->in_progress_at);  // the frame on the wire as XOFF came finishes then
    } else if (!q->held.empty() || (q->pause_seen && q->rc.data_ready())) {
      // The socket was full (the NIC's queue, usually paused by PFC), or PFC holds the NIC: it
      // takes more once the queue sent a packet or the pause ended, so try again after one
      // packet's time at the line rate (at most 100 us). Its data being due meanwhile is no
      // reason to wake: that spun the thread on every paused NIC (incast-lossless kept it
      // 97 % busy), taking the CPU the kernel forwards on.
      due = std::min(due, now + std::min<Nanos>(100'000, Nanos(frame_bits(q->rc) * 1e9 / q->line_bps)));
    } else if (q->rc.data_ready()) {
      due = std::min(due, std::max(q->next_at, endpoints_[q->ep]->next_at));
    }
    // The ACK timer runs from when a packet left, paused or not, as on an RNIC: a QP whose
    // packets sit in a paused fabric (a storm, a deadlock) times out and, retry_cnt + 1
    // timeouts later, fails with retry-exceeded. Packets waiting in the host's own queue
    // count too; that queue is 16 KB a QP (kTxBuffer), microseconds at the line rate.
    const Nanos timer = q->rc.next_timer();
    if (timer != INT64_MAX) due = std::min(due, timer);
  }
  return due;
}

// A host that went down: what its sockets hold is gone, and so is every QP that was at work.
bool Engine::halted(Endpoint& ep, Nanos now) {
  const bool down = ep.spec.halted && ep.spec.halted();
  if (down && !ep.down) {
    ++ep.stats.crashes;
    for (size_t id : ep.served) {
      Qp& q = *qps_[id];
      const auto& st = q.rc.stats();
      if (q.lost || (st.tx_packets == 0 && st.rx_packets == 0 && q.rc.idle())) continue;
      q.lost = true;
      q.rc.abort(kHostCrashed, now);
      q.held.clear();
      q.cnp_due = false;
    }
    // Drain what the sockets hold: a rebooted NIC has none of it.
    char sink[64];
    while (recv(ep.rx.get(), sink, sizeof sink, MSG_DONTWAIT) >= 0) {
    }
  }
  ep.down = down;
  return down;
}

void Engine::turn() {
  const Nanos now = clock_.now();
  for (auto& ep : endpoints_)
    if (!halted(*ep, now)) receive(*ep, now);
  // Hosts are served in a new random order every turn. A fixed order put one host's packets
  // last into a shared switch queue whenever both were due, so that host met the fuller queue,
  // drew more ECN marks and CNPs and settled below its fair share (dcqcn-fairness: 21 CNPs
  // against 16). Within a host its QPs take turns going first, as an RNIC's send scheduler
  // arbitrates its QPs round robin: a fixed order let the first QP with data take the whole
  // line and starve the host's other QPs of its priority until it was done.
  ++turns_;
  for (size_t i = ep_order_.size(); i > 1; --i)
    std::swap(ep_order_[i - 1], ep_order_[splitmix(turns_ * 0x10000 + i) % i]);
  for (size_t e : ep_order_) {
    Endpoint& ep = *endpoints_[e];
    if (ep.down) {
      ep.last_turn = 0;
      continue;
    }
    const double allowance = ep.last_turn ? ep.ready_bps * double(now - ep.last_turn) / 8e9 : 0;
    ep.last_turn = now;
    ep.sent_this_turn = 0;
    double ready = 0;
    bool refused = false;
    const size_t n = ep.served.size(), first = n ? size_t(ep.rr++ % n) : 0;
    for (size_t i = 0; i < n; ++i) {
      Qp& q = *qps_[ep.served[(first + i) % n]];
      if (q.lost) continue;
      q.rc.on_timer(now);
      q.rp.advance(now);
      transmit(q, now);
      if (q.rc.data_ready()) ready += std::min(q.rp.rate(), q.line_bps);
      refused = refused || !q.held.empty();
    }
    // A turn counts when the interval before it began with the queue taking packets, and
    // with it every packet built in it, those the socket then refused too: they were paced
    // here and go out later, uncounted. Leaving out a turn that ended refused lost its
    // packets but kept the allowance of the turns that waited for them, so a ring's NIC,
    // refused now and then at the line rate, read 15-30 % short at 99.5 % of its busbw.
    if (ep.ready_bps > 0) {
      ep.allowed_bytes += allowance;
      ep.paced_bytes += double(ep.sent_this_turn);
      ep.stats.pacing_error = ep.allowed_bytes > 0 ? ep.paced_bytes / ep.allowed_bytes - 1 : 0;
    }
    ep.ready_bps = refused ? 0 : std::min(ready, ep.spec.line_bps);
  }
}

std::vector<int> Engine::rx_fds() const {
  std::vector<int> fds;
  for (auto& ep : endpoints_) fds.push_back(ep->rx.get());
  return fds;
}

bool Engine::has_news() const {
  for (const auto& q : qps_)
    if (q->rc.has_news()) return true;
  return false;
}

bool Engine::run(const std::function<bool()>& done, Nanos deadline, const std::vector<int>& wake) {
  std::vector<pollfd> fds;
  for (int fd : rx_fds()) fds.push_back({fd, POLLIN, 0});
  for (int fd : wake) fds.push_back({fd, POLLIN, 0});
  for (;;) {
    turn();
    if (done()) return true;
    const Nanos now = clock_.now();
    if (now >= deadline) return false;
    const Nanos wait = std::min(next_due(now), deadline) - now;
    if (wait > 20'000) {  // below that, sleeping costs more than it saves
      timespec ts{time_t(wait / 1'000'000'000), long(wait % 1'000'000'000)};
      ppoll(fds.data(), fds.size(), &ts, nullptr);
    }
  }
}

}  // namespace rocelab::engine
