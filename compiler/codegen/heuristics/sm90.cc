// Hopper (sm_90: H100, H200; 132 SMs, 228 KiB shared memory per SM). The values the device
// checks in bench/RESULTS.md were measured with.
#include "compiler/codegen/heuristics/heuristics.h"

namespace kplan::codegen {
namespace {

void set(ParamValues& p, const char* name, int64_t value) { p.try_emplace(name, value); }

}  // namespace

const TuningTable& sm90_tuning() {
  static const TuningTable table = {
      {"embedding", [](ParamValues& p) { set(p, "THREADS", 128); }},
      {"rms_norm", [](ParamValues& p) { set(p, "THREADS", row_threads(p.at("D"))); }},
      // One warp per output row (4 per block); 8 tokens share each weight load.
      {"matmul", [](ParamValues& p) { set(p, "WARPS", 4); set(p, "TOK_TILE", 8); }},
      // 32 dequantised weights per lane are live at once: 4 tokens keep it in registers.
      {"matmul_int4", [](ParamValues& p) { set(p, "WARPS", 4); set(p, "TOK_TILE", 4); }},
      {"rope", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("HEADS") * p.at("ROPE_DIM") / 2)); }},
      {"mla_attention", [](ParamValues& p) { set(p, "WARPS", 4); }},
      {"gqa_attention", [](ParamValues& p) { set(p, "WARPS", 4); }},
      {"kv_append", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("C") + p.at("R"))); }},
      {"kv_compact", [](ParamValues& p) { set(p, "THREADS", threads_for(p.at("C") + p.at("R"))); }},
      {"moe_router", [](ParamValues& p) { set(p, "WARPS", 4); }},
      // Expert-grouped MoE (kernels_templates/moe_grouped.cuh; not yet measured on the device):
      // 8 warps and NT x 4 KiB of staged activations per block; NT 2 (gate/up) and 3 (down) are
      // the largest pair chunks ptxas keeps at <= 128 registers without spills at K2.6 width on
      // sm_90 and sm_120 (gate/up NT 3: 176, NT 4: 186; down NT 4: 188), so 2 blocks per SM.
      // Loads in flight per lane: gate/up 2 x ROWS (4), down ROWS (4), 16 B each: ~32 KiB per SM,
      // above the ~13 KiB that 2.8 TB/s over 132 SMs at ~600 ns needs. Row tiles of 16 (gate/up)
      // and 32 (down) rows keep >= 1000 blocks busy at 1 token (8 experts) on K2.6's I = 2048,
      // H = 7168. PF 1 (the next column chunk's loads issued before this chunk's math: two chunks
      // in flight per lane) for INT4 gate/up's 7 chunks of H, still 128 registers at NT 2 (bf16:
      // 168; its 4 loads per row already keep 4x the bytes in flight); not for down's 2 chunks of
      // I (NT 3 with PF 1: 255 registers). GpuOps.MoeGroupedKimiK26WidthInt4 times these against
      // other (ROWS, NT, PF) choices.
      {"moe_grouped_gate_up", [](ParamValues& p) { set(p, "WARPS", 8); set(p, "ROWS", 2); set(p, "NT", 2); set(p, "PF", p.at("W_FMT")); }},
      {"moe_grouped_down", [](ParamValues& p) { set(p, "WARPS", 8); set(p, "ROWS", 4); set(p, "NT", 3); set(p, "PF", 0); }},
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
