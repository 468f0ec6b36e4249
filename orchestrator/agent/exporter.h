// Live metrics from the agent (`up`/`run --metrics-port N`): Prometheus text on
// 127.0.0.1:N/metrics through prometheus-cpp, read off the fabric at each scrape. Switch
// ports carry SONiC's counter names (SAI port and queue stats, PFC watchdog); host NICs
// also node_exporter's node_infiniband_* names, so existing dashboards read them.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bpf/fabric_maps.h"

namespace rocelab::agent {

struct ExportedPort {
  std::string node, port;
  uint32_t slot = 0;
  int ifindex = 0;
  int netns = -1;  // the node's namespace, entered for the exact-depth probe
  bool host = false;
  uint32_t index = 0;  // the port's index on its node (node_exporter's port label, from 1)
};

class Exporter {
 public:
  // Listens on 127.0.0.1:port; nullptr with `why` when it cannot.
  static std::unique_ptr<Exporter> start(uint16_t port, std::vector<ExportedPort> ports, const bpf::FabricMaps& maps,
                                         double scale, std::string& why);
  ~Exporter();
  // The PFC watchdog's view of a queue, as the agent's loop changes it.
  void set_stormed(uint32_t slot, uint32_t prio, bool stormed);

 private:
  Exporter() = default;
  struct Impl;
  std::shared_ptr<Impl> impl_;
  struct Server;
  std::unique_ptr<Server> server_;
};

}  // namespace rocelab::agent
