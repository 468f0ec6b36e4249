// `rocelab inject`: one fault against a fabric `rocelab up` left running, checked as a
// scenario's fault would be (the instance's own scenario, kept beside its state file) and
// applied on the fault timeline. A fault with an end (duration, a flap's train or count)
// runs to it and is undone; one without stays in force until `inject --clear`.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "fault/timeline.h"
#include "sys/error.h"

namespace rocelab::run {

struct InjectRequest {
  std::string instance;
  std::string kind, target;
  std::vector<std::pair<std::string, std::string>> params;  // KEY=VALUE as given
};

struct InjectReport {
  std::vector<fault::Happened> happened;
  bool left_in_force = false;  // no end: `rocelab inject --clear` undoes it
  double scale = 1;
};

// Bad input (unknown kind, target, key or value; no such instance) is kBadInput with the
// fabric untouched.
Result<InjectReport> inject(const InjectRequest& r, const std::function<void(const std::string&)>& progress,
                            const std::atomic<bool>* cancel);
// Everything faults left in force on the instance, put back; what was done.
Result<std::vector<std::string>> clear_faults(const std::string& instance);

}  // namespace rocelab::run
