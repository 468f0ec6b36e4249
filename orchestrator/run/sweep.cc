#include "run/sweep.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "model/expect.h"
#include "model/loader.h"
#include "run/kinds.h"
#include "run/report.h"
#include "run/results.h"
#include "run/run.h"
#include "run/split.h"
#include "sys/files.h"

namespace rocelab::run {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

constexpr size_t kMaxResults = 64u << 20;  // a run's results.json, read back

// Each chart: a figure against one axis, a line per combination of the other axes, the
// mean of its runs (seeds and repeats) drawn solid and their min-max as a band.
const char* kSweepScript = R"JS(
(function(){
const D = JSON.parse(document.getElementById('data').textContent);
const colors = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
let drawn = 0;
D.charts.forEach(c => {
  const ds = [];
  c.lines.forEach((l, j) => {
    const col = colors[j % colors.length];
    ds.push({ label: l.label + ' (runs: max)', data: l.max, borderColor: col + '55', pointRadius: 0, borderWidth: 1, fill: false });
    ds.push({ label: l.label + ' (runs: min)', data: l.min, borderColor: col + '55', pointRadius: 0, borderWidth: 1,
              backgroundColor: col + '22', fill: '-1' });
    ds.push({ label: l.label, data: l.mean, borderColor: col, backgroundColor: col, tension: 0 });
  });
  new Chart(document.getElementById(c.id), { type: 'line', data: { labels: c.labels, datasets: ds },
    options: { animation: false, maintainAspectRatio: false, spanGaps: true,
      scales: { x: { title: { display: true, text: c.axis } }, y: { title: { display: true, text: c.figure } } } } });
  drawn++;
});
document.body.dataset.charts = String(drawn);
})();
)JS";

std::string num(double v) { return fmt::format("{:.6g}", v); }

// The plan a sweep directory holds: a second command resumes it only if it is the same.
json plan_json(const SweepOptions& o, const std::string& scenario_text) {
  json axes = json::array();
  for (const auto& a : o.grid.axes) axes.push_back({{"key", a.key}, {"values", a.values}});
  return {{"schema", "rocelab.sweep/1"}, {"scenario", o.scenario_path}, {"scenario_text", scenario_text},
          {"fixed", o.grid.fixed},       {"axes", axes},               {"seeds", o.grid.seeds},
          {"figures", o.figures},        {"scale", o.scale ? json(*o.scale) : json(nullptr)}};
}

json plan_of(const SweepOptions& o, const std::string& scenario_text) {
  json plan = plan_json(o, scenario_text);
  if (o.grid.repeat > 1) plan["repeat"] = o.grid.repeat;  // absent at 1: a sweep from before --repeat resumes
  return plan;
}

std::optional<json> read_json(const std::string& path) {
  std::string why;
  auto text = sys::read_file(path, kMaxResults, why);
  if (!text || sys::json_depth(*text) > sys::kMaxJsonDepth) return std::nullopt;
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

// Makes OUT (or checks that it holds this very sweep) and writes the plan.
Status prepare_dir(const SweepOptions& o, const json& plan, bool& resumed) {
  std::error_code ec;
  const std::string plan_path = o.out_dir + "/sweep.json";
  resumed = fs::exists(plan_path, ec);
  if (resumed) {
    auto old = read_json(plan_path);
    if (!old || *old != plan)
      return error(Errc::kBadInput, o.out_dir + " holds another sweep (its sweep.json differs: scenario, --set, --seeds, "
                                                "--repeat or --figure): choose another --out, or remove it");
    return sys::make_own_dir(o.out_dir + "/points");
  }
  if (auto st = sys::make_private_dir(o.out_dir); !st) return st;
  if (auto st = sys::make_own_dir(o.out_dir + "/points"); !st) return st;
  std::string why;
  if (!sys::write_file(plan_path, plan.dump(2) + "\n", why)) return error(Errc::kEnvironment, why);
  return Ok{};
}

// The finished run (exit 0 or 1) a directory holds, if any.
std::optional<json> finished(const std::string& dir) {
  auto res = read_json(dir + "/results.json");
  if (!res) return std::nullopt;
  const int code = res->value("exit_code", -1);
  if (code != kExitPass && code != kExitAssertion) return std::nullopt;
  return res;
}

void figures_of(const json& res, const std::vector<model::ParsedExpr>& exprs, SweepRow& row) {
  model::MetricSet m;
  try {
    m = metrics_from_json(res.value("metrics", json::object()));
  } catch (const json::exception&) {
  }
  for (const auto& e : exprs) {
    std::string why;
    row.figures.push_back(model::evaluate_value(*e.root, m, why));
  }
}

// Runs one point (again at 2 x D when invalid) into a directory of its own.
void run_point(const SweepOptions& o, model::Scenario s, const std::string& dir, SweepRow& row) {
  RunOptions ro;
  ro.scenario_path = o.scenario_path;
  ro.cancel = o.cancel;
  ro.out_dir = dir;
  const RunReport rep = run_scenario_retrying(
      s, ro, [&](const RunReport&) { return row.retried = true, dir + "-2xD"; },
      [&](const std::string& why) {
        if (o.say) o.say("  " + why);
      });
  row.run_dir = rep.run_dir;
  row.exit_code = rep.exit_code;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string sweep_csv(const SweepOptions& o, const std::vector<SweepRow>& rows) {
  std::string c = "point";
  for (const auto& a : o.grid.axes) c += "," + csv_field(a.key);
  c += ",seed,run,exit_code,retried,run_dir";
  for (const auto& f : o.figures) c += "," + csv_field(f);
  c += "\n";
  for (const auto& r : rows) {
    c += std::to_string(r.point.index);
    for (size_t i = 0; i < o.grid.axes.size(); ++i) c += "," + csv_field(o.grid.axes[i].values[r.point.values[i]]);
    c += "," + (r.point.seed ? std::to_string(*r.point.seed) : std::string()) + "," +
         std::to_string(r.point.repeat + 1) + "," + (r.exit_code < 0 ? std::string() : std::to_string(r.exit_code)) + "," + (r.retried ? "1" : "0") + "," +
         csv_field(r.run_dir);
    for (const auto& f : r.figures) c += "," + (f ? num(*f) : std::string());
    for (size_t i = r.figures.size(); i < o.figures.size(); ++i) c += ",";
    c += "\n";
  }
  return c;
}

// Each figure against each axis; with several axes, a line per combination of the others.
json sweep_charts(const SweepOptions& o, const std::vector<SweepRow>& rows) {
  json charts = json::array();
  const auto& axes = o.grid.axes;
  for (size_t f = 0; f < o.figures.size(); ++f)
    for (size_t a = 0; a < axes.size(); ++a) {
      std::map<std::string, std::vector<std::vector<double>>> lines;  // other axes' values -> per x, the seeds
      for (const auto& r : rows) {
        if (f >= r.figures.size() || !r.figures[f]) continue;
        std::string key;
        for (size_t b = 0; b < axes.size(); ++b)
          if (b != a) key += (key.empty() ? "" : " ") + axes[b].key + "=" + axes[b].values[r.point.values[b]];
        auto& per_x = lines[key.empty() ? o.figures[f] : key];
        per_x.resize(axes[a].values.size());
        per_x[r.point.values[a]].push_back(*r.figures[f]);
      }
      json ls = json::array();
      for (const auto& [label, per_x] : lines) {
        json mean = json::array(), lo = json::array(), hi = json::array();
        for (const auto& v : per_x) {
          if (v.empty()) {
            mean.push_back(nullptr), lo.push_back(nullptr), hi.push_back(nullptr);
            continue;
          }
          double sum = 0;
          for (double x : v) sum += x;
          mean.push_back(sum / double(v.size()));
          lo.push_back(*std::min_element(v.begin(), v.end()));
          hi.push_back(*std::max_element(v.begin(), v.end()));
        }
        ls.push_back({{"label", label}, {"mean", mean}, {"min", lo}, {"max", hi}});
      }
      charts.push_back({{"id", fmt::format("c{}", charts.size())}, {"figure", o.figures[f]}, {"axis", axes[a].key},
                        {"labels", axes[a].values}, {"lines", ls}});
    }
  return charts;
}

std::string percent(const std::optional<double>& v) { return v ? fmt::format("{:.1f} %", 100 * *v) : "-"; }

// Each figure's spread: run to run at one seed beside seed to seed (model::figure_spread).
std::string spread_table(const SweepOptions& o, const std::vector<model::FigureSpread>& spreads) {
  if (o.grid.repeat < 2 && o.grid.seeds.size() < 2) return "";
  std::string h = "<h2>Spread</h2><p class=\"note\">(max - min) / mean of a group, the widest group's: run to run over "
                  "the runs of one knob value at one seed (real timing), seed to seed over the seeds' means. A "
                  "difference between two knob values smaller than these is not shown by this sweep.</p><table>"
                  "<tr><th>figure</th><th>run to run</th><th>seed to seed</th></tr>";
  for (size_t i = 0; i < o.figures.size() && i < spreads.size(); ++i)
    h += "<tr><td><code>" + xml_escape(o.figures[i]) + "</code></td><td>" + percent(spreads[i].run_to_run) +
         "</td><td>" + percent(spreads[i].seed_to_seed) + "</td></tr>";
  return h + "</table>";
}

std::string sweep_body(const SweepOptions& o, const std::string& name, const std::vector<SweepRow>& rows,
                       const json& charts, const std::vector<model::FigureSpread>& spreads) {
  std::string h = "<h1>sweep: " + xml_escape(name) + "</h1><p class=\"note\">" + xml_escape(o.scenario_path);
  for (const auto& f : o.grid.fixed) h += ", --set " + xml_escape(f);
  std::string seeds;
  for (auto s : o.grid.seeds) seeds += (seeds.empty() ? "" : ", ") + std::to_string(s);
  h += seeds.empty() ? ", the file's seed" : ", seeds " + seeds;
  if (o.grid.repeat > 1) h += fmt::format(", {} runs at each", o.grid.repeat);
  h += fmt::format("; {} runs. Each chart: the figure against one knob, the line the mean of its runs, the band "
                   "their min-max. Figures are physical.</p><div id=\"errors\"></div>",
                   rows.size());
  h += spread_table(o, spreads);
  for (const auto& c : charts)
    h += "<h2>" + xml_escape(c["figure"].get<std::string>()) + " against " + xml_escape(c["axis"].get<std::string>()) +
         "</h2><div class=\"chart\"><canvas id=\"" + c["id"].get<std::string>() + "\"></canvas></div>";
  h += "<h2>Every run</h2><table><tr><th>#</th>";
  for (const auto& a : o.grid.axes) h += "<th>" + xml_escape(a.key) + "</th>";
  h += "<th>seed</th><th>run</th><th>exit</th>";
  for (const auto& f : o.figures) h += "<th><code>" + xml_escape(f) + "</code></th>";
  h += "<th>run directory</th></tr>";
  for (const auto& r : rows) {
    h += "<tr><td>" + std::to_string(r.point.index) + "</td>";
    for (size_t i = 0; i < o.grid.axes.size(); ++i) h += "<td>" + xml_escape(o.grid.axes[i].values[r.point.values[i]]) + "</td>";
    h += "<td>" + (r.point.seed ? std::to_string(*r.point.seed) : std::string("-")) + "</td><td>" +
         std::to_string(r.point.repeat + 1) + "</td><td>" + (r.exit_code < 0 ? std::string("not run") : std::to_string(r.exit_code) + (r.retried ? " (2xD)" : "")) + "</td>";
    for (size_t i = 0; i < o.figures.size(); ++i)
      h += "<td>" + (i < r.figures.size() && r.figures[i] ? num(*r.figures[i]) : std::string("-")) + "</td>";
    h += "<td>" + xml_escape(r.run_dir) + "</td></tr>";
  }
  return h + "</table>";
}

Status write_outputs(const SweepOptions& o, const std::string& name, const std::vector<SweepRow>& rows,
                     const std::string& chartjs, SweepResult& out) {
  std::string why;
  out.csv = o.out_dir + "/sweep.csv";
  if (!sys::write_file(out.csv, sweep_csv(o, rows), why)) return error(Errc::kEnvironment, why);
  const json charts = sweep_charts(o, rows);
  out.spreads.clear();
  for (size_t f = 0; f < o.figures.size(); ++f) {
    std::vector<model::SweepPoint> points;
    std::vector<std::optional<double>> values;
    for (const auto& r : rows) {
      points.push_back(r.point);
      values.push_back(f < r.figures.size() ? r.figures[f] : std::nullopt);
    }
    out.spreads.push_back(model::figure_spread(points, values));
  }
  out.html = o.out_dir + "/report.html";
  const std::string page = html_page("rocelab sweep: " + name, sweep_body(o, name, rows, charts, out.spreads),
                                     json{{"charts", charts}}.dump(), kSweepScript, chartjs);
  if (!sys::write_file(out.html, page, why)) return error(Errc::kEnvironment, why);
  return Ok{};
}

// Every point's scenario, loaded and validated before anything runs.
Result<std::vector<model::Scenario>> load_points(const SweepOptions& o, const std::string& text,
                                                 const std::vector<model::SweepPoint>& points) {
  std::vector<model::Scenario> out;
  for (const auto& p : points) {
    auto res = load_scenario_bytes(text, o.scenario_path, p.sets(o.grid));
    if (!res.ok()) {
      auto d = res.diags.sorted();
      return error(Errc::kBadInput, "point " + p.label(o.grid) + ": " + (d.empty() ? "does not load" : d.front().format()));
    }
    if (p.seed) res.scenario->seed = *p.seed;
    if (o.scale)
      if (auto err = model::rescale(*res.scenario, *o.scale)) return error(Errc::kBadInput, "--scale: " + *err);
    out.push_back(std::move(*res.scenario));
  }
  return out;
}

}  // namespace

const std::vector<std::string>& default_sweep_figures() {
  static const std::vector<std::string> k = {"max(queue_max)",          "pause_time", "sum(pfc_xoff_tx)",
                                             "min(bottleneck_utilization)", "cnp_received", "max(jct)"};
  return k;
}

Result<SweepResult> run_sweep(const SweepOptions& o) {
  std::vector<model::ParsedExpr> exprs;
  for (const auto& f : o.figures) {
    exprs.push_back(model::parse_value(f));
    if (exprs.back().error) return error(Errc::kBadInput, "--figure " + f + ": " + exprs.back().error->message);
  }
  const auto points = model::sweep_points(o.grid);
  if (points.size() > model::kMaxSweepPoints)
    return error(Errc::kBadInput, fmt::format("{} runs: a sweep runs at most {}", points.size(), model::kMaxSweepPoints));
  // Read once: every point, its run directory's copy and the plan come from these bytes.
  std::string why;
  const auto text = model::read_scenario_bytes(o.scenario_path, why);
  if (!text) return error(Errc::kBadInput, o.scenario_path + ": cannot read the file: " + why);
  auto scenarios = load_points(o, *text, points);
  if (!scenarios) return scenarios.error();
  auto chartjs = sys::read_file(o.chartjs, 16u << 20, why);
  if (!chartjs) return error(Errc::kEnvironment, o.chartjs + " is missing: install Debian's libjs-chart.js (scripts/setup.sh does)");
  bool resumed = false;
  if (auto st = prepare_dir(o, plan_of(o, *text), resumed); !st) return st.error();
  if (resumed && o.say) o.say("resuming the sweep in " + o.out_dir);

  SweepResult out;
  const std::string name = scenarios->front().name;
  for (size_t i = 0; i < points.size(); ++i) {
    SweepRow row;
    row.point = points[i];
    const std::string base = fmt::format("{}/points/{:04d}", o.out_dir, i);
    if (!out.stopped && o.cancel && o.cancel->load()) out.stopped = true;
    // BASE.done names the run directory a point finished in (BASE, BASE-2xD after a retry, or
    // BASE-N after a stopped try): only one inside this sweep's points/ counts.
    std::string done_dir, why2;
    if (auto t = sys::read_file(base + ".done", 4096, why2)) done_dir = t->substr(0, t->find('\n'));
    const bool ours = done_dir.rfind(base, 0) == 0 && done_dir.find("..") == std::string::npos;
    if (auto res = ours ? finished(done_dir) : std::nullopt; res && !out.stopped) {
      row.run_dir = done_dir;
      row.exit_code = res->value("exit_code", -1);
      row.reused = true;
      ++out.reused;
      figures_of(*res, exprs, row);
    } else if (!out.stopped) {
      std::error_code ec;
      std::string dir = base;  // a run stopped midway left its directory: the next try gets another
      for (int n = 2; fs::exists(dir, ec); ++n) dir = base + "-" + std::to_string(n);
      if (o.say) o.say(fmt::format("run {} of {}: {}", i + 1, points.size(), points[i].label(o.grid)));
      run_point(o, (*scenarios)[i], dir, row);
      ++out.ran;
      out.retried += row.retried;
      if (auto res = row.run_dir.empty() ? std::nullopt : finished(row.run_dir)) {
        figures_of(*res, exprs, row);
        if (!sys::write_file(base + ".done", row.run_dir + "\n", why2)) return error(Errc::kEnvironment, why2);
      }
      if (o.say) o.say(fmt::format("  exit {} ({})", row.exit_code, row.run_dir));
    }
    out.rows.push_back(std::move(row));
    if (auto st = write_outputs(o, name, out.rows, *chartjs, out); !st) return st.error();
  }
  return out;
}

}  // namespace rocelab::run
