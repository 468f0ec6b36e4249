#include "run/report.h"
#include "run/report_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "model/port_target.h"
#include "run/results.h"
#include "sys/files.h"
#include "sys/process.h"

namespace rocelab::run {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxPoints = 1500;    // per plotted series: the browser stays quick
constexpr size_t kMaxQueues = 12;      // queue-depth lines, the deepest first
constexpr size_t kMaxPauseLanes = 24;  // pause lanes, the longest paused first
constexpr size_t kMaxFlows = 16;

std::optional<std::string> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A CSV file of ours: a header line, fields that may be double-quoted ("" inside quotes).
struct Table {
  std::map<std::string, size_t> col;
  std::vector<std::vector<std::string>> rows;
  const std::string& at(const std::vector<std::string>& r, const char* name) const {
    static const std::string none;
    auto it = col.find(name);
    return it == col.end() || it->second >= r.size() ? none : r[it->second];
  }
  double num(const std::vector<std::string>& r, const char* name) const {
    const std::string& v = at(r, name);
    return v.empty() ? 0 : std::strtod(v.c_str(), nullptr);
  }
};

std::vector<std::string> split_csv(std::string_view line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') out.back() += '"', ++i;
      else if (ch == '"') quoted = false;
      else out.back() += ch;
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      out.emplace_back();
    } else if (ch != '\r') {
      out.back() += ch;
    }
  }
  return out;
}

std::optional<Table> read_csv(const fs::path& p) {
  auto text = slurp(p);
  if (!text) return std::nullopt;
  Table t;
  std::istringstream in(*text);
  std::string line;
  if (!std::getline(in, line)) return t;
  const auto head = split_csv(line);
  for (size_t i = 0; i < head.size(); ++i) t.col[head[i]] = i;
  while (std::getline(in, line))
    if (!line.empty()) t.rows.push_back(split_csv(line));
  return t;
}

using Points = std::vector<std::pair<double, double>>;

// At most kMaxPoints, each bucket's largest value kept (a peak is never smoothed away).
Points thin(const Points& p) {
  if (p.size() <= kMaxPoints) return p;
  const double t0 = p.front().first, t1 = p.back().first, w = (t1 - t0) / double(kMaxPoints);
  Points out;
  for (const auto& pt : p) {
    const double b = std::floor((pt.first - t0) / w);
    if (!out.empty() && std::floor((out.back().first - t0) / w) == b) {
      if (pt.second > out.back().second) out.back() = pt;
    } else {
      out.push_back(pt);
    }
  }
  return out;
}

json points_json(const Points& p) {
  json a = json::array();
  for (const auto& [x, y] : thin(p)) a.push_back({std::round(x * 1e6) / 1e6, y});
  return a;
}

// A series only holds rows where something happened: where it skips more than one sample
// interval, it was 0 in between.
Points with_zeros(const Points& p, double interval) {
  Points out;
  for (const auto& pt : p) {
    if (!out.empty() && pt.first - out.back().first > 1.5 * interval) {
      const double before = out.back().first;
      if (out.back().second != 0) out.push_back({before + interval, 0});
      if (pt.first - interval > out.back().first) out.push_back({pt.first - interval, 0});  // x stays in order
    }
    out.push_back(pt);
  }
  return out;
}

double sample_interval_ms(const Table& t) {
  std::vector<double> ts;
  for (const auto& r : t.rows) ts.push_back(t.num(r, "t_s") * 1e3);
  std::sort(ts.begin(), ts.end());
  ts.erase(std::unique(ts.begin(), ts.end()), ts.end());
  std::vector<double> d;
  for (size_t i = 1; i < ts.size(); ++i) d.push_back(ts[i] - ts[i - 1]);
  if (d.empty()) return 0;
  std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
  return d[d.size() / 2];
}


// The fabric as SVG: hosts at the bottom, each switch one tier above the nearest host.
std::string fabric_svg(const json& resolved) {
  if (!resolved.contains("nodes") || !resolved["nodes"].is_array()) return "";
  std::vector<std::string> names;
  std::map<std::string, size_t> idx;
  std::vector<bool> host;
  for (const auto& n : resolved["nodes"]) {
    idx[n.value("name", "")] = names.size();
    names.push_back(n.value("name", ""));
    host.push_back(n.value("kind", "") == "host");
  }
  std::vector<std::pair<size_t, size_t>> links;
  std::vector<std::vector<size_t>> adj(names.size());
  for (const auto& l : resolved.value("links", json::array())) {
    const auto& e = l.value("endpoints", json::array());
    if (e.size() != 2) continue;
    auto node_of = [&](const json& v) {
      const std::string s = v.get<std::string>();
      return idx.find(model::PortTarget::parse(s).node);
    };
    auto a = node_of(e[0]), b = node_of(e[1]);
    if (a == idx.end() || b == idx.end()) continue;
    links.push_back({a->second, b->second});
    adj[a->second].push_back(b->second);
    adj[b->second].push_back(a->second);
  }
  std::vector<int> tier(names.size(), -1);
  std::vector<size_t> q;
  for (size_t i = 0; i < names.size(); ++i)
    if (host[i]) tier[i] = 0, q.push_back(i);
  for (size_t h = 0; h < q.size(); ++h)
    for (size_t n : adj[q[h]])
      if (tier[n] < 0) tier[n] = tier[q[h]] + 1, q.push_back(n);
  int top = 0;
  for (auto& t : tier) top = std::max(top, t = std::max(t, 0));
  std::map<int, std::vector<size_t>> rows;
  for (size_t i = 0; i < names.size(); ++i) rows[tier[i]].push_back(i);
  size_t widest = 1;
  for (const auto& [t, r] : rows) widest = std::max(widest, r.size());
  const double w = std::max(640.0, 70.0 * double(widest)), rowh = 90, h = rowh * (top + 1) + 20;
  std::vector<std::pair<double, double>> at(names.size());
  for (const auto& [t, r] : rows)
    for (size_t k = 0; k < r.size(); ++k)
      at[r[k]] = {w * (double(k) + 0.5) / double(r.size()), h - 30 - rowh * t};
  std::string s = fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" class="fabric">)", w, h);
  for (auto [a, b] : links)
    s += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#99a" stroke-width="1"/>)",
                     at[a].first, at[a].second, at[b].first, at[b].second);
  const bool small = widest > 24;
  for (size_t i = 0; i < names.size(); ++i) {
    const auto [x, y] = at[i];
    s += host[i] ? fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="7" fill="#4a7"/>)", x, y)
                 : fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="28" height="16" rx="3" fill="#357"/>)", x - 14, y - 8);
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="{}" text-anchor="middle">{}</text>)", x, y + 22,
                     small ? 7 : 10, xml_escape(names[i]));
  }
  return s + "</svg>";
}

struct Series {
  std::string label;
  Points pts;
  double score = 0;
};

json series_json(std::vector<Series> v, size_t keep, size_t& dropped) {
  std::stable_sort(v.begin(), v.end(), [](const Series& a, const Series& b) { return a.score > b.score; });
  dropped = v.size() > keep ? v.size() - keep : 0;
  json out = json::array();
  for (size_t i = 0; i < v.size() && i < keep; ++i) out.push_back({{"label", v[i].label}, {"points", points_json(v[i].pts)}});
  return out;
}

// gnuplot's SVG of one chart's series (for CI artifacts, where nobody opens a browser).
bool gnuplot_svg(const ReportOptions& o, const fs::path& out, const std::string& title, const std::string& ylabel,
                 const json& series, std::string& why) {
  if (series.empty()) return why = "no data", false;
  if (out.string().find_first_of("'\n") != std::string::npos)
    return why = "its path holds a quote or a newline, which gnuplot's script cannot take", false;
  std::string script = fmt::format(
      "set terminal svg size 960,420 dynamic background rgb 'white'\nset output '{}'\nset title \"{}\"\n"
      "set xlabel 'time (ms, physical)'\nset ylabel \"{}\"\nset key outside right\nset grid\nplot ",
      out.string(), title, ylabel);
  std::string data;
  for (size_t i = 0; i < series.size(); ++i) {
    // A label comes from the results (a file anyone may have written): only characters that
    // cannot end gnuplot's string (a quote, a backslash, a newline would let it run commands).
    std::string label = series[i]["label"].get<std::string>();
    for (char& ch : label)
      if (ch == '"' || ch == '\\' || ch == '\'' || ch == '`' || static_cast<unsigned char>(ch) < 0x20) ch = '_';
    script += fmt::format("{}'-' using 1:2 with lines title \"{}\"", i ? ", " : "", label);
    for (const auto& p : series[i]["points"]) data += fmt::format("{} {}\n", p[0].get<double>(), p[1].get<double>());
    data += "e\n";
  }
  return sys::run_with_input(o.gnuplot, {}, script + "\n" + data, 30'000, why);
}

const char* kStyle = R"(
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1300px}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
.pass{color:#070}.fail,.error{color:#b00;font-weight:bold}.chart{position:relative;height:340px}
.fabric{width:100%;max-height:420px}.note{color:#555;font-size:.9em}#errors{color:#b00;white-space:pre}
)";

// The page's own script: every chart from the embedded data, fault and watchdog markers on
// every time axis, and the count of charts drawn in <body data-charts> (for tests).
const char* kScript = R"JS(
(function(){
const D = JSON.parse(document.getElementById('data').textContent);
const colors = ['#1f77b4','#d62728','#2ca02c','#ff7f0e','#9467bd','#8c564b','#e377c2','#7f7f7f','#bcbd22','#17becf'];
const markers = { id: 'markers', afterDatasetsDraw(chart) {
  const x = chart.scales.x, a = chart.chartArea, ctx = chart.ctx;
  if (!x || x.type !== 'linear' || !chart.options.timeAxis) return;
  ctx.save(); ctx.font = '10px sans-serif';
  for (const ev of D.events) {
    const px = x.getPixelForValue(ev.t_ms);
    if (px < a.left || px > a.right) continue;
    ctx.strokeStyle = ev.kind === 'fault' ? '#c60' : '#a0a'; ctx.setLineDash([4, 3]);
    ctx.beginPath(); ctx.moveTo(px, a.top); ctx.lineTo(px, a.bottom); ctx.stroke();
    ctx.fillStyle = ctx.strokeStyle; ctx.fillText(ev.label, px + 3, a.top + 10);
  }
  ctx.restore();
}};
let drawn = 0;
function chart(id, cfg) {
  const el = document.getElementById(id);
  if (!el) return;
  new Chart(el, cfg); drawn++;
}
function timeChart(id, series, ylabel, extra) {
  if (!series.length) return;
  const ds = series.map((s, i) => Object.assign({ label: s.label, data: s.points.map(p => ({x: p[0], y: p[1]})),
    borderColor: colors[i % colors.length], backgroundColor: colors[i % colors.length], borderWidth: 1.3,
    pointRadius: 0, stepped: !!(extra && extra.stepped) }, (extra && extra.ds) ? extra.ds(s, i) : {}));
  chart(id, { type: 'line', data: { datasets: ds }, plugins: [markers], options: Object.assign({
    animation: false, parsing: false, normalized: true, maintainAspectRatio: false, timeAxis: true,
    interaction: { mode: 'nearest', intersect: false },
    scales: { x: { type: 'linear', title: { display: true, text: 'time (ms, physical)' } },
              y: Object.assign({ title: { display: true, text: ylabel } }, (extra && extra.y) || {}) },
    plugins: { legend: { position: 'right', labels: { boxWidth: 10, font: { size: 10 } } } } }, (extra && extra.options) || {}) });
}
timeChart('queues', D.queues, 'queue depth (KB, most per interval)');
timeChart('buffers', D.buffers, 'shared buffer in use (KB)');
const lanes = D.pauses.map(s => s.label);
timeChart('pauses', D.pauses.map((s, i) => ({ label: s.label, points: s.points.map(p => [p[0], i + 0.8 * p[1]]) })),
  'paused (share of each interval)', { y: { min: -0.2, max: Math.max(1, lanes.length), ticks: { stepSize: 1,
  callback: v => lanes[v] !== undefined ? lanes[v] : '' } }, options: { plugins: { legend: { display: false } } } });
const flowSeries = [];
D.flows.forEach((f, i) => {
  flowSeries.push({ label: f.label + ' DCQCN rate', points: f.rate });
  flowSeries.push({ label: f.label + ' delivered', points: f.delivered });
});
timeChart('flows', flowSeries, 'Gbit/s (physical)', { ds: (s, i) => ({ borderColor: colors[Math.floor(i / 2) % colors.length],
  borderDash: i % 2 ? [4, 3] : [] }) });
if (D.slowdown.length) chart('slowdown', { type: 'line', data: { datasets: [{ label: 'FCT slowdown CDF',
  data: D.slowdown.map(p => ({x: p[0], y: p[1]})), stepped: true, borderColor: colors[0], pointRadius: 0 }] },
  options: { animation: false, parsing: false, maintainAspectRatio: false, scales: { x: { type: 'logarithmic',
  title: { display: true, text: 'FCT / ideal FCT' } }, y: { min: 0, max: 1, title: { display: true, text: 'share of flows' } } } } });
if (D.collectives.length) chart('busbw', { type: 'bar', data: { labels: D.collectives.map(c => c.name), datasets: [
  { label: 'busbw (GB/s)', data: D.collectives.map(c => c.busbw), backgroundColor: colors[0] },
  { label: 'bound (GB/s)', data: D.collectives.map(c => c.bound), backgroundColor: '#bbb' }] },
  options: { animation: false, maintainAspectRatio: false } });
document.body.dataset.charts = String(drawn);
})();
)JS";

std::string section(const std::string& id, const std::string& title, bool has, const std::string& what, size_t dropped = 0) {
  std::string s = "<h2>" + xml_escape(title) + "</h2>";
  if (!has) return s + "<p class=\"note\">" + xml_escape(what) + "</p>";
  if (dropped) s += fmt::format("<p class=\"note\">{} more not shown (the largest are).</p>", dropped);
  return s + "<div class=\"chart\"><canvas id=\"" + id + "\"></canvas></div>";
}

}  // namespace

// Everything the page plots, from the run directory's files.
json report_data(const fs::path& dir, const json& res, const std::set<std::string>& switches, std::map<std::string, size_t>& dropped) {
  json data;
  data["events"] = json::array();
  if (auto ev = read_csv(dir / "series-events.csv"))
    for (const auto& r : ev->rows) {
      const std::string e = ev->at(r, "event");
      data["events"].push_back({{"t_ms", ev->num(r, "t_s") * 1e3},
                                {"kind", e.rfind("fault", 0) == 0 ? "fault" : "pfc"},
                                {"label", e + " " + ev->at(r, "target")}});
    }

  size_t dq = 0, dp = 0, df = 0;
  data["queues"] = data["pauses"] = data["buffers"] = data["flows"] = json::array();
  auto ports = read_csv(dir / "series-ports.csv");
  if (ports) {
    const double iv = sample_interval_ms(*ports);
    std::map<std::string, Series> q, p;
    for (const auto& r : ports->rows) {
      const std::string key = ports->at(r, "node") + ":" + ports->at(r, "port") + " p" + ports->at(r, "prio");
      const double t = ports->num(r, "t_s") * 1e3;
      if (switches.count(ports->at(r, "node"))) {
        Series& s = q[key];
        s.label = key;
        const double kb = ports->num(r, "peak_bytes") / 1e3;
        s.pts.push_back({t, kb});
        s.score = std::max(s.score, kb);
      }
      const double paused_ms = ports->num(r, "paused_s") * 1e3;
      Series& s = p[key];
      s.label = key;
      s.pts.push_back({t, iv > 0 ? std::min(1.0, paused_ms / iv) : 0});
      s.score += paused_ms;
    }
    std::vector<Series> qs, ps;
    for (auto& [k, s] : q)  // a queue that never held 1 KB held control frames at most
      if (s.score >= 1.0) s.pts = with_zeros(s.pts, iv), qs.push_back(std::move(s));
    for (auto& [k, s] : p)
      if (s.score > 0) s.pts = with_zeros(s.pts, iv), ps.push_back(std::move(s));
    data["queues"] = series_json(std::move(qs), kMaxQueues, dq);
    data["pauses"] = series_json(std::move(ps), kMaxPauseLanes, dp);
  }
  if (auto sw = read_csv(dir / "series-switches.csv")) {
    std::map<std::string, Series> b;
    for (const auto& r : sw->rows) {
      Series& s = b[sw->at(r, "node")];
      s.label = sw->at(r, "node");
      s.pts.push_back({sw->num(r, "t_s") * 1e3, sw->num(r, "peak_bytes") / 1e3});
      s.score = std::max(s.score, s.pts.back().second);
    }
    std::vector<Series> bs;
    for (auto& [k, s] : b) bs.push_back(std::move(s));
    size_t unused = 0;
    data["buffers"] = series_json(std::move(bs), kMaxQueues, unused);
  }
  if (auto fl = read_csv(dir / "series-flows.csv")) {
    std::map<int, std::pair<Series, Series>> f;
    std::map<int, std::pair<double, double>> last;  // flow -> (t ms, delivered bytes)
    for (const auto& r : fl->rows) {
      const int id = int(fl->num(r, "flow"));
      auto& [rate, got] = f[id];
      rate.label = got.label = fl->at(r, "from") + ">" + fl->at(r, "to");
      const double t = fl->num(r, "t_s") * 1e3, bytes = fl->num(r, "delivered_bytes");
      rate.pts.push_back({t, fl->num(r, "rate_gbps")});
      if (auto it = last.find(id); it != last.end() && t > it->second.first)
        got.pts.push_back({t, (bytes - it->second.second) * 8 / ((t - it->second.first) * 1e-3) / 1e9});
      last[id] = {t, bytes};
    }
    for (const auto& [id, s] : f) {
      if (data["flows"].size() == kMaxFlows) {
        ++df;
        continue;
      }
      data["flows"].push_back({{"label", s.first.label}, {"rate", points_json(s.first.pts)}, {"delivered", points_json(s.second.pts)}});
    }
  }

  data["slowdown"] = json::array();
  data["collectives"] = json::array();
  if (res.contains("workloads") && res["workloads"].is_object()) {
    std::vector<double> sl;
    for (const auto& f : res["workloads"].value("flows", json::array()))
      if (f.value("fct_slowdown", 0.0) > 0) sl.push_back(f.value("fct_slowdown", 0.0));
    std::sort(sl.begin(), sl.end());
    for (size_t i = 0; i < sl.size(); ++i) data["slowdown"].push_back({sl[i], double(i + 1) / double(sl.size())});
    for (const auto& w : res["workloads"].value("workloads", json::array()))
      if (w.contains("busbw_GBps"))
        data["collectives"].push_back({{"name", w.value("name", "")}, {"busbw", w.value("busbw_GBps", 0.0)},
                                       {"bound", w.value("busbw_bound_GBps", 0.0)}});
  }

  dropped = {{"queues", dq}, {"pauses", dp}, {"flows", df}};
  return data;
}

std::string report_page(const json& res, const json& resolved, const json& data, const std::map<std::string, size_t>& dropped,
                        bool series, const std::string& chartjs) {
  const size_t dq = dropped.at("queues"), dp = dropped.at("pauses"), df = dropped.at("flows");
  const std::string outcome = res.value("outcome", "?");
  const json sc = res.value("scenario", json::object());
  std::string h = fmt::format("<h1>{} &mdash; <span class=\"{}\">{}</span> (exit {})</h1>", xml_escape(sc.value("name", "")),
                   xml_escape(outcome), xml_escape(outcome), res.value("exit_code", -1));
  h += "<p>" + xml_escape(sc.value("description", "")) + "</p>";
  h += fmt::format("<p class=\"note\">seed {}, D = {} (emulated rates = physical / D; every figure here is physical), "
                   "kernel {}, rocelab {}, started {}, {:.1f} s.</p>",
                   res.value("seed", 0), res.value("scale", 0.0), xml_escape(res.value("kernel", json::object()).value("release", "")),
                   xml_escape(res.value("rocelab_version", "")), xml_escape(res.value("started_at", "")), res.value("duration_s", 0.0));
  if (res.contains("error")) h += "<p class=\"fail\">" + xml_escape(res.value("error", "")) + "</p>";
  h += "<div id=\"errors\"></div><h2>Assertions</h2>";
  if (res.value("assertions", json::array()).empty()) h += "<p class=\"note\">The scenario has no expect: assertions.</p>";
  else {
    h += "<table><tr><th>outcome</th><th>assertion</th><th>observed</th></tr>";
    for (const auto& a : res.value("assertions", json::array())) {
      std::string obs;
      const json observed = a.value("observed", json::object());
      for (const auto& [k, v] : observed.items()) obs += (obs.empty() ? "" : "; ") + k + " = " + v.dump();
      const std::string oc = a.value("outcome", "");
      h += fmt::format("<tr><td class=\"{}\">{}</td><td><code>{}</code></td><td>{}</td></tr>", xml_escape(oc), xml_escape(oc),
                       xml_escape(a.value("expr", a.value("name", ""))), xml_escape(obs));
    }
    h += "</table>";
  }
  h += "<h2>Fabric</h2>" + fabric_svg(resolved);
  const std::string no_series = series ? "nothing queued or paused here during the traffic"
                                       : "no time series in this run directory (telemetry.series: off, or no traffic ran)";
  h += section("queues", "Queue depth, switch egress queues", !data["queues"].empty(), no_series, dq);
  h += section("pauses", "PFC pauses in force (each lane a port x priority)", !data["pauses"].empty(), no_series, dp);
  h += section("flows", "Flows: DCQCN rate (solid) and delivered rate (dashed)", !data["flows"].empty(),
               "no flow series (no workload ran)", df);
  h += section("buffers", "Shared buffer in use per switch", !data["buffers"].empty(), no_series);
  h += section("slowdown", "FCT slowdown CDF", !data["slowdown"].empty(), "no completed flows");
  h += section("busbw", "Collectives: busbw against its bound", !data["collectives"].empty(), "no collective workload");
  if (!data["events"].empty()) {
    h += "<h2>Faults and PFC events</h2><table><tr><th>t (ms)</th><th>event</th></tr>";
    for (const auto& e : data["events"])
      h += fmt::format("<tr><td>{:.6f}</td><td>{}</td></tr>", e["t_ms"].get<double>(), xml_escape(e["label"].get<std::string>()));
    h += "</table>";
  }
  if (!res.value("notes", json::array()).empty()) {
    h += "<h2>Notes</h2><ul>";
    for (const auto& n : res.value("notes", json::array())) h += "<li>" + xml_escape(n.get<std::string>()) + "</li>";
    h += "</ul>";
  }
  return html_page("rocelab: " + sc.value("name", ""), h, data.dump(), kScript, chartjs);
}

void write_plots(const ReportOptions& o, const fs::path& dir, const json& data, ReportFiles& out) {
  {
    std::error_code ec;
    if (!fs::exists(o.gnuplot, ec)) {
      out.notes.push_back("no static plots: " + o.gnuplot + " is not installed (Debian's gnuplot-nox)");
    } else {
      // plots/ is made this user's alone (or refused): gnuplot writes into it by name.
      if (auto st = sys::make_own_dir((dir / "plots").string()); !st) {
        out.notes.push_back("no static plots: " + st.error().what);
        return;
      }
      auto plot = [&](const char* name, const char* title, const char* ylabel, const json& s) {
        std::string why;
        const fs::path p = dir / "plots" / name;
        if (gnuplot_svg(o, p, title, ylabel, s, why)) out.plots.push_back(p.string());
        else if (why != "no data") out.notes.push_back(std::string("plots/") + name + ": " + why);
      };
      plot("queues.svg", "Queue depth, switch egress queues", "KB (most per interval)", data["queues"]);
      plot("pauses.svg", "PFC pauses in force", "paused share of each interval", data["pauses"]);
      json rates = json::array();
      for (const auto& f : data["flows"]) rates.push_back({{"label", f["label"].get<std::string>() + " DCQCN"}, {"points", f["rate"]}});
      plot("rates.svg", "Flows: DCQCN rate", "Gbit/s", rates);
    }
  }
}

std::string html_page(const std::string& title, const std::string& body, const std::string& data_json,
                      const std::string& script, const std::string& chartjs) {
  std::string payload = data_json;  // no "</script>" may end the data early
  for (size_t at = 0; (at = payload.find("</", at)) != std::string::npos; at += 3) payload.replace(at, 2, "<\\/");
  // Installed first, so an error anywhere after (Chart.js, the page's script) shows in #errors.
  static const char* kCatch = "(function(){const errs=[];window.addEventListener('error',e=>{errs.push(String(e.message));"
                              "const el=document.getElementById('errors');if(el)el.textContent=errs.join('\\n');});})();";
  return "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + xml_escape(title) +
         "</title><style>" + kStyle + "</style></head><body>" + body + "<script>" + kCatch +
         "</script><script id=\"data\" type=\"application/json\">" + payload + "</script><script>" + chartjs +
         "</script><script>" + script + "</script></body></html>\n";
}

Result<RunDirFiles> read_run_dir(const std::string& run_dir) {
  const fs::path dir(run_dir);
  auto results_text = slurp(dir / "results.json");
  if (!results_text)
    return error(Errc::kBadInput, run_dir + ": no results.json (not a run directory, or its run did not finish)");
  // Whoever wrote it: nested deeper than a run writes is refused before parsing (copies
  // and printing of nested values recurse).
  if (sys::json_depth(*results_text) > sys::kMaxJsonDepth)
    return error(Errc::kBadInput, (dir / "results.json").string() + ": nested deeper than " +
                                      std::to_string(sys::kMaxJsonDepth) + " levels (a run never writes that)");
  RunDirFiles f;
  f.res = json::parse(*results_text, nullptr, false);
  if (!f.res.is_object()) return error(Errc::kBadInput, (dir / "results.json").string() + ": not JSON");
  const std::string resolved_text = slurp(dir / "resolved.json").value_or("null");
  f.resolved = sys::json_depth(resolved_text) > sys::kMaxJsonDepth ? json(nullptr) : json::parse(resolved_text, nullptr, false);
  if (f.resolved.is_discarded()) f.resolved = nullptr;
  f.series = fs::exists(dir / "series-ports.csv");
  try {  // a results.json of another shape (edited, truncated, another version) is bad input, never a crash
    std::set<std::string> switches;
    if (f.resolved.is_object() && f.resolved.contains("nodes") && f.resolved["nodes"].is_array())
      for (const auto& n : f.resolved["nodes"])
        if (n.is_object() && n.value("kind", "") != "host") switches.insert(n.value("name", ""));
    f.data = report_data(dir, f.res, switches, f.dropped);
  } catch (const json::exception& e) {
    return error(Errc::kBadInput, run_dir + ": results.json or resolved.json is not as a run writes it (" + e.what() + ")");
  }
  return f;
}

Result<ReportFiles> write_report(const ReportOptions& o) {
  auto f = read_run_dir(o.run_dir);
  if (!f) return f.error();
  auto chartjs = slurp(o.chartjs);
  if (!chartjs)
    return error(Errc::kEnvironment, o.chartjs + " is missing: install Debian's libjs-chart.js (scripts/setup.sh does)");
  ReportFiles out;
  std::string h;
  try {
    h = report_page(f->res, f->resolved, f->data, f->dropped, f->series, *chartjs);
  } catch (const json::exception& e) {
    return error(Errc::kBadInput, o.run_dir + ": results.json or resolved.json is not as a run writes it (" + e.what() + ")");
  }
  out.html = o.out.empty() ? (fs::path(o.run_dir) / "report.html").string() : o.out;
  if (std::string why; !sys::write_file(out.html, h, why)) return error(Errc::kEnvironment, why);

  if (o.plots) write_plots(o, fs::path(o.run_dir), f->data, out);
  return out;
}

}  // namespace rocelab::run
