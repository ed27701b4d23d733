// kplan compile: checkpoint -> IR -> passes. Prints the IR (--dump-ir, --dump-ir-after=PASS),
// lists the passes (--list-passes), or reads IR text instead of a checkpoint (--ir FILE|-) to
// verify it, run passes on it and print it again (round trips and verifier tests).
#include <charconv>
#include <cstdio>
#include <optional>
#include <iostream>
#include <sstream>

#include "compiler/driver/compile.h"
#include "compiler/passes/lower_to_launches.h"
#include "compiler/passes/lowered_printer.h"
#include "compiler/passes/pipeline.h"
#include "compiler/plan/plan_output.h"
#include "ir/support/error.h"
#include "ir/support/regular_file.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "tools/kplan/commands.h"
#include "tools/kplan/hf_cache.h"
#include "tools/kplan/phase.h"

namespace kplan::cli {

namespace {

struct CompileArgs {
  std::string model, draft, ir_file, dump_after;
  std::string draft_yarn_amplitude = "config";
  int64_t draft_context_window = 0;
  bool no_weights = false, dump_ir = false, list_passes = false, no_passes = false;
  bool no_tree_mask = false;
  std::optional<int64_t> layers;   // --layers N
  std::string synthetic_weights;   // --synthetic-weights SEED (text: parsed and checked here)
  plan::PlanOutputOptions plan;    // -o: write a .kplan plan
};

// --synthetic-weights SEED: a decimal integer in [0, 2^64).
uint64_t parse_seed(const std::string& text) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size())
    throw Error("--synthetic-weights: '" + text + "' is not a seed (a decimal integer from 0 to 2^64 - 1)");
  return v;
}

// The slice and synthetic-weights flags against the rest, before anything is opened.
void check_slice_flags(const CompileArgs& a) {
  const bool synthetic = !a.synthetic_weights.empty();
  if (!a.ir_file.empty() && (a.layers || synthetic))
    throw Error(std::string(a.layers ? "--layers" : "--synthetic-weights") + " applies to a checkpoint (--model), not to --ir");
  if (a.layers && *a.layers < 1)
    throw Error("--layers " + std::to_string(*a.layers) + ": a slice keeps at least 1 layer");
  if (!synthetic) return;
  if (!a.no_weights)
    throw Error("--synthetic-weights generates every weight at load: give --no-weights too (the checkpoint's tensors are not read)");
  if (a.plan.out.empty()) throw Error("--synthetic-weights records the weights in a plan: give -o FILE");
}

// IR text on standard input is read up to this size: a pipe from /dev/zero or a runaway producer
// must end in an error, not in memory exhaustion (K2.6's whole IR is a few MiB).
constexpr size_t kMaxStdinIrBytes = size_t{256} << 20;

std::string read_ir_text(const std::string& file) {
  if (file == "-") {
    std::string text;
    char chunk[1 << 16];
    while (std::cin.read(chunk, sizeof chunk) || std::cin.gcount() > 0) {
      text.append(chunk, static_cast<size_t>(std::cin.gcount()));
      if (text.size() > kMaxStdinIrBytes)
        throw Error("--ir -: standard input holds more than " + std::to_string(kMaxStdinIrBytes >> 20) +
                    " MiB of IR text; pass a file instead");
    }
    return text;
  }
  return read_regular_file(file, "IR file");  // refuses /dev/zero, FIFOs, link loops by name
}

void run_compile(CompileArgs a) {
  check_slice_flags(a);
  if (!a.synthetic_weights.empty()) a.plan.synthetic_seed = parse_seed(a.synthetic_weights);
  if (a.list_passes) {
    for (const passes::Pass& p : passes::pipeline())
      std::printf("%-14s %s\n", std::string(p.name).c_str(), std::string(p.summary).c_str());
    for (const passes::LoweringStage& s : passes::lowering_stages())
      std::printf("%-14s %s\n", std::string(s.name).c_str(), std::string(s.summary).c_str());
    return;
  }
  check_draft_context_window(a.draft_context_window, !a.draft.empty());
  // A lowering stage: the whole IR pipeline, then the lowering stages up to that one.
  const bool lowering_dump = passes::is_lowering_stage(a.dump_after);
  const std::string ir_stop = lowering_dump ? std::string() : a.dump_after;
  std::unique_ptr<ir::Module> module;
  if (!a.ir_file.empty()) {
    if (lowering_dump) throw Error("--dump-ir-after=" + a.dump_after + " lowers a checkpoint's IR: give --model");
    if (!a.model.empty()) throw UsageError("give either --model or --ir, not both");
    // A plan needs the checkpoint (config, weights, tokenizer); IR text carries none of them
    // (issue 11: `--ir t.ir -o x.kplan` printed "IR verified" and wrote nothing).
    if (!a.plan.out.empty())
      throw UsageError("-o " + a.plan.out.string() + ": a plan is compiled from a checkpoint (--model DIR), and --ir IR text "
                       "carries no config, weights or tokenizer; drop -o to verify the IR, or give --model DIR -o");
    module = ir::parse_module(read_ir_text(a.ir_file), a.ir_file == "-" ? "<stdin>" : a.ir_file);
    if (a.no_passes) {
      ir::verify(*module);
    } else {
      passes::run_pipeline(*module, ir_stop);
    }
  } else {
    if (a.model.empty()) throw UsageError("--model DIR (or --ir FILE) is required");
    CompileOptions opt;
    opt.model = resolve_model_argument(a.model, "--model");
    if (!a.draft.empty()) opt.draft = resolve_model_argument(a.draft, "--draft");
    opt.draft_yarn_amplitude = a.draft_yarn_amplitude;
    opt.draft_context_window = a.draft_context_window;  // compile_to_ir refuses < 0 and no --draft
    opt.load_weights = !a.no_weights;
    opt.layers = a.layers;
    opt.stop_after = ir_stop;
    opt.build.tree_mask = !a.no_tree_mask;
    // A tree verified in the largest bucket has at most that many nodes besides its root: the
    // drafter's per-depth candidates need no more.
    opt.build.draft_top_k = plan::draft_candidates(a.plan);
    // Writing a plan: the drafter's attention window is checked against the plan's context
    // (what lower_options resolves for this target), not the model's longest.
    if (opt.draft && !a.plan.out.empty())
      opt.max_context = plan::lower_options(TargetCheckpoint::open(opt.model, WeightsMode::None, opt.layers).config(), a.plan).max_context;
    // Reading the checkpoints: a bar over their safetensors files, each opened and its header
    // validated (phase.h); the IR is built and its passes run in the same phase.
    std::optional<Phase> read_phase;
    if (opt.load_weights) {
      read_phase.emplace("kplan compile", "reading checkpoint " + opt.model.string() + (opt.draft ? " and its drafter" : "") +
                                              " (validating every tensor)",
                         false, ProgressUnit::count("files"));
      opt.on_files = [&read_phase](uint64_t done, uint64_t total) { read_phase->progress(done, total); };
    }
    CompileResult r = compile_to_ir(opt);
    if (read_phase) read_phase->done();
    module = std::move(r.module);
    if (!a.plan.out.empty()) {
      if (!a.dump_after.empty()) throw Error("-o writes the whole pipeline's plan: drop --dump-ir-after");
      // Kernel compile (kernels compiled by NVRTC), the weights' checksums and their writing: a
      // phase each, fed their counters.
      std::unique_ptr<Phase> step;
      a.plan.progress.begin = [&step](const std::string& what, bool bytes, const std::string& items) {
        step.reset();
        step = std::make_unique<Phase>("kplan compile", what, false,
                                       bytes ? ProgressUnit::byte_count() : ProgressUnit::count(items));
      };
      a.plan.progress.advance = [&step](uint64_t done, uint64_t total) {
        if (step) step->progress(done, total);
      };
      a.plan.progress.end = [&step] {
        if (step) step->done();
        step.reset();
      };
      plan::write_compiled_plan(*module, *r.target, r.draft ? &*r.draft : nullptr, a.plan);
    }
    if (lowering_dump) {
      // Works from shapes alone: with --no-weights the weights table has no bytes.
      const DraftCheckpoint* draft = r.draft ? &*r.draft : nullptr;
      passes::LowerState s = passes::lowering_state(*module, plan::checkpoint_bytes(*r.target, draft),
                                                    plan::lower_options(r.target->config(), a.plan));
      passes::run_lowering(s, a.dump_after);
      std::fputs(passes::print_lowered(s, a.dump_after).c_str(), stdout);
      return;
    }
  }
  if (a.dump_ir || !a.dump_after.empty()) {
    std::fputs(ir::print_module(*module).c_str(), stdout);
    return;
  }
  // Nothing asked to be printed: say what was compiled, in one line.
  std::string summary;
  for (const ir::Function* fn : module->functions())
    summary += (summary.empty() ? "" : ", ") + ("@" + fn->name()) + " (" +
               std::to_string(fn->num_ops()) + " ops)";
  std::printf("IR verified: %s; --dump-ir prints it\n", summary.c_str());
}

}  // namespace

void register_compile(CLI::App& app) {
  auto args = std::make_shared<CompileArgs>();
  auto* cmd = app.add_subcommand(
      "compile", "Compile a checkpoint: config + weights -> IR -> passes -> NVRTC kernels -> .kplan plan (or print the IR)");
  cmd->add_option("--model", args->model, "HuggingFace checkpoint directory (or its config.json)");
  cmd->add_option("--draft", args->draft, "DFlash drafter checkpoint directory");
  cmd->add_option("--draft-yarn-amplitude", args->draft_yarn_amplitude,
                  "the drafter's YaRN cos/sin amplitude: config (the config's attention_factor, else mscale / "
                  "mscale_all_dim: 1.0 for Kimi K2.6), legacy (1 + 0.1 ln factor: 1.4159 for factor 64, what "
                  "older transformers and some servers use) or a number")
      ->capture_default_str();
  cmd->add_option("--draft-context-window", args->draft_context_window,
                  "the drafter context window N (a server-style option, like others' 4096-position window): "
                  "@draft attends only to the last N committed context positions plus its own block; 0: the "
                  "whole context. Needs --draft; N >= --max-context is accepted and changes nothing. Not the "
                  "config's sliding_window (a per-query window, refused unless it covers the context)")
      ->capture_default_str();
  cmd->add_flag("--no-weights", args->no_weights,
                "read config.json only (structure-only compile, no safetensors needed)");
  cmd->add_option("--layers", args->layers,
                  "compile only the first N decoder layers (a slice: the first_k_dense_replace dense layers stay dense, "
                  "the rest MoE; embedding, final norm and lm_head kept), 1 <= N <= num_hidden_layers");
  cmd->add_option("--synthetic-weights", args->synthetic_weights,
                  "with --no-weights and -o: record every weight as generated at load from this seed (a real "
                  "checkpoint's layout and dtypes, INT4 experts as compressed-tensors packs, seeded normal-ish values) "
                  "instead of carrying bytes; the GPU runtime generates them on the device, the CPU reference on the host");
  cmd->add_flag("--dump-ir", args->dump_ir, "print the final IR");
  cmd->add_option("--dump-ir-after", args->dump_after,
                  "stop after this pass (or lowering stage: select-kernels ... emit-plan) and print the IR "
                  "(with the lowering's annotations, buckets and launches)");
  cmd->add_flag("--list-passes", args->list_passes, "list the passes in pipeline order");
  cmd->add_option("--ir", args->ir_file,
                  "read IR text (a file, or - for stdin) instead of a checkpoint; verify it and "
                  "run the passes");
  cmd->add_flag("--no-passes", args->no_passes, "with --ir: only parse and verify");
  cmd->add_flag("--no-tree-mask", args->no_tree_mask,
                "build @target with causal attention (no %tree_mask argument)");
  cmd->add_option("-o,--output", args->plan.out, "write the compiled plan (.kplan) to this file");
  cmd->add_option("--arch", args->plan.archs, "GPU archs to build kernels for, e.g. sm_90,sm_120")
      ->capture_default_str();
  cmd->add_option("--buckets", args->plan.buckets, "token counts with their own launch sequence")
      ->capture_default_str();
  cmd->add_option("--max-context", args->plan.max_context,
                  "KV cache positions (default: max_position_embeddings, at most 4096)");
  cmd->add_option("--activations", args->plan.activations,
                  "how the GPU stores the activations kernels write: bf16 (f32 math; the residual stream, router, "
                  "logits and drafter stay f32) or f32. The CPU reference computes in f32 either way")
      ->capture_default_str();
  cmd->add_option("--kv-cache", args->plan.kv_cache,
                  "how the GPU stores the target's KV caches: bf16 (f32 math, half the bytes attention reads) or f32")
      ->capture_default_str();
  cmd->callback([args] { run_compile(*args); });
}

}  // namespace kplan::cli
