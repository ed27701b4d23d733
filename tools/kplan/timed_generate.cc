#include "tools/kplan/timed_generate.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <string>

#include "ir/support/error.h"
#include "tools/kplan/api_handles.h"

namespace kplan::cli {

TimedGenerate generate_timed(kplan_session* session, std::span<const int32_t> prompt,
                             const kplan_generate_options& options) {
  TimedGenerate g;
  g.tokens.resize(static_cast<size_t>(options.max_new));
  g.stats.struct_size = sizeof g.stats;
  int32_t n = 0;
  const auto start = std::chrono::steady_clock::now();
  api_check(kplan_session_generate(session, prompt.data(), static_cast<int32_t>(prompt.size()), &options,
                                   g.tokens.data(), static_cast<int32_t>(g.tokens.size()), &n, &g.stats));
  g.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  g.tokens.resize(static_cast<size_t>(n));
  return g;
}

std::string warm_up(kplan_session* session, std::span<const int32_t> prompt, const kplan_generate_options& options) {
  kplan_generate_options warm = options;
  warm.spec = KPLAN_SPEC_DDTREE;
  warm.max_new = std::min(options.max_new, kWarmUpTokens);
  generate_timed(session, prompt, warm);
  return "wall clock around each generate call, after an untimed " + std::to_string(warm.max_new) + "-token " +
         mode_label(KPLAN_SPEC_DDTREE, warm.budget) + " warm-up";
}

void DecodeFigures::add(const TimedGenerate& g) {
  ++generates;
  tokens += g.stats.generated_tokens;
  rounds += g.stats.rounds;
  committed_in_rounds += g.stats.committed_in_rounds;
  tree_nodes += g.stats.tree_nodes;
  target_forwards += g.stats.target_forwards;
  wall_seconds += g.wall_seconds;
}

double DecodeFigures::mean_acceptance_length() const {
  return rounds > 0 ? static_cast<double>(committed_in_rounds) / static_cast<double>(rounds) : 0.0;
}

double DecodeFigures::tokens_per_second() const {
  return wall_seconds > 0 ? static_cast<double>(tokens) / wall_seconds : 0.0;
}

double DecodeFigures::tokens_per_target_forward() const {
  return target_forwards > 0 ? static_cast<double>(tokens) / static_cast<double>(target_forwards) : 0.0;
}

void print_generate_stats(const TimedGenerate& g) {
  const kplan_generate_stats& s = g.stats;
  auto line = [](const char* fmt, auto... v) {
    std::fprintf(stderr, fmt, v...);
    std::fputc('\n', stderr);
  };
  line("stats: prompt tokens        %lld", static_cast<long long>(s.prompt_tokens));
  line("stats: generated tokens     %lld", static_cast<long long>(s.generated_tokens));
  line("stats: prefill steps        %lld", static_cast<long long>(s.prefill_steps));
  line("stats: rounds               %lld", static_cast<long long>(s.rounds));
  line("stats: mean acceptance len  %.3f (tokens per verify pass: %lld committed by %lld rounds)",
       s.mean_acceptance_length, static_cast<long long>(s.committed_in_rounds), static_cast<long long>(s.rounds));
  line("stats: mean verify tokens   %.2f", s.rounds ? static_cast<double>(s.tree_nodes) / s.rounds : 0.0);
  line("stats: target forwards      %lld (AR: %lld, saved %lld)", static_cast<long long>(s.target_forwards),
       static_cast<long long>(s.generated_tokens), static_cast<long long>(s.generated_tokens - s.target_forwards));
  if (s.stopped_at_context) line("stats: stopped              context full");
  line("stats: wall time            %.3f ms (the generate call)", g.wall_seconds * 1e3);
  line("stats: tokens/s             %.1f (generated tokens / wall time)",
       g.wall_seconds > 0 ? static_cast<double>(s.generated_tokens) / g.wall_seconds : 0.0);

  // Lengths 1 .. the longest seen; the bar is 40 '#' for the commonest length.
  int longest = 0;
  int64_t most = 0;
  for (int i = 0; i < KPLAN_ACCEPTANCE_BINS; ++i)
    if (s.acceptance_histogram[i] > 0) {
      longest = i + 1;
      most = std::max(most, s.acceptance_histogram[i]);
    }
  line("stats: acceptance histogram (tokens a round committed: rounds)");
  for (int i = 0; i < longest; ++i) {
    const int64_t rounds = s.acceptance_histogram[i];
    const std::string length = std::to_string(i + 1) + (i + 1 == KPLAN_ACCEPTANCE_BINS ? "+" : "");
    const std::string bar(static_cast<size_t>((rounds * 40 + most - 1) / most), '#');
    line("stats:   %-4s %6lld%s", length.c_str(), static_cast<long long>(rounds), bar.empty() ? "" : ("  " + bar).c_str());
  }

  // Per stage: total ms and µs per round (the prefill is not a round: its total only).
  const double staged = s.seconds_prefill + s.seconds_draft + s.seconds_tree_build + s.seconds_verify +
                        s.seconds_walk_commit;
  auto stage = [&](const char* name, double seconds, bool per_round, const char* note) {
    if (per_round && s.rounds > 0)
      line("stats: time %-15s %9.3f ms  %9.1f us/round%s", name, seconds * 1e3, seconds * 1e6 / s.rounds, note);
    else
      line("stats: time %-15s %9.3f ms%s", name, seconds * 1e3, note);
  };
  stage("prefill", s.seconds_prefill, false, "");
  stage("draft", s.seconds_draft, true, "");
  stage("tree build", s.seconds_tree_build, true, "");
  stage("verify", s.seconds_verify, true, s.device_rounds ? "  (the whole round: one graph on the device, drafting included)" : "");
  stage("walk+commit", s.seconds_walk_commit, true, "");
  stage("host/other", std::max(0.0, g.wall_seconds - staged), true, "  (wall time less the stages)");
  if (s.seconds_device_wait > 0)
    stage("host busy", std::max(0.0, s.seconds_rounds - s.seconds_device_wait), true,
          "  (the rounds' wall time less the waits for the device: the host's own work)");
}

kplan_drafter_kind drafter_kind(const std::string& drafter) {
  if (drafter == "oracle") return KPLAN_DRAFTER_ORACLE;
  if (drafter == "random") return KPLAN_DRAFTER_RANDOM;
  return KPLAN_DRAFTER_DFLASH;
}

std::string mode_label(kplan_spec_mode spec, int32_t budget) {
  if (spec == KPLAN_SPEC_NONE) return "AR";
  if (spec == KPLAN_SPEC_DFLASH) return "DFlash chain";
  return "DDTree budget " + (budget == KPLAN_BUDGET_AUTO ? std::string("auto") : std::to_string(budget));
}

int32_t parse_budget(const std::string& text, const std::string& flag) {
  if (text == "auto") return KPLAN_BUDGET_AUTO;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 1 || v > INT32_MAX)
    throw Error(flag + ": '" + text + "' is not a tree size (a node count of at least 1, or auto)");
  return static_cast<int32_t>(v);
}

}  // namespace kplan::cli
