#include "engine/dcqcn.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace rocelab::engine {

std::optional<DcqcnParams> DcqcnParams::preset_named(const std::string& name) {
  DcqcnParams p;  // the member defaults are the paper's values
  p.preset = name;
  if (name == "paper") {
    p.byte_counter = model::Bytes{10 * 1024 * 1024};  // "10 MB", MB = MiB as in scenarios
    return p;
  }
  if (name == "off") {
    p.reaction = false;  // PFC alone holds the line: no CNPs sent, none acted on
    p.notification = false;
    return p;
  }
  if (name == "nvidia") {
    // ConnectX-6 firmware defaults (mlx5 roce_np / roce_rp parameters).
    p.cnp_interval = {4'000};          // min_time_between_cnps
    p.initial_alpha = 1023.0 / 1024;   // initial_alpha_value 1023
    p.alpha_window = {1'000};          // dce_tcp_rtt
    p.g = (1024.0 - 1019.0) / 1024;    // dce_tcp_g 1019: the old α keeps 1019/1024
    p.reduce_period = {4'000};         // rate_reduce_monitor_period
    p.rpg_gd = 11;
    p.max_cut = 0.5;                   // rpg_min_dec_fac 50
    p.rate_timer = {300'000};          // rpg_time_reset
    p.byte_counter = {32'767};         // rpg_byte_reset
    p.threshold = 1;                   // rpg_threshold
    p.r_ai = {5'000'000};              // rpg_ai_rate
    p.r_hai = {50'000'000};            // rpg_hai_rate
    p.r_min = {1'000'000};             // rpg_min_rate
    p.clamp_target = false;            // clamp_tgt_rate 0
    p.clamp_target_after_timer = true; // clamp_tgt_rate_after_time_inc 1
    p.rate_on_first_cnp = {0};         // rate_to_set_on_first_cnp 0
    return p;
  }
  if (name == "ns3") {
    // HPCC's ns-3, run.py's dcqcn_paper at --bw 100 (see dcqcn.h).
    p.cnp_interval = {0};               // the ACK of every CE-marked packet carries a CNP
    p.initial_alpha = 1.0;              // set on the first CNP
    p.alpha_window = {50'000};          // ALPHA_RESUME_INTERVAL 50
    p.g = 1.0 / 256;                    // EWMA_GAIN 0.00390625
    p.reduce_period = {50'000};         // RATE_DECREASE_INTERVAL 50
    p.reduce_on_grid = true;
    p.rate_timer = {55'000};            // RP_TIMER 55
    p.byte_counter = {0};               // none
    p.threshold = 1;                    // FAST_RECOVERY_TIMES 1
    p.r_ai = {20'000'000};              // RATE_AI 5 x bw / 25 Mb/s
    p.r_hai = {200'000'000};            // RATE_HAI 50 x bw / 25 Mb/s
    p.r_min = {1'000'000'000};          // MIN_RATE 1000Mb/s
    p.hyper_grows = false;
    p.clamp_target = false;             // CLAMP_TARGET_RATE 0
    p.clamp_target_after_timer = true;
    return p;
  }
  return std::nullopt;
}

DcqcnParams DcqcnParams::with(const model::DcqcnOverrides& o) const {
  DcqcnParams p = *this;
  if (o.cnp_interval) p.cnp_interval = *o.cnp_interval;
  if (o.alpha_timer) p.alpha_timer = *o.alpha_timer;
  if (o.alpha_window) p.alpha_window = *o.alpha_window;
  if (o.rate_timer) p.rate_timer = *o.rate_timer;
  if (o.reduce_period) p.reduce_period = *o.reduce_period;
  if (o.g) p.g = *o.g;
  if (o.initial_alpha) p.initial_alpha = *o.initial_alpha;
  if (o.max_cut) p.max_cut = *o.max_cut;
  if (o.byte_counter) p.byte_counter = *o.byte_counter;
  if (o.threshold) p.threshold = *o.threshold;
  if (o.rate_ai) p.r_ai = *o.rate_ai;
  if (o.rate_hai) p.r_hai = *o.rate_hai;
  if (o.rate_min) p.r_min = *o.rate_min;
  if (o.rate_on_first_cnp) p.rate_on_first_cnp = *o.rate_on_first_cnp;
  if (o.rpg_gd) p.rpg_gd = *o.rpg_gd;
  if (o.clamp_target) p.clamp_target = *o.clamp_target;
  if (o.clamp_target_after_timer) p.clamp_target_after_timer = *o.clamp_target_after_timer;
  if (o.notification_point) p.notification = *o.notification_point;
  if (o.reaction_point) p.reaction = *o.reaction_point;
  return p;
}

DcqcnParams DcqcnParams::emulated(const model::TimeScale& s) const {
  DcqcnParams e = *this;
  e.cnp_interval = s.emulate(cnp_interval);
  e.alpha_timer = s.emulate(alpha_timer);
  e.alpha_window = s.emulate(alpha_window);
  e.rate_timer = s.emulate(rate_timer);
  e.reduce_period = s.emulate(reduce_period);
  e.r_ai = s.emulate(r_ai);
  e.r_hai = s.emulate(r_hai);
  e.r_min = s.emulate(r_min);
  e.rate_on_first_cnp = s.emulate(rate_on_first_cnp);
  return e;
}

const char* to_string(Stage s) {
  switch (s) {
    case Stage::kLine: return "line";
    case Stage::kCut: return "cut";
    case Stage::kFastRecovery: return "fast-recovery";
    case Stage::kAdditive: return "additive";
    case Stage::kHyper: return "hyper";
  }
  return "?";
}

ReactionPoint::ReactionPoint(const DcqcnParams& p, double line_bps)
    : p_(p), line_(line_bps), rc_(line_bps), rt_(line_bps), alpha_(p.initial_alpha) {}

void ReactionPoint::advance(Nanos now) {
  if (!active_) return;
  const bool windowed = p_.alpha_window.ns > 0;
  const Nanos alpha_period = windowed ? p_.alpha_window.ns : p_.alpha_timer.ns;
  constexpr Nanos kNever = std::numeric_limits<Nanos>::max();
  const bool grid = p_.reduce_on_grid;
  for (;;) {
    const Nanos pending = !grid && cut_pending_ ? last_cut_ + p_.reduce_period.ns : kNever;
    const Nanos check = grid ? reduce_next_ : kNever;
    const Nanos next = std::min({alpha_next_, pending, check, rate_next_});
    if (next > now) return;
    if (alpha_next_ == next) {
      alpha_ = (1 - p_.g) * alpha_ + (windowed && cnp_in_window_ ? p_.g : 0.0);
      cnp_in_window_ = false;
      alpha_next_ += alpha_period;
    } else if (pending == next) {
      cut(next);
    } else if (check == next) {
      if (cut_pending_) cut(next);
      reduce_next_ += p_.reduce_period.ns;
    } else {
      increase(true);
      rate_next_ += p_.rate_timer.ns;
    }
  }
}

void ReactionPoint::on_cnp(Nanos now) {
  advance(now);
  ++cnps_;
  if (!p_.reaction) return;
  const bool windowed = p_.alpha_window.ns > 0;
  if (!active_) {
    active_ = true;
    alpha_next_ = now + (windowed ? p_.alpha_window.ns : p_.alpha_timer.ns);
    if (p_.reduce_on_grid) {
      // The first CNP only starts the grids (α's window does not count it); the rate is cut
      // at the first check, and no increase runs before that cut.
      reduce_next_ = now + std::max<Nanos>(p_.reduce_period.ns, 1);
      rate_next_ = std::numeric_limits<Nanos>::max();
      cut_pending_ = true;
      return;
    }
  }
  if (windowed) cnp_in_window_ = true;
  if (p_.reduce_on_grid) {
    cut_pending_ = true;
    return;
  }
  if (p_.reduce_period.ns > 0 && cuts_ > 0 && now - last_cut_ < p_.reduce_period.ns) {
    cut_pending_ = true;
    return;
  }
  cut(now);
}

void ReactionPoint::cut(Nanos now) {
  const double a = alpha_;  // the cut uses α before its update
  if (p_.clamp_target || (p_.clamp_target_after_timer && timer_raised_)) rt_ = rc_;
  const double share = std::min(a / std::ldexp(1.0, p_.rpg_gd - 10), p_.max_cut);
  rc_ = rc_ * (1 - share);
  if (cuts_ == 0 && p_.rate_on_first_cnp.bps > 0) rc_ = double(p_.rate_on_first_cnp.bps);
  if (p_.alpha_window.ns == 0) {
    alpha_ = (1 - p_.g) * a + p_.g;
    alpha_next_ = now + p_.alpha_timer.ns;
  }
  t_ = b_ = hyper_ = 0;
  bytes_ = 0;
  timer_raised_ = false;
  rate_next_ = now + p_.rate_timer.ns;
  last_cut_ = now;
  cut_pending_ = false;
  ++cuts_;
  stage_ = Stage::kCut;
  clamp();
}

void ReactionPoint::on_sent(uint64_t bytes, Nanos now) {
  advance(now);
  if (!active_) return;
  bytes_ += bytes;
  while (p_.byte_counter.n > 0 && bytes_ >= p_.byte_counter.n) {
    bytes_ -= p_.byte_counter.n;
    increase(false);
  }
}

void ReactionPoint::increase(bool by_timer) {
  const int f = p_.threshold;
  // Without a byte counter the stages follow the timer alone: one additive step at t = F.
  const bool timer_only = p_.byte_counter.n == 0;
  if (timer_only ? t_ < f : std::max(t_, b_) < f) {
    stage_ = Stage::kFastRecovery;
  } else if (timer_only ? t_ > f : std::min(t_, b_) >= f) {
    stage_ = Stage::kHyper;
    ++hyper_;
    rt_ += (p_.hyper_grows ? hyper_ : 1) * double(p_.r_hai.bps);
  } else {
    stage_ = Stage::kAdditive;
    rt_ += double(p_.r_ai.bps);
  }
  rt_ = std::min(rt_, line_);
  rc_ = (rt_ + rc_) / 2;
  (by_timer ? t_ : b_) += 1;
  if (by_timer) timer_raised_ = true;
  clamp();
}

void ReactionPoint::clamp() {
  rt_ = std::min(rt_, line_);
  rc_ = std::clamp(rc_, std::min(double(p_.r_min.bps), line_), line_);
}

bool NotificationPoint::on_ce(uint32_t qp, Nanos now) {
  auto [it, fresh] = last_.try_emplace(qp, now);
  if (fresh) return true;
  if (now - it->second < interval_) return false;
  it->second = now;
  return true;
}

}  // namespace rocelab::engine
