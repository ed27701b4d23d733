// Hopper (sm_90: H100, H200; 132 SMs, 228 KiB shared memory per SM). The values the device
// checks in bench/RESULTS.md were measured with.
#include "compiler/codegen/heuristics/heuristics.h"

#include <algorithm>

namespace kplan::codegen {
namespace {

void set(ParamValues& p, const char* name, int64_t value) { p.try_emplace(name, value); }

}  // namespace

const TuningTable& sm90_tuning() {
  static const TuningTable table = {
      {"embedding", [](ParamValues& p) { set(p, "THREADS", 128); }},
      {"rms_norm", [](ParamValues& p) { set(p, "THREADS", row_threads(p.at("D"))); }},
      // A weight stream: 132 SMs holding ~32 warps each (matmul_tiling: rows per warp, split-K;
      // the tensor-core instances of 16+ token steps keep 2 k-chunks in flight per lane and row).
      {"matmul", [](ParamValues& p) { matmul_tiling(p, 132, 32, 2); }},
      // The same stream over INT4 groups (matmul_int4_tiling: 4 tokens a tile, rows per warp, split-K).
      {"matmul_int4", [](ParamValues& p) { matmul_int4_tiling(p, 132, 32); }},
      {"rope", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("HEADS") * p.at("ROPE_DIM") / 2)); }},
      {"mla_attention", [](ParamValues& p) { set(p, "WARPS", 4); }},
      // Split-context MLA (kernels_templates/mla_split.cuh): 8 heads a block (one warp each, 256
      // threads; fewer heads, that many warps), tiles of 32 keys (72 KiB of f32 staged rows at
      // K2.6's C + R = 576), so two blocks fit an SM's 228 KiB and its 64 K registers (ptxas: 128 a
      // thread at K2.6 width, no spills). The combine: a thread a column.
      {"mla_split_partial", [](ParamValues& p) { set(p, "WARPS", std::min<int64_t>(8, p.at("HEADS"))); set(p, "KT", 32); }},
      {"mla_split_combine", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("C"))); }},
      {"gqa_attention", [](ParamValues& p) { set(p, "WARPS", 4); }},
      {"kv_append", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("C") + p.at("R"))); }},
      {"kv_compact", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("C") + p.at("R"))); }},
      {"moe_router", [](ParamValues& p) { set(p, "WARPS", 4); }},
      // Expert-grouped MoE (kernels_templates/moe_grouped.cuh): 8 warps a block; NT 2 (gate/up)
      // and 3 (down) are the largest pair chunks ptxas keeps at <= 128 registers without spills
      // at K2.6 width (gate/up NT 3: 176, NT 4: 186; down NT 4: 188), so 2 blocks per SM, each
      // with NT staged activation rows (gate/up 56 KiB at H = 7168, down 24 KiB at I = 2048).
      // Loads in flight per lane: gate/up 2 x ROWS (4) x 2 (PF: the next chunk's too), down ROWS
      // (4), 16 B each. BLOCKS 264: the 2 x 132 resident blocks, one wave (a block streams
      // several row tiles; a second wave would only add a tail). MMA 0: the CUDA-core path (the
      // tensor-core MMA 1 instances wait for a device run). GpuOps.MoeGroupedKimiK26WidthInt4
      // times these against other (ROWS, NT, PF, BLOCKS, MMA) choices.
      // MMA 1 (the tensor-core path) is a measured variant, not yet the default: at K2.6 width it
      // matches the CPU op and wins (bench/RESULTS.md 2026-12-02 02:35-03:15: 97.5 against 102.4 us
      // at 1 token, 258 against 455 at 8). As the default its small-shape launches failed with
      // CUDA_ERROR_INVALID_VALUE: 32 KiB of static transposition buffers plus under 48 KiB of
      // staged rows, and no opt-in (now every launch with dynamic shared memory opts in, in
      // gpu_model.cc); it becomes the default once the device has run the GPU tests with it.
      {"moe_grouped_gate_up", [](ParamValues& p) { set(p, "WARPS", 8); set(p, "ROWS", 2); set(p, "NT", 2); set(p, "PF", p.at("W_FMT")); set(p, "BLOCKS", 264); set(p, "MMA", 0); }},
      {"moe_grouped_down", [](ParamValues& p) { set(p, "WARPS", 8); set(p, "ROWS", 4); set(p, "NT", 3); set(p, "PF", 0); set(p, "BLOCKS", 264); set(p, "MMA", 0); }},
      {"moe_combine", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("H"))); }},
      {"swiglu", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("I"))); }},
      {"add", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("D"))); }},
      {"copy_rows", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("COLS"))); }},
      {"argmax", [](ParamValues& p) { set(p, "THREADS", 256); }},
      {"topk", [](ParamValues& p) { set(p, "THREADS", 256); }},
      // The round's control is serial work for one warp (one block per round step).
      {"round_draft_inputs", [](ParamValues& p) { set(p, "THREADS", 32 * ((p.at("BLOCK") + 31) / 32)); }},
      {"round_tree", [](ParamValues& p) { set(p, "THREADS", 32); }},
      {"round_walk", [](ParamValues& p) { set(p, "THREADS", 32); }},
      // One block per tree node over the vocabulary (a K2.6-sized vocabulary wants a full block).
      {"round_sample", [](ParamValues& p) { set(p, "THREADS", p.at("V") >= 32768 ? 1024 : 256); }},
      // Load-time weight generation: integer hashing, no reuse; a full block per SM is plenty.
      {"synthetic_weights", [](ParamValues& p) { set(p, "THREADS", 256); }},
  };
  return table;
}

}  // namespace kplan::codegen
