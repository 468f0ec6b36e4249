#include "sys/error.h"

namespace rocelab {

namespace {
class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rocelab"; }
  std::string message(int c) const override {
    switch (Errc(c)) {
      case Errc::kAssertionFailed: return "an assertion failed";
      case Errc::kInvalidRun: return "invalid run";
      case Errc::kBadInput: return "bad input";
      case Errc::kEnvironment: return "environment";
    }
    return "unknown";
  }
};
}  // namespace

const std::error_category& rocelab_category() {
  static const Category c;
  return c;
}

}  // namespace rocelab
