// kplan run: generate token ids from a prompt (token ids, or text through the model's tokenizer),
// autoregressively or with speculative decoding (DFlash's single draft path, or a DDTree of
// `budget` nodes), and print them on one line, then their text when there is a tokenizer;
// --stats adds labelled figures on stderr.
//
// Everything runs through the runtime's C API (kplan/kplan.h): tokenizer, model, session and the
// decode loop. MODEL is a compiled .kplan plan (the GPU when usable, else the CPU), or a checkpoint
// directory, which the compiler turns into an in-memory plan for the CPU reference first
// (open_plan() below is the one place that differs).
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/driver/reference_plan.h"
#include "ir/support/error.h"
#include "kplan/kplan.h"
#include "runtime/c_api_plan.h"
#include "tools/kplan/api_handles.h"
#include "tools/kplan/commands.h"

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
  std::string spec = "none";
  int64_t budget = 16;
  std::string drafter = "dflash";
  double oracle_accuracy = 0.8;
  int64_t draft_depth = 0;
  double temperature = 0.0;
  uint64_t seed = 0;
  int64_t max_context = 0;
  bool ignore_eos = false;
  bool stats = false;
};

// "1,2,3" -> {1, 2, 3}; spaces around ids are allowed.
std::vector<int32_t> parse_prompt_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) {
      if (text.find_first_not_of(" \t,") == std::string::npos) return {};  // no ids at all
      throw Error("--prompt-ids: empty entry in '" + text + "' (give ids like 1,2,3)");
    }
    int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (ec != std::errc() || ptr != item.data() + item.size() || value < INT32_MIN ||
        value > INT32_MAX)
      throw Error("--prompt-ids: '" + item + "' is not a token id");
    ids.push_back(static_cast<int32_t>(value));
    start = end + 1;
  }
  return ids;
}

// The plan for MODEL: a .kplan file, or a checkpoint directory (+ --draft DIR) made into one.
PlanPtr open_plan(const RunArgs& args) {
  namespace fs = std::filesystem;
  const fs::path model(args.model);
  if (!fs::exists(model)) throw Error("MODEL '" + args.model + "' does not exist");
  if (!fs::is_directory(model)) {
    if (!args.draft_dir.empty())
      throw Error("--draft DIR is for a checkpoint directory; a plan carries its drafter (compile it with --draft)");
    return cli::open_plan(args.model.c_str(), true);
  }
  if (args.device == "gpu")
    throw Error("MODEL '" + args.model + "': --device gpu needs a compiled .kplan plan; run a "
                "checkpoint directory with --device cpu");
  ReferencePlanOptions options;
  if (!args.draft_dir.empty()) options.draft = args.draft_dir;
  kplan_plan* p = nullptr;
  api_check(kplan_plan_adopt(std::make_shared<const plan::Plan>(reference_plan(model, options)), args.model, &p));
  return PlanPtr(p);
}

kplan_spec_mode parse_spec(const std::string& spec) {
  if (spec == "none") return KPLAN_SPEC_NONE;
  if (spec == "dflash") return KPLAN_SPEC_DFLASH;
  return KPLAN_SPEC_DDTREE;  // CLI11 restricts the choices
}

kplan_drafter_kind parse_drafter(const std::string& drafter) {
  if (drafter == "oracle") return KPLAN_DRAFTER_ORACLE;
  if (drafter == "random") return KPLAN_DRAFTER_RANDOM;
  return KPLAN_DRAFTER_DFLASH;
}

void print_stats(const kplan_generate_stats& s) {
  auto line = [](const char* fmt, auto... v) {
    std::fprintf(stderr, fmt, v...);
    std::fputc('\n', stderr);
  };
  line("stats: prompt tokens        %lld", static_cast<long long>(s.prompt_tokens));
  line("stats: generated tokens     %lld", static_cast<long long>(s.generated_tokens));
  line("stats: prefill steps        %lld", static_cast<long long>(s.prefill_steps));
  line("stats: rounds               %lld", static_cast<long long>(s.rounds));
  line("stats: mean acceptance len  %.3f (tokens per verify pass)", s.mean_acceptance_length);
  line("stats: mean verify tokens   %.2f", s.rounds ? static_cast<double>(s.tree_nodes) / s.rounds : 0.0);
  line("stats: target forwards      %lld (AR: %lld, saved %lld)", static_cast<long long>(s.target_forwards),
       static_cast<long long>(s.generated_tokens), static_cast<long long>(s.generated_tokens - s.target_forwards));
  if (s.stopped_at_context) line("stats: stopped              context full");
  line("stats: time prefill         %.3f ms", s.seconds_prefill * 1e3);
  line("stats: time draft           %.3f ms", s.seconds_draft * 1e3);
  line("stats: time tree build      %.3f ms", s.seconds_tree_build * 1e3);
  line("stats: time verify          %.3f ms", s.seconds_verify * 1e3);
  line("stats: time walk+commit     %.3f ms", s.seconds_walk_commit * 1e3);
}

void run(const RunArgs& args) {
  if (args.max_new < 1) throw Error("--max-new must be at least 1");
  if (args.spec == "ddtree" && args.budget < 1)
    throw Error("--budget must be at least 1 tree node (got " + std::to_string(args.budget) + ")");
  if (args.temperature < 0) throw Error("--temperature must not be negative");
  if (args.has_prompt == args.has_prompt_ids)
    throw Error("give exactly one of --prompt TEXT and --prompt-ids 1,2,3");
  std::vector<int32_t> prompt;
  if (args.has_prompt_ids) {
    prompt = parse_prompt_ids(args.prompt_ids);
    if (prompt.empty()) throw Error("--prompt-ids: the prompt is empty (give ids like 1,2,3)");
  }
  PlanPtr plan = open_plan(args);
  kplan_plan_info info{};
  info.struct_size = sizeof info;
  api_check(kplan_plan_info_get(plan.get(), &info));
  // Without a tokenizer, --prompt fails before the weights load.
  if (args.has_prompt && !info.has_tokenizer) {
    if (std::filesystem::is_directory(args.model))
      throw Error("no tokenizer: MODEL '" + args.model +
                  "' has no tiktoken.model + tokenizer_config.json; use --prompt-ids");
    throw Error("no tokenizer: plan '" + args.model + "' carries no tiktoken data; use --prompt-ids");
  }
  if (args.has_prompt) {
    int32_t n = 0;
    kplan_tokenizer_encode(plan.get(), args.prompt.data(), args.prompt.size(), nullptr, 0, &n);  // asks the size
    prompt.resize(static_cast<size_t>(n));
    api_check(kplan_tokenizer_encode(plan.get(), args.prompt.data(), args.prompt.size(), prompt.data(), n, &n));
    if (prompt.empty()) throw Error("--prompt: the prompt is empty (give some text)");
  }
  kplan_generate_options g;
  kplan_generate_options_init(&g);
  g.spec = parse_spec(args.spec);
  g.drafter = parse_drafter(args.drafter);
  g.budget = static_cast<int32_t>(args.budget);
  g.max_new = static_cast<int32_t>(args.max_new);
  g.temperature = args.temperature;
  g.seed = args.seed;
  g.stop_at_eos = args.ignore_eos ? 0 : 1;
  g.draft_depth = static_cast<int32_t>(args.draft_depth);
  g.oracle_accuracy = args.oracle_accuracy;
  if (g.spec != KPLAN_SPEC_NONE && g.drafter == KPLAN_DRAFTER_DFLASH && !info.has_drafter)
    throw Error("--spec " + args.spec + " needs a drafter: " +
                (std::filesystem::is_directory(args.model) ? "give --draft DIR (a DFlash checkpoint)"
                                                           : "compile the plan with --draft DIR") +
                " or --drafter oracle|random");
  if (args.draft_depth < 0) throw Error("--draft-depth must not be negative");
  if (args.oracle_accuracy < 0 || args.oracle_accuracy > 1) throw Error("--oracle-accuracy must be within [0, 1]");

  ModelPtr model = create_model(plan.get(), args.device == "gpu"   ? KPLAN_DEVICE_GPU
                                            : args.device == "cpu" ? KPLAN_DEVICE_CPU
                                                                   : KPLAN_DEVICE_AUTO);
  kplan_session_options so;
  kplan_session_options_init(&so);
  so.max_context = args.max_context;
  SessionPtr session = create_session(model.get(), so);

  std::vector<int32_t> tokens(static_cast<size_t>(args.max_new));
  int32_t n = 0;
  kplan_generate_stats stats{};
  stats.struct_size = sizeof stats;
  api_check(kplan_session_generate(session.get(), prompt.data(), static_cast<int32_t>(prompt.size()), &g,
                                   tokens.data(), static_cast<int32_t>(tokens.size()), &n, &stats));
  tokens.resize(static_cast<size_t>(n));

  std::string line;
  for (size_t i = 0; i < tokens.size(); ++i) line += (i ? " " : "") + std::to_string(tokens[i]);
  std::printf("%s\n", line.c_str());
  if (info.has_tokenizer) {
    size_t len = 0;
    kplan_tokenizer_decode(plan.get(), tokens.data(), n, nullptr, 0, &len);  // asks the size
    std::string text(len, '\0');
    api_check(kplan_tokenizer_decode(plan.get(), tokens.data(), n, text.data(), text.size(), &len));
    std::fputs("text: ", stdout);
    std::fwrite(text.data(), 1, text.size(), stdout);  // raw bytes, as the model made them
    std::fputc('\n', stdout);
  }
  std::fflush(stdout);
  if (args.stats) {
    std::string mode = args.spec;
    if (g.spec == KPLAN_SPEC_DDTREE) mode += " budget " + std::to_string(args.budget);
    if (g.spec != KPLAN_SPEC_NONE) mode += ", drafter " + args.drafter;
    std::fprintf(stderr, "stats: mode                 %s, device %s, temperature %g\n", mode.c_str(),
                 kplan_session_device(session.get()) == KPLAN_DEVICE_GPU ? "gpu" : "cpu", args.temperature);
    print_stats(stats);
  }
}

}  // namespace

void register_run(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Generate token ids (AR, DFlash or DDTree decoding)");
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
  cmd->add_option("--spec", args->spec, "Speculative decoding: none, dflash or ddtree")
      ->check(CLI::IsMember({"none", "dflash", "ddtree"}));
  cmd->add_option("--budget", args->budget, "DDTree nodes per round (verify = 1 + budget tokens)");
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
  cmd->add_flag("--stats", args->stats, "Print decoding statistics to stderr");
  cmd->callback([args, cmd] {
    args->has_prompt = cmd->count("--prompt") > 0;
    args->has_prompt_ids = cmd->count("--prompt-ids") > 0;
    run(*args);
  });
}

}  // namespace kplan::cli
