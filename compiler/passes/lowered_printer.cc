#include "compiler/passes/lowered_printer.h"

#include <cinttypes>
#include <cstdio>

#include "ir/printer.h"

namespace kplan::passes {
namespace {

void put(std::string& out, const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  out += buf;
}

const char* role_name(plan::SlotRole r) {
  switch (r) {
    case plan::SlotRole::Scratch: return "scratch";
    case plan::SlotRole::Persistent: return "persistent";
    case plan::SlotRole::Input: return "input";
    case plan::SlotRole::Output: return "output";
  }
  return "?";
}

const char* step_name(uint32_t k) {
  static const char* names[] = {"tokens", "positions", "tree_mask", "cache_length", "token_count"};
  return k < 5 ? names[k] : "?";
}

std::string storage_text(const LowerState& s, const Storage& st) {
  switch (st.kind) {
    case Storage::Kind::Slot: return "slot " + std::to_string(st.index) + " (" + s.buffers.slots.at(st.index).name + ")";
    case Storage::Kind::StepInput: return std::string("step input ") + step_name(st.index);
    case Storage::Kind::Weight: return "weight " + std::to_string(st.index);
    case Storage::Kind::None: return "in the cache";
  }
  return "?";
}

// Trailing attributes of one op: what the stages so far recorded about it.
std::string annotations(const LowerState& s, const ir::Function& fn, const ir::Op& op) {
  std::string a;
  auto add = [&](const std::string& text) { a += (a.empty() ? "" : ", ") + text; };
  auto k = s.kernels.find(&op);
  if (k != s.kernels.end()) {
    std::string ids;
    for (const codegen::KernelSource& src : k->second) ids += (ids.empty() ? "" : ", ") + ("\"" + src.id + "\"");
    add("kernels = [" + ids + "]");
  }
  auto producer = s.epilogue.producers.find(&op);
  if (producer != s.epilogue.producers.end())
    add("epilogue = " + ir::value_ref(fn, producer->second.out) + " = " + ir::value_ref(fn, producer->second.residual) + " + this");
  auto later = s.siblings.later.find(&op);
  if (later != s.siblings.later.end()) {
    std::string refs;
    for (const ir::Op* sibling : later->second) refs += (refs.empty() ? "" : ", ") + ir::value_ref(fn, sibling->result());
    add("siblings = [" + refs + "]");
  }
  auto first = s.siblings.first.find(&op);
  if (first != s.siblings.first.end()) add("fused = a sibling of " + ir::value_ref(fn, first->second->result()));
  auto glu = s.siblings.glu_of.find(&op);
  if (glu != s.siblings.glu_of.end()) add("fused = the swiglu of the siblings of " + ir::value_ref(fn, glu->second->result()));
  auto fused = s.epilogue.fused_adds.find(&op);
  if (fused != s.epilogue.fused_adds.end()) add("fused = the epilogue of " + ir::value_ref(fn, fused->second->result()));
  auto norm = s.norm_matmuls.consumers.find(&op);
  if (norm != s.norm_matmuls.consumers.end())
    add("norm = " + ir::value_ref(fn, norm->second.norm->result()) + (norm->second.store ? " (stored)" : "") +
        (norm->second.exact ? " (exact)" : ""));
  auto norm_of = s.norm_matmuls.absorbed.find(&op);
  if (norm_of != s.norm_matmuls.absorbed.end()) add("fused = into the matmul of " + ir::value_ref(fn, norm_of->second->result()));
  auto router = s.router_experts.router_of.find(&op);
  if (router != s.router_experts.router_of.end()) add("router = " + ir::value_ref(fn, router->second->result()));
  auto router_of = s.router_experts.absorbed.find(&op);
  if (router_of != s.router_experts.absorbed.end()) add("fused = into the experts of " + ir::value_ref(fn, router_of->second->result()));
  auto routes = s.router_experts.logits_router.find(&op);
  if (routes != s.router_experts.logits_router.end()) add("route = " + ir::value_ref(fn, routes->second->result()));
  auto logits_of = s.router_experts.logits_of.find(&op);
  if (logits_of != s.router_experts.logits_of.end()) add("routed = by the launch of " + ir::value_ref(fn, logits_of->second->result()));
  auto uv = s.attention_uv.uv_of.find(&op);
  if (uv != s.attention_uv.uv_of.end()) add("uv = " + ir::value_ref(fn, uv->second->result()));
  auto uv_of = s.attention_uv.absorbed.find(&op);
  if (uv_of != s.attention_uv.absorbed.end()) add("fused = into the attention of " + ir::value_ref(fn, uv_of->second->result()));
  auto gather = s.embedding_norms.gather_of.find(&op);
  if (gather != s.embedding_norms.gather_of.end()) add("gather = " + ir::value_ref(fn, gather->second->result()));
  auto gathered = s.embedding_norms.absorbed.find(&op);
  if (gathered != s.embedding_norms.absorbed.end()) add("fused = into the rms_norm of " + ir::value_ref(fn, gathered->second->result()));
  auto sum = s.add_norms.add_of.find(&op);
  if (sum != s.add_norms.add_of.end()) add("add = " + ir::value_ref(fn, sum->second->result()));
  auto summed = s.add_norms.absorbed.find(&op);
  if (summed != s.add_norms.absorbed.end()) add("fused = into the rms_norm of " + ir::value_ref(fn, summed->second->result()));
  auto appended = s.uk_appends.append_of.find(&op);
  if (appended != s.uk_appends.append_of.end()) add("append = " + ir::value_ref(fn, appended->second->result()));
  auto into_uk = s.uk_appends.absorbed.find(&op);
  if (into_uk != s.uk_appends.absorbed.end()) add("fused = into the head_matmul of " + ir::value_ref(fn, into_uk->second->result()));
  auto absorbed = s.rope_append.absorbed.find(&op);
  if (absorbed != s.rope_append.absorbed.end())
    add("fused = into the kv_append of " + ir::value_ref(fn, absorbed->second->result()));
  if (op.kind() == ir::OpKind::Weight || op.kind() == ir::OpKind::WeightStack) {
    const std::string source = op.attrs().has("ckpt") ? op.attrs().get_string("ckpt") : "target";
    auto w = s.weight_index.find({source, op.attrs().get_string("name")});
    if (w != s.weight_index.end()) {
      const bool have = w->second < s.weights.size();
      add("weight = " + std::to_string(w->second) + (have ? ", layout = \"" + s.weights[w->second].layout + "\"" : ""));
    }
  }
  for (size_t r = 0; r < op.num_results(); ++r) {
    auto narrowed = s.stored_dtypes.find(op.result(r));
    if (narrowed != s.stored_dtypes.end())
      add((op.num_results() > 1 ? "result " + std::to_string(r) + " " : std::string()) + "stored = " + std::string(dtype_name(narrowed->second)));
  }
  for (size_t r = 0; r < op.num_results(); ++r) {
    auto alias = s.aliases.find(op.result(r));
    if (alias != s.aliases.end()) {
      add("in_place = " + ir::value_ref(fn, alias->second));
      continue;
    }
    if (s.unstored(op.result(r))) {
      add((op.num_results() > 1 ? "result " + std::to_string(r) + " " : std::string()) + "unstored");
      continue;
    }
    auto st = s.storage.find(op.result(r));
    if (st != s.storage.end()) add((op.num_results() > 1 ? "result " + std::to_string(r) + " " : std::string()) + storage_text(s, st->second));
  }
  auto sc = s.scratch.find(&op);
  if (sc != s.scratch.end()) add("scratch = " + storage_text(s, {Storage::Kind::Slot, sc->second}));
  return a;
}

void print_programs(const LowerState& s, std::string& out) {
  for (const ir::Function* fn : s.programs) {
    out += "func @" + fn->name() + " {\n";
    for (const ir::Value* arg : fn->args()) {
      auto st = s.storage.find(arg);
      auto narrowed = s.stored_dtypes.find(arg);
      const std::string stored = narrowed == s.stored_dtypes.end() ? "" : std::string(dtype_name(narrowed->second));
      if (st != s.storage.end())
        out += "  // %" + arg->name() + ": " + (stored.empty() ? "" : stored + ", ") + storage_text(s, st->second) + "\n";
      else if (!stored.empty())
        out += "  // %" + arg->name() + ": stored = " + stored + "\n";
    }
    for (const ir::Op* op : fn->ops()) {
      out += "  " + ir::print_op(*fn, *op);
      const std::string a = annotations(s, *fn, *op);
      if (!a.empty()) out += "  // " + a;
      out += "\n";
    }
    out += "}\n";
  }
}

std::string arg_text(const plan::LaunchArg& a) {
  char buf[64];
  switch (a.kind) {
    case plan::ArgKind::Buffer: std::snprintf(buf, sizeof buf, "slot%u+%" PRIu64, a.index, a.offset); break;
    case plan::ArgKind::Weight: std::snprintf(buf, sizeof buf, "w%u+%" PRIu64, a.index, a.offset); break;
    case plan::ArgKind::I32:
    case plan::ArgKind::I64: std::snprintf(buf, sizeof buf, "%" PRId64, a.ival); break;
    case plan::ArgKind::F32: std::snprintf(buf, sizeof buf, "%g", static_cast<double>(a.fval)); break;
    case plan::ArgKind::StepInput: std::snprintf(buf, sizeof buf, "in:%s", step_name(a.index)); break;
    case plan::ArgKind::TensorMap: std::snprintf(buf, sizeof buf, "tmap%u", a.index); break;
  }
  return buf;
}

void print_launches(const plan::LoweredPlan& p, std::string& out) {
  for (const plan::Bucket& b : p.buckets) {
    put(out, "bucket @%s tokens = %u {\n", b.program.c_str(), b.tokens);
    for (size_t i = 0; i < b.launches.size(); ++i) {
      const plan::Launch& l = b.launches[i];
      const codegen::KernelSource& k = p.kernels.at(l.kernel);
      put(out, "  launch %zu: %s grid (%u, %u, %u) block (%u, %u, %u)", i, k.id.c_str(), l.grid[0], l.grid[1], l.grid[2],
          l.block[0], l.block[1], l.block[2]);
      if (l.smem_bytes) put(out, " smem %u", l.smem_bytes);
      if (l.cluster != std::array<uint32_t, 3>{1, 1, 1}) put(out, " cluster (%u, %u, %u)", l.cluster[0], l.cluster[1], l.cluster[2]);
      if (l.grid_x_per_sm) put(out, " grid.x = %u x SMs", l.grid_x_per_sm);
      out += "\n    (";
      for (size_t a = 0; a < l.args.size(); ++a) {
        out += (a ? ", " : "") + (a < k.signature.size() ? k.signature[a].name : std::string("?")) + " = " + arg_text(l.args[a]);
      }
      out += ")\n";
    }
    for (const plan::StepOutput& o : b.outputs) {
      const char* kind = plan::output_kind_name(o.kind);
      put(out, "  output %s", kind);
      if (o.layer >= 0) put(out, " layer %" PRId64, o.layer);
      put(out, ": slot %u %s[%" PRId64 ", %" PRId64 "]\n", o.slot, std::string(dtype_name(o.dtype)).c_str(), o.rows, o.cols);
    }
    out += "}\n";
  }
}

}  // namespace

std::string print_lowered(const LowerState& s, std::string_view after_stage) {
  std::string out;
  put(out, "// lowered after %.*s: arch %s, max_context %" PRId64 ", largest bucket %" PRId64 "\n",
      static_cast<int>(after_stage.size()), after_stage.data(), s.options.arch.c_str(), s.options.max_context, s.max_tokens);
  const plan::BufferPlan& buffers = s.lowered ? s.lowered->buffers : s.buffers;  // emit-round adds slots
  if (!buffers.slots.empty()) {
    out += "slots {\n";
    for (size_t i = 0; i < buffers.slots.size(); ++i) {
      const plan::BufferSlot& slot = buffers.slots[i];
      put(out, "  slot %zu: %s %s %" PRIu64 " bytes\n", i, slot.name.c_str(), role_name(slot.role), slot.size);
    }
    out += "}\n";
  }
  const size_t n_weights = s.lowered ? s.lowered->weights.size() : s.weights.size();
  if (n_weights) {
    out += "weights {\n";
    const std::vector<plan::Weight>& ws = s.lowered ? s.lowered->weights : s.weights;
    for (size_t i = 0; i < ws.size(); ++i) {
      std::string shape;
      for (int64_t d : ws[i].shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
      put(out, "  weight %zu: %s %s %s[%s] %s\n", i, ws[i].source.c_str(), ws[i].name.c_str(),
          std::string(dtype_name(ws[i].dtype)).c_str(), shape.c_str(), ws[i].layout.c_str());
    }
    out += "}\n";
  }
  print_programs(s, out);
  if (!s.buckets.empty()) {
    out += "buckets {";
    for (const BucketSpec& b : s.buckets) put(out, " @%s/%" PRId64, b.program->name().c_str(), b.tokens);
    out += " }\n";
  }
  if (s.lowered) print_launches(*s.lowered, out);
  return out;
}

}  // namespace kplan::passes
