#pragma once
// The CPU reference over a plan: the plan's own IR (Plan::ir_text, after the whole pass pipeline,
// so MLA runs absorbed over the latent cache) executed op by op in fp32 by
// runtime/cpu/interpreter.h, with weights bound by (source, name) from the plan's weights table,
// for the target (DeepSeek-V3 / Kimi K2.x: MLA + MoE) and the DFlash drafter. No temporary files,
// no recompilation: the oracle checks what was compiled. A checkpoint directory runs through the
// same door (compiler/driver/reference_plan.h makes its in-memory plan). Written for exactness,
// not speed: it runs anywhere (CI has no GPU) and is the oracle the GPU path is checked against.
// It matches HuggingFace transformers' DeepseekV3ForCausalLM and z-lab's DFlashDraftModel in fp32
// (tests/unit/cpu/golden_test.cc: ~1e-6 relative).
//
// Where implementations differ we follow transformers (5.x):
// - q_a_layernorm / kv_a_layernorm use eps 1e-6 (DeepseekV3RMSNorm's default), not
//   rms_norm_eps as vLLM/SGLang do (differs for tiny2: 1e-5). Set by the IR builder.
// - rope_interleave: transformers de-interleaves the rope lanes to [evens | odds] and rotates
//   halves; we rotate adjacent pairs in place (GPT-J). q.k is identical; the cached rope key
//   keeps the checkpoint's lane order (runtime/cpu/rope.h).
// - YaRN: inv_freq and the cos/sin amplitude mscale(f, mscale) / mscale(f, mscale_all_dim) as
//   transformers' _compute_yarn_parameters; softmax scale qk_head_dim^-0.5 * mscale(f,
//   mscale_all_dim)^2 (ModelConfig::softmax_scale).
// - Router: experts outside the kept groups get choice score 0.0 (masked_fill), not -inf;
//   weights are the unbiased sigmoid scores, normalised by (sum + 1e-20) when norm_topk_prob,
//   always times routed_scaling_factor; shared experts unscaled (runtime/cpu/moe.h).
// - transformers makes every layer >= first_k_dense_replace MoE, ignoring moe_layer_freq; the
//   frontend honours moe_layer_freq. They agree for moe_layer_freq 1 (all presets and K2.6).
// - INT4 experts: dequantised exactly, (nibble - 8) * scale in fp32 (as the goldens' loader does).
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/step_model.h"
#include "schemas/plan_model.h"

namespace kplan {

namespace cpu {
class WeightTable;
}

// The target over the plan's @target / @target_commit. `max_context`: the most positions its KV
// cache holds (committed + one step's pending); 0 means the plan's limits (else the spec's
// max_position_embeddings). Throws kplan::Error naming `source` (the plan's file, or the
// checkpoint) when the IR does not parse, a weight the IR names is missing or in a layout the
// CPU cannot read, or max_context is negative. `weights`: a model's table over plan->weights,
// shared by all its sessions (one fp32 copy of the weights); null makes one for this target.
std::unique_ptr<TargetModel> make_plan_cpu_target(std::shared_ptr<const plan::Plan> plan, const std::string& source,
                                                  int64_t max_context,
                                                  std::shared_ptr<const cpu::WeightTable> weights = nullptr);

// The DFlash drafter over the plan's @draft_context / @draft and Plan::draft. It reads the
// target's embedding and lm_head from the plan, so it works against any target (CPU or GPU)
// that returns the hidden states of capture_layers(). Throws kplan::Error when the plan has no
// drafter or lacks a weight its IR names.
std::unique_ptr<Drafter> make_plan_cpu_drafter(std::shared_ptr<const plan::Plan> plan, const std::string& source,
                                               std::shared_ptr<const cpu::WeightTable> weights = nullptr);

}  // namespace kplan
