#include "run/split.h"

#include <algorithm>
#include <functional>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "model/port_target.h"
#include "run/resolved.h"

namespace rocelab::run {

std::string split_fingerprint(const model::Scenario& s, size_t parts) {
  auto j = resolved_json(s, false);
  j.erase("name");  // each machine's instance may have its own name
  j["scale"] = s.scale.factor();  // as chosen (scale: auto calibrates on each machine)
  j["parts"] = parts;
  const std::string text = j.dump();
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a: the same on every build, unlike std::hash
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return std::to_string(h) + " (D = " + fmt::format("{:g}", s.scale.factor()) + ", seed " + std::to_string(s.seed) + ")";
}

Result<bool> fault_here(const model::Fault& f, size_t index, const model::Scenario& s, const model::Partition& p,
                        size_t part) {
  const auto t = model::PortTarget::parse(f.target);
  const std::string &node = t.node, &port = t.port_or_empty();
  const auto it = std::find_if(s.nodes.begin(), s.nodes.end(), [&](const model::Node& n) { return n.name == node; });
  if (it == s.nodes.end()) return error(Errc::kBadInput, "fault " + std::to_string(index + 1) + " targets no node of the fabric: " + f.target);
  const size_t x = size_t(it - s.nodes.begin());
  const std::string which = "fault " + std::to_string(index + 1) + " (" + f.type + " on " + f.target + ")";
  if (applied_on_every_part(f.type)) return true;
  if (f.type == "mtu_mismatch")
    if (const auto li = model::link_at(s, x, port); li && p.part_of[s.links[*li].a.node] != p.part_of[s.links[*li].b.node])
      return error(Errc::kBadInput, which + ": an MTU mismatch acts on both ends of its link, and this one is cut "
                                            "between machines");
  return p.part_of[x] == part;
}

nlohmann::ordered_json typed_fault_record(const nlohmann::ordered_json& f) {
  using J = nlohmann::ordered_json;
  J out = J::object();  // the timeline's order
  const auto keep = [&](const char* k, bool (J::*is)() const noexcept) {
    if (const auto it = f.find(k); it != f.end() && ((*it).*is)()) out[k] = *it;
  };
  keep("t_s", &J::is_number);
  keep("fault", &J::is_number_integer);
  for (const char* k : {"type", "target", "action"}) keep(k, &J::is_string);
  keep("ok", &J::is_boolean);
  keep("probability", &J::is_number);
  keep("parameters", &J::is_object);
  keep("error", &J::is_string);
  return out;
}

model::MetricSet metrics_from_json(const nlohmann::ordered_json& j) {
  model::MetricSet m;
  for (const auto& [name, v] : j.items()) {
    const model::MetricInfo* info = model::find_metric(name);
    if (!info) continue;
    model::MetricValue mv;
    mv.kind = info->kind;
    // JSON has no NaN or infinity: metrics_json wrote them as null.
    const auto number = [](const nlohmann::ordered_json& x) {
      return x.is_number() ? x.get<double>() : std::numeric_limits<double>::quiet_NaN();
    };
    if (info->kind == model::MetricKind::kScalar) {
      mv.scalar = number(v);
    } else {
      for (const auto& smp : v)
        mv.samples.push_back({smp.at("labels").get<std::map<std::string, std::string>>(), number(smp.at("value"))});
    }
    m[name] = std::move(mv);
  }
  return m;
}

namespace {

// Scalars that count or time what each machine saw of its own nodes: the fabric's is the sum.
// Every other scalar is the same on every part (the scenario's, or the workloads' once the
// figures were traded) or a worst case, and the fabric's is the largest.
// (link_down_time: every part applies every link fault, so each counts the same links.)
const std::set<std::string, std::less<>> kSummed = {
    "path_changes", "storm_frames", "pfc_deadlocks", "agent_pauses", "pause_time", "pfc_leaks",
    "pfc_pause_tail", "lossless_drops", "host_pairs", "reachable_pairs", "unreachable_pairs"};

}  // namespace

void merge_metrics(model::MetricSet& mine, const model::MetricSet& far) {
  for (const auto& [name, v] : far) {
    auto it = mine.find(name);
    if (it == mine.end()) {
      mine[name] = v;
      continue;
    }
    model::MetricValue& m = it->second;
    if (v.kind == model::MetricKind::kScalar) {
      m.scalar = kSummed.count(name) ? m.scalar + v.scalar : std::max(m.scalar, v.scalar);
      continue;
    }
    std::set<std::map<std::string, std::string>> have;
    for (const auto& s : m.samples) have.insert(s.labels);
    for (const auto& s : v.samples)
      if (!have.count(s.labels)) m.samples.push_back(s);
  }
}

namespace {

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    if (!line.empty()) out.push_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

// The number a line starts with (up to `sep`): a time in seconds or nanoseconds.
std::optional<double> leading_number(std::string_view line, char sep) {
  const std::string field(line.substr(0, line.find(sep)));
  if (field.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(field.c_str(), &end);
  if (end != field.c_str() + field.size()) return std::nullopt;
  return v;
}

}  // namespace

Result<std::string> merge_part_file(const std::string& name, const std::vector<std::string>& parts) {
  const bool csv = name.size() > 4 && name.compare(name.size() - 4, 4, ".csv") == 0;
  const bool qlen = name == "qlen.txt";
  std::string_view header;
  uint64_t latest = 0;
  struct Row {  // parts in order: the stable sort keeps a part's rows before the next's at one time
    double t;
    std::string_view line;
  };
  std::vector<Row> rows;
  for (size_t p = 0; p < parts.size(); ++p) {
    auto bad = [&](const std::string& why) {
      return error(Errc::kEnvironment, fmt::format("part {}'s {}: {}", p, name, why));
    };
    std::vector<std::string_view> ls = lines_of(parts[p]);
    if (ls.empty()) continue;
    if (csv) {
      if (header.empty()) header = ls.front();
      else if (ls.front() != header) return bad("its columns differ from part 0's");
      ls.erase(ls.begin());
    } else if (qlen) {
      // HPCC's qlen format: "time: NS" (the run's end), then a histogram line per port.
      const std::string_view first = ls.front();
      std::optional<double> t;
      if (first.rfind("time: ", 0) == 0) t = leading_number(first.substr(6), ' ');
      if (!t || *t < 0) return bad("no \"time:\" line first");
      latest = std::max(latest, uint64_t(*t));
      ls.erase(ls.begin());
    }
    for (const std::string_view line : ls) {
      // qlen's port lines have no time: they keep part order (0 for all).
      const std::optional<double> t = qlen ? std::optional<double>(0) : leading_number(line, csv ? ',' : ' ');
      if (!t) return bad(fmt::format("a line that does not start with a time: {:.60}", line));
      rows.push_back({*t, line});
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.t < b.t; });
  std::string out;
  if (csv && !header.empty()) out.append(header).append("\n");
  if (qlen) out += fmt::format("time: {}\n", latest);
  for (const Row& r : rows) out.append(r.line).append("\n");
  return out;
}

}  // namespace rocelab::run
