#pragma once
// The CPU reference backend: the compiled IR (compiler/driver compile_to_ir, the whole pass
// pipeline, so MLA runs absorbed over the latent cache) executed op by op in fp32 by
// runtime/cpu/interpreter.h, for the target (DeepSeek-V3 / Kimi K2.x: MLA + MoE) and the DFlash
// drafter. Written for exactness, not speed: it runs anywhere (CI has no GPU) and is the oracle
// the GPU path is checked against. It matches HuggingFace transformers' DeepseekV3ForCausalLM
// and z-lab's DFlashDraftModel in fp32 (tests/unit/cpu/golden_test.cc: ~1e-6 relative).
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
#include <filesystem>
#include <memory>

#include "runtime/step_model.h"

namespace kplan {

// Compiles a target checkpoint directory (config.json + safetensors; every tensor validated)
// and returns a CPU model over it. `max_context`: the most positions its KV cache holds
// (committed + one step's pending); 0 means the config's max_position_embeddings.
// Throws kplan::Error on a bad checkpoint or a negative max_context.
std::unique_ptr<TargetModel> make_cpu_target(const std::filesystem::path& checkpoint_dir,
                                             int64_t max_context = 0);

// Compiles a DFlash drafter directory against the target. It uses the target's embedding and
// lm_head, so `target` must be a model made by make_cpu_target (its checkpoint is read again;
// the drafter does not keep a reference to `target`). Throws kplan::Error when the drafter does
// not fit the target (hidden size, vocab, target layer ids).
std::unique_ptr<Drafter> make_cpu_dflash_drafter(const std::filesystem::path& draft_dir,
                                                 const TargetModel& target);

}  // namespace kplan
