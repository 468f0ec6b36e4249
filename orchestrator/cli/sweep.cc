// `rocelab sweep SCENARIO --set K=V1,V2,... [--seeds 1-3]`: one knob (or several) over a
// grid, a run per point, a table and a report (run/sweep.h).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <ctime>
#include <iostream>

#include "cli/commands.h"
#include "model/sweep.h"
#include "run/results.h"
#include "run/sweep.h"

namespace po = boost::program_options;

namespace rocelab::cli {

void add_sweep_options(po::options_description& d) {
  d.add_options()("set", po::value<std::vector<std::string>>()->composing(),
                  "KEY=V1,V2,...: an axis of the grid (a knob and its values; commas inside [] or {} belong to "
                  "the value); KEY=VALUE with one value applies to every run. Repeatable: the grid is every "
                  "combination")(
      "seeds", po::value<std::string>(), "every point at each of these seeds: 1-3, or 1,2,5 (default: the file's seed)")(
      "repeat", po::value<int>(),
      "run every point N times at each seed (2-20): the table and report set each figure's spread run to run "
      "(real timing) beside its spread seed to seed")(
      "figure", po::value<std::vector<std::string>>()->composing(),
      "a figure to tabulate and chart, an expect: expression without the comparison (max(queue_max), "
      "pause_time, min(bottleneck_utilization)); repeatable (default: peak queue, pause time, XOFF frames, "
      "bottleneck utilisation, CNPs, job time)")(
      "out", po::value<std::string>(),
      "the sweep's directory (default sweeps/NAME-TIMESTAMP); the same command with the same --out resumes it")(
      "scale", po::value<double>(), "time scale D for every run instead of the file's")(
      "scenario", po::value<std::string>(), "scenario file (YAML)");
}

int cmd_sweep(const po::variables_map& vm, const Globals& g) {
  if (!vm.count("scenario")) {
    std::cerr << "rocelab sweep: missing SCENARIO (a YAML file; see scenarios/)\n";
    return run::kExitBadInput;
  }
  run::SweepOptions o;
  o.scenario_path = vm["scenario"].as<std::string>();
  std::string why;
  auto grid = model::parse_grid(vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{}, why);
  if (grid && vm.count("seeds")) {
    if (auto seeds = model::parse_seeds(vm["seeds"].as<std::string>(), why)) grid->seeds = *seeds;
    else grid.reset();
  }
  if (grid && vm.count("repeat")) {
    const int n = vm["repeat"].as<int>();
    if (n < 1 || size_t(n) > model::kMaxRepeat) {
      why = fmt::format("--repeat {}: from 1 to {} runs of each point", n, model::kMaxRepeat);
      grid.reset();
    } else {
      grid->repeat = size_t(n);
    }
  }
  if (!grid) {
    std::cerr << "rocelab sweep: " << why << "\n";
    return run::kExitBadInput;
  }
  if (grid->axes.empty() && grid->seeds.size() < 2 && grid->repeat < 2) {
    std::cerr << "rocelab sweep: nothing to sweep: give a knob several values (--set qos.ecn.kmin=8KB,16KB,32KB), "
                 "several --seeds or --repeat N\n";
    return run::kExitBadInput;
  }
  o.grid = std::move(*grid);
  o.figures = vm.count("figure") ? vm["figure"].as<std::vector<std::string>>() : run::default_sweep_figures();
  if (vm.count("scale")) o.scale = vm["scale"].as<double>();
  if (vm.count("out")) {
    o.out_dir = vm["out"].as<std::string>();
  } else {
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    std::string stem = o.scenario_path.substr(o.scenario_path.rfind('/') + 1);
    stem = stem.substr(0, stem.rfind('.'));
    o.out_dir = "sweeps/" + stem + "-" + stamp;
  }
  o.cancel = cancel_flag();
  o.say = [](const std::string& line) { spdlog::info("{}", line); };
  catch_signals();
  auto r = run::run_sweep(o);
  if (!r) {
    std::cerr << "rocelab sweep: " << r.error().what << "\n";
    return r.error().exit_code();
  }
  size_t failed = 0, bad = 0;
  for (const auto& row : r->rows) {
    failed += row.exit_code == run::kExitAssertion;
    bad += row.exit_code != run::kExitPass && row.exit_code != run::kExitAssertion;
  }
  auto share = [](const std::optional<double>& v) { return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr); };
  if (g.json) {
    nlohmann::ordered_json spread = nlohmann::ordered_json::object();
    for (size_t i = 0; i < o.figures.size() && i < r->spreads.size(); ++i)
      spread[o.figures[i]] = {{"run_to_run", share(r->spreads[i].run_to_run)},
                              {"seed_to_seed", share(r->spreads[i].seed_to_seed)}};
    std::cout << nlohmann::ordered_json{{"out", o.out_dir},       {"csv", r->csv},         {"report", r->html},
                                        {"runs", r->rows.size()}, {"ran", r->ran},         {"reused", r->reused},
                                        {"retried", r->retried},  {"assertions_failed", failed},
                                        {"not_graded", bad},      {"stopped", r->stopped}, {"spread", spread}}
                     .dump(2)
              << "\n";
  } else {
    auto pct = [](const std::optional<double>& v) { return v ? fmt::format("{:.1f} %", 100 * *v) : std::string("-"); };
    if (o.grid.repeat > 1 || o.grid.seeds.size() > 1)
      for (size_t i = 0; i < o.figures.size() && i < r->spreads.size(); ++i)
        fmt::print("spread of {}: run to run {}, seed to seed {}\n", o.figures[i], pct(r->spreads[i].run_to_run),
                   pct(r->spreads[i].seed_to_seed));
    fmt::print("{} runs ({} run now, {} from before, {} retried at 2 x D): {} failed their assertions, {} could not "
               "be measured{}\ntable: {}\nreport: {}\n",
               r->rows.size(), r->ran, r->reused, r->retried, failed, bad, r->stopped ? "; stopped before the end" : "",
               r->csv, r->html);
  }
  // A run whose own assertions failed is a figure of the sweep, not its failure.
  if (r->stopped) return run::kExitInvalid;
  return bad ? run::kExitTestbedFault : 0;
}

}  // namespace rocelab::cli
