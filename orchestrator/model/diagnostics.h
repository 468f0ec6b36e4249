// Validation errors as values: every error names where (file:line:column) and why.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace rocelab::model {

// Every kind the validator can report. tests/malformed/ holds one file per kind, and the
// unit test walks kAllErrorKinds so that a new kind without a file fails the build's tests.
enum class ErrorKind {
  kIo,                // the file cannot be read
  kSyntax,            // YAML syntax
  kUnknownKey,        // a key the schema does not know (with did-you-mean)
  kMissingKey,        // a required key is absent
  kDuplicateKey,      // the same key twice in one map (yaml-cpp keeps both silently)
  kWrongType,         // a map where a list belongs, text where a number belongs, ...
  kBadValue,          // right type, not one of the allowed values (enum, unit, name syntax)
  kOutOfRange,        // a number, rate, MTU, count or time outside its range
  kInconsistent,      // values that contradict each other (Kmin > Kmax, XON >= XOFF, ...)
  kUnknownNode,       // a reference to a node that does not exist
  kUnknownLink,       // a reference to a link that does not exist
  kDuplicateName,     // two nodes, interfaces or workloads with one name
  kSelfLoop,          // a link from a node to itself
  kHostNotConnected,  // a host with no link
  kIfnameTooLong,     // an interface name over the kernel's 15 characters
  kBadAddress,        // an address or prefix that does not parse or does not fit
  kDuplicateAddress,  // two objects given the same address
  kAddressExhausted,  // the pool is too small for the fabric
  kTooLarge,          // more namespaces or links than one machine can hold
  kBadExpression,     // an expect: expression that does not parse or type-check
  kUnknownMetric,     // an expect: expression naming a metric that does not exist
  kUnknownKind,       // a type: (workload, fault, RDMA backend) or section this build does not have
  kNoPath,            // a workload's flow between GPUs no link joins
};

inline constexpr std::array kAllErrorKinds = {
    ErrorKind::kIo,           ErrorKind::kSyntax,           ErrorKind::kUnknownKey,
    ErrorKind::kMissingKey,   ErrorKind::kDuplicateKey,     ErrorKind::kWrongType,
    ErrorKind::kBadValue,     ErrorKind::kOutOfRange,       ErrorKind::kInconsistent,
    ErrorKind::kUnknownNode,  ErrorKind::kUnknownLink,      ErrorKind::kDuplicateName,
    ErrorKind::kSelfLoop,     ErrorKind::kHostNotConnected, ErrorKind::kIfnameTooLong,
    ErrorKind::kBadAddress,   ErrorKind::kDuplicateAddress, ErrorKind::kAddressExhausted,
    ErrorKind::kTooLarge,     ErrorKind::kBadExpression,    ErrorKind::kUnknownMetric,
    ErrorKind::kUnknownKind,  ErrorKind::kNoPath,
};

// Stable, snake_case: used in JSON output and as the malformed test file names.
std::string_view error_kind_name(ErrorKind k);

struct Position {
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based; 0 when unknown
};

struct Diagnostic {
  ErrorKind kind;
  std::string file;
  Position pos;
  std::string message;

  // "file:line:column: message" (line and column left out when unknown).
  std::string format() const;
};

// Collects diagnostics in the order they are found; printing sorts them by position.
class Diagnostics {
 public:
  static constexpr size_t kMaxItems = 100;
  explicit Diagnostics(std::string file = {}) : file_(std::move(file)) {}
  void add(ErrorKind kind, Position pos, std::string message);
  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  const std::vector<Diagnostic>& items() const { return items_; }
  std::vector<Diagnostic> sorted() const;
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::vector<Diagnostic> items_;
};

// Levenshtein distance, for "did you mean" hints.
size_t edit_distance(std::string_view a, std::string_view b);
// The closest candidate within a small distance, or "" when none is close.
std::string closest(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace rocelab::model
