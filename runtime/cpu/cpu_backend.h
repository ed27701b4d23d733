#pragma once
// The CPU reference backend: plain fp32 execution of the target model (DeepSeek-V3 / Kimi K2.x:
// MLA + MoE) and of the DFlash drafter, written for exactness, not speed. It runs anywhere (CI
// has no GPU) and is the oracle the GPU path is checked against. It matches HuggingFace
// transformers' DeepseekV3ForCausalLM and z-lab's DFlashDraftModel in fp32.
#include <cstdint>
#include <filesystem>
#include <memory>

#include "runtime/step_model.h"

namespace kplan {

// Loads a target checkpoint directory (config.json + safetensors) into an fp32 CPU model.
// `max_context`: the most positions its KV cache holds (committed + one step's pending);
// 0 means the config's max_position_embeddings. Throws kplan::Error on a bad checkpoint.
std::unique_ptr<TargetModel> make_cpu_target(const std::filesystem::path& checkpoint_dir,
                                             int64_t max_context = 0);

// Loads a DFlash drafter directory. It shares the target's embedding and lm_head, so `target`
// must be a model made by make_cpu_target (and must outlive the drafter). Throws kplan::Error
// when the drafter does not fit the target (hidden size, vocab, target layer ids).
std::unique_ptr<Drafter> make_cpu_dflash_drafter(const std::filesystem::path& draft_dir,
                                                 const TargetModel& target);

}  // namespace kplan
