// kplan run --spec compare: what kplan exists for, on one prompt. The same session decodes it
// with plain AR, DFlash's single draft chain and a DDTree of --budget nodes (the user's drafter,
// temperature, seed and max-new for all three), checks that the three emit the same tokens
// (greedy, or sampled with one seed: the walk is lossless either way), and prints one table row
// per mode, timed by the wall clock around each kplan_session_generate call.
//
// kplan run --compare: the check alone, for one mode. AR decodes first, then the chosen mode
// (DFlash or DDTree) with the same settings; the mode's tokens are printed as a plain run prints
// them, and the two must be equal token for token, greedy or sampled (one seed gives AR's sample
// in every mode: describe_sampling in token_diff.h says why).
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/support/error.h"
#include "tools/kplan/mode_table.h"
#include "tools/kplan/run_compare.h"
#include "tools/kplan/timed_generate.h"
#include "tools/kplan/token_diff.h"

namespace kplan::cli {

namespace {

struct ModeRun {
  std::string label;
  TimedGenerate decoded;
};

}  // namespace

void run_compare(const CompareTarget& target, std::span<const int32_t> prompt, const kplan_generate_options& options,
                 bool print_stats) {
  const std::string timing = warm_up(target.session, prompt, options);

  std::vector<ModeRun> runs;
  runs.reserve(3);
  for (kplan_spec_mode spec : {KPLAN_SPEC_NONE, KPLAN_SPEC_DFLASH, KPLAN_SPEC_DDTREE}) {
    kplan_generate_options mode = options;
    mode.spec = spec;
    // The oracle drafter is told AR's tokens; left to itself it would decode AR inside the timed call.
    if (spec != KPLAN_SPEC_NONE && mode.drafter == KPLAN_DRAFTER_ORACLE) {
      mode.oracle_continuation = runs[0].decoded.tokens.data();
      mode.oracle_continuation_length = static_cast<int32_t>(runs[0].decoded.tokens.size());
    }
    runs.push_back({mode_label(spec, options.budget), generate_timed(target.session, prompt, mode)});
  }
  const ModeRun& ar = runs[0];
  print_tokens(target.plan, target.info, ar.decoded.tokens);

  std::optional<std::string> mismatch;
  for (size_t i = 1; i < runs.size() && !mismatch; ++i)
    if (auto d = first_difference(ar.decoded.tokens, runs[i].decoded.tokens))
      mismatch = describe_difference(runs[i].label, ar.label, *d);
  const std::string sampling = describe_sampling(options.temperature, options.seed);
  if (!mismatch)
    std::printf("identical: %s, %s and %s emit the same %zu tokens (%s)\n", runs[0].label.c_str(),
                runs[1].label.c_str(), runs[2].label.c_str(), ar.decoded.tokens.size(), sampling.c_str());
  std::printf("device: %s, drafter %s\n", describe_device(target.session, target.source).c_str(),
              target.drafter.c_str());
  std::printf("timing: %s\n", timing.c_str());

  std::vector<std::string> headers = {"mode"};
  for (std::string& h : mode_headers()) headers.push_back(std::move(h));
  TextTable table(std::move(headers), 1);
  DecodeFigures ar_figures;
  ar_figures.add(ar.decoded);
  for (const ModeRun& run : runs) {
    DecodeFigures figures;
    figures.add(run.decoded);
    std::vector<std::string> row = {run.label};
    for (std::string& cell : mode_cells(figures, ar_figures)) row.push_back(std::move(cell));
    table.add_row(std::move(row));
  }
  std::fputs(table.str().c_str(), stdout);
  std::fflush(stdout);
  if (print_stats)
    for (const ModeRun& run : runs) {
      std::fprintf(stderr, "stats: mode                 %s\n", run.label.c_str());
      print_generate_stats(run.decoded);
    }
  if (mismatch) throw Error("the modes disagree (" + sampling + "): " + *mismatch);
}

void run_against_ar(const CompareTarget& target, std::span<const int32_t> prompt, const kplan_generate_options& options,
                    bool print_stats) {
  kplan_generate_options ar_options = options;
  ar_options.spec = KPLAN_SPEC_NONE;
  const TimedGenerate ar = generate_timed(target.session, prompt, ar_options);
  kplan_generate_options mode = options;
  // The oracle drafter is told AR's tokens instead of decoding AR again.
  if (mode.drafter == KPLAN_DRAFTER_ORACLE) {
    mode.oracle_continuation = ar.tokens.data();
    mode.oracle_continuation_length = static_cast<int32_t>(ar.tokens.size());
  }
  const TimedGenerate decoded = generate_timed(target.session, prompt, mode);
  const std::string label = mode_label(options.spec, options.budget);
  print_tokens(target.plan, target.info, decoded.tokens);
  if (print_stats)
    for (const auto& [name, run] : {std::pair{std::string("AR"), &ar}, std::pair{label, &decoded}}) {
      std::fprintf(stderr, "stats: mode                 %s\n", name.c_str());
      print_generate_stats(*run);
    }
  const std::string verdict =
      check_same_as_ar(label, ar.tokens, decoded.tokens, describe_sampling(options.temperature, options.seed));
  std::fprintf(stderr, "%s\n", verdict.c_str());
}

}  // namespace kplan::cli
