#include "compiler/codegen/kernel_families.h"

#include "ir/support/error.h"

namespace kplan::codegen {
namespace {

ParamSpec dim(const char* name, const char* tag) { return {name, tag, false, false}; }
ParamSpec dtype(const char* name, const char* tag) { return {name, tag, true, false}; }
ParamSpec tuning(const char* name, const char* tag) { return {name, tag, false, true}; }
KernelArg ptr(const char* name) { return {name, ArgKind::DevicePtr}; }
KernelArg i32(const char* name) { return {name, ArgKind::I32}; }
KernelArg f32(const char* name) { return {name, ArgKind::F32}; }

std::vector<FamilySpec> make_families() {
  return {
      {"embedding", "embedding.cuh", "kp::embedding",
       {dim("H", "h"), dtype("OUT_DT", "o"), tuning("THREADS", "b")},
       {ptr("ids"), ptr("table"), ptr("out"), i32("n_tokens"), i32("vocab")},
       "THREADS"},
      {"rms_norm", "rms_norm.cuh", "kp::rms_norm",
       {dim("D", "d"), dtype("X_DT", "x"), dtype("Y_DT", "y"), tuning("THREADS", "b")},
       {ptr("x"), ptr("weight"), ptr("y"), i32("n_rows"), i32("x_stride"), i32("y_stride"),
        f32("eps")},
       "THREADS"},
      {"matmul", "matmul.cuh", "kp::matmul",
       {dim("K", "k"), dim("N", "n"), dtype("X_DT", "x"), dtype("Y_DT", "y"), dim("W_LAYOUT", "wl"),
        dim("ACC", "acc"), tuning("WARPS", "w"), tuning("TOK_TILE", "tt")},
       {ptr("x"), ptr("w"), ptr("y"), i32("n_tokens"), i32("x_row_stride"), i32("x_batch_stride"),
        i32("y_row_stride"), i32("y_batch_stride"), i32("w_batch_stride")},
       "WARPS"},
      {"matmul_int4", "matmul_int4.cuh", "kp::matmul_int4",
       {dim("K", "k"), dim("N", "n"), dtype("X_DT", "x"), dtype("Y_DT", "y"), dim("ACC", "acc"),
        tuning("WARPS", "w"), tuning("TOK_TILE", "tt")},
       {ptr("x"), ptr("w_packed"), ptr("w_scale"), ptr("y"), i32("n_tokens"), i32("x_row_stride"),
        i32("y_row_stride")},
       "WARPS"},
      {"rope", "rope.cuh", "kp::rope",
       {dim("ROPE_DIM", "r"), dim("HEADS", "h"), dim("INTERLEAVED", "il"), dtype("X_DT", "x"),
        dtype("Y_DT", "y"), tuning("THREADS", "b")},
       {ptr("x"), ptr("y"), ptr("positions"), i32("n_tokens"), i32("x_row_stride"),
        i32("x_head_stride"), i32("y_row_stride"), i32("y_head_stride"), f32("theta"),
        f32("yarn_factor"), f32("yarn_low"), f32("yarn_high"), f32("cos_sin_scale")},
       "THREADS"},
      {"mla_attention", "mla_attention.cuh", "kp::mla_attention",
       {dim("HEADS", "h"), dim("C", "c"), dim("R", "r"), dtype("Q_DT", "q"), dtype("KV_DT", "kv"),
        dtype("O_DT", "o"), tuning("WARPS", "w")},
       {ptr("q_latent"), ptr("q_rope"), ptr("kv_cache"), ptr("cache_len"), ptr("tree_mask"),
        ptr("out"), i32("n_tokens"), i32("q_latent_row_stride"), i32("q_rope_row_stride"),
        i32("q_rope_head_stride"), i32("out_row_stride"), i32("mask_words"),
        f32("softmax_scale")},
       "WARPS"},
      {"gqa_attention", "gqa_attention.cuh", "kp::gqa_attention",
       {dim("HEADS", "h"), dim("KV_HEADS", "kvh"), dim("D", "d"), dtype("Q_DT", "q"),
        dtype("KV_DT", "kv"), dtype("O_DT", "o"), tuning("WARPS", "w")},
       {ptr("q"), ptr("k"), ptr("v"), ptr("n_keys_base"), ptr("out"), i32("n_queries"),
        i32("n_keys_extra"), i32("q_row_stride"), i32("k_row_stride"), i32("v_row_stride"),
        i32("out_row_stride"), f32("scale")},
       "WARPS"},
      {"kv_append", "kv_cache.cuh", "kp::kv_append",
       {dim("C", "c"), dim("R", "r"), dtype("SRC_DT", "s"), dtype("KV_DT", "kv"),
        tuning("THREADS", "b")},
       {ptr("latent_src"), ptr("rope_src"), ptr("cache"), ptr("cache_len"), i32("n_tokens"),
        i32("latent_src_stride"), i32("rope_src_stride"), i32("max_slots")},
       "THREADS"},
      {"kv_compact", "kv_cache.cuh", "kp::kv_compact",
       {dim("C", "c"), dim("R", "r"), dtype("KV_DT", "kv"), tuning("THREADS", "b")},
       {ptr("cache"), ptr("cache_len"), ptr("keep"), ptr("n_keep"), i32("max_keep"),
        i32("max_slots")},
       "THREADS"},
      {"moe_router", "moe_router.cuh", "kp::moe_router",
       {dim("E", "e"), dim("TOPK", "k"), dim("N_GROUP", "g"), dim("TOPK_GROUP", "tg"),
        dim("NORM", "norm"), tuning("WARPS", "w")},
       {ptr("logits"), ptr("bias"), ptr("topk_ids"), ptr("topk_weights"), i32("n_tokens"),
        f32("routed_scaling")},
       "WARPS"},
      {"moe_gate_up", "moe_experts.cuh", "kp::moe_gate_up",
       {dim("H", "h"), dim("I", "i"), dim("TOPK", "k"), dim("W_FMT", "wf"), dtype("X_DT", "x"),
        tuning("WARPS", "w")},
       {ptr("x"), ptr("topk_ids"), ptr("w_gate"), ptr("w_gate_scale"), ptr("w_up"),
        ptr("w_up_scale"), ptr("h"), i32("n_tokens"), i32("x_row_stride"), i32("n_experts")},
       "WARPS"},
      {"moe_down", "moe_experts.cuh", "kp::moe_down",
       {dim("H", "h"), dim("I", "i"), dim("TOPK", "k"), dim("W_FMT", "wf"), dtype("Y_DT", "y"),
        dim("ACC", "acc"), tuning("WARPS", "w")},
       {ptr("h"), ptr("topk_ids"), ptr("topk_weights"), ptr("w_down"), ptr("w_down_scale"),
        ptr("out"), i32("n_tokens"), i32("out_row_stride"), i32("n_experts")},
       "WARPS"},
      {"swiglu", "swiglu.cuh", "kp::swiglu",
       {dim("I", "i"), dtype("G_DT", "g"), dtype("U_DT", "u"), dtype("O_DT", "o"),
        tuning("THREADS", "b")},
       {ptr("gate"), ptr("up"), ptr("out"), i32("n_tokens"), i32("gate_row_stride"),
        i32("up_row_stride"), i32("out_row_stride")},
       "THREADS"},
      {"add", "add.cuh", "kp::add",
       {dim("D", "d"), dtype("A_DT", "a"), dtype("B_DT", "b"), dtype("O_DT", "o"),
        tuning("THREADS", "t")},
       {ptr("a"), ptr("b"), ptr("out"), i32("n_tokens")},
       "THREADS"},
      {"copy_rows", "copy_rows.cuh", "kp::copy_rows",
       {dim("COLS", "c"), dtype("X_DT", "x"), dtype("Y_DT", "y"), tuning("THREADS", "b")},
       {ptr("x"), ptr("y"), i32("n_rows"), i32("x_stride"), i32("y_stride")},
       "THREADS"},
      {"argmax", "sampling.cuh", "kp::argmax",
       {dim("V", "v"), dtype("X_DT", "x"), tuning("THREADS", "b")},
       {ptr("logits"), ptr("out_ids"), i32("n_rows"), i32("row_stride")},
       "THREADS"},
      {"topk", "sampling.cuh", "kp::topk",
       {dim("V", "v"), dim("K", "k"), dtype("X_DT", "x"), dim("LOGPROB", "lp"),
        tuning("THREADS", "b")},
       {ptr("logits"), ptr("out_ids"), ptr("out_vals"), i32("n_rows"), i32("row_stride")},
       "THREADS"},
  };
}

}  // namespace

const std::vector<FamilySpec>& kernel_families() {
  static const std::vector<FamilySpec> families = make_families();
  return families;
}

const FamilySpec& kernel_family(std::string_view name) {
  for (const FamilySpec& f : kernel_families()) {
    if (f.name == name) return f;
  }
  throw Error("codegen: unknown kernel family '" + std::string(name) + "'");
}

}  // namespace kplan::codegen
