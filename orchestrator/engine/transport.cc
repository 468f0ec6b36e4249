#include "engine/transport.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <utility>

namespace rocelab::engine {
namespace {

constexpr uint32_t kHalfPsnSpace = 1u << 23;

// Distance from `from` forward to `to` in the 24-bit PSN space.
uint32_t psn_ahead(uint32_t to, uint64_t from) { return (to - uint32_t(from)) & kPsnMask; }

}  // namespace

RcQp::RcQp(uint32_t qpn, uint32_t dest_qpn, uint32_t send_psn, uint32_t expect_psn, RcConfig config)
    : qpn_(qpn & kPsnMask), dest_qpn_(dest_qpn & kPsnMask), cfg_(config),
      base_seq_(send_psn & kPsnMask), una_(base_seq_), nxt_(base_seq_), max_sent_(base_seq_),
      posted_end_(base_seq_), epsn_(expect_psn & kPsnMask), rto_(config.rto) {
  cfg_.mtu = std::max<uint32_t>(cfg_.mtu, 256);
  cfg_.window = std::clamp<uint32_t>(cfg_.window, 1, kHalfPsnSpace - 1);
  cfg_.ack_req_every = std::max<uint32_t>(cfg_.ack_req_every, 1);
}

uint64_t RcQp::post(bool write, Buffer data, uint64_t va, uint32_t rkey) {
  if (failed_) {  // IBTA: a WR posted to a QP in the error state completes flushed
    completions_.push_back({next_wr_id_, false, kFlushed});
    return next_wr_id_++;
  }
  const uint32_t packets = data->empty() ? 1 : uint32_t((data->size() + cfg_.mtu - 1) / cfg_.mtu);
  Wr wr{next_wr_id_++, write, std::move(data), va, rkey, posted_end_, packets};
  posted_end_ += packets;
  wrs_.push_back(std::move(wr));
  return wrs_.back().id;
}

uint64_t RcQp::post_send(std::vector<uint8_t> data) {
  return post(false, std::make_shared<const std::vector<uint8_t>>(std::move(data)), 0, 0);
}

uint64_t RcQp::post_write(std::vector<uint8_t> data, uint64_t va, uint32_t rkey) {
  return post(true, std::make_shared<const std::vector<uint8_t>>(std::move(data)), va, rkey);
}

uint64_t RcQp::post_send(Buffer data) { return post(false, std::move(data), 0, 0); }

uint64_t RcQp::post_write(Buffer data, uint64_t va, uint32_t rkey) { return post(true, std::move(data), va, rkey); }

void RcQp::register_memory(uint32_t rkey, uint64_t va, std::span<uint8_t> memory) {
  regions_[rkey] = Region{va, memory};
}

bool RcQp::data_ready() const { return !failed_ && nxt_ < posted_end_ && nxt_ - una_ < cfg_.window; }

TxPacket RcQp::request_packet(uint64_t seq) {
  auto it = std::find_if(wrs_.begin(), wrs_.end(),
                         [&](const Wr& w) { return seq >= w.first_seq && seq < w.first_seq + w.packets; });
  const Wr& w = *it;
  const uint32_t k = uint32_t(seq - w.first_seq);
  const bool first = k == 0, last = k + 1 == w.packets;
  TxPacket t;
  if (w.write) {
    t.bth.opcode = w.packets == 1 ? Opcode::kWriteOnly
                   : first        ? Opcode::kWriteFirst
                   : last         ? Opcode::kWriteLast
                                  : Opcode::kWriteMiddle;
  } else {
    t.bth.opcode = w.packets == 1 ? Opcode::kSendOnly
                   : first        ? Opcode::kSendFirst
                   : last         ? Opcode::kSendLast
                                  : Opcode::kSendMiddle;
  }
  const auto& data = *w.data;
  if (w.write && first) t.reth = Reth{w.va, w.rkey, uint32_t(data.size())};
  const size_t off = std::min(size_t(k) * cfg_.mtu, data.size());
  const size_t len = std::min<size_t>(cfg_.mtu, data.size() - off);
  t.payload = std::span<const uint8_t>(data).subspan(off, len);
  t.bth.dest_qp = dest_qpn_;
  t.bth.psn = uint32_t(seq) & kPsnMask;
  t.bth.ack_req = last || (seq + 1 - base_seq_) % cfg_.ack_req_every == 0 || seq + 1 - una_ >= cfg_.window;
  t.bth.solicited = last && !w.write;
  return t;
}

std::optional<TxPacket> RcQp::next_tx(Nanos now) {
  if (nak_pending_ || ack_pending_) {
    TxPacket t;
    t.bth.opcode = Opcode::kAck;
    t.bth.dest_qp = dest_qpn_;
    if (nak_pending_) {
      t.bth.psn = uint32_t(epsn_) & kPsnMask;  // a NAK names the PSN the responder expects
      t.aeth = Aeth{nak_syndrome_, msn_};
      ++stats_.naks_sent;
      nak_pending_ = false;
    } else {
      t.bth.psn = uint32_t(epsn_ - 1) & kPsnMask;  // the last PSN received in order
      t.aeth = Aeth{Aeth::kAckNoCredit, msn_};
      ++stats_.acks_sent;
      ack_pending_ = false;
    }
    ++stats_.tx_packets;
    return t;
  }
  if (failed_ || nxt_ >= posted_end_ || nxt_ - una_ >= cfg_.window) return std::nullopt;
  if (una_ == max_sent_) last_progress_ = now;  // the retransmission timer starts now
  TxPacket t = request_packet(nxt_);
  // Ask for an ACK at least every quarter timeout too: at a low DCQCN rate, N packets take
  // longer than the timeout, and an ACK asked for only every N packets would come too late.
  if (!t.bth.ack_req && now - last_ack_req_ >= rto_ / 4) t.bth.ack_req = true;
  if (t.bth.ack_req) last_ack_req_ = now;
  if (nxt_ < max_sent_) {
    ++stats_.retransmitted;
    sent_at_[nxt_ - una_] = -1;  // Karn: an ACK for a resent packet is no RTT sample
  } else {
    sent_at_.push_back(now);
  }
  ++nxt_;
  max_sent_ = std::max(max_sent_, nxt_);
  ++stats_.tx_packets;
  stats_.tx_bytes += t.payload.size();
  return t;
}

void RcQp::on_rx(const Packet& p, Nanos now) {
  ++stats_.rx_packets;
  if (p.bth.opcode == Opcode::kAck) {
    requester_rx(p, now);
  } else if (is_send(p.bth.opcode) || is_write(p.bth.opcode)) {
    responder_rx(p);
  } else {
    ++stats_.invalid;  // READ and atomics are not implemented: answered as invalid requests
    nak_syndrome_ = Aeth::kNakInvalidRequest;
    nak_pending_ = true;
  }
}

void RcQp::acknowledge_through(uint64_t end, Nanos now) {
  if (end <= una_) return;
  // RFC 6298 on the newest packet acknowledged: the timeout follows the real round trip, which
  // includes the time packets wait in a PFC-paused host's own queue.
  const size_t n = size_t(std::min<uint64_t>(end - una_, sent_at_.size()));
  if (n > 0 && sent_at_[n - 1] >= 0) {
    const double rtt = double(now - sent_at_[n - 1]);
    if (srtt_ == 0) {
      srtt_ = rtt;
      rttvar_ = rtt / 2;
    } else {
      rttvar_ = 0.75 * rttvar_ + 0.25 * std::abs(srtt_ - rtt);
      srtt_ = 0.875 * srtt_ + 0.125 * rtt;
    }
    if (!cfg_.fixed_timeout) rto_ = std::max<Nanos>(cfg_.rto, Nanos(srtt_ + 4 * rttvar_));
  }
  sent_at_.erase(sent_at_.begin(), sent_at_.begin() + long(n));
  una_ = end;
  nxt_ = std::max(nxt_, una_);
  retries_ = 0;
  while (!wrs_.empty() && wrs_.front().first_seq + wrs_.front().packets <= una_) {
    completions_.push_back({wrs_.front().id, true, {}});
    wrs_.pop_front();
  }
}

void RcQp::requester_rx(const Packet& p, Nanos now) {
  if (!p.aeth || failed_) return;
  const uint64_t in_flight = max_sent_ - una_;
  const uint32_t d = psn_ahead(p.bth.psn, una_);
  if (p.aeth->is_ack()) {
    ++stats_.acks_received;
    if (d < in_flight) {  // otherwise stale: a duplicate ACK for what is already acknowledged
      acknowledge_through(una_ + d + 1, now);
      last_progress_ = now;
    }
  } else if (p.aeth->syndrome == Aeth::kNakPsnSequenceError) {
    ++stats_.naks_received;
    if (d <= in_flight) {  // everything before the PSN it names arrived: go back to it
      acknowledge_through(una_ + d, now);
      nxt_ = una_;
      last_progress_ = now;
    }
  } else if (p.aeth->is_nak()) {
    ++stats_.naks_received;
    fail_all(p.aeth->syndrome == Aeth::kNakRemoteAccess ? "remote access error" : "invalid request", now);
  }
}

void RcQp::responder_rx(const Packet& p) {
  const uint32_t d = psn_ahead(p.bth.psn, epsn_);
  if (d != 0) {
    if (d < kHalfPsnSpace) {
      ++stats_.out_of_sequence;  // a gap: one NAK until the expected PSN arrives
      if (!nak_sent_for_epsn_) {
        nak_syndrome_ = Aeth::kNakPsnSequenceError;
        nak_pending_ = true;
        nak_sent_for_epsn_ = true;
      }
    } else {
      ++stats_.duplicates;  // already delivered: re-acknowledge, the ACK may have been lost
      ack_pending_ = true;
    }
    return;
  }
  const Opcode op = p.bth.opcode;
  auto reject = [&](uint8_t syndrome) {
    ++stats_.invalid;
    nak_syndrome_ = syndrome;
    nak_pending_ = true;
  };
  const bool starts = is_first_or_only(op), ends = is_last_or_only(op);
  if (starts == (in_send_ || in_write_) || (!starts && is_send(op) != in_send_)) {
    return reject(Aeth::kNakInvalidRequest);
  }
  if (is_write(op)) {
    if (starts) {
      auto it = regions_.find(p.reth ? p.reth->rkey : 0);
      if (!p.reth || it == regions_.end() || p.reth->va < it->second.va ||
          p.reth->va - it->second.va + p.reth->length > it->second.mem.size()) {
        return reject(Aeth::kNakRemoteAccess);
      }
      write_region_ = &it->second;
      write_offset_ = p.reth->va - it->second.va;
      write_left_ = p.reth->length;
    }
    if (p.payload.size() > write_left_ || (ends && p.payload.size() != write_left_)) {
      in_write_ = false;
      return reject(Aeth::kNakInvalidRequest);
    }
    std::copy(p.payload.begin(), p.payload.end(), write_region_->mem.begin() + write_offset_);
    write_offset_ += p.payload.size();
    write_left_ -= uint32_t(p.payload.size());
    in_write_ = !ends;
  } else {
    if (starts) assembling_.clear();
    assembling_.insert(assembling_.end(), p.payload.begin(), p.payload.end());
    in_send_ = !ends;
    if (ends) {
      received_.push_back(std::move(assembling_));
      assembling_ = {};
      ++stats_.messages_received;
    }
  }
  stats_.delivered_bytes += p.payload.size();
  stats_.delivered_crc = crc32_update(stats_.delivered_crc, p.payload);
  ++epsn_;
  nak_sent_for_epsn_ = false;
  if (ends) msn_ = (msn_ + 1) & kPsnMask;
  if (p.bth.ack_req) ack_pending_ = true;
}

void RcQp::on_timer(Nanos now) {
  if (failed_ || una_ == max_sent_ || (cfg_.fixed_timeout && rto_ == 0) || now - last_progress_ < rto_) return;
  ++stats_.timeouts;
  if (++retries_ > cfg_.retry_limit) return fail_all(kRetryExceeded, now);
  nxt_ = una_;  // go back N
  last_progress_ = now;
}

Nanos RcQp::next_timer() const {
  if (cfg_.fixed_timeout && rto_ == 0) return LLONG_MAX;
  return failed_ || una_ == max_sent_ ? LLONG_MAX : last_progress_ + rto_;
}

void RcQp::fail_all(const std::string& why, Nanos now) {
  failed_ = true;
  failed_at_ = now;
  failure_ = why;
  for (const Wr& w : wrs_) completions_.push_back({w.id, false, why});
  wrs_.clear();
  una_ = nxt_ = max_sent_ = posted_end_;
  sent_at_.clear();
}

std::vector<Completion> RcQp::take_completions() { return std::exchange(completions_, {}); }

}  // namespace rocelab::engine
