// `scale: auto`: the time scale D chosen for this machine (DESIGN.md §3). A short calibration
// measures what the machine forwards through a fabric (the built-in engine's write transfer
// across a small leaf-spine, cached per machine and kernel); the scenario's peak load is
// estimated from its workloads; D is the smallest step of 1, 1.5, 2, 3, 4, 5, 7 x 10^k at which that load takes at most
// kAutoMargin of what the machine forwards.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fabric/kernel_plan.h"
#include "model/scenario.h"
#include "sys/error.h"

namespace rocelab::run {

// What a fabric on this machine keeps up with: wall-clock bits per second summed over the
// links a packet crosses (a packet on a 4-link path counts 4 times), so paths of other
// lengths compare. Measured as the load of the smallest D at which a ring all-reduce over
// 8 hosts keeps its pacing, in choose_scale's own load model.
struct Calibration {
  double link_bps = 0;
  double held_d = 0;        // the smallest D the calibration ring kept up at
  int64_t measured_at = 0;  // unix seconds
  bool cached = false;      // read from the cache, not measured now
};

// At most this share of what the calibration kept up with: it found the edge once, and a
// run must hold 10 times of 10, with other scenarios' burstier moments (at 0.6, 93 runs of
// 95 across the reference scenarios held: loss-recovery and node-crash each fell behind once).
inline constexpr double kAutoMargin = 0.5;

struct ScaleChoice {
  double d = 0;
  double peak_bps = 0;       // physical bits/s sent at the busiest moment (overlapping workloads summed)
  double peak_link_bps = 0;  // the same, x the links each flow crosses
  std::string busiest;       // the workloads of that moment
  std::string why;           // one line for the user
};

// Where a switch's lossless queues would need more than its buffer: XOFF + the headroom of its
// ports, whose emulation term (the agent's reaction budget at the emulated rate) shrinks as D
// grows. One sentence a switch.
std::vector<std::string> headroom_over_buffer(const fabric::KernelPlan& kp);

// Pure: the D for this scenario on a machine that carries `c`, raised (within the slowest
// link's floor) until no switch's lossless headroom exceeds its buffer. An error when even the largest
// D the scenario's slowest link allows (its emulated rate at the floor) is too small.
Result<ScaleChoice> choose_scale(const model::Scenario& s, const fabric::KernelPlan& plan, const Calibration& c);

// Where calibrations are kept: ROCELAB_CACHE_DIR, else /var/cache/rocelab.
std::string calibration_cache_path();

// Whether this machine and kernel have a cached calibration.
bool has_calibration();

// The cached calibration of this machine and kernel, or a new one (about 3 s: a fabric of
// 14 namespaces up, a few 1 s trials of a ring, down) when there is none or `refresh`. Root only.
Result<Calibration> calibrate(bool refresh, const std::function<void(const std::string&)>& progress);

// The two together: sets s.scale (and clears s.scale_auto) or says why it cannot.
Result<ScaleChoice> resolve_auto_scale(model::Scenario& s, bool refresh,
                                       const std::function<void(const std::string&)>& progress);

}  // namespace rocelab::run
