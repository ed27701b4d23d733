#pragma once
// Test helper: a GPU greedy continuation against the one it should equal, up to a near-tie. A
// plan storing activations as bf16 (kplan compile --activations bf16) rounds every stored value, so where
// two tokens' logits are within the bf16 tolerance the GPU may pick the other one; from there
// the continuations part. `reference` (the CPU reference over the same plan, which matches
// transformers to ~1e-6) scores the step where they part: the token `want` has there must lead
// the GPU's by at most 1e-2 of the row's largest logit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/step_model.h"

namespace kplan::testing_util {

inline void expect_greedy_up_to_a_near_tie(TargetModel& reference, const std::vector<int32_t>& prompt,
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
  EXPECT_LE(margin, 1e-2 * scale) << label << ": token " << got[m] << " at step " << m << " is not a near-tie of " << want[m];
}

}  // namespace kplan::testing_util
