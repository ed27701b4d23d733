#include "compiler/passes/uk_rope_append.h"

#include <vector>

#include "compiler/codegen/heuristics/heuristics.h"

namespace kplan::passes {

using ir::Op;
using ir::OpKind;
using ir::Value;

namespace {

// W_UK as mla_absorb leaves it: [heads, N, K] whose strides read each head as [K, N].
bool weight_read_kn(const View* w) {
  return w && w->shape.size() == 3 && w->strides.size() == 3 && w->strides[1] == 1 && w->strides[2] == w->shape[1];
}

}  // namespace

void find_uk_rope_appends(const ir::Function& fn, const std::map<const Value*, View>& views, const RopeAppendFusions& appends,
                          UkRopeAppends& out) {
  const std::vector<ir::Op*> ops = fn.ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op* kv = ops[i];
    auto fused = appends.appends.find(kv);
    if (fused == appends.appends.end() || !fused->second.q_rope) continue;
    const Op* q_rope = fused->second.q_rope;
    const size_t next = next_launching_op(ops, i);
    if (next == ops.size() || ops[next]->kind() != OpKind::HeadMatmul) continue;
    const Op* uk = ops[next];
    const View* w = find_view(views, uk->operand(1));
    const View* x = find_view(views, uk->operand(0));
    const View* q = find_view(views, q_rope->operand(0));
    const View* latent = find_view(views, fused->second.norm->operand(0));
    if (!weight_read_kn(w) || !x || !q || !latent || q->shape.size() != 3 || q->shape[1] != w->shape[0] || x->dtype != latent->dtype) continue;
    // The attention over this cache and query rope takes W_UK's product as its latent queries.
    bool read = false;
    for (const Op* attn : fn.users(uk->result()))
      read = read || (attn->kind() == OpKind::MlaAttention && attn->num_operands() >= 3 && attn->operand(0) == uk->result() &&
                      attn->operand(1) == q_rope->result() && attn->operand(2) == kv->result());
    if (!read) continue;
    out.append_of[uk] = kv;
    out.absorbed[kv] = uk;
  }
}

// On by default since it ran on a GPU (bench/RESULTS.md 2026-12-07 session 46: its GPU test and the
// HF goldens through it passed on an H100, the K2.6 1-token step there 1.5 - 2 us faster).
bool uk_rope_appends_enabled() { return codegen::compile_switch("KPLAN_FUSE_UK_APPEND", true); }

}  // namespace kplan::passes
