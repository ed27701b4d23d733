#include "compiler/plan/plan_output.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>

#include "compiler/codegen/families/synthetic_weights.h"
#include "compiler/codegen/nvrtc_compile.h"
#include "compiler/passes/lower_to_launches.h"
#include "compiler/plan/plan_assemble.h"
#include "compiler/synth/synthetic_init.h"
#include "ir/support/int4_frag.h"
#include "ir/support/error.h"
#include "ir/printer.h"

namespace kplan::plan {
namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = std::min(text.find(',', start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<int64_t> parse_buckets(const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& item : split(text)) {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || ptr != item.data() + item.size() || v < 1)
      throw Error("--buckets: '" + item + "' is not a positive token count");
    out.push_back(v);
  }
  if (out.empty()) throw Error("--buckets: no token counts given");
  if (std::find(out.begin(), out.end(), 1) == out.end()) out.push_back(1);  // AR decode
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// A storage dtype given as text: bf16 or f32.
DType storage_dtype(const std::string& flag, const std::string& text) {
  if (text == "bf16") return DType::BF16;
  if (text == "f32") return DType::F32;
  throw Error(flag + ": '" + text + "' is not a storage dtype (bf16 or f32)");
}

}  // namespace

passes::LowerOptions lower_options(const ModelConfig& target, const PlanOutputOptions& options) {
  passes::LowerOptions lower;
  lower.buckets = parse_buckets(options.buckets);
  lower.max_context = options.max_context > 0 ? options.max_context : std::min<int64_t>(target.max_position_embeddings, 4096);
  if (lower.max_context > passes::kMaxContextRows)
    throw Error("--max-context " + std::to_string(lower.max_context) + ": at most " + std::to_string(passes::kMaxContextRows) +
                " positions (the kernels index KV rows with 32-bit integers)");
  lower.max_tree_nodes = lower.buckets.back();
  lower.activations = storage_dtype("--activations", options.activations);
  lower.kv_cache = storage_dtype("--kv-cache", options.kv_cache);
  const std::vector<std::string> archs = split(options.archs);
  if (archs.empty()) throw Error("--arch: no GPU arch given");
  // Kernels are tuned for the first arch (heuristics/<arch>.cc) and compiled for every one.
  lower.arch = codegen::canonical_arch(archs.front());
  return lower;
}

int64_t draft_candidates(const PlanOutputOptions& options) {
  return std::max<int64_t>(1, parse_buckets(options.buckets).back() - 1);
}

passes::WeightBytes checkpoint_bytes(const TargetCheckpoint& target, const DraftCheckpoint* draft) {
  if (!target.has_weights()) return nullptr;
  const SafetensorsCheckpoint* t = &target.weights();
  const SafetensorsCheckpoint* d = draft && draft->has_weights() ? &draft->weights() : nullptr;
  // Every float tensor is scanned as it goes into the plan: a NaN or an infinity is refused by
  // name here rather than decoding as junk later.
  return [t, d](const std::string& source, const std::string& name) -> std::span<const uint8_t> {
    if (source == "draft" && !d) throw Error("codegen: weight " + name + " of the drafter, but no drafter checkpoint was opened");
    const TensorView& v = (source == "draft" ? d : t)->get(name);
    if (is_float_dtype(v.dtype)) {
      const int64_t bad = first_non_finite(v.bytes.data(), v.dtype, static_cast<size_t>(v.numel()));
      if (bad >= 0)
        throw Error(v.file + ": tensor " + name + " holds a NaN or infinity (element " + std::to_string(bad) +
                    "): the checkpoint is damaged");
    }
    return v.bytes;
  };
}

void make_weights_synthetic(LoweredPlan& lowered, uint64_t seed, int64_t group_size, const std::string& arch) {
  std::map<std::string, uint32_t> kernel_of;  // instance id -> index in lowered.kernels
  for (size_t k = 0; k < lowered.kernels.size(); ++k) kernel_of[lowered.kernels[k].id] = static_cast<uint32_t>(k);
  for (Weight& w : lowered.weights) {
    if (!w.data().empty()) throw Error("--synthetic-weights: weight " + w.name + " already holds bytes");
    SyntheticInit s = synthetic_init(w, seed, group_size);
    const int kind = static_cast<int>(s.kind);
    const codegen::ElemType out = s.kind == SyntheticKind::Int4Packed || w.dtype == DType::F32 ? codegen::ElemType::F32 : codegen::ElemType::BF16;
    // A weight whose device copy is in int4_frag order is generated in that order.
    const int64_t frag_k = w.shape.empty() ? 0 : int4_frag::columns(w.layout, w.shape.back());
    codegen::KernelSource k = codegen::synthetic_weights_kernel(kind, out, s.group_size, arch, frag_k);
    auto [it, added] = kernel_of.try_emplace(k.id, static_cast<uint32_t>(lowered.kernels.size()));
    if (added) lowered.kernels.push_back(std::move(k));
    s.kernel = it->second;
    w.synthetic = s;
    w.size = dtype_size(w.dtype) * synthetic_units(w);
  }
}

void write_compiled_plan(const ir::Module& module, const TargetCheckpoint& target, const DraftCheckpoint* draft,
                         const PlanOutputOptions& options) {
  const bool synthetic = options.synthetic_seed.has_value();
  if (synthetic && target.has_weights())
    throw Error("--synthetic-weights generates every weight at load: give --no-weights (the checkpoint's tensors are not read)");
  if (!synthetic && !target.has_weights())
    throw Error("-o needs the checkpoint's weights: drop --no-weights, or give --synthetic-weights SEED to generate them at load");
  const passes::LowerOptions lower = lower_options(target.config(), options);
  LoweredPlan lowered = passes::lower_module(module, synthetic ? nullptr : checkpoint_bytes(target, draft), lower);
  if (synthetic) make_weights_synthetic(lowered, *options.synthetic_seed, target.config().quant.group_size, lower.arch);
  const std::optional<std::filesystem::path> draft_dir = draft ? std::optional(draft->dir()) : std::nullopt;

  AssembleOptions assemble;
  assemble.archs = split(options.archs);
  assemble.progress = options.progress;
  codegen::CompileStats stats;
  PlanSources sources{target.dir(), draft_dir, ir::print_module(module), target.config(), std::nullopt};
  // The drafter's config as compiled (its YaRN amplitude choice, resolved mask token, context
  // window), not config.json read again.
  if (draft) sources.draft = draft->config();
  Plan p = write_plan_from_compile(sources, std::move(lowered), assemble,
                                   options.out, &stats);
  uint64_t bytes = 0;
  for (const Weight& w : p.weights) bytes += w.size;
  // MiB by hand: the compiler does not link the runtime's plan printer.
  std::fprintf(stderr, "kplan compile: wrote %s: %zu buckets, %.2f MiB of weights%s; %s\n", options.out.c_str(),
               p.buckets.size(), static_cast<double>(bytes) / (1024.0 * 1024.0),
               synthetic ? (" (synthetic, seed " + std::to_string(*options.synthetic_seed) + ": generated at load)").c_str() : "",
               stats.summary().c_str());
}

}  // namespace kplan::plan
