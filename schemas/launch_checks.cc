#include "schemas/launch_checks.h"

#include <algorithm>

namespace kplan::plan {
namespace {

std::string num(uint64_t v) { return std::to_string(v); }

bool tma_dtype(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16 || t == DType::I32 || t == DType::U8;
}

uint64_t swizzle_span(TensorMapSwizzle s) {
  switch (s) {
    case TensorMapSwizzle::None: return 0;
    case TensorMapSwizzle::B32: return 32;
    case TensorMapSwizzle::B64: return 64;
    case TensorMapSwizzle::B128: return 128;
  }
  return 0;
}

}  // namespace

std::string launch_geometry_error(const Launch& l) {
  for (int d = 0; d < 3; ++d) {
    if (l.block[d] == 0) return "has an empty block";
    if (l.cluster[d] == 0) return "has a zero cluster dim";
    const bool at_load = d == 0 && l.grid_x_per_sm > 0;
    if (at_load) {
      if (l.grid[0] != 0) return "sizes its grid by the SM count but also gives grid.x = " + num(l.grid[0]);
      continue;
    }
    if (l.grid[d] == 0) return "has an empty grid";
    if (l.grid[d] % l.cluster[d] != 0)
      return "grid dim " + num(d) + " (" + num(l.grid[d]) + ") is not a multiple of its cluster's (" + num(l.cluster[d]) + ")";
  }
  const uint64_t blocks = uint64_t{l.cluster[0]} * l.cluster[1] * l.cluster[2];
  if (blocks > 8) return "asks for clusters of " + num(blocks) + " blocks (at most 8)";
  return "";
}

std::string tensor_maps_error(const Plan& plan, const Launch& l) {
  for (size_t i = 0; i < l.tensor_maps.size(); ++i) {
    const TensorMapDesc& t = l.tensor_maps[i];
    const std::string name = "tensor map " + num(i) + " ";
    uint64_t base_bytes = 0;
    if (t.base == ArgKind::Buffer) {
      if (t.index >= plan.buffers.slots.size()) return name + "names a missing buffer slot";
      base_bytes = plan.buffers.slots[t.index].size;
    } else if (t.base == ArgKind::Weight) {
      if (t.index >= plan.weights.size()) return name + "names a missing weight";
      base_bytes = std::max<uint64_t>(plan.weights[t.index].size, plan.weights[t.index].data().size());
    } else {
      return name + "has a " + arg_kind_name(t.base) + " base (a buffer slot or a weight)";
    }
    if (t.offset % 16 != 0) return name + "offset " + num(t.offset) + " is not 16-byte aligned";
    if (!tma_dtype(t.dtype)) return name + "dtype " + std::string(dtype_name(t.dtype)) + " is not one TMA moves";
    const size_t rank = t.dims.size();
    if (rank < 1 || rank > 5) return name + "has rank " + num(rank) + " (1..5)";
    if (t.strides.size() != rank - 1) return name + "has " + num(t.strides.size()) + " strides for rank " + num(rank);
    if (t.box.size() != rank) return name + "has " + num(t.box.size()) + " box dims for rank " + num(rank);
    const uint64_t elem = dtype_size(t.dtype);
    uint64_t extent = t.dims[0] * elem;  // bytes from the base to the last element, + 1
    for (size_t d = 0; d < rank; ++d) {
      if (t.dims[d] == 0 || t.dims[d] > (uint64_t{1} << 32)) return name + "dim " + num(d) + " is out of range";
      if (t.box[d] == 0 || t.box[d] > 256) return name + "box dim " + num(d) + " = " + num(t.box[d]) + " (1..256)";
      if (d > 0) {
        const uint64_t s = t.strides[d - 1];
        if (s % 16 != 0 || s >= (uint64_t{1} << 40)) return name + "stride " + num(d - 1) + " = " + num(s) + " (a multiple of 16 below 2^40)";
        extent += (t.dims[d] - 1) * s;
      }
    }
    const uint64_t row = t.box[0] * elem;
    if (row % 16 != 0) return name + "box row of " + num(row) + " bytes is not a multiple of 16";
    const uint64_t span = swizzle_span(t.swizzle);
    if (span && row > span) return name + "box row of " + num(row) + " bytes exceeds the " + swizzle_name(t.swizzle) + " swizzle span";
    if (base_bytes && t.offset + extent > base_bytes)
      return name + "reaches " + num(t.offset + extent) + " bytes into a base of " + num(base_bytes);
  }
  return "";
}

}  // namespace kplan::plan
