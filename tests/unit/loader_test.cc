// Loader behaviour beyond one error per kind: positions, hints, several errors at once, the
// reserved sections, instance names, defaults.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "model/loader.h"
#include "test_util.h"

using namespace rocelab::model;
using namespace rocelab::testing;

namespace {
const char* kSmall = "scale: 1000\nfabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 2}\n";
}

TEST(Loader, DefaultsWhenUnset) {
  auto s = must_load(kSmall);
  EXPECT_EQ(s.seed, kDefaultSeed);
  EXPECT_EQ(s.name, "test");  // the file's stem
  EXPECT_DOUBLE_EQ(s.scale.factor(), 1000.0);
  EXPECT_EQ(format_prefix(s.pool), "198.18.0.0/15");
  for (const auto& l : s.links) {
    EXPECT_EQ(l.rate, kDefaultRate);
    EXPECT_EQ(l.mtu, kDefaultMtu);
  }
  // DSCP 24-31 -> 3, 48-55 -> 6, rest -> 0; priority 3 lossless.
  for (size_t d = 0; d < 64; ++d)
    EXPECT_EQ(s.qos.dscp_to_prio[d], d >= 24 && d <= 31 ? 3 : d >= 48 && d <= 55 ? 6 : 0) << d;
  EXPECT_EQ(s.qos.lossless_mask, 1u << 3);
  // PFC XON defaults to XOFF - 2 x MTU of the fabric.
  ASSERT_TRUE(s.qos.pfc.xon);
  EXPECT_EQ(s.qos.pfc.xon->n, s.qos.pfc.xoff.n - 2 * kDefaultMtu);
}

TEST(Loader, EveryErrorOfAFileIsReportedInOrder) {
  auto e = errors_of(
      "scale: 0\n"
      "seed: -1\n"
      "defaults: {rate: 10 Gb, mtu: 100}\n"
      "fabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 2}\n"
      "colour: blue\n");
  ASSERT_EQ(e.size(), 5u);
  EXPECT_EQ(e[0], "test.yaml:1:8: scale: the scale factor D must be positive, got 0");
  EXPECT_EQ(e[1].rfind("test.yaml:2:7: seed: ", 0), 0u) << e[1];
  EXPECT_EQ(e[2].rfind("test.yaml:3:18: defaults.rate: ", 0), 0u) << e[2];
  EXPECT_EQ(e[3], "test.yaml:3:30: defaults.mtu: 100 is out of range [576, 9216]");
  EXPECT_EQ(e[4], "test.yaml:5:1: colour: unknown key");
}

TEST(Loader, NegativeScaleIsRejected) {
  auto e = errors_of("scale: -5\nfabric: {type: fat-tree, k: 4}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], "test.yaml:1:8: scale: the scale factor D must be positive, got -5");
}

TEST(Loader, DuplicateKeysAreFoundAtAnyDepth) {
  auto e = errors_of("scale: 1000\nfabric: {type: leaf-spine, spines: 2, leaves: 2, hosts_per_leaf: 2, spines: 3}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("fabric.spines: duplicate key"), std::string::npos) << e[0];
}

TEST(Loader, MisspeltRequiredKeyIsOneErrorWithAHint) {
  auto e = errors_of("scale: 1000\nfabric: {typo: leaf-spine, spines: 2}\n");
  ASSERT_EQ(e.size(), 1u) << e[0];
  EXPECT_EQ(e[0], "test.yaml:2:10: fabric.typo: unknown key (did you mean 'type'?)");
}

TEST(Loader, DocumentShapeErrors) {
  EXPECT_EQ(errors_of(""), std::vector<std::string>{"test.yaml:1:1: the document: expected a map, got nothing"});
  auto list = errors_of("- a\n- b\n");
  ASSERT_EQ(list.size(), 1u);
  EXPECT_NE(list[0].find("expected a map"), std::string::npos) << list[0];
  auto two = errors_of(std::string(kSmall) + "---\n" + kSmall);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0], "test.yaml:3:1: syntax error: a scenario file holds one YAML document, found more");
}

TEST(Loader, HostileInstanceNamesAreRejected) {
  for (const char* bad : {"a/b", "x;rm -rf", "$(id)", "-lead", "UPPER", "waytoolonginstancename"}) {
    auto e = errors_of(std::string("name: '") + bad + "'\n" + kSmall);
    ASSERT_EQ(e.size(), 1u) << bad;
    EXPECT_EQ(e[0].rfind("test.yaml:1:7: name: ", 0), 0u) << e[0];
  }
  std::string huge(100 * 1024, 'a');
  EXPECT_EQ(errors_of("name: " + huge + "\n" + kSmall).size(), 1u);
}

TEST(Loader, HostileNodeAndPortNamesAreRejected) {
  auto e = errors_of(
      "scale: 1000\nnodes:\n  - {name: 'sw/1', kind: switch}\n  - {name: h1, kind: host}\n"
      "links:\n  - endpoints: [h1, 'sw/1']\n");
  ASSERT_FALSE(e.empty());
  EXPECT_NE(e[0].find("test.yaml:3:"), std::string::npos) << e[0];
  auto p = errors_of(
      "scale: 1000\nnodes:\n  - {name: sw1, kind: switch}\n  - {name: h1, kind: host}\n"
      "links:\n  - endpoints: [h1, 'sw1:a b']\n");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("interface name"), std::string::npos) << p[0];
}

TEST(Loader, ReservedSectionsParseIntoTypedObjects) {
  auto s = must_load_model(std::string(kSmall) +
                     "qos:\n"
                     "  profile: roce-lossless\n"
                     "  ecn: {kmin: 100KB, kmax: 400KB, pmax: 0.2}\n"
                     "  pfc: {xoff: 256KB, xon: 200KB}\n"
                     "  buffer: {size: 32MB}\n"
                     "hosts: {engine: builtin, dcqcn: nvidia}\n"
                     "workloads:\n"
                     "  - {name: bw, type: write_bw, from: host1, to: host4, message: 64KB, start: 10ms}\n"
                     "faults:\n"
                     "  - {type: link_down, target: 'leaf1:spine1', at: 2s, duration: 500ms}\n"
                     "capture: {ports: ['leaf1:spine1'], snaplen: 256B}\n");
  EXPECT_EQ(s.qos.ecn.kmin.n, 100u * 1024);
  EXPECT_EQ(s.qos.ecn.kmax.n, 400u * 1024);
  EXPECT_DOUBLE_EQ(s.qos.ecn.pmax, 0.2);
  EXPECT_EQ(s.qos.pfc.xoff.n, 256u * 1024);
  EXPECT_EQ(s.qos.pfc.xon->n, 200u * 1024);
  EXPECT_EQ(s.qos.buffer.size.n, 32u << 20);
  EXPECT_EQ(s.hosts.dcqcn, "nvidia");
  ASSERT_EQ(s.workloads.size(), 1u);
  EXPECT_EQ(s.workloads[0].message.n, 64u * 1024);
  EXPECT_EQ(s.workloads[0].start.ns, 10'000'000);
  ASSERT_EQ(s.faults.size(), 1u);
  EXPECT_EQ(s.faults[0].at.ns, 2'000'000'000);
  EXPECT_EQ(s.faults[0].duration->ns, 500'000'000);
  EXPECT_EQ(s.capture.snaplen.n, 256u);
}

TEST(Loader, ReferencesInReservedSectionsAreChecked) {
  auto e = errors_of(std::string(kSmall) +
                     "workloads:\n  - {name: bw, type: write_bw, from: host1, to: hots4}\n"
                     "  - {name: bw, type: write_bw, from: leaf1, to: host2}\n");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_NE(e[0].find("unknown host 'hots4' (did you mean 'host4'?)"), std::string::npos) << e[0];
  EXPECT_NE(e[1].find("two workloads named 'bw'"), std::string::npos) << e[1];
  EXPECT_NE(e[2].find("'leaf1' is a switch, not a host"), std::string::npos) << e[2];
}

// GPU i uses NIC i: a workload end may name a GPU, which must have its NIC.
TEST(Loader, WorkloadEndsNameAHostOrOneOfItsGpus) {
  const std::string rail = "name: r\nscale: 1000\nfabric: {type: rail-optimized, rails: 2, hosts: 2, spines: 1}\n";
  auto s = must_load(rail + "workloads:\n  - {type: write_bw, from: 'host1:gpu1', to: host2}\n");
  ASSERT_EQ(s.workloads.size(), 1u);
  EXPECT_EQ(s.workloads[0].from, "host1");
  EXPECT_EQ(s.workloads[0].from_gpu, 1);
  EXPECT_EQ(s.workloads[0].to, "host2");
  EXPECT_EQ(s.workloads[0].to_gpu, 0);
  auto bad = errors_of(rail + "workloads:\n  - {type: write_bw, from: 'host1:nic1', to: host2}\n");
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_NE(bad[0].find("'host1:nic1' is not HOST or HOST:gpuN"), std::string::npos) << bad[0];
  auto e = errors_of(rail + "workloads:\n  - {type: write_bw, from: 'host1:gpu2', to: host2}\n"
                            "  - {type: write_bw, from: 'host1:gpu0', to: 'host1:gpu1'}\n");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_NE(e[0].find("'host1' has no gpu2 (GPU i uses NIC i; it has 2 NICs)"), std::string::npos) << e[0];
  EXPECT_NE(e[1].find("GPUs of the same host"), std::string::npos) << e[1];
}

// The ring goes by leaf unless the scenario says otherwise; only an allreduce has one.
TEST(Loader, RingOrderIsByLeafUnlessListed) {
  auto s = must_load(std::string(kSmall) + "workloads:\n  - {type: allreduce, hosts: [host4, host1, host3]}\n"
                                           "  - {type: allreduce, ring: as_listed, hosts: [host4, host1, host3]}\n");
  ASSERT_EQ(s.workloads.size(), 2u);
  EXPECT_FALSE(s.workloads[0].ring_as_listed);
  EXPECT_TRUE(s.workloads[1].ring_as_listed);
  auto e = errors_of(std::string(kSmall) + "workloads:\n  - {type: alltoall, ring: as_listed}\n");
  auto r = errors_of(std::string(kSmall) + "workloads:\n  - {type: allreduce, ring: random}\n");
  ASSERT_EQ(e.size(), 1u);
  ASSERT_EQ(r.size(), 1u);
  e.push_back(r[0]);
  EXPECT_NE(e[0].find("'ring' does not apply to an alltoall"), std::string::npos) << e[0];
  EXPECT_NE(e[1].find("random"), std::string::npos) << e[1];
}

TEST(Loader, PfcThresholdsMustLeaveHysteresis) {
  auto e = errors_of(std::string(kSmall) + "qos:\n  pfc: {xoff: 100KB, xon: 100KB}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("qos.pfc: xon 100KiB"), std::string::npos) << e[0];
}

// Issue 5's validation: PFC only on lossless priorities, headroom at least one MTU.
TEST(Loader, PfcOnlyOnLosslessPrioritiesWithHeadroomOfAnMtu) {
  auto e = errors_of(std::string(kSmall) + "qos:\n  lossless: [3, 4]\n  pfc: {priorities: [3, 5]}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("qos.pfc.priorities[1]: priority 5 is not lossless"), std::string::npos) << e[0];
  auto h = errors_of(std::string(kSmall) + "defaults: {mtu: 4200}\nqos:\n  pfc: {headroom: 4199}\n");
  ASSERT_EQ(h.size(), 1u);
  EXPECT_NE(h[0].find("qos.pfc.headroom: 4199B is below one MTU (4200 bytes)"), std::string::npos) << h[0];
  auto ok = rocelab::testing::must_load(std::string(kSmall) + "qos:\n  lossless: [3, 4]\n  pfc: {priorities: [4], headroom: 4200}\n");
  EXPECT_EQ(ok.qos.pfc_mask, 1u << 4);
  EXPECT_EQ(ok.qos.lossless_mask, (1u << 3) | (1u << 4));
  EXPECT_EQ(ok.qos.pfc.headroom->n, 4200u);
}

TEST(Loader, TimeScaleAppliesToEmulatedValuesOnly) {
  auto s = must_load("scale: 250\ndefaults: {rate: 400G}\nfabric: {type: fat-tree, k: 4}\n");
  EXPECT_EQ(s.links[0].rate.bps, 400'000'000'000ULL);
  EXPECT_EQ(s.scale.emulate(s.links[0].rate).bps, 1'600'000'000ULL);
  EXPECT_EQ(s.scale.emulate(Duration{5'000}).ns, 1'250'000);
  EXPECT_EQ(s.scale.emulate(Bytes{4096}).n, 4096u);
}

TEST(Loader, EmulatedRateBelowTheShaperFloorIsRejected) {
  auto e = errors_of("scale: 1000000\ndefaults: {rate: 10G}\nfabric: {type: fat-tree, k: 4}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].rfind("test.yaml:1:8: ", 0), 0u) << e[0];
}

TEST(Loader, FileNamesGiveSafeInstanceNames) {
  EXPECT_EQ(default_instance_name("scenarios/leaf-spine-4x8x4.yaml"), "leaf-spine-4x8x4");
  EXPECT_EQ(default_instance_name("/a/b/My Fabric.yml"), "my-fabric");
  auto n = default_instance_name("/x/a-very-long-scenario-file-name.yaml");
  EXPECT_LE(n.size(), kInstanceNameMax);
  EXPECT_FALSE(n.empty());
}

// Hostile files (issue 17): a device never ends, a FIFO with no writer never answers, a
// huge file is refused unread, bytes that drive a terminal are not echoed, and a file of
// nothing but mistakes gets a bounded list.
TEST(Loader, HostileFilesAreRefusedBoundedAndQuoted) {
  auto first = [](const LoadResult& r) { return r.diags.sorted().front().format(); };
  EXPECT_NE(first(load_scenario_file("/dev/zero")).find("not a regular file"), std::string::npos);

  char dir[] = "/tmp/rocelab-loader-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/fifo.yaml", big = std::string(dir) + "/big.yaml",
                    bad = std::string(dir) + "/bad.yaml";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(first(load_scenario_file(fifo)).find("not a regular file"), std::string::npos);
  {
    std::ofstream(big).seekp(std::streamoff(kMaxScenarioBytes)) << 'x';
  }
  EXPECT_NE(first(load_scenario_file(big)).find("a scenario is at most"), std::string::npos);

  std::string many = kSmall;
  for (int i = 0; i < 5000; ++i) many += "bogus" + std::to_string(i) + ": 1\n";
  many += "name: \"\x1b[2J\x07\"\n";
  {
    std::ofstream(bad) << many;
  }
  const auto r = load_scenario_file(bad);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.diags.size(), Diagnostics::kMaxItems + 1);
  EXPECT_NE(r.diags.sorted().back().message.find("stopped listing"), std::string::npos);
  for (const auto& d : r.diags.sorted())
    for (char c : d.format()) EXPECT_FALSE((unsigned char)c < 0x20 || c == 0x7f) << d.format();

  auto esc = load_scenario_text(std::string(kSmall) + "name: \"a\x1b[2Jb\"\n", "esc.yaml");
  ASSERT_FALSE(esc.ok());
  EXPECT_NE(esc.diags.sorted().front().format().find("\\x1b"), std::string::npos) << esc.diags.sorted().front().format();
  for (const std::string& p : {fifo, big, bad}) std::remove(p.c_str());
  rmdir(dir);
}

// A loaded scenario carries the file's bytes as read, before --set (issue 49): a run copies
// those and never opens the path again.
TEST(Loader, AScenarioKeepsTheBytesItWasLoadedFrom) {
  char dir[] = "/tmp/rocelab-loader-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/s.yaml";
  const std::string text = std::string(kSmall) + "# a comment the model drops\n";
  {
    std::ofstream(path) << text;
  }
  const auto plain = load_scenario_file(path);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain.scenario->source, text);
  const auto set = load_scenario_file(path, {"seed=9"});
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set.scenario->seed, 9u);
  EXPECT_EQ(set.scenario->source, text) << "the file's bytes, not the text with --set applied";
  std::remove(path.c_str());
  EXPECT_EQ(load_scenario_bytes(text, path, {"seed=9"}).scenario->seed, 9u) << "from bytes: the file is gone";
  EXPECT_TRUE(load_scenario_text(text, "t.yaml").scenario->source.empty()) << "from no file";
  rmdir(dir);
}

// hosts.rc: an RNIC's timer by exponent and retry count, or NCCL's by name; ranges as IBTA's.
TEST(Loader, HostsRcTimers) {
  auto s = must_load(kSmall);
  EXPECT_FALSE(s.hosts.rc.fixed) << "unset: the engine's adaptive timer";
  s = must_load(std::string(kSmall) + "hosts: {rc: {timeout: 14, retry_cnt: 3}}\n");
  EXPECT_TRUE(s.hosts.rc.fixed);
  EXPECT_EQ(s.hosts.rc.timeout, 14);
  EXPECT_EQ(s.hosts.rc.retry_cnt, 3);
  EXPECT_EQ(s.hosts.rc.period().ns, 4096LL << 14);  // 67.1 ms
  s = must_load(std::string(kSmall) + "hosts: {rc: nccl}\n");
  EXPECT_EQ(s.hosts.rc.timeout, 20);
  EXPECT_EQ(s.hosts.rc.retry_cnt, 7);
  EXPECT_EQ(must_load(std::string(kSmall) + "hosts: {rc: {timeout: 0}}\n").hosts.rc.period().ns, 0) << "0: infinite";
  for (const char* bad : {"{timeout: 32}", "{retry_cnt: 8}", "{timeout: -1}", "ncc", "{timout: 3}"}) {
    auto e = errors_of(std::string(kSmall) + "hosts: {rc: " + bad + "}\n");
    EXPECT_FALSE(e.empty()) << bad;
  }
}

TEST(Loader, TelemetrySectionSetsSeriesAndInterval) {
  auto d = must_load(kSmall);
  EXPECT_TRUE(d.telemetry.series);
  EXPECT_FALSE(d.telemetry.interval);
  auto s = must_load(std::string(kSmall) + "telemetry: {series: off, interval: 20us}\n");
  EXPECT_FALSE(s.telemetry.series);
  ASSERT_TRUE(s.telemetry.interval);
  EXPECT_EQ(s.telemetry.interval->ns, 20'000);
  auto e = errors_of(std::string(kSmall) + "telemetry: {series: maybe, interval: 0ns, every: 1ms}\n");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_NE(e[0].find("telemetry.series"), std::string::npos) << e[0];
  EXPECT_NE(e[1].find("telemetry.interval"), std::string::npos) << e[1];
  EXPECT_NE(e[2].find("telemetry.every: unknown key"), std::string::npos) << e[2];
}
