#include "model/diagnostics.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace rocelab::model {

std::string_view error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::kIo: return "io";
    case ErrorKind::kSyntax: return "syntax";
    case ErrorKind::kUnknownKey: return "unknown_key";
    case ErrorKind::kMissingKey: return "missing_key";
    case ErrorKind::kDuplicateKey: return "duplicate_key";
    case ErrorKind::kWrongType: return "wrong_type";
    case ErrorKind::kBadValue: return "bad_value";
    case ErrorKind::kOutOfRange: return "out_of_range";
    case ErrorKind::kInconsistent: return "inconsistent";
    case ErrorKind::kUnknownNode: return "unknown_node";
    case ErrorKind::kUnknownLink: return "unknown_link";
    case ErrorKind::kDuplicateName: return "duplicate_name";
    case ErrorKind::kSelfLoop: return "self_loop";
    case ErrorKind::kHostNotConnected: return "host_not_connected";
    case ErrorKind::kIfnameTooLong: return "ifname_too_long";
    case ErrorKind::kBadAddress: return "bad_address";
    case ErrorKind::kDuplicateAddress: return "duplicate_address";
    case ErrorKind::kAddressExhausted: return "address_exhausted";
    case ErrorKind::kTooLarge: return "too_large";
    case ErrorKind::kBadExpression: return "bad_expression";
    case ErrorKind::kUnknownMetric: return "unknown_metric";
    case ErrorKind::kUnknownKind: return "unknown_kind";
    case ErrorKind::kNoPath: return "no_path";
  }
  return "unknown";
}

namespace {
// A file's bytes quoted back in a message must not drive the user's terminal: control bytes
// (ESC, BEL, NUL, ...) are shown as \xNN.
std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += char(c);
    }
  }
  return out;
}
}  // namespace

std::string Diagnostic::format() const {
  std::string out = printable(file);
  if (pos.line > 0) {
    out += ':' + std::to_string(pos.line);
    if (pos.column > 0) out += ':' + std::to_string(pos.column);
  }
  out += ": ";
  out += printable(message);
  return out;
}

void Diagnostics::add(ErrorKind kind, Position pos, std::string message) {
  // Past kMaxItems a file is not a scenario with mistakes but something else: one last line
  // says so instead of hundreds of thousands.
  if (items_.size() > kMaxItems) return;
  if (items_.size() == kMaxItems) {
    items_.push_back(Diagnostic{kind, file_, Position{}, "more than " + std::to_string(kMaxItems) +
                                                             " errors; stopped listing them"});
    return;
  }
  items_.push_back(Diagnostic{kind, file_, pos, std::move(message)});
}

std::vector<Diagnostic> Diagnostics::sorted() const {
  std::vector<Diagnostic> out = items_;
  // The "stopped listing" line stays last.
  const auto end = out.size() > kMaxItems ? out.begin() + long(kMaxItems) : out.end();
  std::stable_sort(out.begin(), end, [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.pos.line, a.pos.column) < std::tie(b.pos.line, b.pos.column);
  });
  return out;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  std::iota(prev.begin(), prev.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest(std::string_view word, const std::vector<std::string_view>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (auto c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

}  // namespace rocelab::model
