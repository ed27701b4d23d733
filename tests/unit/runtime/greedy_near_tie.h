#pragma once
// Test helper: a GPU greedy continuation against the one it should equal, up to a near-tie. A
// plan storing values as bf16 (the KV caches by default, --activations bf16 too) rounds them, so
// where two tokens' logits are within the bf16 tolerance the GPU may pick the other one; from
// there the continuations part. `reference` (the CPU reference over the same plan, which matches
// transformers to ~1e-6) scores the step where they part: the token `want` has there must lead
// the GPU's by at most 1e-2 of the row's largest logit, or that step's row must route within
// kRouterNearTie of a tie in some layer (a rounded input may choose the other expert there, and
// the layer's output jumps: the tiny goldens' sigmoid routers, all scores near 0.5, do this), or
// an earlier row of the context within kUpstreamNearTie (its flipped expert changed that row's
// later layers, which the step attends to: tiny-yarn's prompt row 2, 1.5e-3 from a tie, parted a
// GPU continuation 11 steps on with the tensor-core paths, bench/RESULTS.md 2026-12-06 session 37).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/cpu/cpu_target.h"
#include "runtime/step_model.h"

namespace kplan::testing_util {

// A gap between a chosen and an unchosen expert's selection score (sigmoid + correction bias)
// that bf16 rounding upstream can close: bf16 KV caches flipped ones of 1.2e-3 (tiny's tree row)
// and 2.0e-3 (tiny2's greedy step 4) in the launch emulator.
constexpr double kRouterNearTie = 5e-3;
// The same for a row before the step's (tighter: its flip must carry through attention).
constexpr double kUpstreamNearTie = 2e-3;

inline void expect_greedy_up_to_a_near_tie(cpu::CpuTarget& reference, const std::vector<int32_t>& prompt,
                                           const std::vector<int32_t>& got, const std::vector<int32_t>& want,
                                           const std::string& label) {
  ASSERT_EQ(got.size(), want.size()) << label;
  const size_t m = static_cast<size_t>(std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin());
  if (m == got.size()) return;
  std::vector<int32_t> prefix = prompt;
  prefix.insert(prefix.end(), want.begin(), want.begin() + static_cast<std::ptrdiff_t>(m));
  StepInput at{prefix, {}, {}};
  for (size_t i = 0; i < prefix.size(); ++i) at.positions.push_back(static_cast<int32_t>(i));
  reference.reset();
  const StepOutput step = reference.forward(at);
  const float* row = step.logits.row(step.logits.rows - 1);
  double scale = 0;
  for (int64_t i = 0; i < step.logits.cols; ++i) scale = std::max(scale, std::fabs(static_cast<double>(row[i])));
  ASSERT_TRUE(got[m] >= 0 && got[m] < step.logits.cols) << label << ": token " << got[m] << " outside the vocabulary";
  const double margin = static_cast<double>(row[want[m]]) - row[got[m]];
  std::printf("[ figures  ] %s: greedy parts at step %zu (got %d, want %d), a reference logit margin of %.3g (%.3g of "
              "the row's scale)\n",
              label.c_str(), m, got[m], want[m], margin, margin / scale);
  const std::vector<float>& routes = reference.router_margins();
  const double route = routes.empty() ? INFINITY : routes.back();
  if (margin > 1e-2 * scale && route <= kRouterNearTie) {
    std::printf("[ figures  ] %s: that step's row routes %.3g from a tie: a flipped expert, not a logit error\n", label.c_str(), route);
    return;
  }
  if (margin > 1e-2 * scale && routes.size() > 1) {
    const auto upstream = std::min_element(routes.begin(), routes.end() - 1);
    if (*upstream <= kUpstreamNearTie) {
      std::printf("[ figures  ] %s: context row %td routes %.3g from a tie: a flipped expert upstream, not a logit error\n",
                  label.c_str(), upstream - routes.begin(), static_cast<double>(*upstream));
      return;
    }
  }
  EXPECT_LE(margin, 1e-2 * scale) << label << ": token " << got[m] << " at step " << m << " is not a near-tie of " << want[m]
                                  << " (that step's row routes " << route << " from a tie)";
}

}  // namespace kplan::testing_util
