#include "model/sweep.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

namespace rocelab::model {

namespace {

// Splits at commas that are not inside [], {} or quotes.
std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  char quote = 0;
  for (char c : s) {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
      continue;
    }
    cur += c;
  }
  out.push_back(cur);
  for (auto& v : out) {
    const size_t a = v.find_first_not_of(" \t"), b = v.find_last_not_of(" \t");
    v = a == std::string::npos ? "" : v.substr(a, b - a + 1);
  }
  return out;
}

std::optional<uint64_t> seed_of(const std::string& t) {
  if (t.empty() || t.size() > 18 || t.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoull(t);
}

}  // namespace

std::vector<std::string> SweepPoint::sets(const SweepGrid& g) const {
  std::vector<std::string> out = g.fixed;
  for (size_t i = 0; i < g.axes.size(); ++i) out.push_back(g.axes[i].key + "=" + g.axes[i].values[values[i]]);
  return out;
}

std::string SweepPoint::label(const SweepGrid& g) const {
  std::string out;
  for (size_t i = 0; i < g.axes.size(); ++i) {
    const std::string& key = g.axes[i].key;
    out += (out.empty() ? "" : " ") + key.substr(key.rfind('.') + 1) + "=" + g.axes[i].values[values[i]];
  }
  if (seed) out += (out.empty() ? "" : " ") + std::string("seed ") + std::to_string(*seed);
  if (g.repeat > 1)
    out += (out.empty() ? "" : " ") + std::string("(run ") + std::to_string(repeat + 1) + " of " +
           std::to_string(g.repeat) + ")";
  return out;
}

std::optional<SweepAxis> parse_axis(const std::string& entry, std::string& why) {
  const size_t eq = entry.find('=');
  if (eq == std::string::npos || eq == 0) {
    why = "--set " + entry + ": expected KEY=VALUE or KEY=V1,V2,... (qos.ecn.kmin=8KB,16KB,32KB)";
    return std::nullopt;
  }
  SweepAxis a;
  a.key = entry.substr(0, eq);
  a.values = split_top(entry.substr(eq + 1));
  for (const auto& v : a.values)
    if (v.empty()) {
      why = "--set " + entry + ": an empty value (two commas, or one at an end)";
      return std::nullopt;
    }
  return a;
}

std::optional<SweepGrid> parse_grid(const std::vector<std::string>& sets, std::string& why) {
  SweepGrid g;
  std::vector<std::string> keys;
  for (const auto& s : sets) {
    auto a = parse_axis(s, why);
    if (!a) return std::nullopt;
    if (std::find(keys.begin(), keys.end(), a->key) != keys.end()) {
      why = "--set " + a->key + " is given twice: list its values in one entry (" + a->key + "=V1,V2,...)";
      return std::nullopt;
    }
    keys.push_back(a->key);
    if (a->values.size() == 1) g.fixed.push_back(a->key + "=" + a->values[0]);
    else g.axes.push_back(std::move(*a));
  }
  return g;
}

std::optional<std::vector<uint64_t>> parse_seeds(const std::string& text, std::string& why) {
  std::vector<uint64_t> out;
  for (const auto& part : split_top(text)) {
    const size_t dash = part.find('-');
    auto lo = seed_of(dash == std::string::npos ? part : part.substr(0, dash));
    auto hi = dash == std::string::npos ? lo : seed_of(part.substr(dash + 1));
    if (!lo || !hi || *lo > *hi || *hi > (uint64_t{1} << 62)) {
      why = "--seeds " + text + ": '" + part + "' is not a seed or a range of seeds (1-3, 1,2,5)";
      return std::nullopt;
    }
    if (*hi - *lo >= kMaxSeeds || out.size() + (*hi - *lo + 1) > kMaxSeeds) {
      why = "--seeds " + text + ": more than " + std::to_string(kMaxSeeds) + " seeds";
      return std::nullopt;
    }
    for (uint64_t s = *lo; s <= *hi; ++s)
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  return out;
}

std::vector<SweepPoint> sweep_points(const SweepGrid& g) {
  std::vector<SweepPoint> out;
  size_t combos = 1;
  for (const auto& a : g.axes) combos *= a.values.size();
  const size_t seeds = std::max<size_t>(1, g.seeds.size());
  for (size_t c = 0; c < combos; ++c) {
    std::vector<size_t> vals(g.axes.size());
    size_t rest = c;
    for (size_t i = g.axes.size(); i-- > 0;) {
      vals[i] = rest % g.axes[i].values.size();
      rest /= g.axes[i].values.size();
    }
    for (size_t s = 0; s < seeds; ++s)
      for (size_t r = 0; r < std::max<size_t>(1, g.repeat); ++r) {
        SweepPoint p;
        p.index = out.size();
        p.values = vals;
        if (!g.seeds.empty()) p.seed = g.seeds[s];
        p.repeat = r;
        out.push_back(std::move(p));
      }
  }
  return out;
}

namespace {

// (max - min) / |mean| of the values, nullopt for fewer than two or a zero mean that moved.
std::optional<double> relative_spread(const std::vector<double>& v) {
  if (v.size() < 2) return std::nullopt;
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  if (*lo == *hi) return 0.0;
  double sum = 0;
  for (double x : v) sum += x;
  const double mean = sum / double(v.size());
  if (mean == 0) return std::nullopt;
  return (*hi - *lo) / std::fabs(mean);
}

void widen(std::optional<double>& widest, std::optional<double> s) {
  if (s && (!widest || *s > *widest)) widest = s;
}

}  // namespace

FigureSpread figure_spread(const std::vector<SweepPoint>& points, const std::vector<std::optional<double>>& values) {
  // knob values -> seed -> the runs' values
  std::map<std::vector<size_t>, std::map<std::optional<uint64_t>, std::vector<double>>> groups;
  for (size_t i = 0; i < points.size() && i < values.size(); ++i)
    if (values[i] && std::isfinite(*values[i])) groups[points[i].values][points[i].seed].push_back(*values[i]);
  FigureSpread out;
  for (const auto& [knobs, by_seed] : groups) {
    std::vector<double> means;
    for (const auto& [seed, runs] : by_seed) {
      widen(out.run_to_run, relative_spread(runs));
      double sum = 0;
      for (double x : runs) sum += x;
      means.push_back(sum / double(runs.size()));
    }
    widen(out.seed_to_seed, relative_spread(means));
  }
  return out;
}

}  // namespace rocelab::model
