// Errors as values with a code. Every layer below the CLI returns these; the CLI turns the
// code into the exit code (DESIGN.md §6) instead of reading the message.
#pragma once

#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace rocelab {

// What went wrong, in the terms of the run contract. The values are the exit codes.
enum class Errc {
  kAssertionFailed = 1,  // an expect: assertion failed
  kInvalidRun = 2,       // the machine did not keep up (fidelity)
  kBadInput = 3,         // the scenario, an option or a name is wrong
  kEnvironment = 4,      // a missing capability, not root, a part not built
  // A fault of the testbed itself: the agent died, a fault was not applied, a pair the
  // topology connects is unreachable, the kernel refused a packet, an internal error. Never
  // retried: a defect is not a slow machine (exit 2 is the only class a runner may retry).
  kTestbedFault = 5,
};

// The class's name in results.json and the terminal ("invalid run", "testbed fault", ...).
const char* class_name(int exit_code);

const std::error_category& rocelab_category();
inline std::error_code make_error_code(Errc e) { return {int(e), rocelab_category()}; }

struct Error {
  std::error_code code;
  std::string what;
  int exit_code() const { return code.category() == rocelab_category() ? code.value() : int(Errc::kEnvironment); }
};

inline Error error(Errc c, std::string what) { return {make_error_code(c), std::move(what)}; }

// Tests make a testbed fault happen on purpose: ROCELAB_TEST_FAIL=WHAT[,WHAT...] (fault: every
// fault's kernel call fails; unreachable: the connectivity check finds one connected pair
// unreachable). Runs without the variable never see it, and neither does any binary but the
// one in the build tree it was built in (from_build_tree): `sudo -E` passes ROCELAB_*, and
// an installed rocelab honours no test hook.
bool test_failure(std::string_view what);

// True when this process is the rocelab binary at the path the build wrote it to (the tests'
// binary), false for an installed or copied one: test hooks and the source tree's labs.
bool from_build_tree();

// A value or the Error why not (std::expected arrives with C++23).
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T v) : v_(std::in_place_index<0>, std::move(v)) {}
  Result(Error e) : v_(std::in_place_index<1>, std::move(e)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

struct Ok {};
using Status = Result<Ok>;
inline Status ok() { return Ok{}; }

}  // namespace rocelab

template <>
struct std::is_error_code_enum<rocelab::Errc> : std::true_type {};
