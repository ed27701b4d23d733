// The Drafter interface's defaults (runtime/step_model.h): candidates from a dense proposal, and
// observing a target step as its committed tokens, positions and captured rows.
#include <algorithm>
#include <numeric>

#include "ir/support/error.h"
#include "runtime/ddtree/log_softmax.h"
#include "runtime/step_model.h"

namespace kplan {

DepthCandidates top_candidates(const Matrix& log_probs, int64_t depth, int64_t k) {
  if (k < 0 || depth < 0) throw Error("drafter: negative candidate count or depth");
  DepthCandidates c;
  c.depth = depth > 0 ? std::min(depth, log_probs.rows) : log_probs.rows;
  c.k = std::min(k, log_probs.cols);
  c.ids.resize(static_cast<size_t>(c.depth * c.k));
  c.log_probs.resize(c.ids.size());
  std::vector<float> row(static_cast<size_t>(log_probs.cols));
  std::vector<int32_t> ids(row.size());
  for (int64_t d = 0; d < c.depth; ++d) {
    std::copy(log_probs.row(d), log_probs.row(d) + log_probs.cols, row.begin());
    log_softmax_row(row.data(), log_probs.cols);
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + c.k, ids.end(), [&row](int32_t a, int32_t b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    for (int64_t r = 0; r < c.k; ++r) {
      c.ids[static_cast<size_t>(d * c.k + r)] = ids[static_cast<size_t>(r)];
      c.log_probs[static_cast<size_t>(d * c.k + r)] = row[static_cast<size_t>(ids[static_cast<size_t>(r)])];
    }
  }
  return c;
}

DepthCandidates leading_candidates(std::span<const int32_t> ids, std::span<const float> log_probs, int64_t rows,
                                   int64_t width, int64_t depth, int64_t k) {
  DepthCandidates c;
  c.depth = depth > 0 ? std::min(depth, rows) : rows;
  c.k = k;
  if (k > width || ids.size() < static_cast<size_t>(c.depth * width) || log_probs.size() < ids.size())
    throw Error("drafter: " + std::to_string(k) + " candidates asked of rows of " + std::to_string(width));
  for (int64_t d = 0; d < c.depth; ++d)
    for (int64_t r = 0; r < k; ++r) {
      c.ids.push_back(ids[static_cast<size_t>(d * width + r)]);
      c.log_probs.push_back(log_probs[static_cast<size_t>(d * width + r)]);
    }
  return c;
}

void Drafter::observe_step(const StepInput& step, const StepOutput& out, std::span<const int32_t> rows) {
  std::vector<int32_t> tokens, positions;
  std::vector<Matrix> captured;
  for (const Matrix& m : out.captured) captured.emplace_back(static_cast<int64_t>(rows.size()), m.cols);
  for (size_t i = 0; i < rows.size(); ++i) {
    const int32_t r = rows[i];
    if (r < 0 || static_cast<size_t>(r) >= step.tokens.size())
      throw Error("drafter observe: step row " + std::to_string(r) + " outside a " + std::to_string(step.tokens.size()) +
                  "-token step");
    tokens.push_back(step.tokens[static_cast<size_t>(r)]);
    positions.push_back(step.positions[static_cast<size_t>(r)]);
    for (size_t c = 0; c < captured.size(); ++c) {
      const Matrix& m = out.captured[c];
      if (r >= m.rows) throw Error("drafter observe: captured layer has " + std::to_string(m.rows) + " rows, row " + std::to_string(r) + " asked");
      std::copy(m.row(r), m.row(r) + m.cols, captured[c].row(static_cast<int64_t>(i)));
    }
  }
  observe(tokens, positions, captured);
}

}  // namespace kplan
