// `rocelab lab`: the RoCE tuning track (issue 35). The labs are data (labs/NN-name/); this is
// the learner's side: list them, start one (copy its scenario into a working directory and
// print the brief), check it (run the learner's file with the lab's objectives as its
// assertions and grade each one with the figure it measured), hints, the solution, reset.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "model/lab.h"
#include "model/overrides.h"
#include "run/kinds.h"
#include "run/results.h"
#include "run/run.h"
#include "sys/files.h"

namespace po = boost::program_options;

namespace rocelab::cli {

namespace {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;
using run::kExitAssertion;
using run::kExitBadInput;
using run::kExitEnvironment;
using run::kExitInvalid;
using run::kExitPass;

constexpr size_t kMaxWorkFile = 1u << 20;  // the learner's scenario, answer and grade

// Where the track is: --labs, $ROCELAB_LABS, the source tree (only for the build's own
// binary: an installed one never looks in a path compiled into it), the installed copy; the
// first that exists.
std::optional<std::string> labs_root(const po::variables_map& vm, std::string& tried) {
  std::vector<std::string> candidates;
  if (vm.count("labs")) candidates.push_back(vm["labs"].as<std::string>());
  else {
    if (const char* env = std::getenv("ROCELAB_LABS"); env && *env) candidates.push_back(env);
    if (from_build_tree()) candidates.push_back(ROCELAB_SOURCE_LABS);  // never for an installed binary
    // Installed: beside the binary's prefix (/usr/bin/rocelab -> /usr/share/rocelab/labs),
    // whatever prefix the package or `cmake --install` used; then the configured one.
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) candidates.push_back((exe.parent_path().parent_path() / "share/rocelab/labs").string());
    candidates.push_back(ROCELAB_INSTALLED_LABS);
  }
  std::error_code ec;
  for (const auto& c : candidates) {
    tried += (tried.empty() ? "" : ", ") + c;
    if (fs::is_directory(c, ec)) return c;
  }
  return std::nullopt;
}

std::string work_base(const po::variables_map& vm) {
  return vm.count("dir") ? vm["dir"].as<std::string>() : std::string("rocelab-labs");
}

std::string work_of(const po::variables_map& vm, const model::Lab& lab) {
  return (fs::path(work_base(vm)) / lab.folder_name()).string();
}

std::string read_small(const std::string& path) {
  std::string why;
  return sys::read_file(path, kMaxWorkFile, why).value_or("");
}

bool write_or_say(const std::string& path, std::string_view text) {
  std::string why;
  if (sys::write_file(path, text, why)) return true;
  std::cerr << "rocelab lab: " << path << ": " << why << "\n";
  return false;
}

// "done" (its last check passed), "started" (a working copy exists) or "".
std::string status_of(const po::variables_map& vm, const model::Lab& lab) {
  const std::string work = work_of(vm, lab);
  std::error_code ec;
  if (!fs::exists(fs::path(work) / "scenario.yaml", ec)) return "";
  const std::string grade = read_small((fs::path(work) / "grade.json").string());
  if (!grade.empty() && sys::json_depth(grade) <= sys::kMaxJsonDepth) {
    auto j = ordered_json::parse(grade, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.value("passed", false)) return "done";
  }
  return "started";
}

std::string indent(const std::string& text, const std::string& pad = "  ") {
  std::string out = pad;
  for (char c : text) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out;
}

std::string brief_text(const model::Lab& lab, const std::string& work) {
  std::string b = fmt::format("Lab {} · {}  ({}, {}, ~{} min)\n\nSituation\n{}\n\nYour task\n{}\n\nObjectives (graded by "
                              "`rocelab lab check {}`)\n",
                              lab.number, lab.title, lab.topic, lab.level, lab.minutes, indent(lab.situation),
                              indent(lab.task), lab.number);
  int i = 0;
  for (const auto& o : lab.objectives) b += fmt::format("  {}. {}\n", ++i, o.name);
  if (lab.question)
    b += fmt::format("  {}. answer: {} (write it in {}/answer.txt)\n", ++i, lab.question->question, work);
  b += fmt::format("\nYour file: {}/scenario.yaml (its own expect: block is not graded)\n"
                   "Check it:  sudo rocelab lab check {}    Stuck? rocelab lab hint {}\n",
                   work, lab.number, lab.number);
  return b;
}

int lab_list(const po::variables_map& vm, const Globals& g, const std::vector<model::Lab>& labs) {
  if (g.json) {
    ordered_json arr = ordered_json::array();
    for (const auto& l : labs)
      arr.push_back({{"number", l.number}, {"id", l.id}, {"title", l.title}, {"topic", l.topic}, {"level", l.level},
                     {"minutes", l.minutes}, {"status", status_of(vm, l)}});
    std::cout << arr.dump(2) << "\n";
    return 0;
  }
  fmt::print(" #  {:<22} {:<48} {:<16} {:<12} {:>4}  {}\n", "id", "title", "topic", "level", "min", "status");
  for (const auto& l : labs)
    fmt::print("{:>2}  {:<22} {:<48} {:<16} {:<12} {:>4}  {}\n", l.number, l.id, l.title, l.topic, l.level, l.minutes,
               status_of(vm, l));
  fmt::print("\nstart one: rocelab lab start 1   (working copies go under {}/; --dir to change)\n", work_base(vm));
  return 0;
}

// Writes the starting files (scenario.yaml, BRIEF.md, answer.txt when the lab asks) into the
// lab's working directory; `fresh` replaces what is there (reset), else it is kept.
int lab_start(const po::variables_map& vm, const model::Lab& lab, bool fresh) {
  const std::string work = work_of(vm, lab);
  std::error_code ec;
  const bool had = fs::exists(fs::path(work) / "scenario.yaml", ec);
  if (auto st = sys::make_own_dir(work); !st) {
    std::cerr << "rocelab lab: " << st.error().what << "\n";
    return kExitEnvironment;
  }
  if (!had || fresh) {
    const std::string start = read_small(lab.start_path());
    if (start.empty()) {
      std::cerr << "rocelab lab: " << lab.start_path() << ": cannot be read\n";
      return kExitEnvironment;
    }
    if (!write_or_say(work + "/scenario.yaml", start)) return kExitEnvironment;
    if (lab.question &&
        !write_or_say(work + "/answer.txt", "# " + lab.question->question + "\n# Write your answer on the line below.\n\n"))
      return kExitEnvironment;
    fs::remove(fs::path(work) / "grade.json", ec);
    fs::remove(fs::path(work) / "hints-seen", ec);
  }
  const std::string brief = brief_text(lab, work);
  if (!write_or_say(work + "/BRIEF.md", brief)) return kExitEnvironment;
  std::cout << brief;
  if (had && !fresh) std::cout << "\n(already started: your edits are kept; `rocelab lab reset " << lab.number << "` starts over)\n";
  if (had && fresh) std::cout << "\n(reset: " << work << "/scenario.yaml is the starting file again)\n";
  return 0;
}

int lab_hint(const po::variables_map& vm, const Globals& g, const model::Lab& lab) {
  const std::string work = work_of(vm, lab);
  const int total = int(lab.hints.size());
  int n = 0;
  if (vm.count("n")) {
    const std::string s = vm["n"].as<std::string>();
    if (s.empty() || s.size() > 3 || s.find_first_not_of("0123456789") != std::string::npos || std::stoi(s) < 1 ||
        std::stoi(s) > total) {
      std::cerr << "rocelab lab hint: '" << s.substr(0, 16) << "': lab " << lab.number << " has hints 1 to " << total << "\n";
      return kExitBadInput;
    }
    n = std::stoi(s);
  } else {  // the next one not yet seen, counted in the working directory when there is one
    const std::string seen = read_small(work + "/hints-seen");
    n = std::clamp(std::atoi(seen.c_str()) + 1, 1, total);
    std::error_code ec;
    if (fs::is_directory(work, ec)) {
      std::string why;
      sys::write_file(work + "/hints-seen", std::to_string(n) + "\n", why);
    }
  }
  const std::string& h = lab.hints[size_t(n - 1)];
  if (g.json) std::cout << ordered_json{{"lab", lab.number}, {"hint", n}, {"of", total}, {"text", h}}.dump(2) << "\n";
  else fmt::print("hint {} of {} (lab {}):\n{}\n", n, total, lab.number, indent(h));
  return 0;
}

int lab_solution(const po::variables_map& vm, const Globals& g, const model::Lab& lab) {
  std::string sets;
  for (const auto& s : lab.solution_set) sets += " --set " + s;
  if (g.json) {
    std::cout << ordered_json{{"lab", lab.number}, {"explain", lab.solution}, {"set", lab.solution_set}}.dump(2) << "\n";
  } else {
    fmt::print("solution (lab {}):\n{}\n\nthe changes, as --set over the starting file:\n  sudo rocelab lab check {}{}\n",
               lab.number, indent(lab.solution), lab.number, sets);
    if (lab.question) fmt::print("the answer: {}\n", lab.question->accept.front());
  }
  if (!vm.count("write")) return 0;
  // --write: the starting file with the changes applied, as the learner's copy.
  const std::string work = work_of(vm, lab);
  std::string why;
  auto text = model::apply_overrides(read_small(lab.start_path()), lab.solution_set, why);
  if (!text) {
    std::cerr << "rocelab lab solution: " << why << "\n";
    return kExitBadInput;
  }
  if (auto st = sys::make_own_dir(work); !st) {
    std::cerr << "rocelab lab: " << st.error().what << "\n";
    return kExitEnvironment;
  }
  if (!write_or_say(work + "/scenario.yaml", "# lab " + std::to_string(lab.number) + ": the solution\n" + *text + "\n"))
    return kExitEnvironment;
  if (lab.question && !write_or_say(work + "/answer.txt", lab.question->accept.front() + "\n")) return kExitEnvironment;
  if (!g.json) fmt::print("wrote {}/scenario.yaml\n", work);
  return 0;
}

std::string the_answer(const po::variables_map& vm, const std::string& work) {
  std::string text = vm.count("answer") ? vm["answer"].as<std::string>() : read_small(work + "/answer.txt");
  size_t from = 0;
  while (from < text.size()) {
    size_t nl = text.find('\n', from);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(from, nl - from);
    from = nl + 1;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty() && line[0] != '#') return line.substr(0, 200);
  }
  return "";
}

// A run directory under WORK/runs that does not exist yet.
std::string new_run_dir(const std::string& work) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  std::error_code ec;
  std::string dir = work + "/runs/check-" + stamp;
  for (int i = 2; fs::exists(dir, ec); ++i) dir = work + "/runs/check-" + stamp + "-" + std::to_string(i);
  return dir;
}

struct Grade {
  ordered_json items = ordered_json::array();
  int met = 0, total = 0;
};

// An objective is met when it holds in every run (one per seed the lab checks at).
void grade_objectives(const model::Lab& lab, const std::vector<run::RunReport>& reps,
                      const std::vector<uint64_t>& seeds, Grade& g, bool quiet) {
  for (size_t i = 0; i < lab.objectives.size(); ++i) {
    const auto& o = lab.objectives[i];
    bool pass = true;
    std::string seen;
    for (size_t r = 0; r < reps.size(); ++r) {
      if (i >= reps[r].assertions.size()) continue;
      const auto& e = reps[r].assertions[i].eval;
      pass = pass && e.outcome == model::Evaluation::Outcome::kPass;
      const std::string one = e.outcome == model::Evaluation::Outcome::kError ? e.error : run::observed_text(e);
      seen += (seen.empty() ? "" : "; ") + (reps.size() > 1 ? fmt::format("seed {}: ", seeds[r]) : "") + one;
    }
    g.items.push_back({{"objective", o.name}, {"expect", o.expr}, {"passed", pass}, {"observed", seen}, {"why", o.why}});
    g.met += pass;
    ++g.total;
    if (quiet) continue;
    fmt::print("  {}  {}\n        measured: {}\n", pass ? "PASS" : "FAIL", o.name, seen.empty() ? "-" : seen);
    if (!pass) fmt::print("        why it matters: {}\n", o.why);
  }
}

void grade_question(const model::Lab& lab, const std::string& answer, Grade& g, bool quiet) {
  if (!lab.question) return;
  const bool pass = model::answer_matches(*lab.question, answer);
  const std::string yours = answer.empty() ? "(none: write it in answer.txt or pass --answer)" : answer;
  g.items.push_back({{"objective", "answer: " + lab.question->question}, {"passed", pass}, {"observed", yours},
                     {"why", lab.question->why}});
  g.met += pass;
  ++g.total;
  if (quiet) return;
  fmt::print("  {}  answer: {}\n        yours: {}\n", pass ? "PASS" : "FAIL", lab.question->question, yours);
  if (!pass) fmt::print("        why it matters: {}\n", lab.question->why);
}

std::string grade_junit(const model::Lab& lab, const Grade& g, double seconds) {
  std::string x = fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"lab.{}\" "
                              "tests=\"{}\" failures=\"{}\" time=\"{:.3f}\">\n",
                              run::xml_escape(lab.folder_name()), g.total, g.total - g.met, seconds);
  for (const auto& it : g.items) {
    x += "    <testcase classname=\"lab." + run::xml_escape(lab.id) + "\" name=\"" +
         run::xml_escape(it["objective"].get<std::string>()) + "\"";
    if (it["passed"].get<bool>()) {
      x += "/>\n";
      continue;
    }
    x += ">\n      <failure message=\"" + run::xml_escape("measured: " + it["observed"].get<std::string>()) + "\">" +
         run::xml_escape(it["why"].get<std::string>()) + "</failure>\n    </testcase>\n";
  }
  return x + "  </testsuite>\n</testsuites>\n";
}

// Loads the learner's file (with --set), puts the lab's objectives in place of its expect:.
std::optional<model::Scenario> learner_scenario(const po::variables_map& vm, const model::Lab& lab, const std::string& path,
                                                bool quiet) {
  const std::vector<std::string> sets = vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{};
  auto res = run::load_scenario_file(path, sets);
  if (!res.ok()) {
    for (const auto& d : res.diags.sorted()) std::cerr << d.format() << "\n";
    std::cerr << "rocelab lab check: fix " << path << " first (`rocelab lab reset " << lab.number
              << "` restores the starting file)\n";
    return std::nullopt;
  }
  if (!res.scenario->expect.empty() && !quiet)
    spdlog::info("your file's own expect: ({} assertions) is not graded; the lab's {} objectives are",
                 res.scenario->expect.size(), lab.objectives.size());
  if (auto err = model::apply_objectives(lab, *res.scenario)) {
    std::cerr << "rocelab lab check: lab " << lab.number << ": " << *err << "\n";
    return std::nullopt;
  }
  return std::move(res.scenario);
}

// Runs as `rocelab run --retry-invalid` would.
run::RunReport run_for_grade(model::Scenario& s, const std::string& work, const std::string& path, bool json) {
  run::RunOptions opts;
  opts.scenario_path = path;
  opts.cancel = cancel_flag();
  bool drew = false;
  if (!json) opts.meter = terminal_meter(drew);
  opts.out_dir = new_run_dir(work);
  catch_signals();
  run::RunReport rep = run::run_scenario_retrying(
      s, opts, [&](const run::RunReport&) { return new_run_dir(work); },
      [&](const std::string& why) {
        if (drew) fmt::print(stderr, "\n");
        drew = false;
        spdlog::warn("{}", why);
      });
  if (drew) fmt::print(stderr, "\n");
  return rep;
}

int lab_check(const po::variables_map& vm, const Globals& gl, const model::Lab& lab) {
  const std::string work = work_of(vm, lab);
  const std::string path = work + "/scenario.yaml";
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    std::cerr << "rocelab lab check: " << path << " does not exist: start the lab first (rocelab lab start " << lab.number
              << ")\n";
    return kExitBadInput;
  }
  auto s = learner_scenario(vm, lab, path, gl.json);
  if (!s) return kExitBadInput;
  if (auto st = sys::make_own_dir(work + "/runs"); !st) {
    std::cerr << "rocelab lab check: " << st.error().what << "\n";
    return kExitEnvironment;
  }
  const std::vector<uint64_t> seeds = lab.seeds.empty() ? std::vector<uint64_t>{s->seed} : lab.seeds;
  std::vector<run::RunReport> reps;
  ordered_json runs = ordered_json::array();
  double seconds = 0;
  for (uint64_t seed : seeds) {
    model::Scenario one = *s;
    one.seed = seed;
    if (!gl.json)
      fmt::print("checking lab {} ({}): running {}{} ...\n", lab.number, lab.title, path,
                 seeds.size() > 1 ? fmt::format(" at seed {} ({} of {})", seed, reps.size() + 1, seeds.size()) : "");
    reps.push_back(run_for_grade(one, work, path, gl.json));
    const run::RunReport& rep = reps.back();
    seconds += rep.seconds;
    runs.push_back({{"seed", seed}, {"run_dir", rep.run_dir}, {"exit_code", rep.exit_code}});
    if (rep.exit_code != kExitPass && rep.exit_code != kExitAssertion) {
      std::cerr << "rocelab lab check: the run could not be graded (exit " << rep.exit_code << "): " << rep.error << "\n";
      if (!rep.run_dir.empty()) std::cerr << "run directory: " << rep.run_dir << "\n";
      return rep.exit_code;
    }
    if (!gl.json) std::cout << rep.table;
    if (!rep.run_dir.empty() && !vm.count("no-report")) write_report_of(rep.run_dir, rep.held);
  }
  if (!gl.json) std::cout << "objectives" << (seeds.size() > 1 ? " (each must hold at every seed)" : "") << "\n";
  Grade g;
  grade_objectives(lab, reps, seeds, g, gl.json);
  grade_question(lab, the_answer(vm, work), g, gl.json);
  const bool passed = g.met == g.total;
  ordered_json grade{{"lab", lab.number}, {"id", lab.id},       {"passed", passed},     {"met", g.met},
                     {"of", g.total},     {"runs", runs},       {"seconds", seconds},   {"objectives", g.items}};
  write_or_say(work + "/grade.json", grade.dump(2) + "\n");
  if (vm.count("junit")) write_or_say(vm["junit"].as<std::string>(), grade_junit(lab, g, seconds));
  if (gl.json) {
    std::cout << grade.dump(2) << "\n";
  } else if (passed) {
    fmt::print("\nlab {} passed: {} of {} objectives met. `rocelab lab solution {}` shows the reasoning to compare.\n",
               lab.number, g.met, g.total, lab.number);
  } else {
    fmt::print("\nlab {}: {} of {} objectives met. Look at the report ({}/report.html), change one knob, check again.\n"
               "stuck? rocelab lab hint {}\n",
               lab.number, g.met, g.total, reps.back().run_dir, lab.number);
  }
  return passed ? kExitPass : kExitAssertion;
}

}  // namespace

void add_lab_options(po::options_description& d) {
  d.add_options()("dir", po::value<std::string>(), "working directory of your copies (default ./rocelab-labs)")(
      "labs", po::value<std::string>(),
      "the labs' folder (default $ROCELAB_LABS, else the source tree's labs/, else the installed copy)")(
      "set", po::value<std::vector<std::string>>()->composing(),
      "check: KEY=VALUE over your file without editing it (repeatable), as run --set")(
      "answer", po::value<std::string>(), "check: your answer to the lab's question instead of answer.txt")(
      "junit", po::value<std::string>(), "check: also write the grade as JUnit XML to FILE (an instructor's CI)")(
      "no-report", "check: do not write the run's report.html")(
      "write", "solution: also write the solved file over your copy")(
      "action", po::value<std::string>(), "list, start, check, hint, solution, reset")(
      "lab", po::value<std::string>(), "a lab's number or id")("n", po::value<std::string>(), "hint: which hint");
}

int cmd_lab(const po::variables_map& vm, const Globals& g) {
  const std::string action = vm.count("action") ? vm["action"].as<std::string>() : "list";
  static const char* kActions[] = {"list", "start", "check", "hint", "solution", "reset"};
  if (std::find(std::begin(kActions), std::end(kActions), action) == std::end(kActions)) {
    std::cerr << "rocelab lab: '" << action.substr(0, 32) << "' is not an action: list, start, check, hint, solution, reset\n";
    return kExitBadInput;
  }
  std::string tried;
  auto root = labs_root(vm, tried);
  if (!root) {
    std::cerr << "rocelab lab: no labs found (looked in " << tried << "; --labs DIR names them)\n";
    return kExitEnvironment;
  }
  auto cat = model::load_labs(*root);
  for (const auto& e : cat.errors) std::cerr << e << "\n";
  if (!cat.errors.empty()) return kExitBadInput;
  if (action == "list") return lab_list(vm, g, cat.labs);
  if (!vm.count("lab")) {
    std::cerr << "rocelab lab " << action << ": which lab? (a number or id; `rocelab lab list`)\n";
    return kExitBadInput;
  }
  const model::Lab* lab = model::find_lab(cat.labs, vm["lab"].as<std::string>());
  if (!lab) {
    std::cerr << "rocelab lab " << action << ": no lab '" << vm["lab"].as<std::string>().substr(0, 64)
              << "' (`rocelab lab list` shows the track)\n";
    return kExitBadInput;
  }
  if (action == "start") return lab_start(vm, *lab, false);
  if (action == "reset") return lab_start(vm, *lab, true);
  if (action == "hint") return lab_hint(vm, g, *lab);
  if (action == "solution") return lab_solution(vm, g, *lab);
  return lab_check(vm, g, *lab);
}

}  // namespace rocelab::cli
