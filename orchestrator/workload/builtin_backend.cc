// `builtin`: the built-in RoCEv2 engine (engine/): real wire format, RC transport and DCQCN
// in one thread, on UDP sockets inside the hosts' namespaces. Runs on any kernel.
#include "workload/backend.h"

namespace rocelab::workload {

namespace {

class Builtin final : public Backend {
 public:
  explicit Builtin(const engine::DcqcnParams& emulated) : eng_(emulated, clock_) {}
  Result<size_t> add_endpoint(const EndpointSpec& e) override {
    std::string why;
    auto id = eng_.add_endpoint({e.name, e.netns_fd, e.addr, e.line_bps, e.halted}, why);
    if (!id) return error(Errc::kEnvironment, why);
    return *id;
  }
  Result<size_t> add_qp(size_t ep, const QpSpec& q) override {
    std::string why;
    auto id = eng_.add_qp(ep, q.qpn, q.remote_addr, q.remote_qpn, q.sport, q.send_psn, q.expect_psn, q.rc, why, q.tos,
                          q.nic_paused);
    if (!id) return error(Errc::kEnvironment, why);
    return *id;
  }
  void register_memory(size_t qp, uint32_t rkey, uint64_t va, std::span<uint8_t> m) override {
    eng_.qp(qp).register_memory(rkey, va, m);
  }
  void post_write(size_t qp, Buffer d, uint64_t va, uint32_t rkey) override { eng_.qp(qp).post_write(std::move(d), va, rkey); }
  void post_send(size_t qp, Buffer d) override { eng_.qp(qp).post_send(std::move(d)); }
  std::vector<engine::Completion> poll(size_t qp) override { return eng_.qp(qp).take_completions(); }
  std::optional<std::vector<uint8_t>> take_received(size_t qp) override {
    auto& r = eng_.qp(qp).received();
    if (r.empty()) return std::nullopt;
    auto m = std::move(r.front());
    r.pop_front();
    return m;
  }
  bool failed(size_t qp) const override { return eng_.qp(qp).failed(); }
  uint32_t mtu(size_t qp) const override { return eng_.qp(qp).config().mtu; }
  bool run(const std::function<bool()>& step, sys::Nanos deadline) override { return eng_.run(step, deadline); }
  QpCounters qp_counters(size_t qp) const override { return eng_.qp_report(qp); }
  EndpointCounters endpoint_counters(size_t ep) const override { return eng_.endpoint_stats(ep); }
  size_t qp_count() const override { return eng_.qp_count(); }
  const sys::Clock& clock() const override { return clock_; }

 private:
  sys::MonotonicClock clock_;  // declared before the engine, which keeps a reference
  engine::Engine eng_;
};

}  // namespace

BackendKind builtin_backend() {
  return {"builtin", "the built-in RoCEv2 engine (wire format, RC, DCQCN), on any kernel",
          [](const model::Scenario& s, std::string_view dcqcn) -> Result<std::unique_ptr<Backend>> {
            auto preset = engine::DcqcnParams::preset_named(std::string(dcqcn));
            if (!preset) return error(Errc::kBadInput, "unknown DCQCN preset '" + std::string(dcqcn) + "' (paper, nvidia, off)");
            return std::unique_ptr<Backend>(new Builtin(preset->with(s.hosts.dcqcn_set).emulated(s.scale)));
          }};
}

}  // namespace rocelab::workload
