// mla-absorb: absorb kv_b_proj into the query (W_UK) and output (W_UV): attention over the
// latent cache. For each mla_attention_expanded whose keys/values are the kv_b_proj expansion of
// the cache's latent columns, per head h (W3 = kv_b_proj viewed [H, nope + v, L]):
//   q_latent[t,h,:] = q_nope[t,h,:] @ W3[h, :nope, :]     (head_matmul with W_UK transposed)
//   o_latent        = mla_attention(q_latent, q_rope, kv)  (scores and sums over latent rows)
//   out[t,h,:]      = W3[h, nope:, :] @ o_latent[t,h,:]    (head_matmul with W_UV)
// which equals the expanded form exactly in real arithmetic, and never expands the cache.
// The expansion chain becomes dead; dce removes it.
#include "compiler/passes/pass.h"
#include "ir/builder.h"

namespace kplan::passes {

namespace {

using ir::OpKind;
using ir::Value;

// The op defining v when it is of `kind`, else nullptr.
ir::Op* def_of(const Value* v, OpKind kind) {
  ir::Op* op = v ? v->defining_op() : nullptr;
  return op && op->kind() == kind ? op : nullptr;
}

bool is_slice(const ir::Op* op, int64_t axis, int64_t start) {
  return op && op->attrs().get_int("axis") == axis && op->attrs().get_int("start") == start;
}

struct Expansion {
  Value* kv = nullptr;       // the cache [N, L + rope]
  Value* kv_b = nullptr;     // kv_b_proj weight [H * (nope + v), L]
  int64_t lora = 0, nope = 0, vdim = 0, heads = 0;
};

// Recognises k_nope / v / k_rope as the builder's expansion of one cache value.
bool match(const ir::Op& attn, Expansion& e) {
  ir::Op* k_slice = def_of(attn.operand(2), OpKind::Slice);
  ir::Op* v_slice = def_of(attn.operand(4), OpKind::Slice);
  ir::Op* r_slice = def_of(attn.operand(3), OpKind::Slice);
  if (!k_slice || !v_slice || !r_slice) return false;
  if (k_slice->operand(0) != v_slice->operand(0)) return false;
  ir::Op* reshape = def_of(k_slice->operand(0), OpKind::Reshape);
  if (!reshape) return false;
  ir::Op* matmul = def_of(reshape->operand(0), OpKind::Matmul);
  if (!matmul || !def_of(matmul->operand(1), OpKind::Weight)) return false;
  ir::Op* lat_slice = def_of(matmul->operand(0), OpKind::Slice);
  if (!lat_slice || lat_slice->operand(0) != r_slice->operand(0)) return false;

  const auto& kvb3 = reshape->result()->type().shape;  // [N, H, nope + v]
  e.nope = attn.operand(0)->type().shape[2].value();
  e.vdim = attn.operand(4)->type().shape[2].value();
  e.lora = lat_slice->attrs().get_int("size");
  if (!kvb3[1].is_constant()) return false;
  e.heads = kvb3[1].value();
  // Latent = cache columns [0, L), rope key = columns [L, L + rope); k_nope first, then v.
  if (!is_slice(lat_slice, 1, 0) || !is_slice(r_slice, 1, e.lora)) return false;
  if (!is_slice(k_slice, 2, 0) || !is_slice(v_slice, 2, e.nope)) return false;
  e.kv = lat_slice->operand(0);
  e.kv_b = matmul->operand(1);
  return true;
}

// The absorbed ops are appended, then moved before `attn` with the function's other edits in
// one pass (ir::Function::apply): a model of thousands of layers stays linear.
void absorb(ir::Function& fn, ir::Op* attn, const Expansion& e, ir::Function::Rewrite& edits) {
  ir::Builder b(fn);
  Value* w3 = b.reshape(e.kv_b, {e.heads, e.nope + e.vdim, e.lora});
  Value* w_uk = b.slice(w3, 1, 0, e.nope);
  Value* w_uk_t = b.transpose(w_uk, {0, 2, 1});  // [H, L, nope]
  Value* w_uv = b.slice(w3, 1, e.nope, e.vdim);  // [H, v, L]
  Value* q_latent = b.head_matmul(attn->operand(0), w_uk_t);
  std::vector<Value*> operands = {q_latent, attn->operand(1), e.kv};
  if (attn->num_operands() == 6) operands.push_back(attn->operand(5));
  ir::Attrs attrs;
  attrs.set("scale", attn->attrs().get_float("scale"));
  attrs.set("kv_lora_rank", e.lora);
  Value* o_latent = b.create(OpKind::MlaAttention, operands, attrs)->result();
  Value* out = b.head_matmul(o_latent, w_uv);
  for (const Value* v : {w3, w_uk, w_uk_t, w_uv, q_latent, o_latent, out}) edits.moved.push_back({v->defining_op(), attn});
  edits.replaced[attn->result()] = out;
  edits.erased.insert(attn);
}

}  // namespace

void mla_absorb(ir::Module& m) {
  for (ir::Function* fn : m.functions()) {
    ir::Function::Rewrite edits;
    for (ir::Op* op : fn->ops()) {
      Expansion e;
      if (op->kind() == OpKind::MlaAttentionExpanded && match(*op, e)) absorb(*fn, op, e, edits);
    }
    fn->apply(edits);
  }
}

}  // namespace kplan::passes
