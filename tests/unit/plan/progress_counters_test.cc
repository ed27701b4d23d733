// The counters the CLI's progress bars draw (tools/kplan/phase.h), from the work itself: the
// chunked checksum equals the one-shot one at every chunk size and reports every byte once;
// read_plan reports the weight bytes it hashes from (0, total) to (total, total); write_plan its
// two passes (hashing, writing) likewise; compile_kernels' per-kernel lines parse to (done, total).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/plan/stage_progress.h"
#include "ir/support/checksum.h"
#include "schemas/plan_reader.h"
#include "schemas/plan_writer.h"
#include "tests/unit/plan/sample_plan.h"

namespace kplan::plan {
namespace {

TEST(ProgressCounters, ChunkedChecksumIsTheOneShotChecksum) {
  const std::vector<uint8_t> bytes = testing::pattern_bytes(100003, 7);
  for (size_t size : {size_t{0}, size_t{1}, size_t{4096}, size_t{65536}, bytes.size()}) {
    for (size_t chunk : {size_t{0}, size_t{1000}, size_t{4096}, size_t{1} << 20}) {
      SCOPED_TRACE(std::to_string(size) + " bytes in chunks of " + std::to_string(chunk));
      size_t seen = 0;
      int calls = 0;
      const uint64_t h = checksum64_chunked(bytes.data(), size, chunk, [&](size_t n) {
        seen += n;
        ++calls;
        if (chunk > 0) EXPECT_LE(n, chunk);
      });
      EXPECT_EQ(h, checksum64(bytes.data(), size));
      EXPECT_EQ(seen, size);
      if (chunk > 0 && size > chunk) EXPECT_EQ(calls, static_cast<int>((size + chunk - 1) / chunk));
    }
  }
}

// Checks a (done, total) sequence: starts at 0, never goes back, ends at the total.
void expect_counts(const std::vector<std::pair<uint64_t, uint64_t>>& calls, uint64_t total) {
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls.front().first, 0u);
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].second, total);
    if (i) EXPECT_GE(calls[i].first, calls[i - 1].first);
  }
  EXPECT_EQ(calls.back().first, total);
}

TEST(ProgressCounters, ReadingAndWritingAPlanReportTheWeightBytes) {
  Plan plan = testing::sample_plan();
  uint64_t total = 0;
  for (const Weight& w : plan.weights) total += w.data().size();
  ASSERT_GT(total, 0u);
  const auto path = testing::scratch_dir("kplan_progress_test") / "p.kplan";

  std::vector<std::pair<uint64_t, uint64_t>> hashing, writing;
  std::vector<std::string> steps;
  write_plan(plan, path, [&](const char* step, uint64_t done, uint64_t of) {
    if (steps.empty() || steps.back() != step) steps.push_back(step);
    (std::string(step) == "hashing" ? hashing : writing).push_back({done, of});
  });
  EXPECT_EQ(steps, (std::vector<std::string>{"hashing", "writing"}));
  expect_counts(hashing, total);
  expect_counts(writing, total);

  ReadOptions o;
  std::vector<std::pair<uint64_t, uint64_t>> reading;
  o.on_progress = [&](uint64_t done, uint64_t of) { reading.push_back({done, of}); };
  const Plan back = read_plan(path, o);
  EXPECT_EQ(back.weights.size(), plan.weights.size());
  expect_counts(reading, total);
  // Nothing is reported when nothing is hashed.
  reading.clear();
  o.verify_weights = false;
  read_plan(path, o);
  EXPECT_TRUE(reading.empty());
}

TEST(ProgressCounters, KernelCompileLinesParseToTheirCounts) {
  uint64_t done = 0, total = 0;
  EXPECT_TRUE(parse_kernel_progress("codegen: [3/40] matmul_bf16_n64_sm_90 (0.21 s)", &done, &total));
  EXPECT_EQ(done, 3u);
  EXPECT_EQ(total, 40u);
  EXPECT_FALSE(parse_kernel_progress("codegen: kernels: 40 (38 cached, 2 compiled, 0 corrupt) in 1.23 s", &done, &total));
  EXPECT_FALSE(parse_kernel_progress("codegen: [3/0] x", &done, &total));
  EXPECT_FALSE(parse_kernel_progress("codegen: [5/4] x", &done, &total));
  EXPECT_FALSE(parse_kernel_progress("codegen: [3 of 4] x", &done, &total));
}

}  // namespace
}  // namespace kplan::plan
