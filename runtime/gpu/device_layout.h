#pragma once
// Weights whose device copy is laid out differently from their plan bytes: the INT4 routed experts
// the tensor-core MoE kernels read in ir/support/int4_frag.h's order (plan layouts "int4_frag",
// "int4_frag_scales", recorded by the compiler's weight-layout pass). The plan keeps the
// checkpoint's stacked rows (the CPU reference reads those); the upload lays each chunk of whole
// row octets out on the host before copying it (the octets keep their rows' byte range), and
// the synthetic generator writes the same order itself (kernels_templates/synthetic_weights.cuh).
#include <cstdint>
#include <span>
#include <vector>

#include "schemas/plan_model.h"

namespace kplan::gpu {

// The matrix's reduction dim when `w`'s device copy is in int4_frag order, else 0.
int64_t int4_frag_columns(const plan::Weight& w);

// The upload's chunk for `w`: `max_bytes`, or for a weight in int4_frag order the most whole
// octets of its rows that fit (at least one), so each chunk lands on its own rows' byte range.
uint64_t upload_chunk_bytes(const plan::Weight& w, uint64_t max_bytes);

// `rows` (whole row octets, starting at a multiple of 8) of `w`'s plan bytes, in device order.
void to_device_layout(const plan::Weight& w, std::span<const uint8_t> rows, std::vector<uint8_t>& out);

}  // namespace kplan::gpu
