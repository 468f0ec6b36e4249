// How the machines of a split fabric (docs/multi-machine.md) agree on moments and trade
// figures: an all-gather by name over TCP. Part 0 is the hub, listening on its underlay
// address; every other part is a spoke that connects to it (retrying until it listens) and
// introduces itself. Each part offers one message for a tag; once the hub holds every part's,
// it sends the list, in part order, to every spoke. A part that gives up says so (abort), and
// every other part's next exchange fails naming it and why; a part's connection that closes
// fails them too. Frames are length-prefixed; nothing blocks on a slow peer (queued both ways).
// The hub listens on a network others share, so it takes a connection only from a part's
// address (`peers`), which must say hello (small, within seconds) and claim a part that is
// that address's and not taken yet; a stray connection (a port scan, a probe, an impostor) is
// closed and counted, and the run goes on. Spokes connect from their own address.
// With a run key (a secret every part holds) every frame carries an HMAC-SHA256 over its
// connection's fresh nonces (the hub's, in its challenge, and then the spoke's, its first
// frame), its direction and its sequence number: a connection that cannot sign is a stray,
// whatever address it comes from, and a recorded conversation of either side cannot be
// replayed into another.
// (ZeroMQ would do this, but its 14 shared libraries cost every rocelab command ~1.7 ms to
// load, a quarter of a small `down`.)
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sys/error.h"

namespace rocelab::sys {

// TCP port of the hub on part 0's underlay address (the cut links' VXLAN is UDP 4789). Below
// 1024: only root binds it, so no local user can squat it before part 0 starts (4790 before).
inline constexpr uint16_t kRendezvousPort = 790;

class Rendezvous {
 public:
  // `hub`: "ADDR:PORT" of part 0; part 0 listens there, the others connect to it. `peers`:
  // each part's address (host order, peers[0] the hub's): the hub takes part I's hello only
  // from peers[I], and a spoke connects from its own.
  // `key`: the run key (empty: frames unsigned, addresses alone decide).
  static Result<std::unique_ptr<Rendezvous>> open(size_t index, size_t parts, const std::string& hub,
                                                  std::vector<uint32_t> peers, std::string key = {});
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  size_t index() const { return index_; }
  size_t parts() const { return parts_; }
  const std::string& hub() const { return hub_; }

  // Offers `mine` for `tag` (on the first call for that tag; later calls only look) and
  // returns every part's message, in part order, once all are in; nullopt until then. Never
  // waits: the workloads' engine asks between its turns.
  Result<std::optional<std::vector<std::string>>> offer(const std::string& tag, const std::string& mine);
  // The same, waiting until every part's is in, `timeout_ms` passed (an error naming the
  // parts still missing) or `cancel` was set.
  Result<std::vector<std::string>> exchange(const std::string& tag, const std::string& mine, int64_t timeout_ms,
                                            const std::atomic<bool>* cancel = nullptr);
  // Tells the other parts this one stops: their next offer or exchange fails with `why`.
  void abort(const std::string& why);
  // The connections' descriptors: input on one may complete an offer (a caller that sleeps
  // wakes on them).
  std::vector<int> fds() const;
  // Hub: connections refused or dropped (not a part's address, no hello in time, a frame too
  // large before hello, a part claimed twice, too many waiting), and the last one's reason.
  size_t strays() const { return strays_; }
  const std::string& last_stray() const { return last_stray_; }

 private:
  struct Conn {
    int fd = -1;
    size_t part = SIZE_MAX;  // hub: unknown until the spoke's hello
    std::string in, out;     // bytes received not yet framed; bytes queued to send
    bool connecting = false;
    uint32_t src = 0;         // hub: the peer's address (host order)
    int64_t since_ns = 0;     // hub: accepted at (a hello is due within kHelloNs)
    // With a run key: the connection's nonce (the hub's challenge; a spoke holds its frames
    // until it has it) and each direction's next sequence number.
    std::string nonce;
    // The spoke's own nonce, its first frame after the challenge: every frame after it is
    // signed over both, so a hub's recorded stream does not replay into a later connection
    // (the spoke draws anew; only the hub's nonce was in the recording).
    std::string spoke_nonce;
    std::vector<std::string> held;
    uint64_t seq_in = 0, seq_out = 0;
    // Spoke: the hub took this part's hello (its welcome came). Until then a close is the
    // hub letting a waiting connection go (a flood's), not the run's end: the spoke connects
    // again and sends `replay`, every frame it queued on the connection, once more.
    bool welcomed = false;
    std::vector<std::string> replay;
  };
  Rendezvous() = default;
  Status pump(long timeout_ms);  // moves bytes both ways; on the hub, completes tags and sends them
  void connect_to_hub();
  void start_over(Conn& c);
  void mismatch(Conn& c);  // spoke: closed before its welcome; connect again and resend
  void queue(Conn& c, const std::string& tag, const std::vector<std::string>& frames);
  void seal(Conn& c, const std::string& body);  // frames it, signed when there is a key
  std::string mac(const Conn& c, bool from_hub, uint64_t seq, const std::string& body) const;
  bool verify(const Conn& c, bool from_hub, uint64_t seq, const std::string& body, const std::string& sig) const;
  bool take_challenge(Conn& c, const std::string& body, const std::string& tag, const std::string& sig);
  bool read_from(Conn& c);   // false: the peer closed or failed
  bool write_to(Conn& c);
  void take_frames(Conn& c);
  void on_frame(Conn& c, const std::string& tag, std::vector<std::string> data);
  void complete(const std::string& tag);
  void lost(Conn& c);
  void stray(Conn& c, const std::string& why);  // hub: drops a connection that is not a part's
  void accept_parts();
  std::string missing(const std::string& tag) const;

  size_t index_ = 0, parts_ = 1;
  std::string hub_;
  uint32_t hub_addr_ = 0;  // host order
  uint16_t hub_port_ = 0;
  int listen_fd_ = -1;
  std::vector<Conn> conns_;  // hub: the spokes; spoke: the hub
  int64_t next_connect_ns_ = 0;
  std::set<std::string> offered_;
  std::map<std::string, std::vector<std::optional<std::string>>> pending_;  // hub: tag -> each part's
  std::map<std::string, std::vector<std::string>> done_;                    // tag -> every part's
  std::string aborted_;  // why another part stopped, or this one did, or a connection went
  std::vector<uint32_t> peers_;
  std::string key_;
  size_t strays_ = 0;
  std::string last_stray_;
};

}  // namespace rocelab::sys
