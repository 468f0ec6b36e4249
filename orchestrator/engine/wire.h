// RoCEv2 wire format (DESIGN.md §2; IBTA vol. 1 ch. 9 and annex A17): the base transport
// header, the RDMA extended and ACK extended headers, and the invariant CRC. Builders write
// network byte order into caller memory; parsers never trust a length they did not check.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace rocelab::engine {

constexpr uint16_t kRoceUdpPort = 4791;
constexpr size_t kBthSize = 12, kRethSize = 16, kAethSize = 4, kImmSize = 4, kIcrcSize = 4;
constexpr size_t kCnpReserved = 16;  // a CNP carries 16 zero bytes after its BTH
constexpr uint16_t kDefaultPkey = 0xFFFF;
constexpr uint32_t kPsnMask = 0xFFFFFF;
constexpr uint8_t kTosData = (26 << 2) | 0x2;  // DSCP 26, ECT(0)
constexpr uint8_t kTosCnp = 48 << 2;           // DSCP 48, not ECN-capable

enum class Opcode : uint8_t {
  kSendFirst = 0x00, kSendMiddle = 0x01, kSendLast = 0x02, kSendLastImm = 0x03,
  kSendOnly = 0x04, kSendOnlyImm = 0x05,
  kWriteFirst = 0x06, kWriteMiddle = 0x07, kWriteLast = 0x08, kWriteLastImm = 0x09,
  kWriteOnly = 0x0A, kWriteOnlyImm = 0x0B,
  kReadRequest = 0x0C, kReadResponseFirst = 0x0D, kReadResponseMiddle = 0x0E,
  kReadResponseLast = 0x0F, kReadResponseOnly = 0x10, kAck = 0x11,
  kCnp = 0x81,
};

bool has_reth(Opcode op);  // WRITE FIRST/ONLY(+IMM), READ REQUEST
bool has_aeth(Opcode op);  // ACK, READ RESPONSE FIRST/LAST/ONLY
bool has_imm(Opcode op);   // *_WITH_IMMEDIATE
bool is_send(Opcode op);
bool is_write(Opcode op);
bool is_first_or_only(Opcode op);  // begins a message
bool is_last_or_only(Opcode op);   // ends a message
std::string opcode_name(Opcode op);

struct Bth {
  Opcode opcode = Opcode::kSendOnly;
  bool solicited = false;
  bool migreq = false;
  uint8_t pad = 0;   // bytes of padding after the payload to a 4-byte multiple
  uint8_t tver = 0;
  uint16_t pkey = kDefaultPkey;
  bool fecn = false;
  bool becn = false;
  uint32_t dest_qp = 0;  // 24 bit
  bool ack_req = false;
  uint32_t psn = 0;  // 24 bit
  bool operator==(const Bth&) const = default;
};

struct Reth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t length = 0;  // the whole message's DMA length
  bool operator==(const Reth&) const = default;
};

// AETH syndrome: ACK 0x00-0x1F (low 5 bits credits; 0x1F = none advertised), RNR NAK
// 0x20-0x3F, NAK 0x60-0x64.
struct Aeth {
  uint8_t syndrome = kAckNoCredit;
  uint32_t msn = 0;  // 24 bit
  static constexpr uint8_t kAckNoCredit = 0x1F;
  static constexpr uint8_t kNakPsnSequenceError = 0x60;
  static constexpr uint8_t kNakInvalidRequest = 0x61;
  static constexpr uint8_t kNakRemoteAccess = 0x62;
  bool is_ack() const { return syndrome <= 0x1F; }
  bool is_rnr_nak() const { return syndrome >= 0x20 && syndrome <= 0x3F; }
  bool is_nak() const { return syndrome >= 0x60 && syndrome <= 0x64; }
  bool operator==(const Aeth&) const = default;
};

void put_bth(const Bth& h, uint8_t* out);
void put_reth(const Reth& h, uint8_t* out);
void put_aeth(const Aeth& h, uint8_t* out);
Bth get_bth(const uint8_t* in);
Reth get_reth(const uint8_t* in);
Aeth get_aeth(const uint8_t* in);

// One RoCEv2 UDP payload: BTH, the extension headers its opcode calls for, payload, pad and
// ICRC. `payload` spans into the buffer that was parsed.
struct Packet {
  Bth bth;
  std::optional<Reth> reth;
  std::optional<Aeth> aeth;
  std::optional<uint32_t> imm;
  std::span<const uint8_t> payload;  // without pad
  uint32_t icrc = 0;                 // as carried
};

// The IPv4 and UDP fields the ICRC covers, for payloads sent and received through UDP
// sockets. The engine's sockets are unconnected with DF set, and Linux then writes IP ID 0
// (ip_select_ident_segs): the header on the wire is fully determined by these fields.
struct Flow {
  uint32_t src = 0, dst = 0;  // IPv4 addresses, host byte order
  uint16_t sport = 0, dport = kRoceUdpPort;
};

// zlib's CRC-32, continued from `crc` (0 to start): also the end-to-end digest of payloads.
uint32_t crc32_update(uint32_t crc, std::span<const uint8_t> bytes);

// zlib crc32 over the masked pseudo packet (DESIGN.md §2), as the value whose
// least-significant byte goes on the wire first.
uint32_t icrc_ipv4_packet(std::span<const uint8_t> ip_packet_without_icrc);
uint32_t icrc_for_flow(const Flow& f, std::span<const uint8_t> roce_without_icrc);

// Writes BTH (+RETH/AETH/imm, or the CNP's 16 zero bytes) + payload + pad + ICRC into `out`
// (cleared first). Sets bth.pad from the payload length. Returns the UDP payload size.
size_t build(Bth bth, const std::optional<Reth>& reth, const std::optional<Aeth>& aeth,
             std::span<const uint8_t> payload, const Flow& flow, std::vector<uint8_t>& out,
             std::optional<uint32_t> imm = std::nullopt);

// Size of a packet's headers before its payload, and the whole UDP payload for `payload` bytes.
size_t header_size(Opcode op);
size_t wire_size(Opcode op, size_t payload);

enum class ParseError { kTooShort, kBadVersion, kBadPad, kBadIcrc };
std::string to_string(ParseError e);

struct Parsed {
  std::optional<Packet> packet;
  ParseError error = ParseError::kTooShort;
  explicit operator bool() const { return packet.has_value(); }
};

// Parses a UDP payload. With `flow`, the ICRC is verified against it (kBadIcrc on mismatch).
Parsed parse(std::span<const uint8_t> udp_payload, const std::optional<Flow>& flow);

}  // namespace rocelab::engine
