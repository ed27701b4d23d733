// kplan chat MODEL: an interactive conversation in the terminal. Each line read from stdin is a
// user turn; the whole conversation is rendered with the model's chat template (as `run --chat`
// renders one turn), decoded, and the reply streamed to stdout as it is made (the turn's end,
// an EOS id, is not printed), then kept as the assistant's turn. `/reset` starts over, `/exit`
// (or end of input) ends. A prompt `> ` is shown on stderr when stdin is a terminal.
#include <unistd.h>

#include <cstdio>
#include <iostream>
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
#include "tools/kplan/text_assembler.h"
#include "tools/kplan/timed_generate.h"

namespace kplan::cli {
namespace {

struct ChatArgs {
  std::string model, draft_dir, device = "auto", system;
  int64_t max_new = 512;
  std::string spec = "auto", budget = "16";
  double temperature = 0.0, top_p = 1.0;
  uint64_t seed = 0;
  bool has_seed = false, quiet = false;
};

void chat(const ChatArgs& args) {
  if (args.max_new < 1 || args.max_new > INT32_MAX) throw UsageError("--max-new must be at least 1");
  if (args.temperature < 0) throw UsageError("--temperature must not be negative");
  if (!(args.top_p > 0 && args.top_p <= 1)) throw UsageError("--top-p must be within (0, 1]");
  const ModelSource source = resolve_source(args.model, args.draft_dir, args.device);
  Phase open_phase("kplan chat", open_phase_text(source), args.quiet, open_phase_unit(source));
  PlanPtr plan = open_model_plan(source, &open_phase);
  open_phase.done();
  const kplan_plan_info info = plan_info(plan.get());
  require_tokenizer(info, source.model, "kplan chat needs a tokenizer and its chat template");
  // The template is checked before the weights load.
  render_chat(plan.get(), R"([{"role": "user", "content": "hi"}])", true, source.model);
  kplan_generate_options g;
  kplan_generate_options_init(&g);
  g.spec = args.spec == "auto" ? (info.has_drafter ? KPLAN_SPEC_DDTREE : KPLAN_SPEC_NONE)
           : args.spec == "none" ? KPLAN_SPEC_NONE
           : args.spec == "dflash" ? KPLAN_SPEC_DFLASH
                                   : KPLAN_SPEC_DDTREE;
  if (g.spec != KPLAN_SPEC_NONE) require_drafter(info, KPLAN_DRAFTER_DFLASH, source.model, "--spec " + args.spec);
  g.budget = parse_budget(args.budget, "--budget");
  g.temperature = args.temperature;
  g.top_p = args.top_p;
  g.seed = args.has_seed ? args.seed : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  Phase load_phase("kplan chat", "loading the model (" + progress::format_bytes(static_cast<double>(info.weight_bytes)) + " of weights)", args.quiet);
  ModelPtr model = create_model(plan.get(), device_kind(args.device), &Phase::progress_callback, &load_phase);
  load_phase.done();
  kplan_session_options so;
  kplan_session_options_init(&so);
  SessionPtr session = create_session(model.get(), so);
  const int64_t context = kplan_session_max_context(session.get());
  std::vector<int64_t> eos(64);
  eos.resize(static_cast<size_t>(std::min(64, kplan_plan_eos_ids_get(plan.get(), eos.data(), 64))));
  if (!args.quiet)
    std::fprintf(stderr, "kplan chat: device %s; context %lld; /reset starts over, /exit (or end of input) ends\n",
                 describe_device(session.get(), source).c_str(), static_cast<long long>(context));

  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  auto start = [&] {
    messages = nlohmann::ordered_json::array();
    if (!args.system.empty()) messages.push_back({{"role", "system"}, {"content", args.system}});
  };
  start();
  const bool tty = ::isatty(0) != 0;
  std::string line;
  for (;;) {
    if (tty) std::fputs("> ", stderr);
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      start();
      if (!args.quiet) std::fputs("kplan chat: the conversation starts over\n", stderr);
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    const std::vector<int32_t> prompt = encode_text(plan.get(), render_chat(plan.get(), messages.dump(), true, source.model));
    const int64_t room = context - static_cast<int64_t>(prompt.size()) + 1;
    if (room < 1) {
      messages.erase(messages.size() - 1);
      std::fprintf(stderr, "kplan chat: the conversation has %zu tokens, past the context of %lld: /reset\n",
                   prompt.size(), static_cast<long long>(context));
      continue;
    }
    g.max_new = static_cast<int32_t>(std::min<int64_t>(args.max_new, room));
    TextAssembler text(plan.get(), true, eos, true, {});
    struct Sink {
      TextAssembler* text;
      static int32_t on_token(void* self, int32_t token) {
        TextAssembler& t = *static_cast<Sink*>(self)->text;
        t.push(token);
        const std::string piece = t.take(false);
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        return 0;
      }
    } sink{&text};
    g.on_token = &Sink::on_token;
    g.on_token_user_data = &sink;
    std::vector<int32_t> out(static_cast<size_t>(g.max_new));
    int32_t n = 0;
    api_check(kplan_session_generate(session.get(), prompt.data(), static_cast<int32_t>(prompt.size()), &g, out.data(),
                                     g.max_new, &n, nullptr));
    const std::string rest = text.take(true);
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    messages.push_back({{"role", "assistant"}, {"content", text.text()}});
    g.seed += 1;  // the next turn samples anew (a --seed run repeats as a whole)
  }
}

}  // namespace

void register_chat(CLI::App& app) {
  auto args = std::make_shared<ChatArgs>();
  auto* cmd = app.add_subcommand("chat", "Interactive chat in the terminal, with the model's chat template");
  cmd->add_option("model", args->model, "Compiled .kplan plan or checkpoint directory (as `kplan run` takes it)")
      ->required();
  cmd->add_option("--draft", args->draft_dir, "DFlash drafter checkpoint directory (with a checkpoint directory)");
  cmd->add_option("--device", args->device, "cpu, gpu or auto")->check(CLI::IsMember({"cpu", "gpu", "auto"}));
  cmd->add_option("--system", args->system, "A system message first (default: none, the template's own)");
  cmd->add_option("--max-new", args->max_new, "Most tokens per reply (fewer at the turn's end or the context's)");
  cmd->add_option("--spec", args->spec, "Decoding: auto = ddtree when the model has a drafter, else none")
      ->check(CLI::IsMember({"auto", "none", "dflash", "ddtree"}));
  cmd->add_option("--budget", args->budget, "DDTree nodes per round, or auto")->capture_default_str();
  cmd->add_option("--temperature", args->temperature, "0: greedy; > 0: sample (lossless)");
  cmd->add_option("--top-p", args->top_p, "Sample from the fewest most likely tokens whose probability reaches p (1: off)");
  cmd->add_option("--seed", args->seed, "Seed for sampling (default: random)")->default_str("random");
  cmd->add_flag("-q,--quiet", args->quiet, "No banner on stderr");
  cmd->callback([args, cmd] {
    args->has_seed = cmd->count("--seed") > 0;
    chat(*args);
  });
}

}  // namespace kplan::cli
