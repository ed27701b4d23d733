#include "compiler/codegen/families/family.h"

#include "ir/support/error.h"

namespace kplan::codegen {

void require(bool ok, std::string_view family, const std::string& what) {
  if (!ok) throw Error("codegen: " + std::string(family) + ": " + what);
}

int64_t kernel_param(const KernelSource& kernel, const std::string& name) {
  for (const KernelParam& p : kernel.params) {
    if (p.name == name) return p.value;
  }
  throw Error("codegen: kernel " + kernel.id + " has no parameter " + name);
}

uint32_t ceil_div(int64_t a, int64_t b) { return static_cast<uint32_t>(a <= 0 ? 0 : (a + b - 1) / b); }

LaunchDims block_of(const KernelSource& k) {
  LaunchDims d;
  d.block = {static_cast<uint32_t>(k.block_threads), 1, 1};
  return d;
}

LaunchDims one_block_per_row(const KernelSource& k, const LaunchShape& s) {
  LaunchDims d = block_of(k);
  d.grid = {static_cast<uint32_t>(s.rows), 1, 1};
  return d;
}

}  // namespace kplan::codegen
