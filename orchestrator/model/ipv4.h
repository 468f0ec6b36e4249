// IPv4 addresses and prefixes in host byte order: the addressing plan is pure arithmetic.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rocelab::model {

struct Ipv4Prefix {
  uint32_t addr = 0;  // host byte order
  int len = 32;
  auto operator<=>(const Ipv4Prefix&) const = default;

  uint32_t mask() const { return len == 0 ? 0 : ~uint32_t{0} << (32 - len); }
  uint64_t size() const { return uint64_t{1} << (32 - len); }
  bool aligned() const { return (addr & ~mask()) == 0; }
  bool contains(uint32_t a) const { return (a & mask()) == (addr & mask()); }
  bool contains(const Ipv4Prefix& p) const { return p.len >= len && contains(p.addr); }
  bool overlaps(const Ipv4Prefix& p) const { return contains(p) || p.contains(*this); }
};

std::optional<uint32_t> parse_ipv4(std::string_view text);
// "a.b.c.d/len"; a bare address is taken as /32 only when allow_bare is set.
std::optional<Ipv4Prefix> parse_prefix(std::string_view text, bool allow_bare = false);
std::string format_ipv4(uint32_t addr);
std::string format_prefix(const Ipv4Prefix& p);

// RFC 2544's benchmarking range: the default pool (DESIGN.md §1).
inline constexpr Ipv4Prefix kDefaultPool{(198u << 24) | (18u << 16), 15};

}  // namespace rocelab::model
