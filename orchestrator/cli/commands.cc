// The CLI edge: parses arguments, calls the layers below, prints, and turns their error
// values into exit codes (0 pass, 1 assertion failed, 2 invalid run, 3 bad input,
// 4 environment). The only place exceptions are caught.
#include "cli/commands.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bpf/probe.h"
#include "model/loader.h"
#include "run/capabilities.h"
#include "run/graph.h"
#include "run/resolved.h"
#include "run/results.h"
#include "run/run.h"

namespace po = boost::program_options;

namespace rocelab::cli {

namespace {

using nlohmann::ordered_json;
using run::kExitBadInput;
using run::kExitEnvironment;

void add_scenario_arg(po::options_description& d) {
  d.add_options()("scenario", po::value<std::string>(), "scenario file (YAML)");
}

// Loads and validates; prints every error. nullopt means exit 3.
std::optional<model::Scenario> load(const po::variables_map& vm, const Globals& g, bool quiet_ok = true) {
  if (!vm.count("scenario")) {
    std::cerr << "rocelab: missing SCENARIO (a YAML file; see scenarios/)\n";
    return std::nullopt;
  }
  const std::string path = vm["scenario"].as<std::string>();
  spdlog::debug("loading {}", path);
  auto res = model::load_scenario_file(path);
  if (res.ok()) return std::move(res.scenario);
  auto diags = res.diags.sorted();
  if (g.json) {
    ordered_json errs = ordered_json::array();
    for (const auto& d : diags)
      errs.push_back({{"file", d.file}, {"line", d.pos.line}, {"column", d.pos.column},
                      {"kind", model::error_kind_name(d.kind)}, {"message", d.message}});
    std::cout << ordered_json{{"ok", false}, {"errors", errs}}.dump(2) << "\n";
  } else {
    for (const auto& d : diags) std::cerr << d.format() << "\n";
    std::cerr << diags.size() << (diags.size() == 1 ? " error" : " errors") << " in " << path << "\n";
  }
  (void)quiet_ok;
  return std::nullopt;
}

std::string summary_line(const model::Scenario& s) {
  char scale[32];
  std::snprintf(scale, sizeof scale, "%g", s.scale.factor());
  return std::string(model::fabric_type_name(s.fabric.type)) + ": " +
         std::to_string(s.count(model::NodeKind::kSwitch)) + " switches, " +
         std::to_string(s.count(model::NodeKind::kHost)) + " hosts, " + std::to_string(s.links.size()) +
         " links; D = " + scale + "; seed " + std::to_string(s.seed) + "; " + std::to_string(s.expect.size()) +
         (s.expect.size() == 1 ? " assertion" : " assertions");
}

int cmd_validate(const po::variables_map& vm, const Globals& g) {
  auto s = load(vm, g);
  if (!s) return kExitBadInput;
  if (vm.count("resolved")) {
    std::cout << run::resolved_json(*s).dump(2) << "\n";
  } else if (g.json) {
    std::cout << ordered_json{{"ok", true}, {"file", s->file}, {"summary", summary_line(*s)}}.dump(2) << "\n";
  } else {
    std::cout << s->file << ": ok (" << summary_line(*s) << ")\n";
  }
  return 0;
}

int cmd_graph(const po::variables_map& vm, const Globals& g) {
  auto s = load(vm, g);
  if (!s) return kExitBadInput;
  std::string dot = run::fabric_dot(*s);
  if (vm.count("output")) {
    std::string out = vm["output"].as<std::string>();
    std::ofstream f(out);
    f << dot;
    if (!f) {
      std::cerr << "rocelab graph: cannot write " << out << "\n";
      return kExitEnvironment;
    }
    std::cerr << "wrote " << out << " (render: dot -Tpng " << out << " -o fabric.png)\n";
  } else {
    std::cout << dot;
  }
  return 0;
}

const char* outcome_word(model::Evaluation::Outcome o) {
  switch (o) {
    case model::Evaluation::Outcome::kPass: return "PASS";
    case model::Evaluation::Outcome::kFail: return "FAIL";
    case model::Evaluation::Outcome::kError: return "ERROR";
  }
  return "ERROR";
}

int cmd_run(const po::variables_map& vm, const Globals& g) {
  auto s = load(vm, g);
  if (!s) return kExitBadInput;
  run::RunOptions opts;
  opts.scenario_path = vm["scenario"].as<std::string>();
  if (vm.count("out")) opts.out_dir = vm["out"].as<std::string>();
  spdlog::info("run {}: {}", s->name, summary_line(*s));
  run::RunReport rep = run::run_scenario(*s, opts);
  if (g.json) {
    ordered_json j{{"run_dir", rep.run_dir}, {"outcome", rep.outcome}, {"exit_code", rep.exit_code},
                   {"assertions", run::assertions_json(rep.assertions)}};
    if (!rep.error.empty()) j["error"] = rep.error;
    std::cout << j.dump(2) << "\n";
    return rep.exit_code;
  }
  for (const auto& n : rep.notes) spdlog::warn("{}", n);
  if (!rep.assertions.empty()) {
    std::cout << "assertions\n";
    for (const auto& a : rep.assertions) {
      std::string obs = a.eval.outcome == model::Evaluation::Outcome::kError ? a.eval.error : run::observed_text(a.eval);
      std::printf("  %-5s %-40s %s\n", outcome_word(a.eval.outcome), a.expect->name.c_str(), obs.c_str());
    }
  }
  if (!rep.error.empty()) std::cerr << "rocelab run: " << rep.error << "\n";
  if (!rep.run_dir.empty()) std::cout << "run directory: " << rep.run_dir << "\n";
  std::cout << "outcome: " << rep.outcome << " (exit " << rep.exit_code << ")\n";
  return rep.exit_code;
}

int cmd_doctor(const po::variables_map&, const Globals& g) {
  run::Capabilities caps = run::detect_capabilities();
  if (g.json) {
    std::cout << ordered_json{{"ok", caps.all_required()}, {"capabilities", caps.to_json()}}.dump(2) << "\n";
  } else {
    for (const auto& c : caps.items)
      std::printf("  %-4s %-13s %s%s\n", c.ok ? "yes" : "no", c.name.c_str(), c.why.c_str(),
                  c.required && !c.ok ? "  [required]" : "");
    std::printf("%s\n", caps.all_required() ? "this machine can run rocelab fabrics"
                                            : "this machine lacks something rocelab fabrics need (see [required])");
  }
  return caps.all_required() ? 0 : kExitEnvironment;
}

int not_built(const std::string& what) {
  std::cerr << "rocelab " << what
            << ": not built yet. Bringing fabrics up and down through netlink arrives with "
               "Foundation II; today 'rocelab run' evaluates the model only.\n";
  return kExitEnvironment;
}

}  // namespace

const std::vector<Command>& commands() {
  static const std::vector<Command> kCommands = {
      {"validate", "SCENARIO", "check a scenario file; print every error as file:line:column: reason",
       "Parses the file, expands its fabric generator, applies defaults and overrides\n"
       "(defaults -> kinds -> fabric -> nodes -> links), plans addresses and ECMP routes, and\n"
       "checks every reference and expect: assertion. Nothing on the machine changes.\n"
       "With --resolved, prints the resolved scenario as JSON: every node, link, address and\n"
       "route, physical and emulated values; that JSON is itself a scenario file.",
       "rocelab validate scenarios/quickstart.yaml\n  rocelab validate --resolved -j scenarios/quickstart.yaml > resolved.json",
       [](po::options_description& d) {
         d.add_options()("resolved", "print the resolved scenario as JSON");
         add_scenario_arg(d);
       },
       cmd_validate},
      {"graph", "SCENARIO", "draw the fabric as Graphviz DOT",
       "Prints the fabric with one rank per tier (hosts at the bottom), link rates and port names.",
       "rocelab graph scenarios/quickstart.yaml | dot -Tsvg > fabric.svg",
       [](po::options_description& d) {
         d.add_options()("output,o", po::value<std::string>(), "write to FILE instead of standard output");
         add_scenario_arg(d);
       },
       cmd_graph},
      {"run", "SCENARIO", "run a scenario end to end and write a run directory",
       "validate -> up -> workloads and faults -> collect -> assertions -> down. Writes\n"
       "RUN_DIR/{scenario.yaml, resolved.json, results.json, events.jsonl, junit.xml}.\n"
       "Exit codes: 0 pass, 1 an expect: assertion failed, 2 invalid run (the machine did not\n"
       "keep up), 3 bad input, 4 environment (missing capability, not root, not built).",
       "rocelab run scenarios/quickstart.yaml\n  rocelab run --out /tmp/r1 scenarios/quickstart.yaml && cat /tmp/r1/junit.xml",
       [](po::options_description& d) {
         d.add_options()("out", po::value<std::string>(), "run directory (default runs/NAME-TIMESTAMP)");
         add_scenario_arg(d);
       },
       cmd_run},
      {"up", "SCENARIO", "bring a fabric up and leave it running",
       "Creates the namespaces, veth pairs, addresses and routes of a scenario (Foundation II).", "rocelab up scenarios/quickstart.yaml",
       add_scenario_arg, [](const po::variables_map&, const Globals&) { return not_built("up"); }},
      {"down", "[NAME]", "tear down a running fabric, exactly as its state file recorded it",
       "Removes what 'up' made for instance NAME (Foundation II).", "rocelab down quickstart",
       [](po::options_description& d) { d.add_options()("name", po::value<std::string>(), "instance name"); },
       [](const po::variables_map&, const Globals&) { return not_built("down"); }},
      {"status", "[NAME]", "show running fabrics, their nodes and interfaces",
       "Lists instances, or one instance's nodes, namespaces and interfaces (Foundation II).", "rocelab status -j quickstart",
       [](po::options_description& d) { d.add_options()("name", po::value<std::string>(), "instance name"); },
       [](const po::variables_map&, const Globals&) { return not_built("status"); }},
      {"doctor", "", "say what this kernel and machine can and cannot do",
       "Tries each capability for real, inside a private network namespace that vanishes\n"
       "afterwards: netns, veth, HTB/TBF/clsact and optional qdiscs (netem, fq, ...), BPF with\n"
       "BTF, rxe and rxe-in-namespace, KVM. Exit 0 when everything required is there, else 4.",
       "sudo rocelab doctor\n  rocelab doctor -j | jq .capabilities.netem",
       [](po::options_description&) {}, cmd_doctor},
  };
  return kCommands;
}

namespace {

void general_help(std::ostream& out) {
  out << "rocelab — lossless-fabric (RoCEv2) emulation testbed\n\n"
         "usage: rocelab [-v] [-j] COMMAND [ARGS]\n\ncommands:\n";
  for (const auto& c : commands()) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-9s %-10s %s\n", c.name.c_str(), c.args.c_str(), c.summary.c_str());
    out << line;
  }
  out << "\nglobal options:\n  -v, --verbose  debug logs\n  -j, --json     JSON output\n  -h, --help     help "
         "(rocelab COMMAND --help for one command)\n\n"
         "start with: rocelab validate scenarios/quickstart.yaml && sudo rocelab run scenarios/quickstart.yaml\n";
}

po::options_description global_options() {
  po::options_description d("global options");
  d.add_options()("verbose,v", "debug logs")("json,j", "JSON output")("help,h", "show help");
  return d;
}

void command_help(const Command& c, std::ostream& out) {
  po::options_description own(c.name + " options");
  c.options(own);
  out << "usage: rocelab " << c.name << " [options] " << c.args << "\n\n" << c.summary << ".\n\n" << c.details
      << "\n\n";
  // Hide the positional argument from the option list; it is in the usage line.
  po::options_description shown(c.name + " options");
  for (const auto& o : own.options())
    if (o->long_name() != "scenario" && o->long_name() != "name") shown.add(o);
  if (!shown.options().empty()) out << shown << "\n";
  out << global_options() << "\nexample:\n  " << c.example << "\n";
}

}  // namespace

int main_entry(int argc, char** argv) {
  auto logger = spdlog::stderr_color_mt("rocelab");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%^%l%$: %v");
  spdlog::set_level(spdlog::level::info);
  bpf::route_libbpf_logs();

  std::vector<std::string> args(argv + 1, argv + argc);
  // The command is the first word that is not an option.
  const Command* cmd = nullptr;
  size_t cmd_at = args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].empty() && args[i][0] == '-') continue;
    if (args[i] == "help") {
      if (i + 1 < args.size())
        for (const auto& c : commands())
          if (c.name == args[i + 1]) {
            command_help(c, std::cout);
            return 0;
          }
      general_help(std::cout);
      return 0;
    }
    for (const auto& c : commands())
      if (c.name == args[i]) cmd = &c;
    if (!cmd) {
      std::cerr << "rocelab: unknown command '" << args[i] << "'\n\n";
      general_help(std::cerr);
      return kExitBadInput;
    }
    cmd_at = i;
    break;
  }
  if (!cmd) {
    bool help = false;
    for (const auto& a : args) help = help || a == "-h" || a == "--help";
    general_help(help ? std::cout : std::cerr);
    return help ? 0 : kExitBadInput;
  }
  args.erase(args.begin() + static_cast<std::ptrdiff_t>(cmd_at));

  po::options_description all;
  po::options_description own;
  cmd->options(own);
  all.add(global_options()).add(own);
  po::positional_options_description pos;
  if (cmd->args.find("SCENARIO") != std::string::npos) pos.add("scenario", 1);
  else if (cmd->args.find("NAME") != std::string::npos) pos.add("name", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "rocelab " << cmd->name << ": " << e.what() << "\n(see: rocelab " << cmd->name << " --help)\n";
    return kExitBadInput;
  }
  if (vm.count("help")) {
    command_help(*cmd, std::cout);
    return 0;
  }
  Globals g{vm.count("verbose") > 0, vm.count("json") > 0};
  if (g.verbose) spdlog::set_level(spdlog::level::debug);
  try {
    return cmd->run(vm, g);
  } catch (const std::exception& e) {
    std::cerr << "rocelab " << cmd->name << ": internal error: " << e.what() << "\n";
    return kExitEnvironment;
  }
}

}  // namespace rocelab::cli
