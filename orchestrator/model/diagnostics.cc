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

std::string Diagnostic::format() const {
  std::string out = file;
  if (pos.line > 0) {
    out += ':' + std::to_string(pos.line);
    if (pos.column > 0) out += ':' + std::to_string(pos.column);
  }
  out += ": ";
  out += message;
  return out;
}

void Diagnostics::add(ErrorKind kind, Position pos, std::string message) {
  items_.push_back(Diagnostic{kind, file_, pos, std::move(message)});
}

std::vector<Diagnostic> Diagnostics::sorted() const {
  std::vector<Diagnostic> out = items_;
  std::stable_sort(out.begin(), out.end(), [](const Diagnostic& a, const Diagnostic& b) {
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
