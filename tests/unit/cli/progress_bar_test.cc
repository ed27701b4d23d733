// The progress bars' text and pacing (tools/kplan/progress_bar.h, drawn by phase.h): amounts in
// the total's unit, rates, ETAs from the counters so far, durations as a person reads them, the
// bar's cells, the whole terminal line and the after-the-fact line, the cut to the terminal's
// width, and the throttle that allows about ten redraws a second.
#include "tools/kplan/progress_bar.h"

#include <gtest/gtest.h>

namespace kplan::cli::progress {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;

TEST(ProgressBar, BytesReadInTheirBestUnit) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(12.3 * kMiB), "12.3 MiB");
  EXPECT_EQ(format_bytes(512.0 * kMiB), "512 MiB");
  EXPECT_EQ(format_bytes(1.8 * kGiB), "1.80 GiB");
  EXPECT_EQ(format_bytes(1023.9 * kMiB), "1.00 GiB");  // not "1024 MiB"
}

TEST(ProgressBar, DoneAndTotalShareTheTotalsUnit) {
  const ProgressUnit bytes = ProgressUnit::byte_count();
  EXPECT_EQ(format_amount(static_cast<uint64_t>(0.92 * kGiB), static_cast<uint64_t>(1.8 * kGiB), bytes), "0.92/1.80 GiB");
  EXPECT_EQ(format_amount(3 * kMiB, 40 * kMiB, bytes), "3.00/40.0 MiB");
  EXPECT_EQ(format_amount(12 * kMiB, 0, bytes), "12.0 MiB");  // no total: the done part alone
  EXPECT_EQ(format_amount(3, 40, ProgressUnit::count("kernels")), "3/40 kernels");
  EXPECT_EQ(format_amount(3, 0, ProgressUnit::count("files")), "3 files");
}

TEST(ProgressBar, RatesFromTheCountersSoFar) {
  EXPECT_EQ(format_rate(static_cast<uint64_t>(1.3 * kGiB), 1.0, ProgressUnit::byte_count()), "1.3 GiB/s");
  EXPECT_EQ(format_rate(850 * kMiB, 1.0, ProgressUnit::byte_count()), "850 MiB/s");
  EXPECT_EQ(format_rate(25, 2.0, ProgressUnit::count("kernels")), "12 kernels/s");
  EXPECT_EQ(format_rate(5, 2.0, ProgressUnit::count("kernels")), "2.5 kernels/s");
  // Nothing to say yet: no time elapsed, or nothing done.
  EXPECT_EQ(format_rate(100, 0.0, ProgressUnit::byte_count()), "");
  EXPECT_EQ(format_rate(0, 3.0, ProgressUnit::byte_count()), "");
}

TEST(ProgressBar, EtaIsTheRestAtTheRateSoFar) {
  EXPECT_FALSE(eta_seconds(0, 100, 1.0).has_value());   // nothing done: no rate yet
  EXPECT_FALSE(eta_seconds(10, 0, 1.0).has_value());    // no total
  EXPECT_FALSE(eta_seconds(10, 100, 0.0).has_value());  // no time
  EXPECT_DOUBLE_EQ(*eta_seconds(25, 100, 1.0), 3.0);
  EXPECT_DOUBLE_EQ(*eta_seconds(100, 100, 4.0), 0.0);
  EXPECT_DOUBLE_EQ(*eta_seconds(150, 100, 4.0), 0.0);   // past the total (a stale estimate)
  EXPECT_EQ(format_eta(92, 180, 0.7), "ETA 0.7 s");
  EXPECT_EQ(format_eta(0, 180, 0.7), "");
}

TEST(ProgressBar, DurationsAsAPersonReadsThem) {
  EXPECT_EQ(format_duration(0.0), "0.0 s");
  EXPECT_EQ(format_duration(0.74), "0.7 s");
  EXPECT_EQ(format_duration(9.94), "9.9 s");
  EXPECT_EQ(format_duration(12.4), "12 s");
  EXPECT_EQ(format_duration(125), "2 min 05 s");
  EXPECT_EQ(format_duration(3720), "1 h 02 min");
  EXPECT_EQ(format_duration(-1), "?");
}

TEST(ProgressBar, BarCellsFollowTheFraction) {
  EXPECT_EQ(render_bar(0, 100, 10), "[          ]");
  EXPECT_EQ(render_bar(50, 100, 10), "[#####     ]");
  EXPECT_EQ(render_bar(99, 100, 10), "[######### ]");  // full only when done
  EXPECT_EQ(render_bar(100, 100, 10), "[##########]");
  EXPECT_EQ(render_bar(200, 100, 4), "[####]");        // clamped
  EXPECT_EQ(render_bar(5, 0, 4), "[    ]");            // no total
}

TEST(ProgressBar, TheTerminalLine) {
  const uint64_t total = static_cast<uint64_t>(1.8 * kGiB), done = static_cast<uint64_t>(0.92 * kGiB);
  // 0.92 GiB in 0.708 s: 1.3 GiB/s, 0.88 GiB left: 0.7 s.
  EXPECT_EQ(progress_line("kplan run", "verifying weights", done, total, ProgressUnit::byte_count(), 0.708),
            "kplan run: verifying weights [##########          ] 0.92/1.80 GiB 1.3 GiB/s ETA 0.7 s");
  // Nothing done yet: no rate, no ETA.
  EXPECT_EQ(progress_line("kplan compile", "compiling kernels", 0, 40, ProgressUnit::count("kernels"), 0.5),
            "kplan compile: compiling kernels [                    ] 0/40 kernels");
  // Without a total: no bar, no ETA.
  EXPECT_EQ(progress_line("kplan synth", "writing d", 12 * kMiB, 0, ProgressUnit::byte_count(), 0.3),
            "kplan synth: writing d 12.0 MiB 40 MiB/s");
  // Done: no ETA.
  EXPECT_EQ(progress_line("kplan run", "x", 4, 4, ProgressUnit::count("files"), 2.0),
            "kplan run: x [####################] 4/4 files 2.0 files/s");
}

TEST(ProgressBar, TheLineAfterTheFact) {
  EXPECT_EQ(summary_line("kplan run", "opening p.kplan", static_cast<uint64_t>(1.8 * kGiB), ProgressUnit::byte_count(), 1.4),
            "kplan run: opening p.kplan: 1.80 GiB in 1.4 s (1.3 GiB/s)");
  EXPECT_EQ(summary_line("kplan run", "loading the model", 0, ProgressUnit::byte_count(), 1.44),
            "kplan run: loading the model: 1.4 s");
  EXPECT_EQ(summary_line("kplan compile", "compiling kernels", 40, ProgressUnit::count("kernels"), 16),
            "kplan compile: compiling kernels: 40 kernels in 16 s (2.5 kernels/s)");
}

TEST(ProgressBar, LinesAreCutToTheTerminal) {
  EXPECT_EQ(fit_width("abcdef", 0), "abcdef");  // width unknown
  EXPECT_EQ(fit_width("abcdef", 7), "abcdef");
  EXPECT_EQ(fit_width("abcdef", 6), "abcde");   // one column spare: the cursor never wraps
  EXPECT_EQ(fit_width("abcdef", 3), "ab");
}

TEST(ProgressBar, RedrawsAreThrottledToTenASecond) {
  RedrawThrottle t(/*start=*/100.0);
  EXPECT_FALSE(t.should_draw(100.05));  // a phase shorter than 0.1 s draws no bar
  EXPECT_TRUE(t.should_draw(100.11));
  EXPECT_FALSE(t.should_draw(100.15));
  EXPECT_FALSE(t.should_draw(100.2));   // 0.09 s after the last redraw
  EXPECT_TRUE(t.should_draw(100.25));
  EXPECT_TRUE(t.should_draw(100.26, /*finished=*/true));  // the last state is always drawn
  EXPECT_EQ(t.draws(), 3);
  // A thousand updates a second for three seconds: about thirty redraws.
  RedrawThrottle busy(0.0);
  for (int i = 1; i <= 3000; ++i) busy.should_draw(i * 0.001);
  EXPECT_GE(busy.draws(), 29);
  EXPECT_LE(busy.draws(), 30);
}

}  // namespace
}  // namespace kplan::cli::progress
