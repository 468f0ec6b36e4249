#include "engine/wire.h"

#include <libdeflate.h>

#include <cstring>

namespace rocelab::engine {
namespace {

void put16(uint8_t* p, uint16_t v) { p[0] = v >> 8; p[1] = v & 0xFF; }
void put24(uint8_t* p, uint32_t v) { p[0] = (v >> 16) & 0xFF; p[1] = (v >> 8) & 0xFF; p[2] = v & 0xFF; }
void put32(uint8_t* p, uint32_t v) { put16(p, v >> 16); put16(p + 2, v & 0xFFFF); }
uint16_t get16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
uint32_t get24(const uint8_t* p) { return uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | p[2]; }
uint32_t get32(const uint8_t* p) { return uint32_t(get16(p)) << 16 | get16(p + 2); }

// libdeflate's CRC-32 is zlib's crc32() (same polynomial, reflection, init and xorout), with
// PCLMUL folding: it roughly halves the engine's per-packet CPU (wire_test cross-checks it
// against zlib).
uint32_t crc(uint32_t c, const uint8_t* p, size_t n) { return libdeflate_crc32(c, p, n); }

// The ICRC's tail: the 8 0xFF bytes standing in for the LRH, the masked IP and UDP headers
// (already in `ip_udp`), then the BTH with its FECN/BECN/reserved byte masked, then the rest.
uint32_t icrc_over(std::span<const uint8_t> ip_udp, std::span<const uint8_t> roce) {
  static constexpr uint8_t kOnes[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  uint32_t c = crc(0, kOnes, sizeof kOnes);
  c = crc(c, ip_udp.data(), ip_udp.size());
  uint8_t bth[kBthSize];
  std::memcpy(bth, roce.data(), kBthSize);
  bth[4] = 0xFF;
  c = crc(c, bth, kBthSize);
  return crc(c, roce.data() + kBthSize, roce.size() - kBthSize);
}

}  // namespace

uint32_t crc32_update(uint32_t c, std::span<const uint8_t> b) { return crc(c, b.data(), b.size()); }

bool has_reth(Opcode op) {
  return op == Opcode::kWriteFirst || op == Opcode::kWriteOnly || op == Opcode::kWriteOnlyImm ||
         op == Opcode::kReadRequest;
}
bool has_aeth(Opcode op) {
  return op == Opcode::kAck || op == Opcode::kReadResponseFirst || op == Opcode::kReadResponseLast ||
         op == Opcode::kReadResponseOnly;
}
bool has_imm(Opcode op) {
  return op == Opcode::kSendLastImm || op == Opcode::kSendOnlyImm || op == Opcode::kWriteLastImm ||
         op == Opcode::kWriteOnlyImm;
}
bool is_send(Opcode op) { return uint8_t(op) <= 0x05; }
bool is_write(Opcode op) { return uint8_t(op) >= 0x06 && uint8_t(op) <= 0x0B; }
bool is_first_or_only(Opcode op) {
  switch (op) {
    case Opcode::kSendFirst: case Opcode::kSendOnly: case Opcode::kSendOnlyImm:
    case Opcode::kWriteFirst: case Opcode::kWriteOnly: case Opcode::kWriteOnlyImm: return true;
    default: return false;
  }
}
bool is_last_or_only(Opcode op) {
  switch (op) {
    case Opcode::kSendLast: case Opcode::kSendLastImm: case Opcode::kSendOnly: case Opcode::kSendOnlyImm:
    case Opcode::kWriteLast: case Opcode::kWriteLastImm: case Opcode::kWriteOnly:
    case Opcode::kWriteOnlyImm: return true;
    default: return false;
  }
}

std::string opcode_name(Opcode op) {
  static const char* kNames[] = {
      "SEND_FIRST", "SEND_MIDDLE", "SEND_LAST", "SEND_LAST_WITH_IMMEDIATE", "SEND_ONLY",
      "SEND_ONLY_WITH_IMMEDIATE", "RDMA_WRITE_FIRST", "RDMA_WRITE_MIDDLE", "RDMA_WRITE_LAST",
      "RDMA_WRITE_LAST_WITH_IMMEDIATE", "RDMA_WRITE_ONLY", "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
      "RDMA_READ_REQUEST", "RDMA_READ_RESPONSE_FIRST", "RDMA_READ_RESPONSE_MIDDLE",
      "RDMA_READ_RESPONSE_LAST", "RDMA_READ_RESPONSE_ONLY", "ACKNOWLEDGE"};
  if (uint8_t(op) < std::size(kNames)) return kNames[uint8_t(op)];
  if (op == Opcode::kCnp) return "CNP";
  return "opcode " + std::to_string(uint8_t(op));
}

void put_bth(const Bth& h, uint8_t* o) {
  o[0] = uint8_t(h.opcode);
  o[1] = uint8_t((h.solicited ? 0x80 : 0) | (h.migreq ? 0x40 : 0) | (h.pad & 3) << 4 | (h.tver & 0xF));
  put16(o + 2, h.pkey);
  o[4] = uint8_t((h.fecn ? 0x80 : 0) | (h.becn ? 0x40 : 0));
  put24(o + 5, h.dest_qp);
  o[8] = h.ack_req ? 0x80 : 0;
  put24(o + 9, h.psn);
}

Bth get_bth(const uint8_t* i) {
  Bth h;
  h.opcode = Opcode(i[0]);
  h.solicited = i[1] & 0x80;
  h.migreq = i[1] & 0x40;
  h.pad = (i[1] >> 4) & 3;
  h.tver = i[1] & 0xF;
  h.pkey = get16(i + 2);
  h.fecn = i[4] & 0x80;
  h.becn = i[4] & 0x40;
  h.dest_qp = get24(i + 5);
  h.ack_req = i[8] & 0x80;
  h.psn = get24(i + 9);
  return h;
}

void put_reth(const Reth& h, uint8_t* o) {
  put32(o, uint32_t(h.va >> 32));
  put32(o + 4, uint32_t(h.va));
  put32(o + 8, h.rkey);
  put32(o + 12, h.length);
}

Reth get_reth(const uint8_t* i) {
  return {uint64_t(get32(i)) << 32 | get32(i + 4), get32(i + 8), get32(i + 12)};
}

void put_aeth(const Aeth& h, uint8_t* o) {
  o[0] = h.syndrome;
  put24(o + 1, h.msn);
}

Aeth get_aeth(const uint8_t* i) { return {i[0], get24(i + 1)}; }

uint32_t icrc_ipv4_packet(std::span<const uint8_t> ip) {
  const size_t ihl = ip.empty() ? 0 : size_t(ip[0] & 0xF) * 4;
  if (ip.size() < ihl + 8 + kBthSize || ihl < 20) return 0;
  std::vector<uint8_t> head(ip.begin(), ip.begin() + ihl + 8);
  head[1] = 0xFF;                 // TOS (DSCP + ECN: switches rewrite it)
  head[8] = 0xFF;                 // TTL
  head[10] = head[11] = 0xFF;     // header checksum
  head[ihl + 6] = head[ihl + 7] = 0xFF;  // UDP checksum
  return icrc_over(head, ip.subspan(ihl + 8));
}

uint32_t icrc_for_flow(const Flow& f, std::span<const uint8_t> roce) {
  if (roce.size() < kBthSize) return 0;
  const size_t udp_len = 8 + roce.size() + kIcrcSize;
  uint8_t h[28] = {0x45, 0xFF};
  put16(h + 2, uint16_t(20 + udp_len));
  put16(h + 4, 0);       // IP ID: 0 for unconnected DF sockets
  put16(h + 6, 0x4000);  // DF
  h[8] = 0xFF;
  h[9] = 17;
  put16(h + 10, 0xFFFF);
  put32(h + 12, f.src);
  put32(h + 16, f.dst);
  put16(h + 20, f.sport);
  put16(h + 22, f.dport);
  put16(h + 24, uint16_t(udp_len));
  put16(h + 26, 0xFFFF);
  return icrc_over(h, roce);
}

size_t header_size(Opcode op) {
  if (op == Opcode::kCnp) return kBthSize + kCnpReserved;
  return kBthSize + (has_reth(op) ? kRethSize : 0) + (has_aeth(op) ? kAethSize : 0) +
         (has_imm(op) ? kImmSize : 0);
}

size_t wire_size(Opcode op, size_t payload) {
  return header_size(op) + ((payload + 3) & ~size_t(3)) + kIcrcSize;
}

size_t build(Bth bth, const std::optional<Reth>& reth, const std::optional<Aeth>& aeth,
             std::span<const uint8_t> payload, const Flow& flow, std::vector<uint8_t>& out,
             std::optional<uint32_t> imm) {
  const Opcode op = bth.opcode;
  bth.pad = uint8_t((4 - payload.size() % 4) % 4);
  out.resize(wire_size(op, payload.size()));  // every byte is written below: no zero fill
  uint8_t* p = out.data();
  put_bth(bth, p);
  p += kBthSize;
  if (op == Opcode::kCnp) {
    std::memset(p, 0, kCnpReserved);
    p += kCnpReserved;
  } else {
    if (has_reth(op)) { put_reth(reth.value_or(Reth{}), p); p += kRethSize; }
    if (has_aeth(op)) { put_aeth(aeth.value_or(Aeth{}), p); p += kAethSize; }
    if (has_imm(op)) { put32(p, imm.value_or(0)); p += kImmSize; }
  }
  if (!payload.empty()) std::memcpy(p, payload.data(), payload.size());
  std::memset(p + payload.size(), 0, bth.pad);
  const size_t body = out.size() - kIcrcSize;
  const uint32_t c = icrc_for_flow(flow, std::span<const uint8_t>(out.data(), body));
  for (int i = 0; i < 4; ++i) out[body + i] = uint8_t(c >> (8 * i));
  return out.size();
}

std::string to_string(ParseError e) {
  switch (e) {
    case ParseError::kTooShort: return "too short for its opcode";
    case ParseError::kBadVersion: return "unknown transport version";
    case ParseError::kBadPad: return "pad count exceeds the payload";
    case ParseError::kBadIcrc: return "ICRC mismatch";
  }
  return "?";
}

Parsed parse(std::span<const uint8_t> in, const std::optional<Flow>& flow) {
  Parsed r;
  if (in.size() < kBthSize + kIcrcSize) return r;
  Packet pk;
  pk.bth = get_bth(in.data());
  if (pk.bth.tver != 0) return {std::nullopt, ParseError::kBadVersion};
  const Opcode op = pk.bth.opcode;
  const size_t head = header_size(op);
  if (in.size() < head + kIcrcSize) return r;
  const uint8_t* p = in.data() + kBthSize;
  if (op != Opcode::kCnp) {
    if (has_reth(op)) { pk.reth = get_reth(p); p += kRethSize; }
    if (has_aeth(op)) { pk.aeth = get_aeth(p); p += kAethSize; }
    if (has_imm(op)) { pk.imm = get32(p); p += kImmSize; }
  }
  const size_t body = in.size() - kIcrcSize;
  if (body - head < pk.bth.pad) return {std::nullopt, ParseError::kBadPad};
  pk.payload = in.subspan(head, body - head - pk.bth.pad);
  for (int i = 0; i < 4; ++i) pk.icrc |= uint32_t(in[body + i]) << (8 * i);
  if (flow && icrc_for_flow(*flow, in.first(body)) != pk.icrc) return {std::nullopt, ParseError::kBadIcrc};
  r.packet = pk;
  return r;
}

}  // namespace rocelab::engine
