// kplan run: generate token ids from a prompt (token ids, or text through the model's tokenizer),
// autoregressively or with speculative decoding (DFlash's single draft path, or a DDTree of
// `budget` nodes), and print them on one line, then their text when there is a tokenizer;
// --stats adds labelled figures on stderr (counts, tokens/s, the acceptance-length histogram, the
// time per stage). --compare decodes with AR first and fails unless the chosen mode emits the same
// tokens; --spec compare decodes with all three modes instead (both in cmd_run_compare.cc).
// Without --spec, --draft DIR means --spec ddtree (and so does --compare), else plain AR.
//
// Everything runs through the runtime's C API (kplan/kplan.h): tokenizer, model, session and the
// decode loop. MODEL is a compiled .kplan plan (the GPU when usable, else the CPU), or a checkpoint
// directory, which the compiler turns into an in-memory plan for the CPU reference first
// (open_model_plan() in model_source.h is the one place that differs).
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "ir/support/error.h"
#include "kplan/kplan.h"
#include "tools/kplan/api_handles.h"
#include "tools/kplan/commands.h"
#include "tools/kplan/model_source.h"
#include "tools/kplan/number_list.h"
#include "tools/kplan/run_compare.h"
#include "tools/kplan/timed_generate.h"

namespace kplan::cli {
namespace {

struct RunArgs {
  std::string model;
  std::string draft_dir;
  std::string device = "auto";
  std::string prompt_ids;
  std::string prompt;  // text, through the tokenizer
  bool has_prompt = false, has_prompt_ids = false;
  int64_t max_new = 16;
  std::string spec;  // as given; "" when --spec was left out (resolve_spec)
  bool compare = false;  // --compare
  std::string budget = "16";
  std::string drafter = "dflash";
  double oracle_accuracy = 0.8;
  int64_t draft_depth = 0;
  double temperature = 0.0;
  uint64_t seed = 0;
  int64_t max_context = 0;
  bool ignore_eos = false;
  bool stats = false;
};

// "1,2,3" -> {1, 2, 3}.
std::vector<int32_t> parse_prompt_ids(const std::string& text) {
  std::vector<int32_t> ids;
  for (int64_t value : parse_integer_list(text, {"--prompt-ids", "a token id", "1,2,3"})) {
    if (value < INT32_MIN || value > INT32_MAX)
      throw Error("--prompt-ids: '" + std::to_string(value) + "' is not a token id");
    ids.push_back(static_cast<int32_t>(value));
  }
  return ids;
}

// --spec as given, else ddtree when there is a drafter to use (--draft DIR) or a mode to check
// against AR (--compare), else none.
std::string resolve_spec(const RunArgs& args) {
  if (!args.spec.empty()) return args.spec;
  return !args.draft_dir.empty() || args.compare ? "ddtree" : "none";
}

kplan_spec_mode parse_spec(const std::string& spec) {
  if (spec == "none") return KPLAN_SPEC_NONE;
  if (spec == "dflash") return KPLAN_SPEC_DFLASH;
  return KPLAN_SPEC_DDTREE;  // ddtree, and compare's last mode (CLI11 restricts the choices)
}

void run(const RunArgs& args) {
  const std::string spec = resolve_spec(args);
  const bool compare = spec == "compare";
  if (args.compare && (compare || spec == "none"))
    throw Error("--compare checks one speculative mode against AR: give --spec dflash or --spec ddtree (the default), "
                "not --spec " + spec + (compare ? " (which already checks all three modes)" : ""));
  if (args.max_new < 1) throw Error("--max-new must be at least 1");
  const int32_t budget = parse_budget(args.budget, "--budget");
  if (args.temperature < 0) throw Error("--temperature must not be negative");
  if (args.has_prompt == args.has_prompt_ids)
    throw Error("give exactly one of --prompt TEXT and --prompt-ids 1,2,3");
  std::vector<int32_t> prompt;
  if (args.has_prompt_ids) {
    prompt = parse_prompt_ids(args.prompt_ids);
    if (prompt.empty()) throw Error("--prompt-ids: the prompt is empty (give ids like 1,2,3)");
  }
  const ModelSource source{args.model, args.draft_dir, args.device};
  PlanPtr plan = open_model_plan(source);
  const kplan_plan_info info = plan_info(plan.get());
  // Without a tokenizer, --prompt fails before the weights load.
  if (args.has_prompt) {
    require_tokenizer(info, args.model, "use --prompt-ids");
    prompt = encode_text(plan.get(), args.prompt);
    if (prompt.empty()) throw Error("--prompt: the prompt is empty (give some text)");
  }
  kplan_generate_options g;
  kplan_generate_options_init(&g);
  g.spec = parse_spec(spec);
  g.drafter = drafter_kind(args.drafter);
  g.budget = budget;
  g.max_new = static_cast<int32_t>(args.max_new);
  g.temperature = args.temperature;
  g.seed = args.seed;
  g.stop_at_eos = args.ignore_eos ? 0 : 1;
  g.draft_depth = static_cast<int32_t>(args.draft_depth);
  g.oracle_accuracy = args.oracle_accuracy;
  if (g.spec != KPLAN_SPEC_NONE)
    require_drafter(info, g.drafter, args.model,
                    args.compare ? "--compare (--spec " + spec + ")" : "--spec " + spec);
  if (args.draft_depth < 0) throw Error("--draft-depth must not be negative");
  if (args.oracle_accuracy < 0 || args.oracle_accuracy > 1) throw Error("--oracle-accuracy must be within [0, 1]");

  ModelPtr model = create_model(plan.get(), device_kind(args.device));
  kplan_session_options so;
  kplan_session_options_init(&so);
  so.max_context = args.max_context;
  SessionPtr session = create_session(model.get(), so);
  if (compare) {
    run_compare({plan.get(), info, session.get(), source, args.drafter}, prompt, g, args.stats);
    return;
  }
  if (args.compare) {
    run_against_ar({plan.get(), info, session.get(), source, args.drafter}, prompt, g, args.stats);
    return;
  }

  const TimedGenerate decoded = generate_timed(session.get(), prompt, g);
  print_tokens(plan.get(), info, decoded.tokens);
  if (args.stats) {
    std::string mode = spec;
    if (g.spec == KPLAN_SPEC_DDTREE) mode += " budget " + args.budget;
    if (g.spec != KPLAN_SPEC_NONE) mode += ", drafter " + args.drafter;
    std::fprintf(stderr, "stats: mode                 %s, device %s, temperature %g\n", mode.c_str(),
                 kplan_session_device(session.get()) == KPLAN_DEVICE_GPU ? "gpu" : "cpu", args.temperature);
    print_generate_stats(decoded);
  }
}

}  // namespace

void register_run(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Generate token ids (AR, DFlash or DDTree decoding, or all three compared)");
  cmd->add_option("model", args->model, "Checkpoint directory or compiled .kplan plan")
      ->required();
  cmd->add_option("--draft", args->draft_dir, "DFlash drafter checkpoint directory");
  cmd->add_option("--device", args->device, "cpu, gpu or auto")
      ->check(CLI::IsMember({"cpu", "gpu", "auto"}));
  auto* ids = cmd->add_option("--prompt-ids", args->prompt_ids, "Prompt token ids, e.g. 1,2,3");
  cmd->add_option("--prompt", args->prompt,
                  "Prompt text, tokenized with the model's tiktoken tokenizer (instead of --prompt-ids); "
                  "special tokens written in it, e.g. <|im_end|>, become their ids")
      ->excludes(ids);
  cmd->add_option("--max-new", args->max_new, "Tokens to generate (fewer on EOS)");
  cmd->add_option("--spec", args->spec,
                  "Speculative decoding: none, dflash or ddtree (default: ddtree with --draft or --compare, else "
                  "none); compare: decode with all three in one session, check they agree and print a table of "
                  "their figures")
      ->check(CLI::IsMember({"none", "dflash", "ddtree", "compare"}));
  cmd->add_option("--budget", args->budget,
                  "DDTree nodes per round (verify = 1 + budget tokens), or auto: each round's from the measured step "
                  "costs and the acceptance so far (GPU)")
      ->capture_default_str();
  cmd->add_option("--drafter", args->drafter,
                  "dflash (--draft DIR), oracle (knows the AR continuation) or random")
      ->check(CLI::IsMember({"dflash", "oracle", "random"}));
  cmd->add_option("--oracle-accuracy", args->oracle_accuracy,
                  "Oracle drafter: chance of proposing the true token at each depth");
  cmd->add_option("--draft-depth", args->draft_depth,
                  "Oracle/random drafter depth (default: the --draft block size - 1, else 7)");
  cmd->add_option("--temperature", args->temperature, "0: greedy; > 0: sample (lossless)");
  cmd->add_option("--seed", args->seed, "Seed for sampling and the oracle/random drafters");
  cmd->add_option("--max-context", args->max_context,
                  "KV cache positions (default: the model's max_position_embeddings)");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "Do not stop at the model's EOS ids");
  cmd->add_flag("--stats", args->stats,
                "Print decoding statistics to stderr: counts, tokens/s, the acceptance-length histogram and the "
                "time per stage (total and per round)");
  cmd->add_flag("--compare", args->compare,
                "Decode with AR too and fail (exit 1, naming the first differing token) unless the --spec mode "
                "emits the same tokens, greedy or sampled with one --seed");
  cmd->callback([args, cmd] {
    args->has_prompt = cmd->count("--prompt") > 0;
    args->has_prompt_ids = cmd->count("--prompt-ids") > 0;
    run(*args);
  });
}

}  // namespace kplan::cli
