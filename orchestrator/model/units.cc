#include "model/units.h"

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <limits>

namespace rocelab::model {
namespace {

using i128 = __int128;

// An exact decimal: mantissa × 10^exp10. Parsing into integers (not double) keeps
// "1.1G" exactly 1100000000 bit/s.
struct Decimal {
  i128 mantissa = 0;
  int exp10 = 0;
  bool negative = false;
};

bool is_space(char c) { return c == ' ' || c == '\t'; }

// Splits "  12.5e3 Gbit/s " into the decimal and the unit text; false if no number leads.
bool split_number(std::string_view text, Decimal& out, std::string_view& unit, std::string& why) {
  size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) out.negative = text[i++] == '-';
  size_t digits = 0;
  auto take_digits = [&](bool fraction) {
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (digits >= 30) {  // beyond any sane value; keeps i128 far from overflow
        why = "too many digits";
        return false;
      }
      if (out.mantissa != 0 || text[i] != '0') ++digits;
      out.mantissa = out.mantissa * 10 + (text[i] - '0');
      if (fraction) --out.exp10;
      ++i;
    }
    return true;
  };
  size_t start = i;
  if (!take_digits(false)) return false;
  bool had_int = i > start;
  bool had_frac = false;
  if (i < text.size() && text[i] == '.') {
    ++i;
    size_t f = i;
    if (!take_digits(true)) return false;
    had_frac = i > f;
  }
  if (!had_int && !had_frac) {
    why = "expected a number";
    return false;
  }
  if (i + 1 < text.size() && (text[i] == 'e' || text[i] == 'E') &&
      ((text[i + 1] >= '0' && text[i + 1] <= '9') ||
       ((text[i + 1] == '-' || text[i + 1] == '+') && i + 2 < text.size() && text[i + 2] >= '0' &&
        text[i + 2] <= '9'))) {
    ++i;
    bool neg = false;
    if (text[i] == '-' || text[i] == '+') neg = text[i++] == '-';
    int e = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      e = e * 10 + (text[i++] - '0');
      if (e > 60) {
        why = "exponent out of range";
        return false;
      }
    }
    out.exp10 += neg ? -e : e;
  }
  while (i < text.size() && is_space(text[i])) ++i;
  size_t end = text.size();
  while (end > i && is_space(text[end - 1])) --end;
  unit = text.substr(i, end - i);
  return true;
}

// mantissa × 10^exp10 × mult as an exact integer in [0, limit], or an error.
bool scale_exact(const Decimal& d, i128 mult, i128 limit, i128& out, std::string& why,
                 const char* quantum) {
  i128 v = d.mantissa * mult;
  int e = d.exp10;
  for (; e > 0; --e) {
    v *= 10;
    if (v > limit) break;
  }
  if (v > limit) {
    why = "value too large";
    return false;
  }
  for (; e < 0; ++e) {
    if (v % 10 != 0) {
      why = std::string("not a whole number of ") + quantum;
      return false;
    }
    v /= 10;
  }
  if (v > limit) {
    why = "value too large";
    return false;
  }
  out = v;
  return true;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

template <class T>
Parsed<T> fail(std::string why) {
  return Parsed<T>{std::nullopt, std::move(why)};
}

constexpr i128 kI64Max = std::numeric_limits<int64_t>::max();

std::string u64_str(uint64_t v) { return std::to_string(v); }

}  // namespace

Parsed<Rate> parse_rate(std::string_view text) {
  Decimal d;
  std::string_view unit;
  std::string why;
  if (!split_number(text, d, unit, why))
    return fail<Rate>("'" + std::string(text) + "' is not a rate: " + why +
                      " (write e.g. 100G, 25Gbit/s, 400Mbps)");
  if (d.negative && d.mantissa != 0) return fail<Rate>("a rate must not be negative");
  i128 mult = 1;
  std::string_view rest = unit;
  if (!rest.empty()) {
    switch (rest[0]) {
      case 'k': case 'K': mult = 1000; rest.remove_prefix(1); break;
      case 'm': case 'M': mult = 1000000; rest.remove_prefix(1); break;
      case 'g': case 'G': mult = 1000000000; rest.remove_prefix(1); break;
      case 't': case 'T': mult = static_cast<i128>(1000000000000LL); rest.remove_prefix(1); break;
      default: break;
    }
  }
  if (rest.find('B') != std::string_view::npos)
    return fail<Rate>("'" + std::string(text) +
                      "': rates are in bit/s, not bytes (write e.g. 100G or 100Gbit/s)");
  static constexpr std::array<std::string_view, 6> kSuffixes = {"", "bps", "bit/s", "b/s", "bit",
                                                                "bits/s"};
  bool ok = false;
  for (auto s : kSuffixes) ok = ok || iequals(rest, s);
  if (!ok)
    return fail<Rate>("'" + std::string(text) + "': unknown rate unit '" + std::string(unit) +
                      "' (use k, M, G, T with optional bit/s or bps)");
  i128 v;
  if (!scale_exact(d, mult, kI64Max, v, why, "bit/s")) return fail<Rate>("'" + std::string(text) + "': " + why);
  return Parsed<Rate>{Rate{static_cast<uint64_t>(v)}, {}};
}

Parsed<Bytes> parse_bytes(std::string_view text) {
  Decimal d;
  std::string_view unit;
  std::string why;
  if (!split_number(text, d, unit, why))
    return fail<Bytes>("'" + std::string(text) + "' is not a size: " + why +
                       " (write e.g. 128KB, 16MB, 1500B)");
  if (d.negative && d.mantissa != 0) return fail<Bytes>("a size must not be negative");
  struct U {
    std::string_view name;
    i128 mult;
  };
  // KB is KiB by the scenario convention (DESIGN.md §2); kB is the SI kilobyte.
  static constexpr std::array<U, 11> kUnits = {{{"", 1},
                                                {"B", 1},
                                                {"KB", 1024},
                                                {"KiB", 1024},
                                                {"kB", 1000},
                                                {"MB", 1024 * 1024},
                                                {"MiB", 1024 * 1024},
                                                {"GB", 1024 * 1024 * 1024},
                                                {"GiB", 1024 * 1024 * 1024},
                                                {"TB", static_cast<i128>(1) << 40},
                                                {"TiB", static_cast<i128>(1) << 40}}};
  for (const auto& u : kUnits) {
    if (unit == u.name) {
      i128 v;
      if (!scale_exact(d, u.mult, kI64Max, v, why, "bytes"))
        return fail<Bytes>("'" + std::string(text) + "': " + why);
      return Parsed<Bytes>{Bytes{static_cast<uint64_t>(v)}, {}};
    }
  }
  if (iequals(unit, "kb") || iequals(unit, "mb") || iequals(unit, "gb"))
    return fail<Bytes>("'" + std::string(text) + "': ambiguous size unit '" + std::string(unit) +
                       "' (write KB or KiB for 1024 bytes, kB for 1000 bytes, MB for MiB)");
  return fail<Bytes>("'" + std::string(text) + "': unknown size unit '" + std::string(unit) +
                     "' (use B, KB, KiB, kB, MB, MiB, GB, GiB)");
}

Parsed<Duration> parse_duration(std::string_view text) {
  Decimal d;
  std::string_view unit;
  std::string why;
  if (!split_number(text, d, unit, why))
    return fail<Duration>("'" + std::string(text) + "' is not a time: " + why +
                          " (write e.g. 200ms, 55us, 1s)");
  if (d.negative && d.mantissa != 0) return fail<Duration>("a time must not be negative");
  i128 mult = 0;
  if (unit == "ns") mult = 1;
  else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") mult = 1000;  // µ as micro or mu
  else if (unit == "ms") mult = 1000000;
  else if (unit == "s") mult = 1000000000;
  else if (unit.empty())
    return fail<Duration>("'" + std::string(text) + "': a time needs a unit (ns, us, ms, s)");
  else
    return fail<Duration>("'" + std::string(text) + "': unknown time unit '" + std::string(unit) +
                          "' (use ns, us, ms, s)");
  i128 v;
  if (!scale_exact(d, mult, kI64Max, v, why, "nanoseconds"))
    return fail<Duration>("'" + std::string(text) + "': " + why);
  return Parsed<Duration>{Duration{static_cast<int64_t>(v)}, {}};
}

Parsed<double> parse_number(std::string_view text) {
  Decimal d;
  std::string_view unit;
  std::string why;
  if (!split_number(text, d, unit, why) || !unit.empty())
    return fail<double>("'" + std::string(text) + "' is not a number");
  // strtod rounds the decimal correctly; mantissa * 10^exp does not (3 * 0.1 is not 0.3),
  // and a resolved dump must reload to the very same double.
  std::string digits;
  for (i128 m = d.mantissa; m > 0 || digits.empty(); m /= 10) digits.insert(digits.begin(), char('0' + int(m % 10)));
  const std::string dec = digits + "e" + std::to_string(d.exp10);
  double v = std::strtod(dec.c_str(), nullptr);
  return Parsed<double>{d.negative ? -v : v, {}};
}

std::string format_rate(Rate r) {
  static constexpr std::array<std::pair<uint64_t, const char*>, 4> kPrefixes = {
      {{1000000000000ULL, "T"}, {1000000000ULL, "G"}, {1000000ULL, "M"}, {1000ULL, "k"}}};
  if (r.bps != 0)
    for (auto [m, p] : kPrefixes)
      if (r.bps % m == 0) return u64_str(r.bps / m) + p + "bit/s";
  return u64_str(r.bps) + "bit/s";
}

std::string format_bytes(Bytes b) {
  static constexpr std::array<std::pair<uint64_t, const char*>, 3> kPrefixes = {
      {{1ULL << 30, "GiB"}, {1ULL << 20, "MiB"}, {1ULL << 10, "KiB"}}};
  if (b.n != 0)
    for (auto [m, p] : kPrefixes)
      if (b.n % m == 0) return u64_str(b.n / m) + p;
  return u64_str(b.n) + "B";
}

std::string format_duration(Duration d) {
  static constexpr std::array<std::pair<int64_t, const char*>, 3> kUnits = {
      {{1000000000LL, "s"}, {1000000LL, "ms"}, {1000LL, "us"}}};
  if (d.ns != 0)
    for (auto [m, u] : kUnits)
      if (d.ns % m == 0) return std::to_string(d.ns / m) + u;
  return std::to_string(d.ns) + "ns";
}

namespace {
std::string with_prefix(double v, const char* const* units, double base, int count) {
  int i = 0;
  double a = std::fabs(v);
  while (i + 1 < count && a >= base) {
    a /= base;
    v /= base;
    ++i;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, a >= 100 || i == 0 ? "%.0f %s" : "%.3g %s", v, units[i]);
  return buf;
}
}  // namespace

std::string human_rate(double bps) {
  static const char* const kU[] = {"bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"};
  return with_prefix(bps, kU, 1000.0, 5);
}

std::string human_bytes(double bytes) {
  static const char* const kU[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  return with_prefix(bytes, kU, 1024.0, 5);
}

std::string human_duration(double seconds) {
  char buf[64];
  double a = std::fabs(seconds);
  if (a >= 1.0 || a == 0.0) std::snprintf(buf, sizeof buf, "%.3g s", seconds);
  else if (a >= 1e-3) std::snprintf(buf, sizeof buf, "%.3g ms", seconds * 1e3);
  else if (a >= 1e-6) std::snprintf(buf, sizeof buf, "%.3g us", seconds * 1e6);
  else std::snprintf(buf, sizeof buf, "%.3g ns", seconds * 1e9);
  return buf;
}

Rate TimeScale::emulate(Rate physical) const {
  return Rate{static_cast<uint64_t>(std::llround(static_cast<double>(physical.bps) / d_))};
}

Duration TimeScale::emulate(Duration physical) const {
  return Duration{static_cast<int64_t>(std::llround(static_cast<double>(physical.ns) * d_))};
}

}  // namespace rocelab::model
