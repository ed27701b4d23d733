#include "compiler/codegen/heuristics.h"

#include <algorithm>

namespace kplan::codegen {
namespace {

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Threads for a block that walks `work` independent elements: at least one warp, at most 256.
int64_t threads_for(int64_t work) { return std::clamp<int64_t>(round_up(work, 32), 32, 256); }

// Rows of length D: aim for <= 16 values per thread, which keeps rms_norm's row in registers.
int64_t row_threads(int64_t d) { return std::clamp<int64_t>(round_up((d + 15) / 16, 32), 128, 1024); }

}  // namespace

void choose_tuning(const FamilySpec& family, std::map<std::string, int64_t>& p) {
  auto set = [&](const char* name, int64_t value) { p.try_emplace(name, value); };
  const std::string& f = family.name;
  if (f == "embedding") {
    set("THREADS", 128);
  } else if (f == "rms_norm") {
    set("THREADS", row_threads(p.at("D")));
  } else if (f == "matmul") {
    // One warp per output row (4 per block); 8 tokens share each weight load.
    set("WARPS", 4);
    set("TOK_TILE", 8);
  } else if (f == "matmul_int4") {
    set("WARPS", 4);
    set("TOK_TILE", 4);  // 32 dequantised weights per lane are live at once
  } else if (f == "rope") {
    set("THREADS", threads_for(p.at("HEADS") * p.at("ROPE_DIM") / 2));
  } else if (f == "mla_attention" || f == "gqa_attention") {
    set("WARPS", 4);
  } else if (f == "kv_append" || f == "kv_compact") {
    set("THREADS", threads_for(p.at("C") + p.at("R")));
  } else if (f == "moe_router") {
    set("WARPS", 4);
  } else if (f == "moe_gate_up" || f == "moe_down") {
    set("WARPS", 4);
  } else if (f == "swiglu") {
    set("THREADS", threads_for(p.at("I")));
  } else if (f == "add") {
    set("THREADS", threads_for(p.at("D")));
  } else if (f == "copy_rows") {
    set("THREADS", threads_for(p.at("COLS")));
  } else if (f == "argmax" || f == "topk") {
    set("THREADS", 256);
  }
}

}  // namespace kplan::codegen
