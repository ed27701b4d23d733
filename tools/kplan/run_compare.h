#pragma once
// `kplan run --spec compare`: one prompt decoded in one session with AR, chain DFlash and DDTree;
// `kplan run --compare`: with AR and the chosen mode, checked token for token (cmd_run_compare.cc).
#include <span>
#include <string>

#include "kplan/kplan.h"
#include "tools/kplan/model_source.h"

namespace kplan::cli {

struct CompareTarget {
  const kplan_plan* plan;
  kplan_plan_info info;
  kplan_session* session;
  ModelSource source;
  std::string drafter;  // --drafter as the user wrote it
};

// `options` is the user's (drafter, budget, temperature, seed, max_new, EOS); its spec is
// replaced per mode. Prints the decoded text once, whether the three agree, the device and the
// per-mode table; throws kplan::Error naming the first differing mode and token when they do not
// agree. `print_stats`: each mode's --stats figures on stderr too.
void run_compare(const CompareTarget& target, std::span<const int32_t> prompt, const kplan_generate_options& options,
                 bool print_stats);

// `kplan run --compare`: decodes with AR, then with `options` (its spec: DFlash or DDTree), prints
// the mode's tokens as a plain run does (stdout), the verdict line on stderr ("compare: DDTree
// budget 16 emits AR's 12 tokens (greedy)") and, with `print_stats`, both decodes' --stats; throws
// kplan::Error naming the first differing token and both tokens when the mode's differ from AR's.
void run_against_ar(const CompareTarget& target, std::span<const int32_t> prompt, const kplan_generate_options& options,
                    bool print_stats);

}  // namespace kplan::cli
