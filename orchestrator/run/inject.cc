#include "run/inject.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "fabric/local_testbed.h"
#include "fabric/realiser.h"
#include "model/scenario.h"
#include "run/kinds.h"
#include "sys/host_info.h"

namespace rocelab::run {

namespace {

using nlohmann::json;

// KEY=VALUE as the fault's YAML value would read: a number, a list ("1ms,300us,500us"
// for a train), or text (durations such as 2ms are text to the loader, which parses units).
json value_of(const std::string& key, const std::string& v) {
  if (key == "train") {
    json a = json::array();
    size_t from = 0;
    for (size_t comma; (comma = v.find(',', from)) != std::string::npos; from = comma + 1) a.push_back(v.substr(from, comma - from));
    a.push_back(v.substr(from));
    return a;
  }
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || !end || *end != '\0' || !std::isfinite(d)) return v;  // a word, or inf/nan: the loader judges it as text
  // A whole number within int64 is an integer (casting one outside is undefined behaviour).
  const bool whole = v.find_first_of(".eE") == std::string::npos && d >= -9.2e18 && d <= 9.2e18;
  if (whole) return json(int64_t(d));
  return json(d);
}

// The instance's scenario with this one fault (at 0 s) in place of its faults and workloads.
Result<model::Scenario> scenario_with(const InjectRequest& r) {
  const std::string path = fabric::scenario_record_path(r.instance);
  auto text = sys::read_file(path);
  if (!text) return error(Errc::kBadInput, "instance " + r.instance + " is not up (or was not brought up by 'rocelab up': " + path + " is missing)");
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return error(Errc::kEnvironment, path + " is damaged");
  json f = {{"type", r.kind}, {"target", r.target}, {"at", "0s"}};
  for (const auto& [k, v] : r.params) {
    if (k == "type" || k == "target" || k == "at")
      return error(Errc::kBadInput, "'" + k + "' is not a parameter here: the kind and target are arguments, and an injected fault starts now");
    f[k] = value_of(k, v);
  }
  j["faults"] = json::array({f});
  j["workloads"] = json::array();
  j["expect"] = json::array();
  auto res = load_scenario_text(j.dump(), "inject");
  if (!res.ok()) {
    std::string why;
    for (const auto& d : res.diags.sorted()) why += (why.empty() ? "" : "; ") + d.message;
    return error(Errc::kBadInput, why);
  }
  return std::move(*res.scenario);
}

}  // namespace

Result<InjectReport> inject(const InjectRequest& r, const std::function<void(const std::string&)>& progress,
                            const std::atomic<bool>* cancel) {
  if (!model::is_instance_name(r.instance)) return error(Errc::kBadInput, "'" + r.instance.substr(0, 64) + "' is not an instance name");
  auto s = scenario_with(r);
  if (!s) return s.error();
  auto t = fabric::LocalTestbed::attach(r.instance);
  if (!t) return t.error();
  fault::Timeline tl(*s, **t);
  tl.start((*t)->clock().now());
  size_t reported = 0;
  auto report = [&] {
    for (; reported < tl.happened().size(); ++reported) {
      const auto& h = tl.happened()[reported];
      if (progress)
        progress((h.begin ? "start " : "end ") + h.type + " " + h.target + (h.ok ? "" : ": " + h.error));
    }
  };
  while (tl.pending()) {
    if (cancel && cancel->load()) break;
    const sys::Nanos wait = tl.next_due() - (*t)->clock().now();
    if (wait > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<sys::Nanos>(wait, 50'000'000)));
    tl.apply_due((*t)->clock().now());
    report();
  }
  InjectReport out;
  out.scale = s->scale.factor();
  // A fault whose last event was its start has no end: it stays (the Change is not undone).
  out.left_in_force = !tl.happened().empty() && tl.happened().back().begin && tl.happened().back().ok;
  if (cancel && cancel->load()) {
    tl.finish((*t)->clock().now());  // interrupted: put back what it started
    out.left_in_force = false;
    report();
  }
  out.happened = tl.happened();
  if (tl.failed()) return error(Errc::kEnvironment, tl.happened().back().error);
  return out;
}

Result<std::vector<std::string>> clear_faults(const std::string& instance) {
  if (!model::is_instance_name(instance)) return error(Errc::kBadInput, "'" + instance.substr(0, 64) + "' is not an instance name");
  auto t = fabric::LocalTestbed::attach(instance);
  if (!t) return t.error();
  return (*t)->clear_faults();
}

}  // namespace rocelab::run
