// expect: assertions — a small expression language over a run's metrics.
//
//   expr  := or ;  or := and ('||' and)* ;  and := not ('&&' not)* ;  not := '!' not | cmp
//   cmp   := sum (('=='|'!='|'<'|'<='|'>'|'>=') sum)?
//   sum   := prod (('+'|'-') prod)* ;  prod := unary (('*'|'/') unary)* ;  unary := '-' unary | atom
//   atom  := NUMBER [UNIT] | AGG '(' expr [',' NUMBER] ')' | METRIC ['(' label=value, ... ')'] | '(' expr ')'
//
// 'and', 'or', 'not' may be written for &&, ||, !. Numbers may carry a unit, converted to the
// metric base units (bit/s, bytes, seconds): 90G, 128KB, 200ms, 95%. A series metric (one
// sample per flow, link, port...) must go through an aggregate: min, max, sum, avg, count,
// p50, p90, p95, p99, or pct(series, q). Labels select samples: link_rate(tier=host).
// A counter metric (packets, bytes, drops per port and priority) is labelled samples too,
// but standing alone it is the sum of the samples its labels select: drops(prio=3) == 0.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rocelab::model {

enum class MetricKind { kScalar, kSeries, kCounter };

struct MetricInfo {
  std::string_view name;
  MetricKind kind;
  std::string_view unit;  // "count", "bit/s", "bytes", "s", "ratio"
  std::vector<std::string_view> labels;
  std::string_view help;
};

// The metrics a run can produce. Later issues add theirs here; expect: may name only these.
const std::vector<MetricInfo>& metric_registry();
const MetricInfo* find_metric(std::string_view name);

struct Expr {
  enum class Op { kNumber, kMetric, kAggregate, kNeg, kNot, kAdd, kSub, kMul, kDiv,
                  kLt, kLe, kGt, kGe, kEq, kNe, kAnd, kOr };
  enum class Type { kNumber, kSeries, kBool };
  Op op = Op::kNumber;
  Type type = Type::kNumber;
  double number = 0;                                       // kNumber; percentile q for kAggregate
  std::string name;                                        // metric or aggregate name
  std::vector<std::pair<std::string, std::string>> labels; // metric selectors
  bool counter = false;                                    // kMetric of a counter: sums, or aggregates
  std::vector<std::unique_ptr<Expr>> args;
  size_t offset = 0;                                       // byte offset in the source text
  std::string text;                                        // source text of this sub-expression
};

struct ExprError {
  bool unknown_metric = false;  // else a syntax or type error
  size_t offset = 0;
  std::string message;
};

struct ParsedExpr {
  std::unique_ptr<Expr> root;
  std::optional<ExprError> error;
};

ParsedExpr parse_expression(std::string_view text);
// A figure rather than an assertion (sweep and compare columns): the same grammar, but the
// whole must be one number - a scalar, an aggregate, arithmetic on them - not a comparison.
ParsedExpr parse_value(std::string_view text);

// A run's metric values: a scalar, or samples each with its labels.
struct Sample {
  std::map<std::string, std::string> labels;
  double value = 0;
};
struct MetricValue {
  MetricKind kind = MetricKind::kScalar;
  double scalar = 0;
  std::vector<Sample> samples;
};
using MetricSet = std::map<std::string, MetricValue, std::less<>>;

struct Evaluation {
  enum class Outcome { kPass, kFail, kError } outcome = Outcome::kError;
  std::string error;                                     // for kError: why it could not be decided
  std::vector<std::pair<std::string, double>> observed;  // metric terms and their values
};

Evaluation evaluate(const Expr& e, const MetricSet& metrics);
// The value of a parse_value expression, or nullopt and `why` (a metric the run did not produce).
std::optional<double> evaluate_value(const Expr& e, const MetricSet& metrics, std::string& why);

}  // namespace rocelab::model
