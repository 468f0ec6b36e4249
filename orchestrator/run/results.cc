#include "run/results.h"

#include <unistd.h>

#include "sys/files.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>

namespace rocelab::run {

using nlohmann::ordered_json;
using namespace rocelab::model;

MetricSet topology_metrics(const Scenario& s) {
  MetricSet m;
  auto scalar = [&](const char* name, double v) { m[name] = MetricValue{MetricKind::kScalar, v, {}}; };
  scalar("switches", static_cast<double>(s.count(NodeKind::kSwitch)));
  scalar("hosts", static_cast<double>(s.count(NodeKind::kHost)));
  scalar("links", static_cast<double>(s.links.size()));
  scalar("namespaces", static_cast<double>(s.nodes.size()));
  size_t nics = 0;
  for (const Node& n : s.nodes)
    if (n.kind == NodeKind::kHost) nics += n.ports.size();
  scalar("nics", static_cast<double>(nics));
  scalar("oversubscription", s.oversubscription());
  scalar("scale", s.scale.factor());
  MetricValue rates{MetricKind::kSeries, 0, {}};
  for (const Link& l : s.links) {
    bool host = s.nodes[l.a.node].kind == NodeKind::kHost || s.nodes[l.b.node].kind == NodeKind::kHost;
    rates.samples.push_back(Sample{{{"a", s.nodes[l.a.node].name}, {"b", s.nodes[l.b.node].name},
                                    {"tier", host ? "host" : "fabric"}},
                                   static_cast<double>(l.rate.bps)});
  }
  m["link_rate"] = rates;
  return m;
}

ordered_json metrics_json(const MetricSet& m) {
  ordered_json j = ordered_json::object();
  for (const auto& [name, v] : m) {
    if (v.kind == MetricKind::kScalar) {
      j[name] = v.scalar;
    } else {
      ordered_json arr = ordered_json::array();
      for (const auto& s : v.samples) arr.push_back({{"labels", s.labels}, {"value", s.value}});
      j[name] = arr;
    }
  }
  return j;
}

namespace {
const char* outcome_name(Evaluation::Outcome o) {
  switch (o) {
    case Evaluation::Outcome::kPass: return "pass";
    case Evaluation::Outcome::kFail: return "fail";
    case Evaluation::Outcome::kError: return "error";
  }
  return "error";
}


std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}
}  // namespace

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 allows no control characters but tab, newline, carriage return.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') out += '?';
        else out += c;
    }
  }
  return out;
}

std::string observed_text(const Evaluation& e) {
  std::string out;
  for (const auto& [term, v] : e.observed) out += (out.empty() ? "" : ", ") + term + " = " + num(v);
  return out;
}

ordered_json assertions_json(const std::vector<AssertionOutcome>& a) {
  ordered_json arr = ordered_json::array();
  for (const auto& o : a) {
    ordered_json j;
    j["name"] = o.expect->name;
    j["expr"] = o.expect->text;
    j["line"] = o.expect->pos.line;
    j["outcome"] = outcome_name(o.eval.outcome);
    ordered_json obs = ordered_json::object();
    for (const auto& [term, v] : o.eval.observed) obs[term] = v;
    j["observed"] = obs;
    if (!o.eval.error.empty()) j["error"] = o.eval.error;
    arr.push_back(j);
  }
  return arr;
}

std::string junit_xml(const Scenario& s, const std::vector<AssertionOutcome>& a, double seconds,
                      const std::string& timestamp, const std::string& extra_failure,
                      const std::vector<std::pair<std::string, std::string>>& properties) {
  size_t failures = 0, errors = 0;
  for (const auto& o : a) {
    failures += o.eval.outcome == Evaluation::Outcome::kFail;
    errors += o.eval.outcome == Evaluation::Outcome::kError;
  }
  size_t tests = a.size() + (extra_failure.empty() ? 0 : 1);
  errors += extra_failure.empty() ? 0 : 1;
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  std::string suite = "rocelab." + s.name;
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites name=\"rocelab\" tests=\"" + std::to_string(tests) + "\" failures=\"" + std::to_string(failures) +
       "\" errors=\"" + std::to_string(errors) + "\" time=\"" + num(seconds) + "\">\n";
  x += "  <testsuite name=\"" + xml_escape(suite) + "\" tests=\"" + std::to_string(tests) + "\" failures=\"" +
       std::to_string(failures) + "\" errors=\"" + std::to_string(errors) + "\" skipped=\"0\" time=\"" + num(seconds) +
       "\" timestamp=\"" + timestamp + "\" hostname=\"" + xml_escape(host) + "\">\n";
  x += "    <properties>\n";
  x += "      <property name=\"scenario\" value=\"" + xml_escape(s.file) + "\"/>\n";
  x += "      <property name=\"seed\" value=\"" + std::to_string(s.seed) + "\"/>\n";
  x += "      <property name=\"scale\" value=\"" + num(s.scale.factor()) + "\"/>\n";
  for (const auto& [k, v] : properties)
    x += "      <property name=\"" + xml_escape(k) + "\" value=\"" + xml_escape(v) + "\"/>\n";
  x += "    </properties>\n";
  for (const auto& o : a) {
    x += "    <testcase classname=\"" + xml_escape(suite) + ".expect\" name=\"" + xml_escape(o.expect->name) +
         "\" time=\"0\"";
    std::string obs = observed_text(o.eval);
    switch (o.eval.outcome) {
      case Evaluation::Outcome::kPass:
        x += ">\n      <system-out>" + xml_escape(obs) + "</system-out>\n    </testcase>\n";
        break;
      case Evaluation::Outcome::kFail:
        x += ">\n      <failure type=\"assertion\" message=\"" + xml_escape(o.expect->text + " is false") + "\">" +
             xml_escape(s.file + ":" + std::to_string(o.expect->pos.line) + ": " + o.expect->text +
                        (obs.empty() ? "" : "\nobserved: " + obs)) +
             "</failure>\n    </testcase>\n";
        break;
      case Evaluation::Outcome::kError:
        x += ">\n      <error type=\"undecided\" message=\"" + xml_escape(o.eval.error) + "\">" +
             xml_escape(s.file + ":" + std::to_string(o.expect->pos.line) + ": " + o.expect->text) +
             "</error>\n    </testcase>\n";
        break;
    }
  }
  if (!extra_failure.empty())
    x += "    <testcase classname=\"" + xml_escape(suite) + "\" name=\"run\" time=\"" + num(seconds) +
         "\">\n      <error type=\"run\" message=\"" + xml_escape(extra_failure) + "\"/>\n    </testcase>\n";
  x += "  </testsuite>\n</testsuites>\n";
  return x;
}

EventLog::EventLog(const std::string& path) : start_(std::chrono::steady_clock::now()) {
  std::string why;
  fd_ = sys::Fd(sys::open_for_write(path, why, /*append=*/true));
}

double EventLog::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void EventLog::add(const std::string& event, ordered_json fields) {
  ordered_json j;
  j["t"] = elapsed();
  j["event"] = event;
  for (auto& [k, v] : fields.items()) j[k] = v;
  if (!fd_.valid()) return;
  const std::string line = j.dump(-1, ' ', false, ordered_json::error_handler_t::replace) + "\n";
  (void)!write(fd_.get(), line.data(), line.size());  // one write a line: O_APPEND keeps lines whole
}

std::string utc_timestamp(std::chrono::system_clock::time_point t, bool compact) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, compact ? "%Y%m%d-%H%M%S" : "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace rocelab::run
