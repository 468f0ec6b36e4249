// `rocelab plan SCENARIO --parts M`: how a split run would divide the fabric (issue 37), the
// same model::partition every part computes, before any machine is asked: each part's nodes
// and ports (its bring-up), the links cut between parts (each a VXLAN tunnel over the
// machines' own network) and what the cut must carry.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "model/hostlist.h"
#include "model/partition.h"
#include "model/units.h"
#include "run/kinds.h"
#include "run/results.h"

namespace rocelab::cli {

namespace po = boost::program_options;
using nlohmann::ordered_json;

void add_plan_options(po::options_description& d) {
  d.add_options()("scenario", po::value<std::string>(), "scenario file (YAML)")(
      "parts", po::value<size_t>(), "M: the machines the run is split over (2-64)");
}

int cmd_plan(const po::variables_map& vm, const Globals& g) {
  auto bad = [](const std::string& what) {
    std::cerr << "rocelab plan: " << what << "\n";
    return int(run::kExitBadInput);
  };
  if (!vm.count("scenario")) return bad("missing SCENARIO");
  if (!vm.count("parts")) return bad("missing --parts M (the machines the run is split over)");
  const size_t parts = vm["parts"].as<size_t>();
  if (parts < 2 || parts > model::kMaxParts) return bad("--parts: 2 to " + std::to_string(model::kMaxParts));
  const std::string path = vm["scenario"].as<std::string>();
  auto res = run::load_scenario_file(path);
  if (!res.ok()) {
    for (const auto& d : res.diags.sorted()) std::cerr << d.format() << "\n";
    return run::kExitBadInput;
  }
  const model::Scenario& s = *res.scenario;
  std::string why;
  const auto p = model::partition(s, parts, why);
  if (!p) return bad(path + ": " + why);
  // Each cut link carries at most its rate each way; on the machines' network that is the
  // rate / D of wall clock, plus VXLAN's 50 bytes a packet.
  const double d = s.scale.factor();
  double cut_bps = 0;
  ordered_json cuts = ordered_json::array();
  for (size_t li : p->cut_links) {
    const auto& l = s.links[li];
    cut_bps += double(l.rate.bps);
    cuts.push_back({{"a", s.nodes[l.a.node].name + ":" + l.a.ifname}, {"b", s.nodes[l.b.node].name + ":" + l.b.ifname},
                    {"parts", {p->part_of[l.a.node], p->part_of[l.b.node]}}, {"rate_bps", l.rate.bps}});
  }
  ordered_json per = ordered_json::array();
  for (size_t i = 0; i < parts; ++i) {
    ordered_json nodes = ordered_json::array();
    for (size_t n = 0; n < s.nodes.size(); ++n)
      if (p->part_of[n] == i) nodes.push_back(s.nodes[n].name);
    per.push_back({{"part", i}, {"ports", p->ports[i]}, {"nodes", nodes}});
  }
  if (g.json) {
    std::cout << ordered_json{{"scenario", s.name}, {"parts", per}, {"cut_links", cuts}, {"scale", d},
                              {"cut_wall_bps_each_way", cut_bps / d}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << s.name << " over " << parts << " machines: " << s.nodes.size() << " nodes, " << p->cut_links.size()
            << " of " << s.links.size() << " links cut\n";
  for (const auto& x : per) {
    std::cout << "part " << x["part"].get<size_t>() << ": " << x["ports"].get<size_t>() << " ports;";
    for (const auto& n : x["nodes"]) std::cout << " " << n.get<std::string>();
    std::cout << "\n";
  }
  std::cout << "cut links (a VXLAN tunnel each, UDP 4789 between the machines):\n";
  for (const auto& c : cuts)
    std::cout << "  " << c["a"].get<std::string>() << " (part " << c["parts"][0].get<size_t>() << ") <-> "
              << c["b"].get<std::string>() << " (part " << c["parts"][1].get<size_t>() << "), "
              << model::format_rate(model::Rate{c["rate_bps"].get<uint64_t>()}) << "\n";
  std::cout << "at D = " << d << " the cut carries at most " << model::human_rate(cut_bps / d)
            << " each way between the machines (the links' rates / D, plus 50 bytes a packet)\n";
  return 0;
}

}  // namespace rocelab::cli
