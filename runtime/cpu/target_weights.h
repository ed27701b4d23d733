#pragma once
// The target model's weights in fp32, laid out by layer (DeepSeek-V3 / Kimi K2.x).
#include <memory>
#include <optional>
#include <vector>

#include "compiler/frontend/model_config.h"
#include "runtime/cpu/moe.h"
#include "runtime/cpu/weight_loader.h"
#include "runtime/step_model.h"

namespace kplan::cpu {

struct MlpWeights {
  Matrix gate, up, down;  // gate/up [inter, hidden], down [hidden, inter]
  ExpertWeights view() const { return {&gate, &up, &down}; }
};

struct MoeWeights {
  Matrix router;                  // mlp.gate.weight [n_experts, hidden]
  std::vector<float> router_bias; // mlp.gate.e_score_correction_bias [n_experts]
  std::vector<MlpWeights> experts;
  MlpWeights shared;              // n_shared_experts fused: intermediate = moe_inter * n_shared
};

struct AttentionWeights {
  // q_lora_rank set: q_a_proj [q_lora, hidden], q_a_layernorm [q_lora], q_b_proj [H*qk, q_lora];
  // else q_proj [H*qk, hidden].
  std::optional<Matrix> q_a;
  std::vector<float> q_a_norm;
  Matrix q_b;                     // q_b_proj or q_proj
  Matrix kv_a;                    // kv_a_proj_with_mqa [kv_lora + rope, hidden]
  std::vector<float> kv_a_norm;   // [kv_lora]
  Matrix kv_b;                    // [H*(nope+v), kv_lora]
  Matrix o;                       // [hidden, H*v]
};

struct LayerWeights {
  std::vector<float> input_norm, post_attention_norm;
  AttentionWeights attn;
  std::optional<MlpWeights> dense;  // dense layers
  std::optional<MoeWeights> moe;    // MoE layers
};

struct TargetWeights {
  Matrix embed;                     // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;
  Matrix lm_head;                   // [vocab, hidden] (the embedding when tied)
};

// Loads every weight the config needs; missing tensors throw kplan::Error naming them.
TargetWeights load_target_weights(const ModelConfig& config, const WeightLoader& loader);

}  // namespace kplan::cpu
