// Physical quantities of a scenario and the time scale that turns them into emulated ones.
//
// Every value keeps its unit in its type: a Rate is bit/s, Bytes are bytes, a Duration is
// nanoseconds. Parsing follows the scenario conventions of DESIGN.md §2: KB means KiB unless
// written kB; rates are bit/s with decimal prefixes (k, M, G, T). Formatting is lossless, so
// a formatted value parses back to the same integer.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rocelab::model {

struct Rate {
  uint64_t bps = 0;  // bit/s
  auto operator<=>(const Rate&) const = default;
};

struct Bytes {
  uint64_t n = 0;
  auto operator<=>(const Bytes&) const = default;
};

struct Duration {
  int64_t ns = 0;
  auto operator<=>(const Duration&) const = default;
};

// A parse either yields the value or says, in words fit for a diagnostic, why not.
template <class T>
struct Parsed {
  std::optional<T> value;
  std::string error;
  explicit operator bool() const { return value.has_value(); }
};

Parsed<Rate> parse_rate(std::string_view text);
Parsed<Bytes> parse_bytes(std::string_view text);
Parsed<Duration> parse_duration(std::string_view text);
// A plain decimal number (no unit), e.g. "0.5", "1e-3", "250".
Parsed<double> parse_number(std::string_view text);

std::string format_rate(Rate r);          // "100Gbit/s", "1500Mbit/s", "12345bit/s"
std::string format_bytes(Bytes b);        // "128KiB", "16MiB", "1000B"
std::string format_duration(Duration d);  // "55us", "200ms", "1500ns"
// Human-friendly, not lossless: "1.36 Gbit/s", "97.3 KiB", "2.5 ms".
std::string human_rate(double bps);
std::string human_bytes(double bytes);
std::string human_duration(double seconds);

// The time scale D of DESIGN.md §3: rates ÷ D, times × D, bytes unchanged. The one place
// where physical values become emulated ones.
class TimeScale {
 public:
  explicit TimeScale(double d = 1.0) : d_(d) {}
  double factor() const { return d_; }
  Rate emulate(Rate physical) const;
  Duration emulate(Duration physical) const;
  Bytes emulate(Bytes physical) const { return physical; }

 private:
  double d_;
};

}  // namespace rocelab::model
