#include "compiler/passes/attention_uv.h"

#include "compiler/codegen/families/mla_split.h"
#include "compiler/codegen/heuristics/heuristics.h"
#include "compiler/passes/op_rules.h"
#include "compiler/passes/program_order.h"

namespace kplan::passes {

using ir::Op;
using ir::OpKind;
using ir::Value;

void find_attention_uv_fusions(const ir::Function& fn, const std::map<const Value*, View>& views, int64_t max_tokens,
                               const std::string& arch, AttentionUvFusions& out) {
  if (codegen::mla_split_max_tokens(arch) == 0) return;  // no split pair at all
  const ProgramOrder order(fn);
  for (const Op* attn : fn.ops()) {
    if (attn->kind() != OpKind::MlaAttention) continue;
    const Op* uv = order.only_reader(attn->result());
    if (!uv || uv->kind() != OpKind::HeadMatmul || uv->operand(0) != attn->result()) continue;
    const View* ql = find_view(views, attn->operand(0));
    const View* qr = find_view(views, attn->operand(1));
    const View* kv = find_view(views, attn->operand(2));
    const View* lat = find_view(views, attn->result());
    const View* w = find_view(views, uv->operand(1));
    const View* y = find_view(views, uv->result());
    if (!ql || !qr || !kv || !lat || !w || !y || !is_contiguous(*lat) || !is_contiguous(*y)) continue;
    if (ql->shape.size() != 3 || qr->shape.size() != 3 || kv->shape.size() != 2 || w->shape.size() != 3 || w->dtype != DType::BF16) continue;
    const int64_t heads = ql->shape[1], c = ql->shape[2], r = qr->shape[2], n = w->shape[1];
    // W_UV as rows: head h's [N, C] row-major, heads w.strides[0] apart.
    if (w->shape[0] != heads || w->shape[2] != c || w->strides[2] != 1 || w->strides[1] != c) continue;
    if (!codegen::mla_split_combine_uv_misfit(c, n).empty()) continue;
    // Every bucket must take the split pair (the one-launch attention writes the latent itself).
    const codegen::KernelSource part = codegen::mla_split_partial_kernel(heads, c, r, elem(*ql), elem(*kv), arch);
    if (max_tokens > codegen::mla_split_max_tokens(arch, codegen::kernel_param(part, "MMA") >= 2)) continue;
    out.uv_of[attn] = uv;
    out.absorbed[uv] = attn;
    out.unstored.insert(attn->result());
  }
}

// Opt-in: on an H100 (bench/RESULTS.md 2026-12-07 session 44, K2.6 3-layer slice, in the step's
// graph) the fused launch took 7.6-8.0 us a layer against the combine's ~3.8 and W_UV's ~4: the
// block's merge of every column of its head (the combine's blocks merge a quarter) outweighs W_UV's
// load moved behind the partial; the 1-token step 1.5364 against 1.5318 ms (512 threads: 1.5302
// against 1.5271), 16 tokens 2.8288 against 2.7513 (each block's tokens one after another).
bool attention_uv_fusion_enabled() { return codegen::compile_switch("KPLAN_FUSE_ATTN_UV", false); }

}  // namespace kplan::passes
