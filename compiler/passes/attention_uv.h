#pragma once
// select-kernels' attention-W_UV fusion: an absorbed MLA layer's
//   head_matmul(mla_attention(q_latent, q_rope, cache, ...), W_UV)
// computed by the attention's rule as the split pair's partial and one combine-and-W_UV launch
// (kernels_templates/mla_split.cuh, mla_split_combine_uv): the head_matmul launches nothing, and
// the attention's result (the merged latent) is never stored -- the fused launch rounds it to the
// dtype it would have been stored in and multiplies it by W_UV from registers. A 1-token decode
// step's MLA chain is latency-bound: this takes a launch off each layer, and W_UV's weights load
// behind the partial (the fused launch waits for it only after loading them). The IR is unchanged
// (the CPU reference runs both ops). Opt-in (KPLAN_FUSE_ATTN_UV=1): measured slower (attention_uv.cc).
//
// Only where every bucket of the program takes the split pair (its largest step within the
// partial's mla_split_max_tokens), and W_UV's shape fits the template (C a multiple of 256, its
// rows a head a multiple of 32: mla_split_combine_uv_misfit).
#include <map>
#include <set>
#include <string>

#include "compiler/passes/lowering_views.h"
#include "ir/ir.h"

namespace kplan::passes {

struct AttentionUvFusions {
  std::map<const ir::Op*, const ir::Op*> uv_of;     // mla_attention -> the head_matmul its combine launch computes
  std::map<const ir::Op*, const ir::Op*> absorbed;  // head_matmul -> the mla_attention that launches it
  std::set<const ir::Value*> unstored;              // the attentions' results (the merged latents)
};

// The fusions of `fn` given its views (select-kernels', with stored dtypes), its largest step
// `max_tokens` and `arch`: each mla_attention whose result only a head_matmul reads, as its
// activations, through a contiguous [tokens, heads, C] view, with W_UV a bf16 [heads, N, C] view
// of rows (not the transposed W_UK layout), the head_matmul's result contiguous. Appends to `out`.
void find_attention_uv_fusions(const ir::Function& fn, const std::map<const ir::Value*, View>& views, int64_t max_tokens,
                               const std::string& arch, AttentionUvFusions& out);

// True when KPLAN_FUSE_ATTN_UV=1 (opt-in: slower than the two launches where measured,
// attention_uv.cc); another value than 0 or 1 is refused.
bool attention_uv_fusion_enabled();

}  // namespace kplan::passes
