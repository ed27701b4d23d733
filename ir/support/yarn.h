#pragma once
// RoPE frequencies with YaRN scaling, as transformers computes them (_compute_yarn_parameters,
// truncate = true; ir/OPS.md "RoPE"): the one place the correction range, the ramp and the
// attention factor are written. The CPU reference, the kernel arguments and the tests use it.
#include <cstdint>

namespace kplan::yarn {

// transformers' yarn_get_mscale: 0.1 * mscale * ln(scale) + 1 for scale > 1, else 1.
double get_mscale(double scale, double mscale);

// The attention factor (cos/sin scale): get_mscale(f, mscale) / get_mscale(f, mscale_all_dim)
// when both are non-zero, else get_mscale(f, 1).
double attention_factor(double factor, double mscale, double mscale_all_dim);

// The correction range [low, high] over the rotated dims (high nudged by 0.001 when equal).
struct CorrectionRange {
  double low = 0, high = 1;
};
CorrectionRange correction_range(int64_t dim, double theta, double original_max_position_embeddings,
                                 double beta_fast, double beta_slow);

// inv_freq[i] for i in [0, dim/2), in fp32 as torch computes it: plain when factor is 1 and the
// range is not used (scaling "none"), else blended by the linear ramp over the range.
void inv_freq_plain(int64_t dim, double theta, float* out);
void inv_freq_yarn(int64_t dim, double theta, double factor, CorrectionRange range, float* out);

}  // namespace kplan::yarn
