#pragma once
// What the lowering stages (select-kernels, weight-layout, plan-memory, bucketize, emit-plan;
// pipeline.cc lists them) read and record on their way from the final IR to launches as data
// (plan::LoweredPlan). Each stage fills its own section below and reads only the sections of
// the stages before it; --dump-ir-after=<stage> prints the IR with what the stages so far have
// recorded (lowered_printer.h).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "compiler/codegen/kernel_instance.h"
#include "compiler/passes/epilogue_adds.h"
#include "compiler/passes/lowered_plan.h"
#include "compiler/passes/norm_matmuls.h"
#include "compiler/passes/attention_uv.h"
#include "compiler/passes/add_norm.h"
#include "compiler/passes/embedding_norm.h"
#include "compiler/passes/router_experts.h"
#include "compiler/passes/rope_append.h"
#include "compiler/passes/sibling_matmuls.h"
#include "compiler/passes/uk_rope_append.h"
#include "ir/ir.h"

namespace kplan::passes {

struct LowerOptions {
  std::vector<int64_t> buckets = {1};  // token counts of @target, each gets its own launch sequence
  int64_t max_context = 0;             // KV cache rows (> 0)
  int64_t max_tree_nodes = 0;          // recorded in the limits (0: no tree buckets)
  std::string arch = "sm_90";          // the arch kernels are selected (tuned) for
  // How the device stores the activations kernels write and the KV caches (storage-dtypes): F32,
  // or BF16 (storage_dtypes.cc says which activations stay f32). The IR, and the CPU reference
  // running it, stay f32. (`kplan compile` stores the caches as bf16 by default: plan_output.h.)
  DType activations = DType::F32;
  DType kv_cache = DType::F32;
};

// The bytes of a checkpoint tensor by (source, name): source is the weight op's `ckpt`
// ("target" | "draft"). Null: no weight bytes (--no-weights); the plan's weights then carry
// names, dtypes and shapes only.
using WeightBytes = std::function<std::span<const uint8_t>(const std::string& source, const std::string& name)>;

// A bucket to emit: one program at one token count.
struct BucketSpec {
  const ir::Function* program = nullptr;
  int64_t tokens = 1;
};

// Where a value's storage comes from once memory is planned.
struct Storage {
  enum class Kind : uint8_t { Slot, Weight, StepInput, None } kind = Kind::None;
  uint32_t index = 0;  // slot, weight or StepInputKind
};

struct LowerState {
  const ir::Module* module = nullptr;
  LowerOptions options;
  WeightBytes weight_bytes;
  // The functions lowered to launches: @target, @target_commit and, with a drafter,
  // @draft_context, @draft_commit, @draft.
  std::vector<const ir::Function*> programs;
  int64_t max_tokens = 1;
  // Rows the drafter's caches hold past max_context (its block size; 0 without a drafter).
  int64_t draft_rows = 0;

  // storage-dtypes: values stored in another dtype than their IR type's (roots only: views and
  // the in-place kv results take their source's); stored_dtype() reads it.
  std::map<const ir::Value*, DType> stored_dtypes;

  // select-kernels: the kernel instances each op runs, in launch order (moe experts: three), and
  // the residual adds done in a producer's epilogue (epilogue_adds.h; the adds have no kernels).
  std::map<const ir::Op*, std::vector<codegen::KernelSource>> kernels;
  EpilogueFusions epilogue;
  SiblingMatmuls siblings;  // matmuls of the same activations one launch computes (sibling_matmuls.h)
  RopeAppendFusions rope_append;  // an MLA layer's norm and ropes its kv_append's launch does (rope_append.h)
  NormMatmuls norm_matmuls;       // norms their first matmul reader's launch computes (norm_matmuls.h)
  RouterExperts router_experts;   // routers their experts' gate/up launch runs (router_experts.h)
  AttentionUvFusions attention_uv;  // W_UV products their attention's combine launch computes (attention_uv.h)
  EmbeddingNorms embedding_norms;   // embeddings their first norm's launch gathers (embedding_norm.h)
  AddNorms add_norms;               // adds the launch of the norm right after them computes (add_norm.h)
  UkRopeAppends uk_appends;         // fused kv_appends their W_UK's launch does (uk_rope_append.h)
  // A result no kernel writes: only a fused add, a kv_append's fused launch, or an attention's
  // combine-and-W_UV launch read it.
  bool unstored(const ir::Value* v) const {
    return epilogue.unstored.count(v) || rope_append.unstored.count(v) || attention_uv.unstored.count(v);
  }

  // weight-layout: every weight any function names, by (source, name), with its layout.
  std::vector<plan::Weight> weights;
  std::map<std::pair<std::string, std::string>, uint32_t> weight_index;

  // plan-memory: slots, the storage of every root value (function arguments, op results that
  // own a buffer), per-op scratch, and the in-place aliases (kv_append / kv_compact results are
  // their cache operand's storage).
  plan::BufferPlan buffers;
  std::vector<plan::StepInputBinding> step_inputs;
  std::vector<plan::KvCache> kv_caches;
  std::map<const ir::Value*, Storage> storage;
  std::map<const ir::Op*, uint32_t> scratch;
  std::map<const ir::Op*, uint32_t> route_counts;  // a router its logits' launch runs -> its persistent count (router_experts.h)
  std::map<const ir::Value*, const ir::Value*> aliases;  // result -> the operand it updates in place

  // bucketize.
  std::vector<BucketSpec> buckets;

  // emit-plan.
  std::optional<plan::LoweredPlan> lowered;
};

// The stages, one file each; pipeline.cc lists them in order with their dumps.
void storage_dtypes(LowerState& s);  // storage_dtypes.cc
void select_kernels(LowerState& s);  // select_kernels.cc
void weight_layout(LowerState& s);   // weight_layout.cc
void plan_memory(LowerState& s);     // plan_memory.cc
void bucketize(LowerState& s);       // bucketize.cc
void emit_plan(LowerState& s);       // emit_plan.cc
void emit_round(LowerState& s);      // emit_round.cc

// The value owning `v`'s storage: through views and the in-place kv results (their cache).
const ir::Value* storage_root(const ir::Value* v);
// The dtype `v` (a root: an argument or an op result owning storage) is stored in on the device.
DType stored_dtype(const LowerState& s, const ir::Value* v);
// Whether `fn`'s activations are stored as bf16 (LowerOptions::activations, but not the
// drafter's programs: storage_dtypes.cc).
bool stores_bf16_activations(const LowerState& s, const ir::Function& fn);

// plan-memory's verifier: every in-place alias updates a persistent KV cache slot that no other
// value shares, results never share a live slot. Throws kplan::Error naming the value.
void verify_memory(const LowerState& s);

}  // namespace kplan::passes
