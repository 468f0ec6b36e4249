// `rocelab compare`: runs side by side (run/report.h). Reads only the run directories.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "run/report.h"
#include "run/report_data.h"
#include "run/results.h"
#include "sys/files.h"

namespace rocelab::run {

namespace {

using nlohmann::json;

constexpr size_t kMaxScenarioRows = 300, kMaxMetricRows = 400, kOverlaid = 6;

// Each chart overlays one series (a queue, a pause lane, a flow's rate) of every run: the
// colour is the series, the dash the run.
const char* kCompareScript = R"JS(
(function(){
const D = JSON.parse(document.getElementById('data').textContent);
const colors = ['#1f77b4','#d62728','#2ca02c','#ff7f0e','#9467bd','#8c564b','#e377c2','#17becf'];
const dashes = [[], [6, 3], [2, 2], [10, 3, 2, 3], [1, 4], [8, 8], [3, 6], [12, 2]];
let drawn = 0;
D.charts.forEach(c => {
  if (!c.series.length) return;
  const ds = c.series.map(s => ({ label: s.label, data: s.points.map(p => ({x: p[0], y: p[1]})),
    borderColor: colors[s.color % colors.length], backgroundColor: colors[s.color % colors.length],
    borderDash: dashes[s.run % dashes.length], borderWidth: 1.4, pointRadius: 0, stepped: !!c.stepped }));
  new Chart(document.getElementById(c.id), { type: 'line', data: { datasets: ds }, options: {
    animation: false, parsing: false, normalized: true, maintainAspectRatio: false,
    interaction: { mode: 'nearest', intersect: false },
    scales: { x: { type: 'linear', title: { display: true, text: 'time (ms, physical)' } },
              y: { title: { display: true, text: c.ylabel } } },
    plugins: { legend: { position: 'right', labels: { boxWidth: 10, font: { size: 10 } } } } } });
  drawn++;
});
document.body.dataset.charts = String(drawn);
})();
)JS";

// The resolved scenario as path -> value text, leaves only.
void flatten(const json& j, const std::string& path, std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) flatten(v, path.empty() ? k : path + "." + k, out);
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) flatten(j[i], path + "." + std::to_string(i), out);
  } else {
    out[path] = j.dump();
  }
}

// A run's metrics as name -> value: scalars as they are, a series or counter by the sum and
// the largest of its samples.
std::map<std::string, double> metric_values(const json& res) {
  std::map<std::string, double> out;
  const json m = res.value("metrics", json::object());
  if (!m.is_object()) return out;
  for (const auto& [name, v] : m.items()) {
    if (v.is_number()) {
      out[name] = v.get<double>();
    } else if (v.is_array()) {  // no sample: nothing was counted (a counter keeps only non-zero samples)
      double sum = 0, most = v.empty() ? 0 : -std::numeric_limits<double>::infinity();
      for (const auto& s : v) {
        const double x = s.is_object() && s.contains("value") && s["value"].is_number() ? s["value"].get<double>() : 0;
        sum += x;
        most = std::max(most, x);
      }
      out[name + " (sum)"] = sum;
      out[name + " (max)"] = most;
    }
  }
  return out;
}

bool bookkeeping(const std::string& metric) {
  static const char* kNames[] = {"run_seconds", "up_seconds", "down_seconds", "series_samples"};
  return std::any_of(std::begin(kNames), std::end(kNames), [&](const char* n) { return metric.rfind(n, 0) == 0; });
}

std::vector<MetricChange> metric_changes(const std::vector<RunDirFiles>& runs) {
  std::vector<std::map<std::string, double>> vals;
  std::set<std::string> names;
  for (const auto& r : runs) {
    vals.push_back(metric_values(r.res));
    for (const auto& [k, v] : vals.back()) names.insert(k);
  }
  std::vector<MetricChange> out;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const auto& n : names) {
    MetricChange c;
    c.metric = n;
    for (const auto& v : vals) c.values.push_back(v.count(n) ? v.at(n) : nan);
    const double a = c.values.front(), b = c.values.back();
    if (std::isnan(a) || std::isnan(b)) c.change = nan;
    else if (a == 0) c.change = b == 0 ? 0 : std::numeric_limits<double>::infinity();
    else c.change = (b - a) / std::fabs(a);
    out.push_back(std::move(c));
  }
  // By the factor between first and last, either way: a figure that fell to 0 or rose from
  // 0 changed most, then x10 up or down alike (a relative change ranks +500 % above -100 %).
  auto rank = [](const MetricChange& c) {
    const double a = c.values.front(), b = c.values.back();
    if (std::isnan(c.change)) return -1.0;
    if (a == b) return 0.0;
    if (a == 0 || b == 0 || (a < 0) != (b < 0)) return std::numeric_limits<double>::infinity();
    return std::fabs(std::log(b / a));
  };
  std::stable_sort(out.begin(), out.end(), [&](const MetricChange& x, const MetricChange& y) { return rank(x) > rank(y); });
  return out;
}

std::string change_text(double c) {
  if (std::isnan(c)) return "-";
  if (std::isinf(c)) return "from 0";
  if (c == -1) return "-100 % (to 0)";
  return fmt::format("{:+.1f} %", c * 100);
}

// One overlay chart: the `kOverlaid` series (by label) that reach highest in any run, each
// run's copy of them.
json overlay(const std::vector<RunDirFiles>& runs, const std::string& kind, const std::string& points_key) {
  std::map<std::string, double> top;
  for (const auto& r : runs)
    for (const auto& s : r.data.value(kind, json::array()))
      for (const auto& p : s.value(points_key, json::array()))
        if (p.is_array() && p.size() == 2) top[s.value("label", "")] = std::max(top[s.value("label", "")], p[1].get<double>());
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [label, most] : top) order.push_back({-most, label});
  std::sort(order.begin(), order.end());
  if (order.size() > kOverlaid) order.resize(kOverlaid);
  json series = json::array();
  for (size_t c = 0; c < order.size(); ++c)
    for (size_t r = 0; r < runs.size(); ++r)
      for (const auto& s : runs[r].data.value(kind, json::array()))
        if (s.value("label", "") == order[c].second)
          series.push_back({{"label", fmt::format("run {}: {}", r + 1, order[c].second)}, {"run", r}, {"color", c},
                            {"points", s.value(points_key, json::array())}});
  return series;
}

std::string runs_table(const CompareOptions& o, const std::vector<RunDirFiles>& runs) {
  std::string h = "<h2>Runs</h2><table><tr><th>run</th><th>directory</th><th>scenario</th><th>seed</th><th>D</th>"
                  "<th>--set</th><th>outcome</th></tr>";
  for (size_t i = 0; i < runs.size(); ++i) {
    const json& res = runs[i].res;
    const json sc = res.value("scenario", json::object());
    std::string sets;
    for (const auto& s : sc.value("set", json::array())) sets += (sets.empty() ? "" : ", ") + s.get<std::string>();
    const std::string oc = res.value("outcome", "?");
    h += fmt::format("<tr><td>{} ({})</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{} (exit "
                     "{})</td></tr>",
                     i + 1, i == 0 ? "solid" : "dashed", xml_escape(o.run_dirs[i]), xml_escape(sc.value("name", "")),
                     res.value("seed", 0), res.value("scale", 0.0), xml_escape(sets), xml_escape(oc), xml_escape(oc),
                     res.value("exit_code", -1));
  }
  return h + "</table>";
}

std::string scenario_table(const std::vector<RunDirFiles>& runs, size_t& differences) {
  std::vector<std::map<std::string, std::string>> flat(runs.size());
  std::set<std::string> paths;
  for (size_t i = 0; i < runs.size(); ++i) {
    flatten(runs[i].resolved, "", flat[i]);
    for (const auto& [p, v] : flat[i]) paths.insert(p);
  }
  std::string rows;
  differences = 0;
  for (const auto& p : paths) {
    bool same = true;
    for (size_t i = 1; i < runs.size(); ++i) same = same && flat[i][p] == flat[0][p];
    if (same || p == "name" || p.rfind("derived.", 0) == 0) continue;
    if (++differences > kMaxScenarioRows) continue;
    rows += "<tr><td><code>" + xml_escape(p) + "</code></td>";
    for (size_t i = 0; i < runs.size(); ++i)
      rows += "<td>" + xml_escape(flat[i].count(p) ? flat[i][p] : std::string("-")) + "</td>";
    rows += "</tr>";
  }
  std::string h = fmt::format("<h2>What differs in the resolved scenario ({})</h2>", differences);
  if (!differences) return h + "<p class=\"note\">Nothing: the same scenario (the seed or the machine made any difference).</p>";
  h += "<table><tr><th>setting</th>";
  for (size_t i = 0; i < runs.size(); ++i) h += fmt::format("<th>run {}</th>", i + 1);
  return h + "</tr>" + rows + "</table>";
}

std::string metrics_table(const std::vector<MetricChange>& changes, size_t runs) {
  std::string h = "<h2>Every metric, the largest change first</h2><p class=\"note\">A series or counter shows the sum "
                  "and the largest of its samples; the change is the last run against the first.</p><table><tr><th>metric</th>";
  for (size_t i = 0; i < runs; ++i) h += fmt::format("<th>run {}</th>", i + 1);
  h += "<th>change</th></tr>";
  size_t n = 0;
  for (const auto& c : changes) {
    if (++n > kMaxMetricRows) break;
    h += "<tr><td><code>" + xml_escape(c.metric) + "</code></td>";
    for (double v : c.values) h += "<td>" + (std::isnan(v) ? std::string("-") : fmt::format("{:.6g}", v)) + "</td>";
    h += "<td>" + change_text(c.change) + "</td></tr>";
  }
  return h + "</table>";
}

}  // namespace

Result<CompareFiles> write_compare(const CompareOptions& o) {
  if (o.run_dirs.size() < 2 || o.run_dirs.size() > 8) return error(Errc::kBadInput, "compare takes 2 to 8 run directories");
  std::vector<RunDirFiles> runs;
  for (const auto& d : o.run_dirs) {
    auto f = read_run_dir(d);
    if (!f) return f.error();
    runs.push_back(std::move(*f));
  }
  std::string why;
  auto chartjs = sys::read_file(o.chartjs, 16u << 20, why);
  if (!chartjs) return error(Errc::kEnvironment, o.chartjs + " is missing: install Debian's libjs-chart.js (scripts/setup.sh does)");
  CompareFiles out;
  std::string body;
  json charts = json::array();
  try {  // results.json of another shape than a run writes is bad input, never a crash
    const auto changes = metric_changes(runs);
    for (const auto& c : changes)
      if (!bookkeeping(c.metric) && !std::isnan(c.change) && c.change != 0 && out.most_changed.size() < 10)
        out.most_changed.push_back(c);
    std::string title;
    for (const auto& r : runs) title += (title.empty() ? "" : " vs ") + r.res.value("scenario", json::object()).value("name", "?");
    body = "<h1>compare: " + xml_escape(title) + "</h1><div id=\"errors\"></div>" + runs_table(o, runs);
    body += "<h2>Changed most</h2><ul>";
    for (const auto& c : out.most_changed)
      body += "<li><code>" + xml_escape(c.metric) + "</code>: " + change_text(c.change) + "</li>";
    body += "</ul>" + scenario_table(runs, out.scenario_differences);
    charts.push_back({{"id", "queues"}, {"ylabel", "queue depth (KB, most per interval)"}, {"series", overlay(runs, "queues", "points")}});
    charts.push_back({{"id", "pauses"}, {"ylabel", "paused (share of each interval)"}, {"stepped", true},
                      {"series", overlay(runs, "pauses", "points")}});
    charts.push_back({{"id", "flows"}, {"ylabel", "DCQCN rate (Gbit/s, physical)"}, {"series", overlay(runs, "flows", "rate")}});
    const char* titles[] = {"Queues (the deepest, overlaid)", "PFC pauses in force (the most paused lanes)",
                            "Flows: DCQCN rate (the fastest flows)"};
    for (size_t i = 0; i < charts.size(); ++i)
      body += "<h2>" + std::string(titles[i]) + "</h2>" +
              (charts[i]["series"].empty() ? "<p class=\"note\">none in these runs (no time series, or nothing of this kind)</p>"
                                           : "<div class=\"chart\"><canvas id=\"" + charts[i]["id"].get<std::string>() +
                                                 "\"></canvas></div>");
    body += metrics_table(changes, runs.size());
  } catch (const json::exception& e) {
    return error(Errc::kBadInput, std::string("a results.json is not as a run writes it (") + e.what() + ")");
  }
  out.html = o.out;
  const std::string page = html_page("rocelab compare", body, json{{"charts", charts}}.dump(), kCompareScript, *chartjs);
  if (!sys::write_file(out.html, page, why)) return error(Errc::kEnvironment, why);
  return out;
}

}  // namespace rocelab::run
