#include "sys/rendezvous.h"

#include "sys/inet.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

namespace rocelab::sys {

namespace {

constexpr const char* kAbort = "!abort";
constexpr const char* kHello = "!hello";
constexpr const char* kChallenge = "!challenge";  // keyed: the hub's first frame, the connection's nonce
constexpr const char* kWelcome = "!welcome";      // the hub took the spoke's hello: it is that part's now
constexpr const char* kSpokeNonce = "!nonce";     // keyed: the spoke's first frame, its own nonce
constexpr const char* kOpen = "!open";            // unkeyed: the hub's first frame (a keyed spoke stops on it)
constexpr uint32_t kMaxChallengeFrame = 64;       // a keyed spoke's first frame: the challenge is 38 bytes
constexpr size_t kNonceBytes = 16;
constexpr size_t kMacBytes = 32;                  // HMAC-SHA256
constexpr uint32_t kMaxFrame = 256u << 20;  // after hello: a part's figures of the largest fabrics fit
constexpr uint32_t kMaxHelloFrame = 256;    // before hello: the hello itself is ~30 bytes
constexpr size_t kMaxPendingTags = 4096;   // hub: a part's messages waiting for part 0's own (a job's round each)
constexpr int64_t kHelloNs = 5'000'000'000;  // a connection that has not said hello by then is dropped
constexpr size_t kMaxWaiting = 8;            // connections without a hello at once
// A waiting connection younger than this is not let go for a newer one (a part answers its
// challenge within a round trip): a burst of connections refuses the newcomers instead.
constexpr int64_t kYoungNs = 200'000'000;
constexpr size_t kAcceptsPerPump = 32;  // a flood waits in the backlog, not in one long pump
constexpr size_t kMaxPeerText = 500;         // of a peer's abort reason, printed
constexpr int64_t kReconnectNs = 100'000'000;

// A peer's text as this machine prints it: printable ASCII, bounded.
std::string printable(const std::string& s) {
  std::string out;
  for (char ch : s.substr(0, kMaxPeerText)) out += (ch >= 0x20 && ch < 0x7f) ? ch : '?';
  return s.size() > kMaxPeerText ? out + "..." : out;
}

std::string dotted(uint32_t a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." + std::to_string((a >> 8) & 255) + "." +
         std::to_string(a & 255);
}

void keepalive(int fd) {
  const int one = 1, idle = 10, intvl = 5, cnt = 3;  // a machine gone silently is found in ~25 s
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void put32(std::string& s, uint32_t v) {
  const uint32_t n = htonl(v);
  s.append(reinterpret_cast<const char*>(&n), 4);
}

uint32_t get32(const std::string& s, size_t at) {
  uint32_t n;
  std::memcpy(&n, s.data() + at, 4);
  return ntohl(n);
}

// A frame's body: u32 tag length, the tag, u32 count, each datum as u32 length + bytes.
std::string body_of(const std::string& tag, const std::vector<std::string>& data) {
  std::string body;
  put32(body, uint32_t(tag.size()));
  body += tag;
  put32(body, uint32_t(data.size()));
  for (const auto& d : data) {
    put32(body, uint32_t(d.size()));
    body += d;
  }
  return body;
}

}  // namespace

Result<std::unique_ptr<Rendezvous>> Rendezvous::open(size_t index, size_t parts, const std::string& hub,
                                                     std::vector<uint32_t> peers, std::string key) {
  if (parts < 2 || index >= parts) return error(Errc::kBadInput, "a rendezvous needs two parts or more and an index below them");
  if (peers.size() != parts) return error(Errc::kBadInput, "a rendezvous needs every part's address");
  const size_t colon = hub.rfind(':');
  in_addr a{};
  unsigned long port = 0;
  if (colon == std::string::npos || inet_pton(AF_INET, hub.substr(0, colon).c_str(), &a) != 1 ||
      (port = std::strtoul(hub.c_str() + colon + 1, nullptr, 10)) == 0 || port > 65535)
    return error(Errc::kBadInput, "rendezvous address '" + hub + "': expected IPV4:PORT");
  std::unique_ptr<Rendezvous> r(new Rendezvous());
  r->index_ = index;
  r->parts_ = parts;
  r->hub_ = hub;
  r->hub_addr_ = ntohl(a.s_addr);
  r->hub_port_ = uint16_t(port);
  r->peers_ = std::move(peers);
  r->key_ = std::move(key);
  if (index != 0) {
    r->conns_.emplace_back();
    r->queue(r->conns_[0], kHello, {std::to_string(index)});  // sent once connected
    r->connect_to_hub();
    return r;
  }
  r->listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(r->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const sockaddr_in sa = ipv4_sockaddr(r->hub_addr_, r->hub_port_);
  if (r->listen_fd_ < 0 || bind(r->listen_fd_, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 ||
      listen(r->listen_fd_, 64) != 0)  // room for strays while the parts come: they are closed at the next pump
    return error(Errc::kEnvironment, "cannot listen on " + hub + " for the other parts: " + std::strerror(errno));
  return r;
}

Rendezvous::~Rendezvous() {
  // What was queued last (the final figures, an abort) still goes out, for a little while.
  const int64_t until = now_ns() + 2'000'000'000;
  for (Conn& c : conns_)
    while (c.fd >= 0 && !c.connecting && !c.out.empty() && now_ns() < until) {
      pollfd p{c.fd, POLLOUT, 0};
      if (poll(&p, 1, 50) < 0 || !write_to(c)) break;
    }
  for (Conn& c : conns_)
    if (c.fd >= 0) close(c.fd);
  if (listen_fd_ >= 0) close(listen_fd_);
}

// Spoke: a non-blocking connect; refused (part 0 not listening yet) is tried again later.
void Rendezvous::connect_to_hub() {
  Conn& c = conns_[0];
  if (c.fd >= 0 || now_ns() < next_connect_ns_) return;
  next_connect_ns_ = now_ns() + kReconnectNs;
  c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c.fd < 0) return;
  // From this part's own address: the hub takes part I only from peers[I]. An address this
  // machine does not have ends the part here, saying so (the hub would refuse it anyway).
  const sockaddr_in own = ipv4_sockaddr(peers_[index_], 0);
  if (bind(c.fd, reinterpret_cast<const sockaddr*>(&own), sizeof own) != 0) {
    if (aborted_.empty())
      aborted_ = errno == EADDRNOTAVAIL ? "no interface of this machine has the underlay address " + dotted(peers_[index_]) +
                                              " (part " + std::to_string(index_) + "'s in the list of peers)"
                                        : "cannot connect from " + dotted(peers_[index_]) + ": " + std::strerror(errno);
    close(c.fd);
    c.fd = -1;
    return;
  }
  keepalive(c.fd);
  const sockaddr_in sa = ipv4_sockaddr(hub_addr_, hub_port_);
  const int rc = connect(c.fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  if (rc == 0 || errno == EINPROGRESS) {
    c.connecting = rc != 0;
    return;
  }
  close(c.fd);
  c.fd = -1;
}

// A frame: u32 length, then u32 tag length, the tag, u32 count and each datum as u32 length + bytes.
void Rendezvous::queue(Conn& c, const std::string& tag, const std::vector<std::string>& frames) {
  const std::string body = body_of(tag, frames);
  if (index_ != 0 && !c.welcomed) c.replay.push_back(body);
  seal(c, body);
}

// Spoke: the hub closed this connection before taking its hello (it let it go for a flood's,
// or was not ready): nothing of this part's counted there. A fresh connection, then every
// frame again (the hello first), sealed under the new connection's nonce and numbers.
void Rendezvous::start_over(Conn& c) {
  if (c.fd >= 0) close(c.fd);
  c.fd = -1;
  c.connecting = false;
  c.in.clear();
  c.out.clear();
  c.nonce.clear();
  c.spoke_nonce.clear();
  c.held.clear();
  c.seq_in = c.seq_out = 0;
  for (const auto& b : std::exchange(c.replay, {})) {
    c.replay.push_back(b);
    seal(c, b);
  }
  connect_to_hub();
}

// Keyed spoke, unkeyed hub: this part stops, and tells the hub why in the hub's own unsigned
// framing (an unkeyed run trusts its peers' addresses alone anyway), so both stop at once.
void Rendezvous::mismatch(Conn& c) {
  const std::string why = "part " + std::to_string(index_) + " has a run key and part 0 (" + hub_ +
                          ") runs without one (--insecure-no-key): give every part the same key, or none";
  if (aborted_.empty()) aborted_ = why;
  const std::string body = body_of(kAbort, {why});
  c.out.clear();
  put32(c.out, uint32_t(body.size()));
  c.out += body;
  (void)write_to(c);
  lost(c);
}

// Unkeyed: u32 length and the body. Keyed: the same and the body's HMAC; a spoke holds its
// frames until the hub's challenge gives the connection its nonce.
void Rendezvous::seal(Conn& c, const std::string& body) {
  if (!key_.empty() && c.nonce.empty()) {
    c.held.push_back(body);
    return;
  }
  put32(c.out, uint32_t(body.size()));
  c.out += body;
  if (!key_.empty()) {
    const std::string m = mac(c, index_ == 0, c.seq_out++, body);
    if (m.empty() && aborted_.empty()) aborted_ = "HMAC-SHA256 failed (OpenSSL): no frame can be signed";
    c.out += m;
  }
}

// HMAC-SHA256 under the run key of the connection's nonce, the direction, the frame's
// sequence number in that direction and its body.
std::string Rendezvous::mac(const Conn& c, bool from_hub, uint64_t seq, const std::string& body) const {
  std::string msg = "rocelab rendezvous 1";
  msg += c.nonce;
  msg += c.spoke_nonce;  // empty until the spoke's first frame gave it
  msg += from_hub ? 'h' : 's';
  for (int i = 7; i >= 0; --i) msg += char((seq >> (8 * i)) & 0xff);
  msg += body;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!HMAC(EVP_sha256(), key_.data(), int(key_.size()), reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), md, &n) ||
      n != kMacBytes)
    return "";  // OpenSSL failed: nothing verifies, and sealing stops the run (seal)
  return std::string(reinterpret_cast<const char*>(md), n);
}

bool Rendezvous::verify(const Conn& c, bool from_hub, uint64_t seq, const std::string& body, const std::string& sig) const {
  const std::string m = mac(c, from_hub, seq, body);
  return m.size() == kMacBytes && sig.size() == kMacBytes && CRYPTO_memcmp(m.data(), sig.data(), kMacBytes) == 0;
}

// Spoke, keyed: the hub's first frame is its challenge, signed with the nonce it carries.
// false (and the reason in aborted_) when it is not, or not signed with this part's key.
bool Rendezvous::take_challenge(Conn& c, const std::string& body, const std::string& tag, const std::string& sig) {
  std::string why;
  if (tag != kChallenge) {
    why = "part 0 (" + hub_ + ") runs without a run key and this part has one: give every part the same key";
  } else {
    c.nonce = body.substr(body.size() - kNonceBytes);
    if (!verify(c, true, 0, body, sig))
      why = "part 0 (" + hub_ + ")'s challenge is not signed with this part's run key: give every part the same key";
  }
  if (!why.empty()) {
    if (aborted_.empty()) aborted_ = why;
    c.nonce.clear();
    return false;
  }
  c.seq_in = 1;
  // This side's nonce first, signed over the hub's alone; everything after over both.
  std::string mine(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(mine.data()), int(kNonceBytes)) != 1) {
    if (aborted_.empty()) aborted_ = "no random bytes for this part's nonce";
    return false;
  }
  seal(c, body_of(kSpokeNonce, {mine}));
  c.spoke_nonce = mine;
  for (const auto& b : std::exchange(c.held, {})) seal(c, b);
  return true;
}

bool Rendezvous::write_to(Conn& c) {
  while (!c.out.empty()) {
    const ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out.erase(0, size_t(n));
      continue;
    }
    return n < 0 && (errno == EAGAIN || errno == EINTR);
  }
  return true;
}

bool Rendezvous::read_from(Conn& c) {
  char buf[65536];
  while (true) {
    const ssize_t n = recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      c.in.append(buf, size_t(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    return false;  // closed, or failed
  }
}

// Every whole frame received, in one pass (what is left moves to the front once).
void Rendezvous::take_frames(Conn& c) {
  size_t pos = 0;
  struct Consume {
    Conn& c;
    size_t& pos;
    ~Consume() {
      if (c.fd >= 0 && pos) c.in.erase(0, pos);
    }
  } consume{c, pos};
  const size_t sig_bytes = key_.empty() ? 0 : kMacBytes;
  while (c.fd >= 0 && c.in.size() - pos >= 4) {
    const uint32_t len = get32(c.in, pos);
    if (index_ == 0 && c.part == SIZE_MAX && len > kMaxHelloFrame) return stray(c, "a first frame of " + std::to_string(len) + " bytes, not a hello");
    if (len > kMaxFrame || len < 8) return lost(c);
    if (index_ != 0 && sig_bytes && c.nonce.empty()) {  // nothing is trusted before the challenge
      if (len > kMaxChallengeFrame) {
        if (aborted_.empty()) aborted_ = "part 0 (" + hub_ + ")'s first frame is " + std::to_string(len) + " bytes, no challenge";
        return lost(c);
      }
      if (c.in.size() - pos >= 4 + size_t(len) && c.in.compare(pos + 8, std::strlen(kOpen), kOpen) == 0 &&
          get32(c.in, pos + 4) == std::strlen(kOpen))
        return mismatch(c);
    }
    if (c.in.size() - pos < 4 + size_t(len) + sig_bytes) return;
    const std::string body = c.in.substr(pos + 4, len);
    const std::string sig = c.in.substr(pos + 4 + len, sig_bytes);
    pos += 4 + size_t(len) + sig_bytes;
    if (sig_bytes && !c.nonce.empty()) {
      if (!verify(c, index_ != 0, c.seq_in, body, sig)) {
        if (c.part == SIZE_MAX && index_ == 0) return stray(c, "a frame not signed with the run key");
        if (aborted_.empty())
          aborted_ = "a frame from " + (index_ == 0 ? "part " + std::to_string(c.part) : "part 0 (" + hub_ + ")") +
                     " is not signed with the run key (altered on the way?)";
        return lost(c);
      }
      ++c.seq_in;
    }
    size_t at = 0;
    auto field = [&](std::string& out) {
      if (at + 4 > body.size() || at + 4 + get32(body, at) > body.size()) return false;
      out = body.substr(at + 4, get32(body, at));
      at += 4 + out.size();
      return true;
    };
    std::string tag;
    if (!field(tag) || at + 4 > body.size()) return index_ == 0 && c.part == SIZE_MAX ? stray(c, "not a frame") : lost(c);
    const uint32_t count = get32(body, at);
    at += 4;
    std::vector<std::string> data(std::min<uint32_t>(count, uint32_t(parts_ + 1)));
    for (auto& d : data)
      if (!field(d)) return lost(c);
    if (index_ != 0 && sig_bytes && c.nonce.empty()) {  // the hub's challenge comes first
      if (data.size() != 1 || data[0].size() != kNonceBytes || !take_challenge(c, body, tag, sig)) {
        if (aborted_.empty()) aborted_ = "part 0 (" + hub_ + ")'s first frame is no challenge";
        return lost(c);
      }
      continue;
    }
    if (index_ != 0 && !sig_bytes && tag == kChallenge) {
      if (aborted_.empty())
        aborted_ = "part 0 (" + hub_ + ") asks for a run key (--run-key FILE or ROCELAB_RUN_KEY) and this part has none";
      return lost(c);
    }
    on_frame(c, tag, std::move(data));
  }
}

void Rendezvous::on_frame(Conn& c, const std::string& tag, std::vector<std::string> data) {
  if (index_ != 0) {  // from the hub: its welcome, every part's messages for a tag, or an abort
    if (tag == kWelcome) {
      c.welcomed = true;
      c.replay.clear();
    } else if (tag == kAbort) {
      if (aborted_.empty()) aborted_ = data.empty() ? "part 0 stopped" : printable(data[0]);
    } else if (data.size() == parts_) {
      done_[tag] = std::move(data);
    }
    return;
  }
  if (c.part == SIZE_MAX) {  // the first frame must be a hello naming a part of this address
    if (!key_.empty() && c.spoke_nonce.empty()) {  // keyed: the spoke's nonce comes before
      if (tag != kSpokeNonce || data.size() != 1 || data[0].size() != kNonceBytes) return stray(c, "no nonce");
      c.spoke_nonce = data[0];
      return;
    }
    if (key_.empty() && tag == kAbort && !data.empty()) {  // a keyed part met this unkeyed hub (mismatch())
      if (aborted_.empty()) aborted_ = "a part at " + dotted(c.src) + " stopped: " + printable(data[0]);
      return stray(c, "it stopped: " + printable(data[0]));
    }
    if (tag != kHello) return stray(c, "no hello");
    const size_t part = data.empty() ? 0 : std::strtoul(data[0].c_str(), nullptr, 10);
    if (part == 0 || part >= parts_) return stray(c, "a hello naming no part");
    if (peers_[part] != c.src) return stray(c, "a hello for part " + std::to_string(part) + ", whose address is " + dotted(peers_[part]));
    for (const Conn& o : conns_)
      if (&o != &c && o.fd >= 0 && o.part == part) return stray(c, "a hello for part " + std::to_string(part) + ", already here");
    c.part = part;
    queue(c, kWelcome, {});  // the spoke stops treating a close as the hub's flood control
    (void)write_to(c);
    return;
  }
  if (tag == kHello || data.empty()) return;
  if (tag == kAbort) {
    if (aborted_.empty()) aborted_ = "part " + std::to_string(c.part) + " stopped: " + printable(data[0]);
    for (Conn& o : conns_)
      if (&o != &c && o.part != SIZE_MAX) {
        queue(o, kAbort, {aborted_});
        (void)write_to(o);
      }
    return;
  }
  // A part runs at most a barrier ahead of part 0 (a round of each lock-step job), so its
  // waiting tags are few: one that keeps sending tags part 0 never offers is not the same
  // run (or not well), and would otherwise grow part 0 until the OOM killer came.
  size_t tags = 1, bytes = tag.size() + data[0].size();
  for (const auto& [t, slots] : pending_)
    if (t != tag && slots.size() > c.part && slots[c.part]) {
      ++tags;
      bytes += t.size() + slots[c.part]->size();
    }
  if (tags > kMaxPendingTags || bytes > kMaxFrame) {
    if (aborted_.empty())
      aborted_ = "part " + std::to_string(c.part) + " sent " + std::to_string(tags) + " messages (" + std::to_string(bytes >> 20) +
                 " MiB) that part 0 has not reached: more than a run's parts ever wait for (" + std::to_string(kMaxPendingTags) +
                 ", " + std::to_string(kMaxFrame >> 20) + " MiB)";
    return lost(c);
  }
  auto& slots = pending_[tag];
  slots.resize(parts_);
  slots[c.part] = std::move(data[0]);
  complete(tag);
}

// Hub: once every part's message for `tag` is in, it is done here and goes to every spoke.
void Rendezvous::complete(const std::string& tag) {
  auto it = pending_.find(tag);
  if (it == pending_.end()) return;
  for (const auto& s : it->second)
    if (!s) return;
  std::vector<std::string> all;
  for (auto& s : it->second) all.push_back(std::move(*s));
  pending_.erase(it);
  for (Conn& c : conns_)
    if (c.part != SIZE_MAX && c.fd >= 0) {
      queue(c, tag, all);
      (void)write_to(c);  // at once: a start barrier's skew is this message's latency
    }
  done_[tag] = std::move(all);
}

void Rendezvous::stray(Conn& c, const std::string& why) {
  ++strays_;
  last_stray_ = "a connection from " + dotted(c.src) + " was closed: " + why;
  if (c.fd >= 0) close(c.fd);
  c.fd = -1;
  c.in.clear();
  c.out.clear();
}

// Hub: takes the connections waiting, each only from a part's address. When too many wait
// for their hello the oldest goes: a flood of idle connections cannot keep a part out, it
// would have to outpace the part's own hello (sent the moment it connects, or is challenged).
void Rendezvous::accept_parts() {
  for (size_t n = 0; n < kAcceptsPerPump; ++n) {
    sockaddr_in from{};
    socklen_t len = sizeof from;
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    Conn c{fd};
    c.src = ntohl(from.sin_addr.s_addr);
    c.since_ns = now_ns();
    if (std::find(peers_.begin() + 1, peers_.end(), c.src) == peers_.end()) {
      stray(c, "not the address of any part (--peers)");
      continue;
    }
    std::vector<Conn*> waiting, old;
    for (Conn& o : conns_)
      if (o.fd >= 0 && o.part == SIZE_MAX) {
        waiting.push_back(&o);
        if (c.since_ns - o.since_ns > kYoungNs) old.push_back(&o);
      }
    if (waiting.size() >= kMaxWaiting) {
      // The oldest goes, if it has had its time; else this newcomer (a burst faster than a
      // round trip is a flood's, and a part challenged a moment ago keeps its place).
      if (old.empty()) {
        stray(c, "too many connections waiting for their hello, all of them just come");
        continue;
      }
      stray(**std::min_element(old.begin(), old.end(), [](const Conn* a, const Conn* b) { return a->since_ns < b->since_ns; }),
            "too many connections waiting for their hello: the oldest goes");
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    keepalive(fd);
    if (!key_.empty()) {  // the challenge: this connection's nonce, and the first frame it gets
      c.nonce.resize(kNonceBytes);
      if (RAND_bytes(reinterpret_cast<unsigned char*>(c.nonce.data()), int(kNonceBytes)) != 1) {
        stray(c, "no random bytes for its challenge");
        continue;
      }
      queue(c, kChallenge, {c.nonce});
      (void)write_to(c);
    } else {  // says so at once: a keyed spoke stops instead of waiting for a challenge
      queue(c, kOpen, {});
      (void)write_to(c);
    }
    // A slot of a connection gone is reused: the list stays as long as the parts.
    auto free = std::find_if(conns_.begin(), conns_.end(), [](const Conn& o) { return o.fd < 0; });
    if (free != conns_.end()) *free = std::move(c);
    else conns_.push_back(std::move(c));
  }
}

// A part's connection that closed or spoke nonsense: every exchange not done yet fails. On the
// hub, a connection that never said hello is not a part's: it only goes.
void Rendezvous::lost(Conn& c) {
  if (index_ == 0 && c.part == SIZE_MAX) return stray(c, "closed before its hello");
  if (index_ != 0 && !c.welcomed && aborted_.empty()) return start_over(c);  // the hub never took it
  if (aborted_.empty())
    aborted_ = index_ == 0 ? (c.part == SIZE_MAX ? "a connection to the rendezvous broke before it said its part"
                                                 : "part " + std::to_string(c.part) + " closed its connection (it stopped)")
                           : "part 0 (" + hub_ + ") closed its connection (it stopped)";
  if (c.fd >= 0) close(c.fd);
  c.fd = -1;
  c.in.clear();
  c.out.clear();
}

Status Rendezvous::pump(long timeout_ms) {
  if (index_ != 0) connect_to_hub();
  std::vector<pollfd> pfds;
  if (listen_fd_ >= 0) pfds.push_back({listen_fd_, POLLIN, 0});
  for (const Conn& c : conns_)
    if (c.fd >= 0) pfds.push_back({c.fd, short(POLLIN | (c.connecting || !c.out.empty() ? POLLOUT : 0)), 0});
  if (poll(pfds.data(), pfds.size(), int(pfds.empty() ? std::min(timeout_ms, 100L) : timeout_ms)) < 0 && errno != EINTR)
    return error(Errc::kEnvironment, std::string("waiting for the other parts: ") + std::strerror(errno));
  if (listen_fd_ >= 0) accept_parts();
  for (Conn& c : conns_) {
    if (c.fd < 0) continue;
    if (index_ == 0 && c.part == SIZE_MAX && now_ns() - c.since_ns > kHelloNs) {
      stray(c, "no hello within " + std::to_string(kHelloNs / 1'000'000'000) + " s");
      continue;
    }
    if (c.connecting) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      pollfd p{c.fd, POLLOUT, 0};
      if (err == 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLOUT)) {
        c.connecting = false;
        const int one = 1;
        setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      } else if (err != 0 && err != EINPROGRESS) {  // refused: part 0 is not listening yet
        close(c.fd);
        c.fd = -1;
        continue;
      } else {
        continue;
      }
    }
    if (!write_to(c) || !read_from(c)) {
      take_frames(c);  // what arrived before it closed still counts
      lost(c);
      continue;
    }
    take_frames(c);
  }
  return ok();
}

Result<std::optional<std::vector<std::string>>> Rendezvous::offer(const std::string& tag, const std::string& mine) {
  if (offered_.insert(tag).second) {
    if (index_ == 0) {
      auto& slots = pending_[tag];
      slots.resize(parts_);
      slots[0] = mine;
      complete(tag);
    } else {
      queue(conns_[0], tag, {mine});
    }
  }
  if (auto st = pump(0); !st) return st.error();
  auto it = done_.find(tag);
  if (it == done_.end()) {
    if (!aborted_.empty()) return error(Errc::kEnvironment, aborted_);
    return std::optional<std::vector<std::string>>();
  }
  std::vector<std::string> all = std::move(it->second);
  done_.erase(it);
  return std::optional<std::vector<std::string>>(std::move(all));
}

std::string Rendezvous::missing(const std::string& tag) const {
  if (index_ != 0)
    return "part 0 (" + hub_ + ")" +
           (!key_.empty() && conns_[0].nonce.empty() ? ", which has not challenged this part (does it run with the run key?)" : "");
  std::string out;
  auto it = pending_.find(tag);
  for (size_t p = 1; p < parts_; ++p)
    if (it == pending_.end() || it->second.size() <= p || !it->second[p])
      out += (out.empty() ? "part " : ", ") + std::to_string(p);
  if (!out.empty() && !last_stray_.empty()) out += " (meanwhile " + last_stray_ + ")";
  return out.empty() ? "none" : out;
}

Result<std::vector<std::string>> Rendezvous::exchange(const std::string& tag, const std::string& mine, int64_t timeout_ms,
                                                      const std::atomic<bool>* cancel) {
  const int64_t deadline = now_ns() + timeout_ms * 1'000'000;
  while (true) {
    auto r = offer(tag, mine);
    if (!r) return r.error();
    if (*r) return std::move(**r);
    if (cancel && cancel->load()) return error(Errc::kEnvironment, "cancelled while waiting for the other parts (" + tag + ")");
    const int64_t left_ms = (deadline - now_ns()) / 1'000'000;
    if (left_ms <= 0)
      return error(Errc::kEnvironment, "waited " + std::to_string(timeout_ms / 1000) + " s at '" + tag + "' for " +
                                           missing(tag) + " (is rocelab run --part running on every machine, "
                                           "with the same scenario and --peers?)");
    if (auto st = pump(std::min<int64_t>(left_ms, 50)); !st) return st.error();
  }
}

std::vector<int> Rendezvous::fds() const {
  std::vector<int> out;
  for (const Conn& c : conns_)
    if (c.fd >= 0) out.push_back(c.fd);
  return out;
}

void Rendezvous::abort(const std::string& why) {
  if (!aborted_.empty()) return;
  aborted_ = "part " + std::to_string(index_) + " stopped: " + why;
  for (Conn& c : conns_)
    if (c.fd >= 0 && (index_ != 0 || c.part != SIZE_MAX)) queue(c, kAbort, {index_ == 0 ? aborted_ : why});
  (void)pump(0);
}

}  // namespace rocelab::sys
