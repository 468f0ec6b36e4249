// DCQCN (DESIGN.md §2): the notification point that turns CE marks into CNPs, and the
// reaction point that sets a QP's sending rate. Parameters are physical; `emulated()` applies
// the time scale (rates ÷ D, times × D, bytes unchanged) before an engine uses them.
//
// The reading of the paper implemented here (Zhu et al., SIGCOMM 2015, fig. 6 and §5), tested
// by tests/unit/dcqcn_golden.py, an independent model:
//  - A CNP cuts: RT ← RC (see clamp rules for nvidia), RC ← RC·(1 − α/2) with the α before its
//    update, then α ← (1 − g)α + g; the increase timer, byte counter and their counts restart.
//  - α decays, α ← (1 − g)α, every K after the last CNP (the K timer restarts at each CNP).
//  - Increase events: the timer every T after the last cut, the byte counter every B bytes
//    sent after it. t and b count the events before this one since the cut (as HPCC's ns-3
//    model does, so F events of fast recovery precede additive increase); then the event's
//    own count goes up:
//      fast recovery  while max(t, b) < F:  RC ← (RT + RC)/2
//      hyper          once min(t, b) ≥ F:   RT ← RT + i·R_HAI, i = 1, 2, … per hyper event
//                                           since the cut; RC ← (RT + RC)/2
//      additive       otherwise:            RT ← RT + R_AI; RC ← (RT + RC)/2
//    RT and RC are capped at line rate; RC never falls below R_min.
//  - Before its first CNP a QP sends at line rate and runs no timers: nothing to recover.
//    Timers due at the same instant as an event fire first; α's timer before the rate's.
//
// `nvidia` (ConnectX-6 firmware defaults, the mlx5 DCQCN "roce_rp"/"roce_np" parameters):
// α is updated once per dce_tcp_rtt window as α ← (1 − G)α + G·[CNP seen in the window] with
// G = (1024 − dce_tcp_g)/1024. DESIGN.md writes G = dce_tcp_g/1024, which with 1019 would
// make α forget everything in one 1 µs window; 1019/1024 is the weight of the old α, the
// firmware's counterpart of the paper's 1 − g (255/256). A cut happens at most once per
// rate_reduce_monitor_period: a CNP inside the period is applied at its end. The cut factor is
// α/2^(rpg_gd − 10) (rpg_gd 11: α/2), removing at most 1 − rpg_min_dec_fac of RC. RT ← RC on a cut only
// with clamp_tgt_rate, or with clamp_tgt_rate_after_time_inc when the timer raised the rate
// since the last cut; rate_to_set_on_first_cnp (0: unused) sets RC on a QP's first cut.
//
// `ns3`: HPCC's ns-3 simulator (alibaba-edu/High-Precision-Congestion-Control, rdma-hw.cc's
// Mellanox-model DCQCN, with simulation/run.py's dcqcn_paper timers at 100 Gbit/s), the
// reference the DCQCN incast is compared with. Its receiver flags a CNP on the ACK of every
// CE-marked packet (no NP interval); a QP's first CNP sets α = 1 and starts two grids: α is
// updated every alpha_window as nvidia's, and every reduce_period the rate is cut if a CNP
// came since the last check (reduce_on_grid: so the first cut comes one period after the
// first CNP). No byte counter: the stages follow the timer alone (fast recovery while
// t < F, one additive step at t = F, hyper after), each hyper step adds R_HAI (not i·R_HAI),
// and RT ← RC on a cut only after a timer step (CLAMP_TARGET_RATE 0).
#pragma once

#include <optional>
#include <string>
#include <unordered_map>

#include "sys/clock.h"
#include "model/scenario.h"
#include "model/units.h"

namespace rocelab::engine {

using sys::Clock;
using sys::Nanos;

struct DcqcnParams {
  std::string preset = "paper";
  bool reaction = true;      // the reaction point cuts on CNPs (false for `off`)
  bool notification = true;  // the notification point sends CNPs (false for `off`: no CNPs)
  // Notification point
  model::Duration cnp_interval{50'000};
  // Reaction point
  double g = 1.0 / 256;
  double initial_alpha = 1.0;
  model::Duration alpha_timer{55'000};  // K; with alpha_window set, the window instead
  model::Duration alpha_window{0};      // nvidia dce_tcp_rtt: windowed α update
  model::Duration rate_timer{55'000};   // T
  model::Bytes byte_counter{10'000'000};  // B
  int threshold = 5;                    // F
  model::Rate r_ai{40'000'000};
  model::Rate r_hai{200'000'000};
  model::Rate r_min{10'000'000};
  // nvidia-only knobs (paper values make them inert)
  model::Duration reduce_period{0};  // rate_reduce_monitor_period
  int rpg_gd = 11;                   // cut factor α / 2^(rpg_gd - 10)
  double max_cut = 1.0;              // the largest share of RC one cut removes (nvidia:
                                     // 1 − rpg_min_dec_fac)
  bool clamp_target = true;          // clamp_tgt_rate (the paper always sets RT ← RC)
  bool clamp_target_after_timer = false;
  model::Rate rate_on_first_cnp{0};
  // ns3-only (the other presets keep the paper's behaviour)
  bool reduce_on_grid = false;  // cut only at the reduce_period grid from the first CNP
  bool hyper_grows = true;      // the i-th hyper step adds i·R_HAI (the paper); else R_HAI

  static std::optional<DcqcnParams> preset_named(const std::string& name);
  // The preset with the parameters a scenario set (hosts.dcqcn as a map), still physical.
  DcqcnParams with(const model::DcqcnOverrides& o) const;
  DcqcnParams emulated(const model::TimeScale& scale) const;
};

enum class Stage { kLine, kCut, kFastRecovery, kAdditive, kHyper };
const char* to_string(Stage s);

class ReactionPoint {
 public:
  ReactionPoint(const DcqcnParams& p, double line_bps);

  // Each first fires the timers due up to `now`.
  void on_cnp(Nanos now);
  void on_sent(uint64_t bytes, Nanos now);
  void advance(Nanos now);

  double rate() const { return rc_; }  // bit/s
  double target() const { return rt_; }
  double alpha() const { return alpha_; }
  Stage stage() const { return stage_; }
  uint64_t cuts() const { return cuts_; }
  uint64_t cnps() const { return cnps_; }

 private:
  void cut(Nanos now);
  void increase(bool by_timer);
  void clamp();

  DcqcnParams p_;
  double line_;
  double rc_, rt_, alpha_;
  Stage stage_ = Stage::kLine;
  bool active_ = false;  // a first CNP has been seen
  Nanos alpha_next_ = 0;
  Nanos rate_next_ = 0;
  uint64_t bytes_ = 0;
  int t_ = 0, b_ = 0, hyper_ = 0;
  bool timer_raised_ = false;
  // nvidia: windowed α and the rate-reduce monitor period
  bool cnp_in_window_ = false;
  Nanos last_cut_ = 0;
  bool cut_pending_ = false;
  Nanos reduce_next_ = 0;  // ns3: the next check of the reduce grid
  uint64_t cuts_ = 0, cnps_ = 0;
};

// At most one CNP per `interval` per QP; keyed by the local QP that saw the CE mark.
class NotificationPoint {
 public:
  explicit NotificationPoint(Nanos interval) : interval_(interval) {}
  bool on_ce(uint32_t qp, Nanos now);

 private:
  Nanos interval_;
  std::unordered_map<uint32_t, Nanos> last_;
};

}  // namespace rocelab::engine
