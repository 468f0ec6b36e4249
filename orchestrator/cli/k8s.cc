// `rocelab k8s SCENARIO --parts M`: the manifests that run a split run on Kubernetes (issue
// 37): the scenario as a ConfigMap, the run key as a Secret, a headless Service whose DNS
// names the parts meet by, and an Indexed Job of M privileged pods, each `rocelab run --part
// auto` (model::k8s_pod reads its part from the index Kubernetes gives it).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "model/hostlist.h"
#include "run/kinds.h"
#include "run/results.h"
#include "sys/files.h"

namespace rocelab::cli {

namespace po = boost::program_options;
using nlohmann::ordered_json;
using run::kExitBadInput;
using run::kExitEnvironment;

namespace {

void emit(YAML::Emitter& out, const ordered_json& j) {
  if (j.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [k, v] : j.items()) {
      out << YAML::Key << k << YAML::Value;
      emit(out, v);
    }
    out << YAML::EndMap;
  } else if (j.is_array()) {
    out << YAML::BeginSeq;
    for (const auto& v : j) emit(out, v);
    out << YAML::EndSeq;
  } else if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s.find('\n') != std::string::npos) out << YAML::Literal << s;
    else out << YAML::DoubleQuoted << s;  // "3" stays a string, as the API wants env values
  } else if (j.is_boolean()) {
    out << j.get<bool>();
  } else if (j.is_number_integer()) {
    out << j.get<int64_t>();
  } else {
    out << YAML::Null;
  }
}

// 32 random bytes as hex: the run key every part signs its rendezvous frames with.
std::optional<std::string> random_key() {
  unsigned char b[32];
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && read(fd, b, sizeof b) == ssize_t(sizeof b);
  if (fd >= 0) close(fd);
  if (!ok) return std::nullopt;
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) s += {hex[c >> 4], hex[c & 15]};
  return s;
}

struct K8sPlan {
  std::string name, ns, image, scenario_text, key;
  size_t parts = 2;
};

// The five objects; every field set is listed with its reason in docs/multi-machine.md.
std::vector<ordered_json> manifests(const K8sPlan& p) {
  const ordered_json labels{{"app.kubernetes.io/name", "rocelab"}, {"rocelab.io/run", p.name}};
  auto meta = [&](const std::string& n) { return ordered_json{{"name", n}, {"namespace", p.ns}, {"labels", labels}}; };
  const std::string key_secret = p.name + "-run-key", config = p.name + "-scenario";
  ordered_json secret{{"apiVersion", "v1"}, {"kind", "Secret"}, {"metadata", meta(key_secret)},
                      {"type", "Opaque"}, {"stringData", {{"run-key", p.key}}}};
  ordered_json cm{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", meta(config)},
                  {"data", {{"scenario.yaml", p.scenario_text}}}};
  ordered_json svc{{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", meta(p.name)},
                   {"spec",
                    {{"clusterIP", "None"},
                     {"publishNotReadyAddresses", true},
                     {"selector", labels},
                     {"ports",
                      {{{"name", "rendezvous"}, {"port", 790}, {"protocol", "TCP"}},
                       {{"name", "vxlan"}, {"port", 4789}, {"protocol", "UDP"}}}}}}};
  ordered_json env = ordered_json::array({
      {{"name", "ROCELAB_PARTS"}, {"value", std::to_string(p.parts)}},
      {{"name", "ROCELAB_K8S_JOB"}, {"value", p.name}},
      {{"name", "ROCELAB_K8S_SERVICE"}, {"value", p.name}},
      {{"name", "ROCELAB_RUN_KEY"}, {"valueFrom", {{"secretKeyRef", {{"name", key_secret}, {"key", "run-key"}}}}}},
  });
  ordered_json container{
      {"name", "rocelab"},
      {"image", p.image},
      // JOB_COMPLETION_INDEX: the Job controller sets it in an Indexed Job's containers.
      {"args", {"run", "--part", "auto", "--out", "/runs/part-$(JOB_COMPLETION_INDEX)", "/etc/rocelab/scenario.yaml"}},
      {"env", env},
      {"securityContext", {{"privileged", true}}},
      // Memory bounded (a run's largest fabrics take ~1 GiB); no CPU limit: CFS quota would
      // stall the PFC agent's loop, and a run says it is invalid when the machine lags anyway.
      {"resources", {{"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}, {"limits", {{"memory", "4Gi"}}}}},
      {"volumeMounts",
       {{{"name", "scenario"}, {"mountPath", "/etc/rocelab"}, {"readOnly", true}}, {{"name", "runs"}, {"mountPath", "/runs"}}}}};
  ordered_json job{
      {"apiVersion", "batch/v1"},
      {"kind", "Job"},
      {"metadata", meta(p.name)},
      {"spec",
       {{"completionMode", "Indexed"},
        {"completions", p.parts},
        {"parallelism", p.parts},
        {"backoffLimit", 0},
        {"template",
         {{"metadata", {{"labels", labels}}},
          {"spec",
           {{"subdomain", p.name},
            {"restartPolicy", "Never"},
            {"automountServiceAccountToken", false},  // a privileged pod needs no API credentials
            {"containers", {container}},
            {"volumes",
             {{{"name", "scenario"}, {"configMap", {{"name", config}}}}, {{"name", "runs"}, {"emptyDir", ordered_json::object()}}}}}}}}}}};
  // Only the run's own pods reach its rendezvous and VXLAN ports (the key guards the first;
  // nothing but this guards the second); everything else to these pods is refused.
  const ordered_json run_pods{{"matchLabels", {{"rocelab.io/run", p.name}}}};
  ordered_json policy{
      {"apiVersion", "networking.k8s.io/v1"},
      {"kind", "NetworkPolicy"},
      {"metadata", meta(p.name)},
      {"spec",
       {{"podSelector", run_pods},
        {"policyTypes", {"Ingress"}},
        {"ingress",
         {{{"from", {{{"podSelector", run_pods}}}},
           {"ports", {{{"protocol", "TCP"}, {"port", 790}}, {{"protocol", "UDP"}, {"port", 4789}}}}}}}}}};
  return {secret, cm, svc, policy, job};
}

}  // namespace

void add_k8s_options(po::options_description& d) {
  d.add_options()("scenario", po::value<std::string>(), "scenario file (YAML)")(
      "parts", po::value<size_t>(), "M: pods, one part of the split run each (2-64)")(
      "image", po::value<std::string>()->default_value("rocelab:latest"),
      "the container image with rocelab installed (packaging/Containerfile, pushed where the cluster pulls)")(
      "namespace", po::value<std::string>()->default_value("default"), "the Kubernetes namespace")(
      "name", po::value<std::string>(), "the Job's and Service's name (default: rocelab-SCENARIO'S NAME)")(
      "out,o", po::value<std::string>(), "write to this file instead of standard output");
}

int cmd_k8s(const po::variables_map& vm, const Globals&) {
  auto bad = [](const std::string& what) {
    std::cerr << "rocelab k8s: " << what << "\n";
    return int(kExitBadInput);
  };
  if (!vm.count("scenario")) return bad("missing SCENARIO");
  if (!vm.count("parts")) return bad("missing --parts M (the pods the run is split over)");
  K8sPlan p;
  p.parts = vm["parts"].as<size_t>();
  if (p.parts < 2 || p.parts > model::kMaxParts) return bad("--parts: 2 to " + std::to_string(model::kMaxParts));
  const std::string path = vm["scenario"].as<std::string>();
  std::string why;
  auto text = sys::read_file(path, 1u << 20, why);  // a ConfigMap holds at most 1 MiB
  if (!text) return bad(path + ": " + why);
  auto res = run::load_scenario_text(*text, path);
  if (!res.ok()) {
    for (const auto& d : res.diags.sorted()) std::cerr << d.format() << "\n";
    return kExitBadInput;
  }
  p.scenario_text = *text;
  p.name = vm.count("name") ? vm["name"].as<std::string>() : "rocelab-" + res.scenario->name;
  p.ns = vm["namespace"].as<std::string>();
  p.image = vm["image"].as<std::string>();
  if (!model::is_dns_label(p.name, 56)) return bad("--name " + p.name.substr(0, 64) + ": a DNS label of 56 characters at most");
  if (!model::is_dns_label(p.ns)) return bad("--namespace " + p.ns.substr(0, 64) + ": a DNS label");
  auto key = random_key();
  if (!key) return std::cerr << "rocelab k8s: /dev/urandom: cannot read\n", int(kExitEnvironment);
  p.key = *key;
  std::string out = "# rocelab k8s " + path + " --parts " + std::to_string(p.parts) +
                    ": kubectl apply -f this; kubectl logs -f -l rocelab.io/run=" + p.name + " --prefix\n";
  for (const auto& m : manifests(p)) {
    YAML::Emitter e;
    emit(e, m);
    out += std::string("---\n") + e.c_str() + "\n";
  }
  uint32_t mtu = 0;
  for (const auto& l : res.scenario->links) mtu = std::max(mtu, l.mtu);
  std::cerr << "the pods' network must carry " << mtu + 50 << "-byte packets (the links' MTU " << mtu
            << " + VXLAN's 50) between nodes, TCP 790 and UDP 4789\n";
  if (!vm.count("out")) {
    std::cout << out;
    return 0;
  }
  const std::string o = vm["out"].as<std::string>();
  std::string werr;
  const int fd = sys::open_private_for_write(o, werr);  // it holds the run key
  bool ok = fd >= 0;
  for (size_t at = 0; ok && at < out.size();) {
    const ssize_t n = write(fd, out.data() + at, out.size() - at);
    ok = n > 0;
    at += ok ? size_t(n) : 0;
  }
  if (fd >= 0) close(fd);
  if (!ok) return std::cerr << "rocelab k8s: " << o << ": " << (werr.empty() ? std::strerror(errno) : werr) << "\n",
               int(kExitEnvironment);
  std::cerr << "wrote " << o << " (it holds the run key: 0600)\n";
  return 0;
}

}  // namespace rocelab::cli
