#include "model/ipv4.h"

namespace rocelab::model {

std::optional<uint32_t> parse_ipv4(std::string_view text) {
  uint32_t out = 0;
  int parts = 0;
  size_t i = 0;
  while (parts < 4) {
    if (i >= text.size() || text[i] < '0' || text[i] > '9') return std::nullopt;
    uint32_t v = 0;
    size_t digits = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      v = v * 10 + static_cast<uint32_t>(text[i++] - '0');
      if (++digits > 3 || v > 255) return std::nullopt;
    }
    if (digits > 1 && text[i - digits] == '0') return std::nullopt;  // no octal look-alikes
    out = (out << 8) | v;
    if (++parts < 4) {
      if (i >= text.size() || text[i] != '.') return std::nullopt;
      ++i;
    }
  }
  if (i != text.size()) return std::nullopt;
  return out;
}

std::optional<Ipv4Prefix> parse_prefix(std::string_view text, bool allow_bare) {
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) {
    if (!allow_bare) return std::nullopt;
    auto a = parse_ipv4(text);
    if (!a) return std::nullopt;
    return Ipv4Prefix{*a, 32};
  }
  auto a = parse_ipv4(text.substr(0, slash));
  std::string_view l = text.substr(slash + 1);
  if (!a || l.empty() || l.size() > 2) return std::nullopt;
  int len = 0;
  for (char c : l) {
    if (c < '0' || c > '9') return std::nullopt;
    len = len * 10 + (c - '0');
  }
  if (len > 32) return std::nullopt;
  return Ipv4Prefix{*a, len};
}

std::string format_ipv4(uint32_t a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." +
         std::to_string((a >> 8) & 255) + "." + std::to_string(a & 255);
}

std::string format_prefix(const Ipv4Prefix& p) { return format_ipv4(p.addr) + "/" + std::to_string(p.len); }

}  // namespace rocelab::model
