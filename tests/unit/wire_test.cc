// RoCEv2 wire format: DESIGN.md §2's CNP vectors, header round trips, ICRC rejection.
#include "engine/wire.h"

#include <gtest/gtest.h>
#include <libdeflate.h>
#include <zlib.h>

#include <random>
#include <string>

namespace rocelab::engine {
namespace {

std::vector<uint8_t> hex(std::string s) {
  std::erase(s, ' ');
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < s.size(); i += 2) out.push_back(uint8_t(std::stoul(s.substr(i, 2), nullptr, 16)));
  return out;
}

// The two 74-byte CNP frames of DESIGN.md §2 (Ethernet, no FCS).
const std::string kCnp10 =
    "020000000002 020000000001 0800 45c0003c000040004011 25ef 0a000002 0a000001"
    "c12312b700280000 8100ffff40000011 00000000 00000000000000000000000000000000 4107b81e";
const std::string kCnp198 =
    "020000000002 020000000001 0800 45c0003c000040004011 adc9 c6120002 c6120001"
    "c12312b700280000 8100ffff40000011 00000000 00000000000000000000000000000000 e18c53f7";

uint32_t le32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | uint32_t(p[3]) << 24; }

class CnpVector : public testing::TestWithParam<std::string> {};

TEST_P(CnpVector, IcrcOfTheCapturedFrameMatches) {
  const auto f = hex(GetParam());
  ASSERT_EQ(f.size(), 74u);
  std::span<const uint8_t> ip(f.data() + 14, f.size() - 14);
  EXPECT_EQ(icrc_ipv4_packet(ip.first(ip.size() - 4)), le32(f.data() + 70));
}

TEST_P(CnpVector, TheEngineBuildsTheSameBytes) {
  const auto f = hex(GetParam());
  Flow flow{uint32_t(f[26] << 24 | f[27] << 16 | f[28] << 8 | f[29]),
            uint32_t(f[30] << 24 | f[31] << 16 | f[32] << 8 | f[33]), 0xC123, kRoceUdpPort};
  Bth bth;
  bth.opcode = Opcode::kCnp;
  bth.becn = true;
  bth.dest_qp = 0x11;
  std::vector<uint8_t> out;
  build(bth, std::nullopt, std::nullopt, {}, flow, out);
  EXPECT_EQ(out, std::vector<uint8_t>(f.begin() + 42, f.end()));
  auto p = parse(out, flow);
  ASSERT_TRUE(p);
  EXPECT_EQ(p.packet->bth, bth);
  EXPECT_TRUE(p.packet->payload.empty());
}

INSTANTIATE_TEST_SUITE_P(Design, CnpVector, testing::Values(kCnp10, kCnp198));

TEST(Icrc, MasksTosTtlAndChecksumsButCoversAddresses) {
  auto f = hex(kCnp198);
  std::span<const uint8_t> ip(f.data() + 14, 56);
  const uint32_t want = le32(f.data() + 70);
  f[15] = 0xC3;  // ECN CE, as a switch marks it
  f[22] = 0x3F;  // TTL decremented
  f[24] = 0x12;  // checksum rewritten
  f[40] = 0xAB;  // UDP checksum set
  f[46] = 0x80;  // FECN set in flight
  EXPECT_EQ(icrc_ipv4_packet(ip), want);
  f[29] ^= 1;  // source address
  EXPECT_NE(icrc_ipv4_packet(ip), want);
}

// DESIGN.md defines the ICRC through zlib's crc32(); the engine computes it with libdeflate.
TEST(Icrc, LibdeflateCrc32IsZlibCrc32) {
  std::mt19937_64 rng(42);
  std::vector<uint8_t> buf(9000);
  for (auto& b : buf) b = uint8_t(rng());
  for (size_t n : {0u, 1u, 7u, 8u, 15u, 64u, 1040u, 4096u, 9000u}) {
    for (uint32_t seed : {0u, 0xFFFFFFFFu, 0x1234567u}) {
      EXPECT_EQ(libdeflate_crc32(seed, buf.data(), n), uint32_t(crc32(seed, buf.data(), uInt(n)))) << n;
    }
  }
}

TEST(Headers, RoundTripRandomValues) {
  std::mt19937_64 rng(0x5eed);
  for (int i = 0; i < 2000; ++i) {
    Bth b;
    b.opcode = Opcode(rng() % 0x12);
    b.solicited = rng() & 1;
    b.migreq = rng() & 1;
    b.pad = rng() & 3;
    b.tver = rng() & 0xF;
    b.pkey = uint16_t(rng());
    b.fecn = rng() & 1;
    b.becn = rng() & 1;
    b.dest_qp = rng() & 0xFFFFFF;
    b.ack_req = rng() & 1;
    b.psn = rng() & kPsnMask;
    uint8_t buf[16];
    put_bth(b, buf);
    EXPECT_EQ(get_bth(buf), b);
    Reth r{rng(), uint32_t(rng()), uint32_t(rng())};
    put_reth(r, buf);
    EXPECT_EQ(get_reth(buf), r);
    Aeth a{uint8_t(rng()), uint32_t(rng() & 0xFFFFFF)};
    put_aeth(a, buf);
    EXPECT_EQ(get_aeth(buf), a);
  }
}

TEST(Headers, BthFieldsLandWhereTheSpecPutsThem) {
  Bth b;
  b.opcode = Opcode::kWriteLast;
  b.solicited = true;
  b.pad = 3;
  b.pkey = 0xFFFF;
  b.becn = true;
  b.dest_qp = 0xABCDEF;
  b.ack_req = true;
  b.psn = 0x123456;
  uint8_t buf[12];
  put_bth(b, buf);
  EXPECT_EQ(std::vector<uint8_t>(buf, buf + 12), hex("08b0ffff40abcdef80123456"));
}

TEST(Packets, EveryOpcodeAndPayloadLengthRoundTrips) {
  const Flow flow{0xC6120002, 0xC6120003, 0xC001, kRoceUdpPort};
  std::vector<uint8_t> payload(4100);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t(i * 7 + 3);
  for (uint8_t code = 0; code <= 0x11; ++code) {
    for (size_t n : {0u, 1u, 2u, 3u, 4u, 255u, 1024u, 4096u}) {
      Bth b;
      b.opcode = Opcode(code);
      b.dest_qp = 0x123 + code;
      b.psn = (0xFFFFF0 + code) & kPsnMask;  // wraps: PSNs are 24-bit
      std::optional<Reth> reth;
      std::optional<Aeth> aeth;
      if (has_reth(b.opcode)) reth = Reth{0x1122334455667788ull, 0xCAFE, uint32_t(n * 3)};
      if (has_aeth(b.opcode)) aeth = Aeth{Aeth::kNakPsnSequenceError, 77};
      std::vector<uint8_t> out;
      const auto span = std::span<const uint8_t>(payload).first(n);
      EXPECT_EQ(build(b, reth, aeth, span, flow, out, 0xDEADBEEF), wire_size(b.opcode, n));
      EXPECT_EQ(out.size() % 4, 0u);
      auto p = parse(out, flow);
      ASSERT_TRUE(p) << opcode_name(b.opcode) << " " << n << ": " << to_string(p.error);
      EXPECT_EQ(p.packet->bth.opcode, b.opcode);
      EXPECT_EQ(p.packet->bth.pad, (4 - n % 4) % 4);
      EXPECT_EQ(p.packet->bth.psn, b.psn);
      EXPECT_EQ(p.packet->reth, reth);
      EXPECT_EQ(p.packet->aeth, aeth);
      EXPECT_EQ(p.packet->imm.has_value(), has_imm(b.opcode));
      EXPECT_TRUE(std::equal(span.begin(), span.end(), p.packet->payload.begin(), p.packet->payload.end()));
    }
  }
}

TEST(Packets, AnyCorruptedByteOrWrongFlowIsRejected) {
  const Flow flow{0xC6120002, 0xC6120003, 0xC001, kRoceUdpPort};
  std::vector<uint8_t> payload(100, 0x5A), out;
  Bth b;
  b.opcode = Opcode::kWriteOnly;
  build(b, Reth{1, 2, 100}, std::nullopt, payload, flow, out);
  for (size_t i = 0; i < out.size(); ++i) {
    if (i == 4) continue;  // FECN/BECN/reserved byte: masked by design, switches set FECN
    for (uint8_t bit : {0x01, 0x80}) {
      auto bad = out;
      bad[i] ^= bit;
      auto p = parse(bad, flow);
      EXPECT_FALSE(p) << "byte " << i;
    }
  }
  Flow other = flow;
  other.sport ^= 1;
  EXPECT_EQ(parse(out, other).error, ParseError::kBadIcrc);
  EXPECT_EQ(parse(std::span<const uint8_t>(out).first(20), flow).error, ParseError::kTooShort);
  EXPECT_TRUE(parse(out, std::nullopt));  // without a flow the ICRC is carried, not checked
}

}  // namespace
}  // namespace rocelab::engine
