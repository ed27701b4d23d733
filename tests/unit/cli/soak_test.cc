// kplan soak (issue 12 item 5): the verdict on a memory series (a leak of 64 KiB a call over a
// hundred calls shows, allocator noise within the tolerance does not), and the command on a
// compiled tiny pair on the CPU: both phases run their counts, every series is sampled and judged
// flat, the JSON carries the samples, bad counts are refused by name.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/kplan_cli.h"
#include "tools/kplan/soak_figures.h"

namespace kplan::test {
namespace {

namespace fs = std::filesystem;

TEST(SoakVerdict, ALeakPerCallGrowsAndNoiseDoesNot) {
  using cli::growth_of;
  using cli::MemorySeries;
  MemorySeries leak{"host RSS", {}}, noise{"host RSS", {}};
  for (uint64_t i = 0; i < 100; ++i) {
    leak.bytes.push_back(100'000'000 + i * 64 * 1024);                   // 64 KiB a call
    noise.bytes.push_back(100'000'000 + (i % 3) * 512 * 1024 + (i % 7) * 4096);  // up to ~1 MiB, no trend
  }
  const cli::Growth grew = growth_of(leak, 4 << 20);
  EXPECT_FALSE(grew.flat);
  EXPECT_EQ(grew.grown, 99 * 64 * 1024);
  EXPECT_TRUE(growth_of(noise, 4 << 20).flat);
  EXPECT_FALSE(growth_of(noise, 0).flat) << "a tolerance of 0 refuses any growth";
  EXPECT_EQ(growth_of(noise, 4 << 20).peak, 100'000'000u + 2 * 512 * 1024 + 6 * 4096);
  EXPECT_TRUE(growth_of(MemorySeries{"empty", {}}, 0).flat);
}

TEST(SoakCommand, BothPhasesRunFlatOnTheCpu) {
  testing_util::TempDir dir("soak_cli");
  const SynthPair pair = synth_tiny_pair(dir.path());
  const fs::path plan = dir.path() / "tiny.kplan", json = dir.path() / "soak.json";
  CliResult r = run_kplan("compile --model " + pair.target.string() + " --draft " + pair.draft.string() +
                              " --buckets 1,4,16 --max-context 128 -o " + plan.string(),
                          dir.path());
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_kplan("soak " + plan.string() + " --device cpu --tokens 400 --chunk 100 --sessions 30 --json " + json.string(),
                dir.path());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("DDTree budget 15"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens    host RSS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sessions  host RSS"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("GREW"), std::string::npos) << r.out;
  std::ifstream in(json);
  const nlohmann::json doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["device"], "cpu");
  ASSERT_EQ(doc["phases"].size(), 2u);
  EXPECT_EQ(doc["phases"][0]["units"], 400);
  EXPECT_EQ(doc["phases"][0]["host_rss_bytes"].size(), 4u);  // one sample per call of 100
  EXPECT_EQ(doc["phases"][1]["units"], 30);
  EXPECT_EQ(doc["phases"][1]["host_rss_bytes"].size(), 10u);  // every tenth session
  EXPECT_TRUE(doc["phases"][0]["host_rss_flat"]);
  EXPECT_TRUE(doc["phases"][1]["host_rss_flat"]);
  EXPECT_FALSE(doc["phases"][0].contains("device_memory_bytes")) << "no device memory on the CPU";

  r = run_kplan("soak " + plan.string() + " --device cpu --tokens 0", dir.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--tokens, --chunk and --sessions must be positive"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kplan::test
