// Mutation fuzz over the reference scenarios: ≥ 10,000 seeded mutations never crash or hang
// the loader; some mutation classes must be rejected; whatever is accepted must satisfy the
// model's invariants and round-trip through the resolved dump.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_set>

#include "run/kinds.h"
#include "run/resolved.h"
#include "test_util.h"

using namespace rocelab;
namespace fs = std::filesystem;

namespace {

constexpr int kMutationsPerScenario = 2500;  // x 5 reference scenarios = 12,500
constexpr uint64_t kSeed = 0x5eed2026;

// splitmix64: the same sequence on every standard library, unlike std distributions.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n ? next() % n : 0; }
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

bool is_top_level_key(const std::string& l) {
  return !l.empty() && l[0] != ' ' && l[0] != '#' && l[0] != '-' && l.find(':') != std::string::npos;
}

struct Mutant {
  std::string text;
  std::string what;
  bool must_reject = false;
};

const char* const kTokens[] = {":", "{", "}", "[", "]", ",", "-", "#", "'", "\"", "&a", "*a", "!!str", "~",
                               "0", "-1", "1e309", "99999999999999999999", "1.5", "0x10", "100G", "4KB",
                               "nan", ".inf", "true", "null", "\t", "  ", "\n", "|", ">", "%", "@", "\\"};
const char* const kNumbers[] = {"0", "1", "2", "3", "-1", "7", "64", "1000", "100000", "1.5", "-0.5", "1e9",
                                "18446744073709551616", "4KB", "100G", "abc", "[]", "{}"};

Mutant mutate(const std::string& base, Rng& r) {
  auto lines = lines_of(base);
  Mutant m;
  switch (r.below(11)) {
    case 0: {  // delete a line
      size_t i = r.below(lines.size());
      m.what = "delete line " + std::to_string(i + 1);
      lines.erase(lines.begin() + i);
      break;
    }
    case 1: {  // duplicate a line; a top-level key twice is a duplicate key
      size_t i = r.below(lines.size());
      m.what = "duplicate line " + std::to_string(i + 1);
      m.must_reject = is_top_level_key(lines[i]);
      lines.insert(lines.begin() + i, lines[i]);
      break;
    }
    case 2: {  // swap two lines
      size_t i = r.below(lines.size()), j = r.below(lines.size());
      m.what = "swap lines " + std::to_string(i + 1) + "," + std::to_string(j + 1);
      std::swap(lines[i], lines[j]);
      break;
    }
    case 3: case 4: {  // insert a token somewhere
      std::string t = base;
      size_t at = r.below(t.size() + 1);
      const char* tok = kTokens[r.below(std::size(kTokens))];
      m.what = std::string("insert '") + tok + "' at " + std::to_string(at);
      m.text = t.insert(at, tok);
      return m;
    }
    case 5: {  // delete a span of characters
      std::string t = base;
      size_t at = r.below(t.size()), len = 1 + r.below(8);
      m.what = "erase " + std::to_string(len) + " at " + std::to_string(at);
      m.text = t.erase(at, len);
      return m;
    }
    case 6: {  // truncate
      size_t at = r.below(base.size());
      m.what = "truncate at " + std::to_string(at);
      m.text = base.substr(0, at);
      return m;
    }
    case 7: case 8: {  // replace a number
      std::vector<size_t> digits;
      for (size_t i = 0; i < base.size(); ++i)
        if (std::isdigit(static_cast<unsigned char>(base[i])) && (i == 0 || !std::isalnum(static_cast<unsigned char>(base[i - 1])))) digits.push_back(i);
      if (digits.empty()) return {base, "unchanged", false};
      size_t at = digits[r.below(digits.size())], end = at;
      while (end < base.size() && (std::isalnum(static_cast<unsigned char>(base[end])) || base[end] == '.')) ++end;
      const char* num = kNumbers[r.below(std::size(kNumbers))];
      m.what = "number at " + std::to_string(at) + " -> " + num;
      m.text = base.substr(0, at) + num + base.substr(end);
      return m;
    }
    case 9: {  // an unknown top-level key
      size_t i = r.below(lines.size() + 1);
      m.what = "unknown key at line " + std::to_string(i + 1);
      m.must_reject = true;
      // Inside a block this changes the block instead; only column 0 between top-level keys
      // is sure to land at the top level.
      while (i < lines.size() && !is_top_level_key(lines[i])) ++i;
      lines.insert(lines.begin() + i, "zz_no_such_key: 1");
      break;
    }
    default: {  // a non-positive scale
      const char* bad = r.below(2) ? "0" : "-1000";
      m.what = std::string("scale ") + bad;
      m.must_reject = true;
      for (auto& l : lines)
        if (l.rfind("scale:", 0) == 0) l = std::string("scale: ") + bad;
      break;
    }
  }
  m.text = join(lines);
  return m;
}

// What must hold of any accepted scenario.
void check_invariants(const model::Scenario& s, const std::string& what) {
  std::unordered_set<uint32_t> addrs;
  for (const auto& n : s.nodes) {
    EXPECT_TRUE(s.pool.contains(n.loopback)) << what;
    EXPECT_TRUE(addrs.insert(n.loopback.addr).second) << what;
    if (n.kind == model::NodeKind::kHost) {
      EXPECT_FALSE(n.ports.empty()) << what << ": host " << n.name;
    }
  }
  for (const auto& l : s.links) {
    EXPECT_NE(l.a.node, l.b.node) << what;
    EXPECT_LE(l.a.ifname.size(), model::kIfnameMax) << what;
    EXPECT_LE(l.b.ifname.size(), model::kIfnameMax) << what;
    EXPECT_EQ(l.subnet.len, 31) << what;
    EXPECT_TRUE(s.pool.contains(l.subnet)) << what;
    EXPECT_TRUE(addrs.insert(l.a.addr).second && addrs.insert(l.b.addr).second) << what;
    EXPECT_GE(l.mtu, model::kMtuMin) << what;
    EXPECT_LE(l.mtu, model::kMtuMax) << what;
    EXPECT_GE(s.scale.emulate(l.rate), model::kEmulatedRateMin) << what;
  }
  EXPECT_GT(s.scale.factor(), 0) << what;
  EXPECT_EQ(s.routes.size(), s.nodes.size()) << what;
}

void fuzz_one(const fs::path& file, Rng& rng, size_t& accepted, size_t& rejected) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string base = ss.str();
  for (int i = 0; i < kMutationsPerScenario; ++i) {
    Mutant m = mutate(base, rng);
    std::string label = file.filename().string() + " #" + std::to_string(i) + " (" + m.what + ")";
    auto t0 = std::chrono::steady_clock::now();
    auto r = run::load_scenario_text(m.text, "mutant.yaml");
    // A hang detector, not a speed check: one small file never takes seconds.
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10)) << label;
    if (!r.ok()) {
      ++rejected;
      ASSERT_FALSE(r.diags.empty()) << label << ": rejected without a reason";
      int nlines = static_cast<int>(lines_of(m.text).size()) + 1;
      for (const auto& d : r.diags.items()) {
        EXPECT_FALSE(d.message.empty()) << label;
        EXPECT_LE(d.pos.line, nlines) << label << ": " << d.format();
      }
      continue;
    }
    ++accepted;
    EXPECT_FALSE(m.must_reject) << label << " was accepted:\n" << m.text;
    check_invariants(*r.scenario, label);
    // The loader never reads `derived`, so the reload skips parsing it (big mutants make it
    // tens of MB); the comparison still covers it, recomputed from the reloaded model.
    std::string first = run::resolved_json(*r.scenario).dump();
    auto again = run::load_scenario_text(run::resolved_json(*r.scenario, false).dump(), "resolved.json");
    ASSERT_TRUE(again.ok()) << label << ": its resolved dump does not load:\n"
                            << (again.diags.empty() ? "" : again.diags.sorted().front().format());
    EXPECT_EQ(run::resolved_json(*again.scenario).dump(), first) << label;
  }
}

}  // namespace

TEST(Fuzz, TenThousandMutationsOfTheReferenceScenarios) {
  Rng rng{kSeed};
  size_t accepted = 0, rejected = 0, files = 0;
  std::vector<fs::path> paths;
  for (const auto& e : fs::directory_iterator(fs::path(ROCELAB_SOURCE_DIR) / "scenarios"))
    if (e.path().extension() == ".yaml") paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());  // directory order is not stable; the seed's sequence must be
  for (const auto& p : paths) {
    fuzz_one(p, rng, accepted, rejected);
    ++files;
  }
  ASSERT_GE(files, 4u);
  EXPECT_GE(accepted + rejected, 10000u);
  // Both outcomes occur: a fuzz that rejects everything (or nothing) tests little.
  EXPECT_GT(accepted, 500u);
  EXPECT_GT(rejected, 500u);
  std::cout << "fuzz: " << accepted + rejected << " mutants, " << accepted << " accepted, " << rejected
            << " rejected\n";
}
