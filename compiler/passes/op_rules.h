#pragma once
// How each IR op becomes kernel launches: the kernel instances it needs and, given where its
// operands and results live, each launch's typed arguments (families/<family>.h Args). One rule
// per op kind, used twice: select-kernels runs it to choose (and record) the instances, emit-plan
// runs it again with the recorded instances and real storage to bind the arguments.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/codegen/families/family.h"
#include "compiler/passes/add_norm.h"
#include "compiler/passes/attention_uv.h"
#include "compiler/passes/embedding_norm.h"
#include "compiler/passes/epilogue_adds.h"
#include "compiler/passes/lowering_views.h"
#include "compiler/passes/norm_matmuls.h"
#include "compiler/passes/router_experts.h"
#include "compiler/passes/rope_append.h"
#include "compiler/passes/sibling_matmuls.h"
#include "compiler/passes/uk_rope_append.h"
#include "schemas/plan_model.h"

namespace kplan::passes {

struct LaunchSpec {
  codegen::KernelSource kernel;
  int64_t rows = 0, batch = 1;  // codegen::LaunchShape
  std::vector<plan::LaunchArg> args;
  std::vector<plan::TensorMapDesc> tensor_maps;  // what TensorMap arguments name
};

struct RuleContext {
  const ir::Function* fn = nullptr;
  int64_t op_index = 0;
  // Weight bytes the step's launch before this op's reads (-1: none before it); select-kernels
  // sets it, for the matmuls' L2 prefetch (heuristics' weight_prefetch_after_light_kib).
  int64_t prev_launch_weight_bytes = -1;
  int64_t tokens = 1;       // this bucket's token count
  int64_t max_tokens = 1;   // the plan's largest bucket (select-kernels chooses instances there)
  int64_t max_context = 0;  // KV cache rows
  std::string arch = "sm_90";
  bool bf16_activations = false;  // the program stores its activations as bf16 (stores_bf16_activations)
  const std::map<const ir::Value*, View>* views = nullptr;
  // emit-plan: the op's instances as select-kernels recorded them; select-kernels: null, and
  // the instances the rule makes are appended to `chosen`.
  const std::vector<codegen::KernelSource>* selected = nullptr;
  std::vector<codegen::KernelSource> chosen;
  // Set: the op's kernel also does this residual add in its epilogue (matmul, moe experts; a
  // matmul's may sum a MoE's per-pair rows too, EpilogueAdd::routed).
  const EpilogueAdd* epilogue = nullptr;
  // Set (a MoE): the shared down projection whose epilogue does its combine (no combine launch).
  const ir::Op* combined_by = nullptr;
  // Set (a matmul): the later sibling matmuls its launch computes too (sibling_matmuls.h).
  const std::vector<const ir::Op*>* siblings = nullptr;
  // Set (a sibling group's first matmul): the swiglu of its last two siblings, computed too.
  const ir::Op* glu = nullptr;
  // Set (a kv_append): the norm and ropes its launch does too (rope_append.h).
  const RopeAppend* rope_append = nullptr;
  // Set (a matmul, a sibling group's first): the norm of its activations its launch computes
  // where it runs on the CUDA cores, and launches before it elsewhere (norm_matmuls.h).
  const NormMatmul* norm = nullptr;
  // Set (a MoE's experts): the router its gate/up launch runs (router_experts.h), and where the
  // group of the router's logits routes it at the steps it launches together, that group.
  const ir::Op* router = nullptr;
  const ir::Op* router_logits = nullptr;
  const std::vector<const ir::Op*>* router_logits_later = nullptr;
  // Set (a sibling group's first, the router's logits): the router its launch runs (router_experts.h).
  const ir::Op* route = nullptr;
  // Set (an mla_attention): the W_UV head_matmul its combine launch computes (attention_uv.h).
  const ir::Op* uv = nullptr;
  // Set (an rms_norm): the embedding its launch gathers (embedding_norm.h).
  const ir::Op* gather = nullptr;
  // Set (an rms_norm): the add its launch computes (add_norm.h).
  const ir::Op* add = nullptr;
  // Set (a head_matmul, W_UK): the fused kv_append its launch does and that kv_append's fusion
  // (uk_rope_append.h).
  const ir::Op* uk_append = nullptr;
  const RopeAppend* uk_rope = nullptr;
  // Pointer arguments for a view / for the op's scratch buffer.
  std::function<plan::LaunchArg(const View&)> ptr;
  std::function<plan::LaunchArg(const ir::Op&)> scratch;
  // A router's persistent count (its logits' launch routes it: router_experts.h).
  std::function<plan::LaunchArg(const ir::Op&)> route_count;
  std::vector<LaunchSpec> launches;

  const View& view(const ir::Value* v) const;
  std::string where(const ir::Op& op) const;  // "op 12 (rms_norm) of @target"
};

// What select-kernels' fusions recorded (lower_state.h holds them).
struct LoweringFusions {
  const EpilogueFusions& epilogue;
  const SiblingMatmuls& siblings;
  const RopeAppendFusions& rope_append;
  const NormMatmuls& norm_matmuls;
  const RouterExperts& router_experts;
  const AttentionUvFusions& attention_uv;
  const EmbeddingNorms& embedding_norms;
  const AddNorms& add_norms;
  const UkRopeAppends& uk_appends;
  // Whether `op` launches nothing of its own: a fused add, a later sibling or their swiglu, an op
  // a kv_append absorbs, a norm its matmul's rule launches, a router its experts' launch runs, a
  // W_UV product its attention's combine computes, an embedding its norm's launch gathers, an add
  // the launch of the norm after it computes, a kv_append its W_UK's launch does.
  bool absorbed(const ir::Op& op) const {
    return epilogue.fused_adds.count(&op) || siblings.first.count(&op) || siblings.glu_of.count(&op) || rope_append.absorbed.count(&op) ||
           norm_matmuls.absorbed.count(&op) || router_experts.absorbed.count(&op) || attention_uv.absorbed.count(&op) ||
           embedding_norms.absorbed.count(&op) || add_norms.absorbed.count(&op) || uk_appends.absorbed.count(&op);
  }
};

// A kernel's element type for a view's stored dtype (storage-dtypes: f32, or bf16 activations);
// throws kplan::Error for any other.
codegen::ElemType elem(const View& v);

// Points ctx at what select-kernels' fusions recorded for `op` (its epilogue add, its later
// sibling matmuls, the ops its kv_append absorbs, the norm it reads): select-kernels and
// emit-plan lower an op the same way.
void attach_fusions(const LoweringFusions& fusions, const ir::Op& op, RuleContext& ctx);

// Appends the op's launches to ctx.launches (nothing for weights, views, concat, output).
// Throws kplan::Error naming the op for a construct no kernel handles.
void lower_op(const ir::Op& op, RuleContext& ctx);

// Bytes of the scratch buffer the op needs at `max_tokens` over a cache of `max_context` rows,
// lowered for `arch` (0: none).
// `kv_cache`, `queries`: the dtypes an mla_attention's cache and queries are stored in (the split
// partial's instance, whose tuning may need a bf16 cache and bf16 queries, sizes the workspace).
uint64_t scratch_bytes(const ir::Op& op, int64_t max_tokens, int64_t max_context, std::string_view arch, DType kv_cache = DType::F32,
                       DType queries = DType::F32);

}  // namespace kplan::passes
