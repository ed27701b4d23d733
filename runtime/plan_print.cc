#include "runtime/plan_print.h"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>

#include "runtime/tokenizer/tokenizer_bundle.h"

namespace kplan::plan {
namespace {

// printf into a std::string.
template <typename... Args>
void put(std::string& out, const char* fmt, Args... args) {
  char buf[1024];
  int n = std::snprintf(buf, sizeof buf, fmt, args...);
  if (n >= static_cast<int>(sizeof buf)) {
    std::string big(static_cast<size_t>(n) + 1, '\0');
    std::snprintf(big.data(), big.size(), fmt, args...);
    big.resize(static_cast<size_t>(n));
    out += big;
  } else if (n > 0) {
    out.append(buf, static_cast<size_t>(n));
  }
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

uint64_t total_weight_bytes(const Plan& p) {
  uint64_t n = 0;
  for (const Weight& w : p.weights) n += w.size;
  return n;
}

// Bytes of the weights generated at load (synthetic: not in the file).
uint64_t synthetic_weight_bytes(const Plan& p) {
  uint64_t n = 0;
  for (const Weight& w : p.weights)
    if (w.synthetic) n += w.size;
  return n;
}

// "tiktoken, N ranks + M specials" for a tiktoken bundle, the size of other tokenizer data.
std::string tokenizer_text(const Plan& p) {
  if (p.tokenizer.empty()) return "none";
  if (!tokenizer::is_tokenizer_bundle(p.tokenizer)) return format_bytes(p.tokenizer.size()) + " (tokenizer.json)";
  try {
    return tokenizer::tokenizer_from_bundle(p.tokenizer, "plan").summary();
  } catch (const std::exception& e) {
    return std::string("damaged tiktoken data: ") + e.what();
  }
}

std::string summary(const Plan& p) {
  std::string out;
  const Header& h = p.header;
  std::string archs;
  for (const std::string& a : h.archs) archs += (archs.empty() ? "" : ",") + a;
  put(out, "kplan plan, format version %u, written by kplan %s (CUDA %s, NVRTC %s)\n", h.format_version,
      h.compiler_version.c_str(), h.cuda_version.c_str(), h.nvrtc_version.c_str());
  put(out, "archs:        %s\n", archs.c_str());
  put(out, "limits:       max %" PRId64 " tokens/step, %" PRId64 " tree nodes, %" PRId64 " context\n",
      h.limits.max_tokens_per_step, h.limits.max_tree_nodes, h.limits.max_context);
  const ModelConfig& m = p.model;
  put(out, "model:        %s, %" PRId64 " layers, hidden %" PRId64 ", vocab %" PRId64 ", %" PRId64 " routed experts top-%" PRId64 "%s\n",
      m.model_type.c_str(), m.num_hidden_layers, m.hidden_size, m.vocab_size, m.n_routed_experts, m.num_experts_per_tok,
      m.quant.enabled ? ", INT4 experts" : "");
  if (p.draft) {
    put(out, "drafter:      %" PRId64 " layers, block %" PRId64 ", context from %zu target layers\n", p.draft->num_hidden_layers,
        p.draft->block_size, p.draft->target_layer_ids.size());
    // --draft-context-window: the block attends to the last N context positions only.
    if (p.draft->context_window > 0)
      put(out, "drafter context window: the last %" PRId64 " positions\n", p.draft->context_window);
    else
      put(out, "drafter context window: none (the whole context)\n");
  }
  put(out, "tokenizer:    %s\n", tokenizer_text(p).c_str());
  put(out, "IR:           %zu lines\n",
      p.ir_text.empty() ? size_t{0} : static_cast<size_t>(std::count(p.ir_text.begin(), p.ir_text.end(), '\n')));
  uint64_t cubin_bytes = 0;
  size_t library_calls = 0;
  for (const Kernel& k : p.kernels) {
    for (const KernelBinary& b : k.binaries) cubin_bytes += b.cubin.size();
    library_calls += k.library.empty() ? 0 : 1;
  }
  put(out, "kernels:      %zu instances, %s of cubins", p.kernels.size(), format_bytes(cubin_bytes).c_str());
  if (library_calls) put(out, "; %zu of them cuBLASLt calls (no cubin)", library_calls);
  out += "\n";
  put(out, "weights:      %zu tensors, %s", p.weights.size(), format_bytes(total_weight_bytes(p)).c_str());
  if (const uint64_t syn = synthetic_weight_bytes(p)) put(out, " (%s synthetic, generated at load)", format_bytes(syn).c_str());
  put(out, "\n");
  put(out, "arena:        %s in %zu slots; %zu KV caches\n", format_bytes(p.buffers.arena_size).c_str(),
      p.buffers.slots.size(), p.kv_caches.size());
  put(out, "buckets:     ");
  if (p.buckets.empty()) out += " none";
  for (const Bucket& b : p.buckets)
    put(out, " %s/%u (%zu launches)", b.program.c_str(), b.tokens, b.launches.size());
  out += "\n";
  return out;
}

std::string kernels(const Plan& p) {
  std::string out;
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const Kernel& k = p.kernels[i];
    if (!k.library.empty())
      put(out, "kernel %zu: %s  a %s call  family %s\n", i, k.id.c_str(), k.library.c_str(), k.family.c_str());
    else
      put(out, "kernel %zu: %s  entry %s  family %s  key %s\n", i, k.id.c_str(), k.entry.c_str(), k.family.c_str(),
          k.cache_key.empty() ? "-" : k.cache_key.c_str());
    if (!k.constants.empty()) {
      out += "  constants:";
      for (const KernelConstant& c : k.constants) put(out, " %s=%" PRId64, c.name.c_str(), c.value);
      out += "\n";
    }
    out += "  params:";
    for (size_t j = 0; j < k.params.size(); ++j) {
      const char* name = j < k.param_names.size() ? k.param_names[j].c_str() : "";
      put(out, " %s%s%s", param_type_name(k.params[j]), *name ? " " : "", name);
      if (j + 1 < k.params.size()) out += ",";
    }
    out += "\n";
    for (const KernelBinary& b : k.binaries)
      put(out, "  %s: %s cubin  (%s_%s)\n", b.arch.c_str(), format_bytes(b.cubin.size()).c_str(), k.id.c_str(),
          b.arch.c_str());
  }
  return out;
}

std::string memory(const Plan& p) {
  std::string out;
  put(out, "arena: %s (%" PRIu64 " bytes)\n", format_bytes(p.buffers.arena_size).c_str(), p.buffers.arena_size);
  std::map<SlotRole, uint64_t> by_role;
  for (size_t i = 0; i < p.buffers.slots.size(); ++i) {
    const BufferSlot& s = p.buffers.slots[i];
    by_role[s.role] += s.size;
    put(out, "  slot %-4zu %-10s offset %12" PRIu64 "  size %12" PRIu64 "  align %5" PRIu64 "  %s\n", i,
        slot_role_name(s.role), s.offset, s.size, s.alignment, s.name.c_str());
  }
  for (const auto& [role, bytes] : by_role) put(out, "  total %-10s %s\n", slot_role_name(role), format_bytes(bytes).c_str());
  for (const StepInputBinding& in : p.step_inputs)
    put(out, "step input %-12s -> slot %u\n", step_input_name(in.kind), in.slot);
  for (const KvCache& kv : p.kv_caches)
    put(out, "KV cache %s: slot %u, %" PRIu64 " rows x %" PRIu64 " bytes\n", kv.name.c_str(), kv.slot, kv.rows,
        kv.row_bytes);
  put(out, "weights: %s in the data section\n", format_bytes(total_weight_bytes(p) - synthetic_weight_bytes(p)).c_str());
  if (const uint64_t syn = synthetic_weight_bytes(p)) put(out, "weights: %s synthetic, generated at load\n", format_bytes(syn).c_str());
  return out;
}

std::string arg_text(const Plan& p, const LaunchArg& a) {
  std::string out;
  switch (a.kind) {
    case ArgKind::Buffer:
      put(out, "slot%u(%s)+%" PRIu64, a.index,
          a.index < p.buffers.slots.size() ? p.buffers.slots[a.index].name.c_str() : "?", a.offset);
      break;
    case ArgKind::Weight:
      put(out, "w%u(%s)", a.index, a.index < p.weights.size() ? p.weights[a.index].name.c_str() : "?");
      if (a.offset) put(out, "+%" PRIu64, a.offset);
      break;
    case ArgKind::I32:
    case ArgKind::I64: put(out, "%" PRId64, a.ival); break;
    case ArgKind::F32: put(out, "%g", static_cast<double>(a.fval)); break;
    case ArgKind::StepInput: put(out, "in:%s", step_input_name(static_cast<StepInputKind>(a.index))); break;
    case ArgKind::TensorMap: put(out, "tmap%u", a.index); break;
  }
  return out;
}

std::string launches(const Plan& p) {
  std::string out;
  for (const Bucket& b : p.buckets) {
    put(out, "bucket %s/%u: %zu launches\n", b.program.c_str(), b.tokens, b.launches.size());
    for (size_t i = 0; i < b.launches.size(); ++i) {
      const Launch& l = b.launches[i];
      const char* id = l.kernel < p.kernels.size() ? p.kernels[l.kernel].id.c_str() : "?";
      if (l.grid_x_per_sm > 0)
        put(out, "  %4zu %s grid(%u*SMs,%u,%u) block(%u,%u,%u) smem %u", i, id, l.grid_x_per_sm, l.grid[1], l.grid[2],
            l.block[0], l.block[1], l.block[2], l.smem_bytes);
      else
        put(out, "  %4zu %s grid(%u,%u,%u) block(%u,%u,%u) smem %u", i, id, l.grid[0], l.grid[1], l.grid[2],
            l.block[0], l.block[1], l.block[2], l.smem_bytes);
      if (l.cluster != std::array<uint32_t, 3>{1, 1, 1}) put(out, " cluster(%u,%u,%u)", l.cluster[0], l.cluster[1], l.cluster[2]);
      out += " (";
      for (size_t a = 0; a < l.args.size(); ++a) out += (a ? ", " : "") + arg_text(p, l.args[a]);
      out += ")";
      if (!l.note.empty()) out += "  ; " + l.note;
      out += "\n";
      for (size_t m = 0; m < l.tensor_maps.size(); ++m) {
        const TensorMapDesc& t = l.tensor_maps[m];
        put(out, "       tmap%zu: %s%u+%" PRIu64 " %s dims", m, t.base == ArgKind::Weight ? "w" : "slot", t.index, t.offset,
            std::string(dtype_name(t.dtype)).c_str());
        for (uint64_t d : t.dims) put(out, " %" PRIu64, d);
        out += " box";
        for (uint32_t d : t.box) put(out, " %u", d);
        out += "\n";
      }
    }
    for (const StepOutput& o : b.outputs) {
      put(out, "  -> %s", output_kind_name(o.kind));
      if (o.kind == OutputKind::Hidden) put(out, " layer %" PRId64, o.layer);
      put(out, " %s[%" PRId64 ",%" PRId64 "] at slot %u+%" PRIu64 "\n", std::string(dtype_name(o.dtype)).c_str(),
          o.rows, o.cols, o.slot, o.offset);
    }
  }
  return out;
}

std::string weights(const Plan& p) {
  std::string out;
  size_t synthetic = 0;
  for (size_t i = 0; i < p.weights.size(); ++i) {
    const Weight& w = p.weights[i];
    if (w.synthetic) {
      const SyntheticInit& s = *w.synthetic;
      put(out, "%5zu %-56s %-6s %-18s %-12s synthetic seed %" PRIu64 " %s mean %g std %g", i, w.name.c_str(),
          std::string(dtype_name(w.dtype)).c_str(), shape_text(w.shape).c_str(), w.layout.c_str(), s.seed,
          synthetic_kind_name(s.kind), static_cast<double>(s.mean), static_cast<double>(s.stddev));
      if (s.group_size) put(out, " group %u", s.group_size);
      put(out, " size %10" PRIu64 " kernel %u\n", w.size, s.kernel);
      ++synthetic;
      continue;
    }
    put(out, "%5zu %-56s %-6s %-18s %-12s offset %12" PRIu64 " size %10" PRIu64 " xxh3 %016" PRIx64 "\n", i,
        w.name.c_str(), std::string(dtype_name(w.dtype)).c_str(), shape_text(w.shape).c_str(), w.layout.c_str(),
        w.offset, w.size, w.checksum);
  }
  put(out, "total: %zu tensors, %s", p.weights.size(), format_bytes(total_weight_bytes(p)).c_str());
  if (synthetic) put(out, " (%zu synthetic: generated at load, not in the file)", synthetic);
  put(out, "\n");
  return out;
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  char buf[64];
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) std::snprintf(buf, sizeof buf, "%" PRIu64 " B", bytes);
  else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

std::string describe_plan(const Plan& plan, PlanSection section) {
  switch (section) {
    case PlanSection::Summary: return summary(plan);
    case PlanSection::Ir: return plan.ir_text.empty() ? "(the plan holds no IR)\n" : plan.ir_text;
    case PlanSection::Kernels: return kernels(plan);
    case PlanSection::Memory: return memory(plan);
    case PlanSection::Launches: return launches(plan);
    case PlanSection::Weights: return weights(plan);
  }
  return {};
}

}  // namespace kplan::plan
