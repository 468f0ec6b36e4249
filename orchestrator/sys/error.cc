#include "sys/error.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>

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
      case Errc::kTestbedFault: return "testbed fault";
    }
    return "unknown";
  }
};
}  // namespace

bool from_build_tree() {
#ifdef ROCELAB_BUILD_BINARY
  static const bool yes = [] {
    char exe[PATH_MAX], built[PATH_MAX];  // both resolved: a build directory reached through a link
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    return n > 0 && realpath(ROCELAB_BUILD_BINARY, built) && std::string_view(exe, size_t(n)) == built;
  }();
  return yes;
#else
  return false;
#endif
}

bool test_failure(std::string_view what) {
  const char* v = std::getenv("ROCELAB_TEST_FAIL");
  if (!v || !from_build_tree()) return false;
  std::string_view list(v);
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (list.substr(0, comma) == what) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

const char* class_name(int exit_code) {
  switch (exit_code) {
    case 0: return "pass";
    case int(Errc::kAssertionFailed): return "assertion failed";
    case int(Errc::kInvalidRun): return "invalid run";
    case int(Errc::kBadInput): return "bad input";
    case int(Errc::kEnvironment): return "environment";
    case int(Errc::kTestbedFault): return "testbed fault";
  }
  return "unknown";
}

const std::error_category& rocelab_category() {
  static const Category c;
  return c;
}

}  // namespace rocelab
