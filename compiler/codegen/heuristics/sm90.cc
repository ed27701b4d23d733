// Hopper (sm_90: H100, H200; 132 SMs, 228 KiB shared memory per SM). The values the device
// checks in bench/RESULTS.md were measured with.
#include "compiler/codegen/heuristics/heuristics.h"

#include "compiler/codegen/families/mla_split.h"

#include <algorithm>

namespace kplan::codegen {
namespace {

void set(ParamValues& p, const char* name, int64_t value) { p.try_emplace(name, value); }

// XB (bf16-staged activations) is the tensor-core path's: a caller's XB 1 (a bf16-activations
// program's experts, op_rules.cc) is dropped where the instance runs on the CUDA cores; 0 unless given.
void moe_xb_where_mma(ParamValues& p) {
  set(p, "XB", 0);
  if (p.at("MMA") == 0) p["XB"] = 0;
}

}  // namespace

const TuningTable& sm90_tuning() {
  static const TuningTable table = {
      {"embedding", [](ParamValues& p) { set(p, "THREADS", 128); }},
      // A layer's norm over a K2.6-wide row (D 7168) in 1024 threads rather than row_threads' 448: the
      // 1-token step in the graph 1.4956 against 1.4978 / 1.4980 ms, 16 tokens 2.7226 against 2.7276
      // (224 threads: 1.5036; H100, session 48). Narrow rows (q_a's 1536) keep row_threads, which
      // the exact norm folds match (norm_matmuls.h).
      {"rms_norm", [](ParamValues& p) { set(p, "THREADS", p.at("D") >= 4096 ? 1024 : row_threads(p.at("D"))); }},
      {"embedding_norm", [](ParamValues& p) { set(p, "THREADS", row_threads(p.at("H"))); }},
      {"add_norm", [](ParamValues& p) { set(p, "THREADS", row_threads(p.at("H"))); }},
      // A weight stream: 132 SMs holding ~32 warps each (matmul_tiling: rows per warp, split-K;
      // the tensor-core instances of 16+ token steps keep 2 k-chunks in flight per lane and row).
      {"matmul", [](ParamValues& p) { matmul_tiling(p, 132, 32, 2); }},
      // The same stream over INT4 groups (matmul_int4_tiling: 4 tokens a tile, rows per warp, split-K).
      {"matmul_int4", [](ParamValues& p) { matmul_int4_tiling(p, 132, 32); }},
      {"matmul_siblings", [](ParamValues& p) { matmul_siblings_tiling(p, 132, 32); }},
      {"rope", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("HEADS") * p.at("ROPE_DIM") / 2)); }},
      {"mla_attention", [](ParamValues& p) { set(p, "WARPS", 4); }},
      // Split-context MLA (kernels_templates/mla_split.cuh): 8 heads a block (one warp each, 256
      // threads; fewer heads, that many warps), tiles of 32 keys (72 KiB of f32 staged rows at
      // K2.6's C + R = 576), so two blocks fit an SM's 228 KiB and its 64 K registers (ptxas: 128 a
      // thread at K2.6 width, no spills). The combine: a thread a column. MMA 1 (the tensor-core
      // partial: 16 heads a block, 4 warps of C / 4 output columns each) is opt-in until measured
      // (KPLAN_TUNE=mla_split_partial:MMA=1). MMA 2 (every head a block, two warps an m-tile of 16
      // heads: 8 warps at K2.6) where it fits a bf16 cache and mla_split_wide (heuristics.cc) says so.
      {"mla_split_partial",
       [](ParamValues& p) {
         set(p, "MMA", mla_split_wide(p) ? 2 : 0);
         set(p, "WARPS", p.at("MMA") >= 2 ? 2 * p.at("HEADS") / 16 : p.at("MMA") == 1 ? 4 : std::min<int64_t>(8, p.at("HEADS")));
         set(p, "KT", 32);
       }},
      // The combine: 256 threads; C in column chunks (grid.z) while the heads x chunks stay within two
      // blocks an SM: a 1-token step's 64 heads alone read the 132 partials of a long context
      // back on under half the SMs (H100, 2026-12-06: 21 us of the MMA 3 pair's 64 at 32768 keys).
      // CH 4 against 1 on the H200 (bench/RESULTS.md 2026-12-06 04:00): the MMA 3 pair at 32768 keys,
      // 1 token 0.0493 against 0.0607 ms, at 131072 keys 0.1129 against 0.1256.
      {"mla_split_combine",
       [](ParamValues& p) {
         set(p, "THREADS", threads_for(p.at("C")));
         int64_t ch = 1;
         while (p.at("HEADS") * ch * 2 <= 2 * 132 && p.at("C") % (2 * ch * 64) == 0) ch *= 2;
         set(p, "CH", ch);
       }},
      // The combine with W_UV: 8 warps, 32 rows a block (4 a warp): K2.6's 64 heads x 4 chunks are
      // 256 blocks, each warp's rows 8 KiB of loads in flight before the wait.
      {"mla_split_combine_uv",
       [](ParamValues& p) {
         set(p, "THREADS", 256);
         set(p, "RB", kMlaCombineUvRows);
       }},
      {"gqa_attention", [](ParamValues& p) { set(p, "WARPS", 4); }},
      {"kv_append", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("C") + p.at("R"))); }},
      // One block writes a token's cache row, the others rotate 8 query heads each (256 threads:
      // a rope pair a thread at R 64).
      {"mla_rope_append", [](ParamValues& p) { set(p, "THREADS", std::max<int64_t>(256, p.at("R") / 2)); }},
      // W_UK and the rope-append in one launch: every parameter is given (W_UK's instance's, above).
      {"uk_rope_append", [](ParamValues&) {}},
      {"kv_compact", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("C") + p.at("R"))); }},
      {"moe_router", [](ParamValues& p) { set(p, "WARPS", 4); }},
      // Expert-grouped MoE (kernels_templates/moe_grouped.cuh). INT4 experts take the tensor-core
      // path (MMA 1: weight rows as the mma M, the chunk's pairs as its N): gate/up 16 warps a
      // block, 8 rows a warp (an m16 tile pair), NT 4 pairs a chunk with the next chunk's weights
      // prefetched, one block an SM (the staged rows of a 16-warp block fill its shared memory);
      // down 8 warps, 16 rows a warp, NT 8, two blocks an SM. Measured against every other (ROWS,
      // NT, PF, BLOCKS, MMA) choice by GpuOps.MoeGroupedKimiK26WidthInt4 (bench/RESULTS.md
      // 2026-12-02 02:35-03:15: 97.5 against the CUDA-core path's 102.4 us at 1 token, 258
      // against 455 at 8). bf16 experts keep the CUDA-core path (MMA 0; the MMA path is INT4's),
      // bound by the bytes a warp keeps in flight: one row a warp (gate/up; down 2) with the next
      // column chunk's loads in flight (PF 1), NT 2 / 3 pairs a chunk, BLOCKS 264. The K2.6
      // bf16-experts slice at 1 / 16 tokens: 1.384 / 6.059 ms against 1.406 / 6.370 with ROWS 2 / 4
      // and PF 0 (bench/RESULTS.md 2026-12-04 20:05, KPLAN_TUNE variants in the same run).
      // Gate/up's lanes load their own scales (MMA 2: no shuffles in the math, 124 registers at
      // one block an SM); down shares them over the quad (MMA 1: 106 registers, two blocks an SM).
      // A caller that gives ROWS (a measured variant) tunes the rest itself from the CUDA-core defaults.
      // XB 1 (asked for by a bf16-activations program: its activations rounded to bf16 once staged,
      // one MMA a k-step, half the shared memory a pair) takes twice the pairs a chunk (gate/up NT
      // 8: 112 KiB; down NT 16) and two steps of loads ahead (PF 2): measured on an H100 at K2.6
      // width against the split's tuning, 84.6 against 89.8 us at 1 token, 244 against 445 at 16
      // (bench/RESULTS.md 2026-12-05 18:44–19:27, GpuOps.MoeGroupedKimiK26WidthInt4).
      // The INT4 steps in flight sit in the PF register ring; a caller or KPLAN_TUNE giving RING
      // >= 2 moves them to the shared-memory ring (cp.async) and takes PF 0 with it: slower in the
      // K2.6 slice on the H200 (checkpoint order, 2026-12-05) and, in its first form, on an H100 over
      // int4_frag experts (1.5973 against 1.5796 ms at 1 token, bench/RESULTS.md 2026-12-06 session
      // 38; its cursor form, fewer instructions a step than the register ring, 1.5604 against 1.5530,
      // session 39), so not the default (sm120.cc gives RING 0: its 99 KiB a block). Nor are the
      // 128 + q forms (MMA 3 / 4) with XB 1: 1.5579 against 1.5527 (session 39). An L2 prefetch
      // of the steps ahead (cp.async.bulk.prefetch.L2 by lane 0, 2 / 4 / 8 steps) was slower at
      // every distance (1.5748 / 1.5863 / 1.6049 against 1.5473; session 39, reverted). Nor is the
      // int4_frag ring filled by the copy engine (TMA 1 with RING >= 2): 1.5503 against 1.5478 ms at
      // 1 token, 2.7748 against 2.7991 at 16 (H100, session 40), so TMA 0.
      {"moe_grouped_gate_up", [](ParamValues& p) {
         if (p.at("W_FMT") == 1 && !p.count("ROWS")) {
           const bool ring = p.count("RING") && p.at("RING") >= 2, xb = p.count("XB") && p.at("XB") == 1;
           set(p, "WARPS", 16); set(p, "ROWS", 8); set(p, "NT", xb ? 8 : 4); set(p, "PF", ring ? 0 : xb ? 2 : 1); set(p, "BLOCKS", 132);
           set(p, "MMA", 2);
         } else {
           set(p, "WARPS", 8); set(p, "ROWS", 1); set(p, "NT", 2); set(p, "PF", 1); set(p, "BLOCKS", 264); set(p, "MMA", 0);
         }
         set(p, "RING", 0);
         set(p, "TMA", 0);
         set(p, "KS", 0);
         // The GPF prologue (L2 asked for each warp's first tile before the PDL wait) was slower on
         // the H200 at 8 KiB: 1.1555 against 1.1475 ms, gate/up +4-6 us in the graph (session 45).
         set(p, "GPF", 0);
         set(p, "MINB", 0);
         moe_xb_where_mma(p);
       }},
      {"moe_grouped_down", [](ParamValues& p) {
         if (p.at("W_FMT") == 1 && !p.count("ROWS")) {
           const bool ring = p.count("RING") && p.at("RING") >= 2, xb = p.count("XB") && p.at("XB") == 1;
           set(p, "WARPS", 8); set(p, "ROWS", 16); set(p, "NT", xb ? 16 : 8); set(p, "PF", ring ? 0 : xb ? 2 : 1); set(p, "BLOCKS", 264);
           set(p, "MMA", 1);
         } else {
           set(p, "WARPS", 8); set(p, "ROWS", 2); set(p, "NT", 3); set(p, "PF", 1); set(p, "BLOCKS", 264); set(p, "MMA", 0);
         }
         set(p, "RING", 0);
         set(p, "TMA", 0);
         // The GPF prologue (each warp's first 8 KiB asked of L2 before the PDL wait, its expert
         // read from the ids as they stand): with the routing in the router logits' launch the ids
         // are written two launches ahead, and the 1-token step in the graph took 1.4919 against
         // 1.4978 / 1.4980 ms, 16 tokens 2.7202 against 2.7276 (H100, session 48; 16 KiB 1.4921).
         // Not on gate/up, whose ids are written by the launch just before: 1.5167 at 16 KiB.
         set(p, "GPF", p.count("W_LAYOUT") && p.at("W_LAYOUT") == 1 ? 8 : 0);
         set(p, "MINB", 0);
         moe_xb_where_mma(p);
       }},
      {"moe_combine", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("H"))); }},
      {"swiglu", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("I"))); }},
      {"add", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("D"))); }},
      {"copy_rows", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("COLS"))); }},
      // A vocabulary row over a cluster of 8 SMs (one SM streams 640 KiB at ~13 GB/s).
      {"argmax", [](ParamValues& p) {
         const bool wide = p.at("V") >= 32768;
         set(p, "THREADS", wide ? 1024 : 256);
         set(p, "CLUSTER", wide ? 8 : 1);
       }},
      {"topk", [](ParamValues& p) { set(p, "THREADS", 256); }},
      // The round's control is serial work for one warp (one block per round step).
      {"round_draft_inputs", [](ParamValues& p) { set(p, "THREADS", 32 * ((p.at("BLOCK") + 31) / 32)); }},
      {"round_tree", [](ParamValues& p) { set(p, "THREADS", 32); }},
      {"round_walk", [](ParamValues& p) { set(p, "THREADS", 32); }},
      // One block per tree node over the vocabulary (a K2.6-sized vocabulary wants a full block).
      {"round_sample", [](ParamValues& p) { set(p, "THREADS", p.at("V") >= 32768 ? 1024 : 256); }},
      // Load-time weight generation: integer hashing, no reuse; a full block per SM is plenty.
      {"synthetic_weights", [](ParamValues& p) { set(p, "THREADS", 256); }},
      // A library call: cuBLASLt's heuristic picks its kernel at load (runtime/gpu/library_matmul.h).
      {"cublaslt_matmul", [](ParamValues&) {}},
  };
  return table;
}

}  // namespace kplan::codegen
