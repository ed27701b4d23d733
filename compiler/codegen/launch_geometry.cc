#include "compiler/codegen/launch_geometry.h"

#include "ir/support/error.h"

namespace kplan::codegen {
namespace {

uint32_t ceil_div(int64_t a, int64_t b) {
  return static_cast<uint32_t>(a <= 0 ? 0 : (a + b - 1) / b);
}

}  // namespace

int64_t kernel_param(const KernelSource& kernel, const std::string& name) {
  for (const KernelParam& p : kernel.params) {
    if (p.name == name) return p.value;
  }
  throw Error("codegen: kernel " + kernel.id + " has no parameter " + name);
}

LaunchDims launch_dims(const KernelSource& k, int64_t rows, int64_t batch) {
  if (rows < 0 || batch < 1) throw Error("codegen: bad launch shape for " + k.id);
  LaunchDims d;
  d.block = {static_cast<uint32_t>(k.block_threads), 1, 1};
  const uint32_t r = static_cast<uint32_t>(rows);
  auto p = [&](const char* name) { return kernel_param(k, name); };
  const std::string& f = k.family;
  if (f == "matmul") {
    const int64_t per_block = p("W_LAYOUT") == 0 ? p("WARPS") : 32 * p("WARPS");
    d.grid = {ceil_div(p("N"), per_block), ceil_div(rows, p("TOK_TILE")), static_cast<uint32_t>(batch)};
  } else if (f == "matmul_int4") {
    d.grid = {ceil_div(p("N"), p("WARPS")), ceil_div(rows, p("TOK_TILE")), 1};
  } else if (f == "mla_attention" || f == "gqa_attention") {
    d.grid = {static_cast<uint32_t>(p("HEADS")), r, 1};
  } else if (f == "kv_compact") {
    d.grid = {ceil_div(p("C") + p("R"), p("THREADS")), 1, 1};
  } else if (f == "moe_router") {
    d.grid = {ceil_div(rows, p("WARPS")), 1, 1};
  } else if (f == "moe_gate_up") {
    d.grid = {ceil_div(p("I"), p("WARPS")), r * static_cast<uint32_t>(p("TOPK")), 1};
  } else if (f == "moe_down") {
    d.grid = {ceil_div(p("H"), p("WARPS")), r, 1};
  } else {
    // One block per row: embedding, rms_norm, rope, kv_append, swiglu, add, copy_rows, argmax, topk.
    d.grid = {r, 1, 1};
  }
  return d;
}

}  // namespace kplan::codegen
