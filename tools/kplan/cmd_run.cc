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
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/support/error.h"
#include "kplan/kplan.h"
#include "tools/kplan/api_handles.h"
#include "tools/kplan/commands.h"
#include "tools/kplan/model_source.h"
#include "tools/kplan/number_list.h"
#include "tools/kplan/phase.h"
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
  std::string chat, system, messages_file;  // --chat TEXT [--system TEXT] | --messages FILE: the chat template
  bool has_prompt = false, has_prompt_ids = false, has_chat = false, has_messages = false, print_prompt = false;
  int64_t max_new = 16;
  std::string spec;  // as given; "" when --spec was left out (resolve_spec)
  bool compare = false;  // --compare
  std::string budget = "16";
  std::string drafter = "dflash";
  double oracle_accuracy = 0.8;
  int64_t draft_depth = 0;
  double temperature = 0.0;
  uint64_t seed = 0;
  bool has_seed = false;  // --seed given; else a random one (printed under --stats)
  int64_t max_context = 0;
  bool ignore_eos = false;
  bool stats = false;
  std::string stats_json;  // --stats-json FILE ("-": stdout)
  bool quiet = false, stream = false;
  int64_t top_k = 0;
  double top_p = 1.0, min_p = 0.0, repetition_penalty = 1.0, frequency_penalty = 0.0, presence_penalty = 0.0;
  std::vector<std::string> stop;
};

// Where the first of `stops` begins in `text` (npos: none).
size_t first_stop(const std::string& text, const std::vector<std::string>& stops) {
  size_t at = std::string::npos;
  for (const std::string& s : stops) at = std::min(at, text.find(s));
  return at;
}

// --stream: each token as the decode emits it, on stdout: its text when the plan has a tokenizer
// (held back while it could still be the start of a stop string, and cut where one begins), else
// its id and a space.
struct StreamPrinter {
  const kplan_plan* plan;
  bool text_mode;
  std::vector<std::string> stops;
  std::string text;    // all the text so far
  size_t printed = 0;  // bytes of it on stdout
  bool cut = false;    // a stop string began: nothing more is printed

  static int32_t on_token(void* self, int32_t token) {
    static_cast<StreamPrinter*>(self)->push(token);
    return 0;
  }
  void push(int32_t token) {
    if (!text_mode) {
      std::printf("%d ", token);
      std::fflush(stdout);
      return;
    }
    if (cut) return;
    text += decode_tokens(plan, std::span<const int32_t>(&token, 1));
    size_t hold = 0;
    for (const std::string& s : stops) hold = std::max(hold, s.size() - 1);
    size_t upto = text.size() > hold ? text.size() - hold : 0;
    if (const size_t at = first_stop(text, stops); at != std::string::npos) {
      upto = at;
      cut = true;
    }
    if (upto > printed) {
      std::fwrite(text.data() + printed, 1, upto - printed, stdout);
      printed = upto;
      std::fflush(stdout);
    }
  }
  void finish() {
    if (text_mode && !cut && printed < text.size()) std::fwrite(text.data() + printed, 1, text.size() - printed, stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
};

const char* stop_reason_name(int32_t reason) {
  switch (reason) {
    case KPLAN_STOP_EOS: return "eos";
    case KPLAN_STOP_STRING: return "stop string";
    case KPLAN_STOP_CONTEXT: return "context full";
    case KPLAN_STOP_CALLBACK: return "callback";
    default: return "max-new";
  }
}

// --stats-json: the decode's figures as one JSON object (format kplan-run-stats-1).
nlohmann::json stats_json(const TimedGenerate& d, const std::string& mode, const std::string& device, uint64_t seed,
                          double temperature) {
  const kplan_generate_stats& s = d.stats;
  nlohmann::json histogram = nlohmann::json::array();
  int longest = 0;
  for (int i = 0; i < KPLAN_ACCEPTANCE_BINS; ++i)
    if (s.acceptance_histogram[i] > 0) longest = i + 1;
  for (int i = 0; i < longest; ++i) histogram.push_back(s.acceptance_histogram[i]);
  const double staged =
      s.seconds_prefill + s.seconds_draft + s.seconds_tree_build + s.seconds_verify + s.seconds_walk_commit;
  return {{"format", "kplan-run-stats-1"},
          {"mode", mode},
          {"device", device},
          {"seed", seed},
          {"temperature", temperature},
          {"tokens", d.tokens},
          {"prompt_tokens", s.prompt_tokens},
          {"generated_tokens", s.generated_tokens},
          {"prefill_steps", s.prefill_steps},
          {"rounds", s.rounds},
          {"committed_in_rounds", s.committed_in_rounds},
          {"tree_nodes", s.tree_nodes},
          {"target_forwards", s.target_forwards},
          {"mean_acceptance_length", s.mean_acceptance_length},
          {"stop_reason", stop_reason_name(s.stop_reason)},
          {"wall_seconds", d.wall_seconds},
          {"tokens_per_second", d.wall_seconds > 0 ? static_cast<double>(s.generated_tokens) / d.wall_seconds : 0.0},
          {"acceptance_histogram", histogram},
          {"seconds",
           {{"prefill", s.seconds_prefill},
            {"draft", s.seconds_draft},
            {"tree_build", s.seconds_tree_build},
            {"verify", s.seconds_verify},
            {"walk_commit", s.seconds_walk_commit},
            {"host_other", std::max(0.0, d.wall_seconds - staged)},
            {"rounds", s.seconds_rounds},
            {"device_wait", s.seconds_device_wait}}}};
}

std::string bytes_text(uint64_t bytes) {
  char buf[64];
  if (bytes >= (uint64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  else if (bytes >= (uint64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  return buf;
}

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
  if (args.max_new < 1) throw UsageError("--max-new must be at least 1");
  if (args.max_new > INT32_MAX) throw UsageError("--max-new " + std::to_string(args.max_new) + " is too large");
  if (args.max_context < 0) throw UsageError("--max-context must not be negative");
  const int32_t budget = parse_budget(args.budget, "--budget");
  if (args.temperature < 0) throw UsageError("--temperature must not be negative");
  if (int(args.has_prompt) + int(args.has_prompt_ids) + int(args.has_chat) + int(args.has_messages) != 1)
    throw UsageError("give exactly one of --prompt TEXT, --prompt-ids 1,2,3, --chat TEXT and --messages FILE.json");
  if (!args.system.empty() && !args.has_chat) throw UsageError("--system goes with --chat (in --messages, give a system message)");
  if (args.print_prompt && !(args.has_chat || args.has_messages))
    throw UsageError("--print-prompt prints the chat template's rendering: give --chat or --messages");
  if (args.stream && (compare || args.compare))
    throw UsageError("--stream prints one decode as it is made: not with --compare or --spec compare");
  std::vector<int32_t> prompt;
  if (args.has_prompt_ids) {
    prompt = parse_prompt_ids(args.prompt_ids);
    if (prompt.empty()) throw Error("--prompt-ids: the prompt is empty (give ids like 1,2,3)");
  }
  const ModelSource source = resolve_source(args.model, args.draft_dir, args.device);
  // The phases before the decode can take a while on a big model (issue 11: ~13 s of checksumming
  // a plan's weights, shown nowhere): each is timed, shown on stderr (phase.h) and in --stats.
  Phase open_phase("kplan run", open_phase_text(source), args.quiet, open_phase_unit(source));
  PlanPtr plan = open_model_plan(source, &open_phase);
  const kplan_plan_info info = plan_info(plan.get());
  const double open_seconds = open_phase.done();
  if (args.max_context > 0 && info.max_context > 0 && args.max_context > info.max_context)
    throw UsageError("--max-context " + std::to_string(args.max_context) + " is past the plan's context of " +
                     std::to_string(info.max_context) + " positions (compile it with --max-context " +
                     std::to_string(args.max_context) + ")");
  if (!args.stop.empty()) require_tokenizer(info, source.model, "drop --stop (stop strings match the output's text)");
  // Without a tokenizer, --prompt fails before the weights load.
  if (args.has_prompt) {
    require_tokenizer(info, args.model, "use --prompt-ids");
    prompt = encode_text(plan.get(), args.prompt);
    if (prompt.empty()) throw Error("--prompt: the prompt is empty (give some text)");
  }
  // A conversation, rendered with the checkpoint's chat template and tokenized (its turn markers
  // become their special ids); the plan's EOS ids include the end of a turn (<|im_end|>).
  if (args.has_chat || args.has_messages) {
    const std::string flag = args.has_chat ? "--chat" : "--messages";
    require_tokenizer(info, source.model, "use --prompt-ids (" + flag + " needs a tokenizer and its chat template)");
    std::string conversation;
    if (args.has_chat) {
      nlohmann::json messages = nlohmann::json::array();
      if (!args.system.empty()) messages.push_back({{"role", "system"}, {"content", args.system}});
      messages.push_back({{"role", "user"}, {"content", args.chat}});
      conversation = messages.dump();
    } else {
      std::ifstream in(args.messages_file, std::ios::binary);
      if (!in) throw Error("--messages: cannot read " + args.messages_file);
      conversation.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    std::string text;
    try {
      text = render_chat(plan.get(), conversation, true, source.model);
    } catch (const Error& e) {
      throw Error(flag + (args.has_messages ? " " + args.messages_file : std::string()) + ": " + e.what());
    }
    if (args.print_prompt) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fputc('\n', stdout);
      return;
    }
    prompt = encode_text(plan.get(), text);
    if (prompt.empty()) throw Error(flag + ": the chat template rendered an empty prompt");
  }
  kplan_generate_options g;
  kplan_generate_options_init(&g);
  g.spec = parse_spec(spec);
  g.drafter = drafter_kind(args.drafter);
  g.budget = budget;
  g.max_new = static_cast<int32_t>(args.max_new);
  g.temperature = args.temperature;
  // A random seed unless --seed gives one: every run samples anew, --seed repeats one.
  g.seed = args.has_seed ? args.seed : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  if (args.top_k < 0) throw UsageError("--top-k must not be negative (0: off)");
  if (!(args.top_p > 0 && args.top_p <= 1)) throw UsageError("--top-p must be within (0, 1] (1: off)");
  if (!(args.min_p >= 0 && args.min_p <= 1)) throw UsageError("--min-p must be within [0, 1] (0: off)");
  if (!(args.repetition_penalty > 0) || std::isinf(args.repetition_penalty))
    throw UsageError("--repetition-penalty must be a number > 0 (1: off)");
  if (!std::isfinite(args.frequency_penalty)) throw UsageError("--frequency-penalty must be a finite number");
  if (!std::isfinite(args.presence_penalty)) throw UsageError("--presence-penalty must be a finite number");
  g.top_k = static_cast<int32_t>(std::min<int64_t>(args.top_k, INT32_MAX));
  g.top_p = args.top_p;
  g.min_p = args.min_p;
  g.repetition_penalty = args.repetition_penalty;
  g.frequency_penalty = args.frequency_penalty;
  g.presence_penalty = args.presence_penalty;
  std::vector<const char*> stops;
  for (const std::string& s : args.stop) {
    if (s.empty()) throw UsageError("--stop: a stop string must not be empty");
    stops.push_back(s.c_str());
  }
  g.stop_strings = stops.empty() ? nullptr : stops.data();
  g.n_stop_strings = static_cast<int32_t>(stops.size());
  g.stop_at_eos = args.ignore_eos ? 0 : 1;
  g.draft_depth = static_cast<int32_t>(args.draft_depth);
  g.oracle_accuracy = args.oracle_accuracy;
  if (g.spec != KPLAN_SPEC_NONE)
    require_drafter(info, g.drafter, args.model,
                    args.compare ? "--compare (--spec " + spec + ")" : "--spec " + spec);
  if (args.draft_depth < 0) throw Error("--draft-depth must not be negative");
  if (args.oracle_accuracy < 0 || args.oracle_accuracy > 1) throw Error("--oracle-accuracy must be within [0, 1]");

  Phase load_phase("kplan run", "loading the model (" + bytes_text(info.weight_bytes) + " of weights)", args.quiet);
  ModelPtr model = create_model(plan.get(), device_kind(args.device), &Phase::progress_callback, &load_phase);
  const double load_seconds = load_phase.done();
  kplan_session_options so;
  kplan_session_options_init(&so);
  so.max_context = args.max_context;
  Phase session_phase("kplan run", "creating a session (KV cache, graphs)", args.quiet);
  SessionPtr session = create_session(model.get(), so);
  const double session_seconds = session_phase.done();
  // What fits the context: the prompt and every new token but the last are cached (issue 11: 600
  // new tokens on a 512 context silently came back as 506).
  const int64_t context = kplan_session_max_context(session.get());
  const int64_t needed = static_cast<int64_t>(prompt.size()) + args.max_new - 1;
  if (static_cast<int64_t>(prompt.size()) > context)  // as the decode would say it, before any banner
    throw Error("the prompt has " + std::to_string(prompt.size()) + " tokens, longer than the context of " +
                std::to_string(context));
  if (needed > context)
    throw UsageError("--max-new " + std::to_string(args.max_new) + " does not fit: the prompt's " +
                     std::to_string(prompt.size()) + " tokens and " + std::to_string(args.max_new) + " new ones need " +
                     std::to_string(needed) + " cache positions, the context holds " + std::to_string(context) +
                     (context > static_cast<int64_t>(prompt.size())
                          ? " (--max-new " + std::to_string(context - static_cast<int64_t>(prompt.size()) + 1) + " fits)"
                          : ""));
  const std::string device = describe_device(session.get(), source);
  if (!args.quiet)
    std::fprintf(stderr, "kplan run: device %s; %s %s; weights %s; context %lld\n", device.c_str(),
                 std::filesystem::is_directory(source.model) ? "checkpoint" : "plan", source.model.c_str(),
                 bytes_text(info.weight_bytes).c_str(), static_cast<long long>(context));
  if (args.stats) {
    std::fprintf(stderr, "stats: seed                 %llu%s\n", static_cast<unsigned long long>(g.seed),
                 args.has_seed ? "" : " (random; --seed repeats it)");
    std::fprintf(stderr, "stats: load                 %.3f s: plan open %.3f s, model load %.3f s, session %.3f s\n",
                 open_seconds + load_seconds + session_seconds, open_seconds, load_seconds, session_seconds);
  }
  if (compare) {
    run_compare({plan.get(), info, session.get(), source, args.drafter}, prompt, g, args.stats);
    return;
  }
  if (args.compare) {
    run_against_ar({plan.get(), info, session.get(), source, args.drafter}, prompt, g, args.stats);
    return;
  }

  StreamPrinter printer{plan.get(), info.has_tokenizer != 0, args.stop};
  if (args.stream) {
    g.on_token = &StreamPrinter::on_token;
    g.on_token_user_data = &printer;
  }
  const TimedGenerate decoded = generate_timed(session.get(), prompt, g);
  if (args.stream) {
    printer.finish();
  } else {
    print_tokens(plan.get(), info, decoded.tokens, args.stop);
  }
  std::string mode = spec;
  if (g.spec == KPLAN_SPEC_DDTREE) mode += " budget " + args.budget;
  if (g.spec != KPLAN_SPEC_NONE) mode += ", drafter " + args.drafter;
  const char* where = kplan_session_device(session.get()) == KPLAN_DEVICE_GPU ? "gpu" : "cpu";
  if (args.stats) {
    std::fprintf(stderr, "stats: mode                 %s, device %s, temperature %g\n", mode.c_str(), where,
                 args.temperature);
    std::fprintf(stderr, "stats: stopped by           %s\n", stop_reason_name(decoded.stats.stop_reason));
    print_generate_stats(decoded);
  }
  if (!args.stats_json.empty()) {
    nlohmann::json j = stats_json(decoded, mode, where, g.seed, args.temperature);
    j["load_seconds"] = {{"plan_open", open_seconds}, {"model_load", load_seconds}, {"session", session_seconds}};
    const std::string text = j.dump(2) + "\n";
    if (args.stats_json == "-") {
      std::fputs(text.c_str(), stdout);
    } else {
      std::ofstream out(args.stats_json);
      if (!(out << text)) throw Error("--stats-json: cannot write " + args.stats_json);
    }
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
  cmd->add_option("--chat", args->chat,
                  "A user message, rendered with the model's chat template (chat_template.jinja, else "
                  "tokenizer_config.json's chat_template) and the assistant turn's opening, then tokenized");
  cmd->add_option("--system", args->system, "With --chat: a system message before it (default: none, the template's)");
  cmd->add_option("--messages", args->messages_file,
                  "A conversation as JSON (a list of {\"role\", \"content\"} messages, or {\"messages\": [...], "
                  "\"tools\": ...}), rendered with the chat template like --chat");
  cmd->add_flag("--print-prompt", args->print_prompt,
                "With --chat / --messages: print the rendered prompt text and exit (no decode)");
  cmd->add_option("--max-new", args->max_new,
                  "Tokens to generate (fewer on EOS or a stop string); prompt + max-new - 1 must fit the context");
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
  cmd->add_option("--top-k", args->top_k, "Sample from the k most likely tokens (0: off)");
  cmd->add_option("--top-p", args->top_p, "Sample from the fewest most likely tokens whose probability reaches p (1: off)");
  cmd->add_option("--min-p", args->min_p, "Drop tokens below p x the most likely token's probability (0: off)");
  cmd->add_option("--repetition-penalty", args->repetition_penalty,
                  "> 1 discourages tokens of the prompt and output (HF's: positive logits divided, negative "
                  "multiplied; 1: off; applies at temperature 0 too)");
  cmd->add_option("--frequency-penalty", args->frequency_penalty,
                  "Subtract this x the token's count in the output from its logit (OpenAI's; 0: off)");
  cmd->add_option("--presence-penalty", args->presence_penalty,
                  "Subtract this from the logit of every token already in the output (OpenAI's; 0: off)");
  cmd->add_option("--stop", args->stop,
                  "Stop once the output's text contains this string (repeatable; the text is cut where it begins; "
                  "needs a tokenizer)");
  auto* seed = cmd->add_option("--seed", args->seed,
                               "Seed for sampling and the oracle/random drafters (default: random, printed by --stats)");
  seed->default_str("random");
  cmd->add_option("--max-context", args->max_context,
                  "KV cache positions, at most the plan's (0: the plan's; a checkpoint directory's: "
                  "max_position_embeddings)");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "Do not stop at the model's EOS ids");
  cmd->add_flag("--stats", args->stats,
                "Print decoding statistics to stderr: counts, tokens/s, the acceptance-length histogram and the "
                "time per stage (total and per round)");
  cmd->add_option("--stats-json", args->stats_json,
                  "Write the --stats figures as JSON (format kplan-run-stats-1) to this file, - for stdout");
  cmd->add_flag("-q,--quiet", args->quiet, "No device banner on stderr");
  cmd->add_flag("--stream", args->stream,
                "Print each token as it is made (its text when there is a tokenizer, else its id) instead of the "
                "ids line and text: line at the end");
  cmd->add_flag("--compare", args->compare,
                "Decode with AR too and fail (exit 1, naming the first differing token) unless the --spec mode "
                "emits the same tokens, greedy or sampled with one --seed");
  cmd->callback([args, cmd] {
    args->has_prompt = cmd->count("--prompt") > 0;
    args->has_prompt_ids = cmd->count("--prompt-ids") > 0;
    args->has_chat = cmd->count("--chat") > 0;
    args->has_messages = cmd->count("--messages") > 0;
    args->has_seed = cmd->count("--seed") > 0;
    run(*args);
  });
}

}  // namespace kplan::cli
