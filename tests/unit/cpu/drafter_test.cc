// The CPU DFlash drafter: shapes and normalisation of its proposals, the context cache
// (incremental observe == observe at once), and refusals of a drafter that does not fit.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/frontend/draft_config.h"
#include "ir/support/error.h"
#include "runtime/cpu/dflash_drafter.h"
#include "runtime/plan_print.h"
#include "tests/unit/cpu/cpu_test_util.h"

namespace kplan {
namespace {

using cpu_test::causal_step;
using cpu_test::relative_error;
using cpu_test::synth_preset;

std::vector<int32_t> iota_positions(int32_t from, size_t n) {
  std::vector<int32_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = from + static_cast<int32_t>(i);
  return p;
}

class CpuDrafterTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CpuDrafterTest, ProposesNormalisedLogProbsPerDepth) {
  const auto& dirs = synth_preset(GetParam());
  auto m = testing_util::reference_model(dirs.target, 64, dirs.draft);
  auto& target = m.target;
  auto& drafter = m.drafter;
  const DraftConfig draft = load_draft_config(dirs.draft / "config.json");
  EXPECT_EQ(drafter->max_depth(), draft.block_size - 1);
  EXPECT_EQ(drafter->capture_layers(), draft.target_layer_ids);
  target->set_capture_layers(drafter->capture_layers());
  const std::vector<int32_t> prompt = {7, 8, 9, 10, 11};
  StepOutput out = target->forward(causal_step(prompt, 0));
  drafter->observe(prompt, iota_positions(0, prompt.size()), out.captured);
  Matrix lp = drafter->propose(12, 5);
  ASSERT_EQ(lp.rows, draft.block_size - 1);
  ASSERT_EQ(lp.cols, target->config().vocab_size);
  for (int64_t r = 0; r < lp.rows; ++r) {
    double z = 0.0;
    for (int64_t c = 0; c < lp.cols; ++c) z += std::exp(static_cast<double>(lp.row(r)[c]));
    EXPECT_NEAR(z, 1.0, 1e-4);
  }
  // propose does not change the context: asking again gives the same answer.
  EXPECT_EQ(drafter->propose(12, 5).data, lp.data);
}

TEST_P(CpuDrafterTest, IncrementalObserveEqualsObserveAtOnce) {
  const auto& dirs = synth_preset(GetParam());
  auto m = testing_util::reference_model(dirs.target, 64, dirs.draft);
  auto& target = m.target;
  auto& a = m.drafter;
  auto b = make_plan_cpu_drafter(m.plan, dirs.draft.string());
  target->set_capture_layers(a->capture_layers());
  const std::vector<int32_t> prompt = {20, 21, 22, 23, 24, 25, 26};
  StepOutput out = target->forward(causal_step(prompt, 0));
  a->observe(prompt, iota_positions(0, prompt.size()), out.captured);
  // b sees the same rows in two parts.
  std::vector<Matrix> first, second;
  for (const Matrix& m : out.captured) {
    Matrix f(3, m.cols), s(4, m.cols);
    std::copy(m.data.begin(), m.data.begin() + 3 * m.cols, f.data.begin());
    std::copy(m.data.begin() + 3 * m.cols, m.data.end(), s.data.begin());
    first.push_back(f);
    second.push_back(s);
  }
  b->observe(std::vector<int32_t>(prompt.begin(), prompt.begin() + 3), iota_positions(0, 3), first);
  b->observe(std::vector<int32_t>(prompt.begin() + 3, prompt.end()), iota_positions(3, 4), second);
  Matrix pa = a->propose(30, 7), pb = b->propose(30, 7);
  for (int64_t r = 0; r < pa.rows; ++r) EXPECT_LT(relative_error(pb.row(r), pa.row(r), pa.cols), 1e-6);
  // reset forgets the context.
  b->reset();
  b->observe(prompt, iota_positions(0, prompt.size()), out.captured);
  EXPECT_EQ(b->propose(30, 7).data, pa.data);
}

TEST_P(CpuDrafterTest, ObserveRejectsWrongCaptures) {
  const auto& dirs = synth_preset(GetParam());
  auto drafter = testing_util::reference_model(dirs.target, 64, dirs.draft).drafter;
  std::vector<int32_t> tokens = {1, 2};
  EXPECT_THROW(drafter->observe(tokens, iota_positions(0, 2), {}), Error);
  std::vector<Matrix> wrong(drafter->capture_layers().size(), Matrix(2, 3));
  EXPECT_THROW(drafter->observe(tokens, iota_positions(0, 2), wrong), Error);
}

INSTANTIATE_TEST_SUITE_P(Presets, CpuDrafterTest, ::testing::Values("tiny", "tiny2"));

TEST(CpuDrafter, RefusesADrafterThatDoesNotFitTheTarget) {
  // tiny2's drafter (hidden 192, layers 1/3/5) against the tiny target (hidden 256, 4 layers).
  testing_util::expect_contains(
      testing_util::error_of([] { testing_util::reference_model(synth_preset("tiny").target, 16, synth_preset("tiny2").draft); }),
      {"drafter does not fit the target", "hidden_size"});
}

// The drafter reads the target's embedding and lm_head from the plan, so it runs against any
// target that returns the captured hidden states: here a second, independent target over the
// same checkpoint (as a GPU target would be), fed the same captures, proposes the same.
TEST(CpuDrafter, WorksAgainstAnyTargetThatReturnsTheCaptures) {
  const auto& dirs = synth_preset("tiny");
  auto m = testing_util::reference_model(dirs.target, 32, dirs.draft);
  auto other = testing_util::reference_target(dirs.target, 32);
  const std::vector<int32_t> prompt = {3, 4, 5};
  m.target->set_capture_layers(m.drafter->capture_layers());
  other->set_capture_layers(m.drafter->capture_layers());
  StepOutput a = m.target->forward(causal_step(prompt, 0)), b = other->forward(causal_step(prompt, 0));
  auto second = make_plan_cpu_drafter(m.plan, "second");
  m.drafter->observe(prompt, iota_positions(0, 3), a.captured);
  second->observe(prompt, iota_positions(0, 3), b.captured);
  EXPECT_EQ(m.drafter->propose(6, 3).data, second->propose(6, 3).data);
}

// --draft-context-window N (the plan's @draft attention {context_window}): the block attends to
// the last N context positions only. A window smaller than the context changes the proposals —
// to exactly those of a drafter that saw only the last N positions (context K/V are per row) —
// and a window as long as the context, or longer, leaves them bit-identical.
TEST(CpuDrafter, ContextWindowSeesOnlyTheLastPositions) {
  const auto& dirs = synth_preset("tiny");
  auto plan_of = [&](int64_t window) {
    return std::make_shared<const plan::Plan>(reference_plan(dirs.target, {.draft = dirs.draft, .draft_context_window = window}));
  };
  const int32_t n = 20, window = 4;
  const auto full = plan_of(0), narrow = plan_of(window), exact = plan_of(n), wide = plan_of(100000);
  ASSERT_TRUE(narrow->draft);
  EXPECT_EQ(narrow->draft->context_window, window);
  EXPECT_EQ(full->draft->context_window, 0);
  EXPECT_NE(narrow->ir_text.find("context_window = 4"), std::string::npos);
  EXPECT_EQ(full->ir_text.find("context_window"), std::string::npos);
  // kplan inspect's summary says it.
  testing_util::expect_contains(plan::describe_plan(*narrow, plan::PlanSection::Summary),
                                {"drafter context window: the last 4 positions"});
  testing_util::expect_contains(plan::describe_plan(*full, plan::PlanSection::Summary),
                                {"drafter context window: none (the whole context)"});

  auto target = make_plan_cpu_target(full, "tiny", 64);
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < n; ++i) prompt.push_back(5 + 37 * i % 900);
  auto drafter = make_plan_cpu_drafter(full, "full");
  target->set_capture_layers(drafter->capture_layers());
  const StepOutput out = target->forward(causal_step(prompt, 0));
  auto proposal = [&](const std::shared_ptr<const plan::Plan>& p) {
    auto d = make_plan_cpu_drafter(p, "drafter");
    d->observe(prompt, iota_positions(0, prompt.size()), out.captured);
    return d->propose(77, n);
  };
  const Matrix want = proposal(full), got = proposal(narrow);
  EXPECT_NE(got.data, want.data) << "a window of " << window << " over " << n << " positions changed nothing";
  EXPECT_EQ(proposal(exact).data, want.data);
  EXPECT_EQ(proposal(wide).data, want.data);

  // The same as the full drafter over the last `window` positions alone.
  std::vector<Matrix> tail;
  for (const Matrix& m : out.captured) {
    Matrix t(window, m.cols);
    std::copy(m.data.end() - window * m.cols, m.data.end(), t.data.begin());
    tail.push_back(t);
  }
  auto alone = make_plan_cpu_drafter(full, "alone");
  alone->observe(std::vector<int32_t>(prompt.end() - window, prompt.end()), iota_positions(n - window, window), tail);
  const Matrix short_context = alone->propose(77, n);
  for (int64_t r = 0; r < got.rows; ++r) EXPECT_LT(relative_error(got.row(r), short_context.row(r), got.cols), 1e-6) << r;

  // Refused by the flag's name through the library too.
  testing_util::expect_contains(testing_util::error_of([&] { plan_of(-1); }), {"--draft-context-window -1", ">= 0"});
  ReferencePlanOptions no_drafter;
  no_drafter.draft_context_window = 8;
  testing_util::expect_contains(testing_util::error_of([&] { reference_plan(dirs.target, no_drafter); }),
                                {"--draft-context-window 8", "--draft DIR"});
}

TEST(CpuDrafter, NeedsAPlanWithADrafter) {
  auto plan = std::make_shared<const plan::Plan>(reference_plan(synth_preset("tiny").target));
  testing_util::expect_contains(testing_util::error_of([&] { make_plan_cpu_drafter(plan, "tiny.kplan"); }),
                                {"tiny.kplan", "no DFlash drafter"});
}

}  // namespace
}  // namespace kplan
