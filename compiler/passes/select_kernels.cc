// select-kernels: which kernel instances (family + compile-time constants, tuned for the
// plan's arch) implement each op of the programs lowered to launches. The home of fusions: a
// pattern that one kernel serves (an epilogue add, a norm before a quantised matmul) is matched
// here and recorded on the ops it covers (epilogue_adds.h: residual adds; sibling_matmuls.h:
// matmuls of the same activations; rope_append.h: an MLA layer's norm and ropes in its kv_append;
// norm_matmuls.h: a norm in the launch of the matmul that first reads it; router_experts.h: a
// MoE's router in its experts' gate/up launch; embedding_norm.h: the embedding in its first
// norm's launch; add_norm.h: an add in the launch of the norm right after it; uk_rope_append.h:
// a fused kv_append in the launch of the W_UK product after it).
#include "compiler/passes/lower_state.h"
#include "compiler/passes/lowering_views.h"
#include "compiler/passes/op_rules.h"
#include "ir/support/dtype.h"
#include "ir/support/error.h"

namespace kplan::passes {
namespace {

// The weight bytes an op's launch reads: its operands whose storage is a weight (the views' bytes:
// a MoE's whole expert stacks, a per-head slice's heads), and its later siblings' where one launch
// computes them too (sibling_matmuls.h).
int64_t launch_weight_bytes(const ir::Op& op, const std::map<const ir::Value*, View>& views, const std::vector<const ir::Op*>* siblings) {
  int64_t bytes = 0;
  auto add = [&](const ir::Op& o) {
    for (const ir::Value* v : o.operands()) {
      auto it = views.find(v);
      if (it == views.end() || !it->second.root || !it->second.root->defining_op()) continue;
      const ir::OpKind k = it->second.root->defining_op()->kind();
      if (k == ir::OpKind::Weight || k == ir::OpKind::WeightStack)
        bytes += product(it->second.shape) * static_cast<int64_t>(dtype_size(it->second.dtype));
    }
  };
  add(op);
  if (siblings)
    for (const ir::Op* s : *siblings) add(*s);
  return bytes;
}

}  // namespace

void select_kernels(LowerState& s) {
  s.kernels.clear();
  s.epilogue = {};
  s.siblings = {};
  s.rope_append = {};
  s.norm_matmuls = {};
  s.router_experts = {};
  s.attention_uv = {};
  s.embedding_norms = {};
  s.add_norms = {};
  s.uk_appends = {};
  for (const ir::Function* fn : s.programs) {
    // Instances depend on widths, not on the token count: choose them at the largest bucket.
    const std::map<const ir::Value*, View> views = compute_views(*fn, s.max_tokens, s.options.max_context, s.draft_rows, &s.stored_dtypes);
    if (epilogue_adds_enabled()) find_epilogue_adds(*fn, views, s.epilogue);
    if (sibling_matmuls_enabled()) find_sibling_matmuls(*fn, views, s.epilogue, s.siblings);
    if (rope_append_fusion_enabled()) find_rope_append_fusions(*fn, views, s.rope_append);
    if (const NormFolds folds = norm_folds(); folds.readers) find_norm_matmuls(*fn, views, s.siblings, s.norm_matmuls, folds.readers, folds.exact);
    if (router_experts_enabled()) find_router_experts(*fn, views, s.max_tokens, s.router_experts);
    if (router_experts_enabled() && router_logits_enabled()) find_router_logits(s.siblings, s.router_experts);
    if (attention_uv_fusion_enabled()) find_attention_uv_fusions(*fn, views, s.max_tokens, s.options.arch, s.attention_uv);
    if (embedding_norms_enabled()) find_embedding_norms(*fn, views, s.norm_matmuls, s.embedding_norms);
    if (add_norms_enabled()) find_add_norms(*fn, views, s.epilogue, s.norm_matmuls, s.embedding_norms, s.add_norms);
    if (uk_rope_appends_enabled()) find_uk_rope_appends(*fn, views, s.rope_append, s.uk_appends);
    const LoweringFusions fusions{s.epilogue,     s.siblings,   s.rope_append,     s.norm_matmuls, s.router_experts,
                                  s.attention_uv, s.embedding_norms, s.add_norms, s.uk_appends};
    const std::vector<ir::Op*> ops = fn->ops();
    int64_t prev_weight_bytes = -1;  // the weights the step's launch before this op reads
    for (size_t n = 0; n < ops.size(); ++n) {
      if (fusions.absorbed(*ops[n])) continue;  // the producer, first sibling or kv_append launches it
      RuleContext ctx;
      attach_fusions(fusions, *ops[n], ctx);
      ctx.fn = fn;
      ctx.op_index = static_cast<int64_t>(n);
      ctx.prev_launch_weight_bytes = prev_weight_bytes;
      ctx.tokens = s.max_tokens;
      ctx.max_tokens = s.max_tokens;
      ctx.max_context = s.options.max_context;
      ctx.arch = s.options.arch;
      ctx.bf16_activations = stores_bf16_activations(s, *fn);
      ctx.views = &views;
      // Storage is not planned yet: any pointer will do, but a deferred concat is still refused.
      ctx.ptr = [&](const View& v) {
        if (!v.root) throw Error("codegen: a deferred concat was read by a kernel (" + ctx.where(*ops[n]) + ")");
        return plan::LaunchArg::buffer(0);
      };
      ctx.scratch = [](const ir::Op&) { return plan::LaunchArg::buffer(0); };
      ctx.route_count = [](const ir::Op&) { return plan::LaunchArg::buffer(0); };
      lower_op(*ops[n], ctx);
      if (!ctx.chosen.empty()) s.kernels[ops[n]] = std::move(ctx.chosen);
      if (!ctx.launches.empty()) prev_weight_bytes = launch_weight_bytes(*ops[n], views, ctx.siblings);
    }
  }
}

}  // namespace kplan::passes
