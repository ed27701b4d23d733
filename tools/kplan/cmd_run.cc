// kplan run: generate token ids from a prompt (token ids, or text through the model's tokenizer),
// autoregressively or with speculative decoding (DFlash's single draft path, or a DDTree of
// `budget` nodes), and print them on one line, then their text when there is a tokenizer;
// --stats adds labelled figures on stderr.
//
// MODEL is a checkpoint directory (run on the CPU reference backend) or a compiled .kplan plan
// (run through the runtime's C API session: the GPU when usable, else the CPU); open_target()
// below is the one place a target is chosen.
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compiler/driver/reference_plan.h"
#include "compiler/frontend/draft_config.h"
#include "ir/support/error.h"
#include "kplan/session_target_model.h"
#include "runtime/ddtree/decode.h"
#include "runtime/ddtree/oracle_drafter.h"
#include "runtime/ddtree/random_drafter.h"
#include "runtime/plan_cpu_target.h"
#include "runtime/tokenizer/tokenizer_bundle.h"
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

// The model's tokenizer: a checkpoint directory's tiktoken.model + tokenizer_config.json, or a
// plan's tokenizer data; nullopt when it has none.
std::optional<tokenizer::Tokenizer> load_tokenizer(const RunArgs& args, const TargetModel& target) {
  namespace fs = std::filesystem;
  if (fs::is_directory(args.model)) {
    if (!tokenizer::has_tokenizer_files(args.model)) return std::nullopt;
    return tokenizer::Tokenizer::from_dir(args.model);
  }
  const auto* session = dynamic_cast<const SessionTargetModel*>(&target);
  if (!session) return std::nullopt;
  uint64_t size = 0;
  const uint8_t* data = kplan_plan_tokenizer(session->plan(), &size);
  const std::span<const uint8_t> bytes(data, size);
  if (!tokenizer::is_tokenizer_bundle(bytes)) return std::nullopt;
  return tokenizer::tokenizer_from_bundle(bytes, args.model);
}

SpecMode parse_spec(const std::string& spec) {
  if (spec == "none") return SpecMode::kNone;
  if (spec == "dflash") return SpecMode::kDFlash;
  return SpecMode::kDDTree;  // CLI11 restricts the choices
}

// The target for MODEL on the chosen device: a plan goes through the runtime session (GPU or
// CPU), a checkpoint directory to the CPU reference backend over its in-memory plan (set in
// `reference_plan_out`, with the DFlash drafter when one will be used).
std::unique_ptr<TargetModel> open_target(const RunArgs& args, std::shared_ptr<const plan::Plan>& reference_plan_out) {
  namespace fs = std::filesystem;
  const fs::path model(args.model);
  if (!fs::exists(model)) throw Error("MODEL '" + args.model + "' does not exist");
  const bool is_checkpoint = fs::is_directory(model);
  if (!is_checkpoint) {
    // A compiled plan, through the runtime's C API: the GPU when one is usable (auto, gpu), else
    // the CPU reference over the plan's own tensors (auto, cpu).
    kplan_session_options o{KPLAN_DEVICE_AUTO, 1, args.max_context};
    if (args.device == "gpu") o.device = KPLAN_DEVICE_GPU;
    if (args.device == "cpu") o.device = KPLAN_DEVICE_CPU;
    return SessionTargetModel::open(args.model, o);
  }
  if (args.device == "gpu")
    throw Error("MODEL '" + args.model + "': --device gpu needs a compiled .kplan plan; run a "
                "checkpoint directory with --device cpu");
  ReferencePlanOptions options;
  if (args.spec != "none" && args.drafter == "dflash" && !args.draft_dir.empty()) options.draft = args.draft_dir;
  reference_plan_out = std::make_shared<const plan::Plan>(reference_plan(model, options));
  return make_plan_cpu_target(reference_plan_out, args.model, args.max_context);
}

std::unique_ptr<Drafter> make_drafter(const RunArgs& args, TargetModel& target,
                                      const std::shared_ptr<const plan::Plan>& checkpoint_plan,
                                      const std::vector<int32_t>& prompt,
                                      const DecodeOptions& options) {
  const int64_t vocab = target.config().vocab_size;
  if (args.drafter == "dflash") {
    if (args.draft_dir.empty())
      throw Error("--spec " + args.spec +
                  " needs a drafter: give --draft DIR (a DFlash checkpoint) or --drafter "
                  "oracle|random");
    if (!checkpoint_plan || !checkpoint_plan->draft)
      throw Error("--draft with a compiled plan: the DFlash drafter needs a CPU target over a checkpoint directory");
    return make_plan_cpu_drafter(checkpoint_plan, args.draft_dir);
  }
  if (args.draft_depth < 0) throw Error("--draft-depth must not be negative");
  // Random and oracle drafters propose as deep as the DFlash drafter would (its block size - 1),
  // or --draft-depth, or 7 (block size 8).
  int64_t depth = args.draft_depth;
  if (depth == 0 && !args.draft_dir.empty())
    depth = load_draft_config(std::filesystem::path(args.draft_dir) / "config.json").block_size - 1;
  if (depth == 0) depth = 7;
  if (args.drafter == "random") return std::make_unique<RandomDrafter>(vocab, depth, args.seed);
  // The oracle is told the target's true continuation: AR decoding with the same settings run
  // first (greedy, or sampled with the same seed: the speculative walk draws the same samples).
  if (args.oracle_accuracy < 0 || args.oracle_accuracy > 1)
    throw Error("--oracle-accuracy must be within [0, 1]");
  DecodeOptions ar = options;
  ar.spec = SpecMode::kNone;
  std::vector<int32_t> truth = prompt;
  const DecodeResult reference = decode(target, nullptr, prompt, ar);
  truth.insert(truth.end(), reference.tokens.begin(), reference.tokens.end());
  return std::make_unique<OracleDrafter>(std::move(truth), vocab, depth, args.oracle_accuracy,
                                         args.seed);
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
  // A checkpoint directory without tokenizer files fails before its weights load.
  if (args.has_prompt && std::filesystem::is_directory(args.model) &&
      !tokenizer::has_tokenizer_files(args.model))
    throw Error("no tokenizer: MODEL '" + args.model +
                "' has no tiktoken.model + tokenizer_config.json; use --prompt-ids");

  std::shared_ptr<const plan::Plan> reference;
  std::unique_ptr<TargetModel> target = open_target(args, reference);
  const std::optional<tokenizer::Tokenizer> tok = load_tokenizer(args, *target);
  if (args.has_prompt) {
    if (!tok) throw Error("no tokenizer: plan '" + args.model + "' carries no tiktoken data; use --prompt-ids");
    prompt = tok->encode(args.prompt);
    if (prompt.empty()) throw Error("--prompt: the prompt is empty (give some text)");
  }
  DecodeOptions options;
  options.spec = parse_spec(args.spec);
  options.budget = args.budget;
  options.max_new = args.max_new;
  options.temperature = args.temperature;
  options.seed = args.seed;
  if (!args.ignore_eos) options.eos_ids = target->config().eos_token_ids;

  std::unique_ptr<Drafter> drafter;
  if (options.spec != SpecMode::kNone) {
    check_prompt(*target, prompt);  // before the oracle's reference run or a drafter load
    drafter = make_drafter(args, *target, reference, prompt, options);
  }
  const DecodeResult result = decode(*target, drafter.get(), prompt, options);

  std::string line;
  for (size_t i = 0; i < result.tokens.size(); ++i)
    line += (i ? " " : "") + std::to_string(result.tokens[i]);
  std::printf("%s\n", line.c_str());
  if (tok) {
    const std::string text = tok->decode(result.tokens);  // raw bytes, as the model made them
    std::fputs("text: ", stdout);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  }
  std::fflush(stdout);
  if (args.stats) {
    std::string mode = args.spec;
    if (options.spec == SpecMode::kDDTree) mode += " budget " + std::to_string(args.budget);
    if (options.spec != SpecMode::kNone) mode += ", drafter " + args.drafter;
    const auto* session = dynamic_cast<const SessionTargetModel*>(target.get());
    std::fprintf(stderr, "stats: mode                 %s, device %s, temperature %g\n",
                 mode.c_str(), session && session->on_gpu() ? "gpu" : "cpu", args.temperature);
    std::fputs(format_stats(result.stats).c_str(), stderr);
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
