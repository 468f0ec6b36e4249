// `rocelab import sonic CONFIG_DB.json` and `rocelab export sonic SCENARIO`: a SONiC switch's
// QoS tables as a scenario's qos: block and back (model/sonic.h has the reading).
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bpf/headroom.h"
#include "cli/commands.h"
#include "fabric/kernel_plan.h"
#include "model/sonic.h"
#include "run/kinds.h"
#include "run/results.h"
#include "sys/files.h"

namespace rocelab::cli {

namespace po = boost::program_options;
using nlohmann::ordered_json;
using run::kExitBadInput;
using run::kExitEnvironment;

namespace {

constexpr size_t kMaxConfigDb = 64u << 20;  // a large switch's whole CONFIG_DB is a few MB

// The scenario's text without its top-level qos: block (the key's line and every line under
// it that is indented, blank or a comment), so the imported block takes its place.
std::string without_qos(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  bool inside = false;
  while (std::getline(in, line)) {
    const bool top = !line.empty() && line[0] != ' ' && line[0] != '\t' && line[0] != '#';
    if (top) inside = line.rfind("qos:", 0) == 0;
    if (!inside) out += line + "\n";
  }
  return out;
}

bool write_out(const po::variables_map& vm, const std::string& cmd, const std::string& text) {
  if (!vm.count("out")) {
    std::cout << text;
    return true;
  }
  const std::string path = vm["out"].as<std::string>();
  std::string why;  // never through a link, a FIFO or a device (root writes it)
  if (!sys::write_file(path, text, why)) {
    std::cerr << "rocelab " << cmd << ": " << why << "\n";
    return false;
  }
  std::cerr << "wrote " << path << "\n";
  return true;
}

bool sonic_format(const po::variables_map& vm, const std::string& cmd) {
  const std::string f = vm.count("format") ? vm["format"].as<std::string>() : "";
  if (f == "sonic") return true;
  std::cerr << "rocelab " << cmd << ": " << (f.empty() ? "missing FORMAT" : "'" + f.substr(0, 32) + "' is not a format")
            << ": the one format is sonic (rocelab " << cmd << " sonic ...)\n";
  return false;
}

// A workload whose DSCP the imported map puts on a priority that is not lossless: right by
// the file, and a surprise (SONiC's AZURE map sends DSCP 26, perftest's RoCE default, to TC 1).
void warn_lossy_workloads(const model::Scenario& s) {
  for (const auto& w : s.workloads) {
    const int prio = s.qos.dscp_to_prio[size_t(w.dscp) & 63];
    if (s.qos.lossless_mask && !((s.qos.lossless_mask >> prio) & 1))
      std::cerr << "note: workload " << w.name << " sends on DSCP " << w.dscp << ", which this map puts on priority "
                << prio << ": not lossless here (set the workload's dscp: to one the map sends to a lossless priority)\n";
  }
}

// The imported block checked the way a scenario file is: inside --into's scenario, or on a
// one-switch stub (its values alone: ranges, XON below XOFF, headroom of an MTU at least).
bool validate_import(const std::string& text, const std::string& label) {
  auto res = run::load_scenario_text(text, label);
  if (res.ok()) {
    warn_lossy_workloads(*res.scenario);
    return true;
  }
  auto diags = res.diags.sorted();
  for (const auto& d : diags) std::cerr << d.format() << "\n";
  std::cerr << diags.size() << (diags.size() == 1 ? " error" : " errors") << " in " << label << "\n";
  return false;
}

}  // namespace

void add_sonic_options(po::options_description& d) {
  d.add_options()("format", po::value<std::string>(), "sonic")(
      "file", po::value<std::string>(), "CONFIG_DB.json")("scenario", po::value<std::string>(), "the scenario")(
      "into", po::value<std::string>(), "import: print this scenario with its qos: replaced by the import")(
      "node", po::value<std::string>(), "export: the switch whose ports the tables name (default: the first)")(
      "ports", po::value<std::string>(),
      "export: interface names to write instead of the switch's own, comma-separated (Ethernet0,Ethernet4)")(
      "out,o", po::value<std::string>(), "write to this file instead of standard output");
}

int cmd_import(const po::variables_map& vm, const Globals& g) {
  if (!sonic_format(vm, "import")) return kExitBadInput;
  if (!vm.count("file")) {
    std::cerr << "rocelab import: missing CONFIG_DB (a SONiC config_db.json)\n";
    return kExitBadInput;
  }
  const std::string path = vm["file"].as<std::string>();
  std::string why;
  auto text = sys::read_file(path, kMaxConfigDb, why);
  if (!text) {
    std::cerr << "rocelab import: " << path << ": " << why << "\n";
    return kExitBadInput;
  }
  auto imp = model::import_sonic(*text, why);
  if (!imp) {
    std::cerr << "rocelab import: " << path << ": " << why << "\n";
    return kExitBadInput;
  }
  std::string out = "# qos from SONiC " + path + " (rocelab import sonic)\n";
  for (const auto& u : imp->unmapped) out += "# not mapped: " + u + "\n";
  out += imp->yaml;
  if (vm.count("into")) {
    const std::string into = vm["into"].as<std::string>();
    auto scen = sys::read_file(into, kMaxConfigDb, why);
    if (!scen) {
      std::cerr << "rocelab import: " << into << ": " << why << "\n";
      return kExitBadInput;
    }
    out = without_qos(*scen) + out;
    if (!validate_import(out, into + " with the qos of " + path)) return kExitBadInput;
  } else if (!validate_import("name: sonic-import\nscale: 1000\nnodes: [{name: sw, kind: switch}, {name: h1, kind: host}]\n"
                              "links: [{endpoints: [h1, sw]}]\n" + imp->yaml,
                              "the qos of " + path)) {
    return kExitBadInput;
  }
  if (g.json) {
    std::cout << ordered_json{{"qos", imp->yaml}, {"unmapped", imp->unmapped}}.dump(2) << "\n";
    return 0;
  }
  for (const auto& u : imp->unmapped) std::cerr << "not mapped: " << u << "\n";
  return write_out(vm, "import", out) ? 0 : kExitEnvironment;
}

int cmd_export(const po::variables_map& vm, const Globals&) {
  if (!sonic_format(vm, "export")) return kExitBadInput;
  if (!vm.count("scenario")) {
    std::cerr << "rocelab export: missing SCENARIO\n";
    return kExitBadInput;
  }
  const std::string path = vm["scenario"].as<std::string>();
  auto res = run::load_scenario_file(path);
  if (!res.ok()) {
    for (const auto& d : res.diags.sorted()) std::cerr << d.format() << "\n";
    return kExitBadInput;
  }
  const model::Scenario& s = *res.scenario;
  const auto plan = fabric::plan_kernel(s);
  const std::string want = vm.count("node") ? vm["node"].as<std::string>() : "";
  auto node = std::find_if(plan.nodes.begin(), plan.nodes.end(),
                           [&](const auto& n) { return !n.host && (want.empty() || n.node == want); });
  if (node == plan.nodes.end()) {
    std::cerr << "rocelab export: " << path << (want.empty() ? " has no switch" : " has no switch " + want) << "\n";
    return kExitBadInput;
  }
  std::vector<std::string> ports;
  for (const auto& p : node->ports) ports.push_back(p.ifname);
  if (vm.count("ports")) {
    ports.clear();
    std::istringstream in(vm["ports"].as<std::string>());
    for (std::string p; std::getline(in, p, ',');)
      if (!p.empty()) ports.push_back(p);
  }
  // The PG's bytes past XOFF: qos.pfc.headroom, or the physical part the fabric gives the
  // switch's ports (2 x MTU + the link's round trip), the largest of them.
  uint64_t headroom = s.qos.pfc.headroom ? s.qos.pfc.headroom->n : 0;
  if (!s.qos.pfc.headroom)
    for (const auto& hp : fabric::headroom_inputs(plan, *node)) headroom = std::max<uint64_t>(headroom, hp.base);
  std::cerr << "switch " << node->node << ", " << ports.size() << " ports; a lossless PG's size is XOFF + "
            << headroom << " B of headroom\n";
  return write_out(vm, "export", model::export_sonic(s.qos, ports, headroom)) ? 0 : kExitEnvironment;
}

}  // namespace rocelab::cli
