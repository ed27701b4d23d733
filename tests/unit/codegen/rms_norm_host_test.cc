// kernels_templates/rms_norm.cuh run on the host (cuda_host_shim.h) at K2.6's width in the block
// sizes the heuristics choose (1024 threads for a 7168-wide row, 7 values a thread; 448 until
// session 48): each row is the norm computed in double to its rounding (f32 rows to 1e-5 relative,
// bf16 rows to one bf16 step), and rows past n_rows are left alone. The device runs the same
// source through NVRTC (GpuOps.RmsNormStridedRows, the K2.6 slices).
#include <gtest/gtest.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "tests/unit/codegen/codegen_test_util.h"
// The shim's macros stay below every other include.
#include "tests/unit/codegen/cuda_host_shim.h"
#include "kernels_templates/rms_norm.cuh"  // (built with -Wno-unknown-pragmas: #pragma unroll)

namespace kplan::codegen {
namespace {

template <int D, int Y_DT, int THREADS>
void check_against_double(int n_rows) {
  using Y = std::conditional_t<Y_DT == kp::F32, float, unsigned short>;
  const int rows = n_rows + 1;
  const std::vector<float> x = testing_util::xorshift_uniform(rows * D, 41, 3.f);
  std::vector<unsigned short> w(D);
  const std::vector<float> wf = testing_util::xorshift_uniform(D, 42, 1.f);
  for (int j = 0; j < D; ++j) w[j] = static_cast<unsigned short>(cuda_host::float_to_bf16_bits(wf[j]));
  std::vector<Y> y(rows * D, Y{});
  const float eps = 1e-6f;
  cuda_host::launch(rows, 1, THREADS, [&] { kp::rms_norm<D, kp::F32, Y_DT, THREADS>(x.data(), w.data(), y.data(), n_rows, D, D, eps); });
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int j = 0; j < D; ++j) ss += static_cast<double>(x[r * D + j]) * x[r * D + j];
    const double inv = 1.0 / std::sqrt(ss / D + eps);
    for (int j = 0; j < D; ++j) {
      const Y got = y[r * D + j];
      if (r >= n_rows) {
        ASSERT_EQ(got, Y{}) << "row " << r << " is past n_rows";
        continue;
      }
      const double want = cuda_host::bf16_bits_to_float(w[j]) * (x[r * D + j] * inv);
      const double value = Y_DT == kp::F32 ? static_cast<double>(got) : cuda_host::bf16_bits_to_float(got);
      const double tol = (Y_DT == kp::F32 ? 1e-5 : 8e-3) * std::abs(want) + 1e-7;
      ASSERT_NEAR(value, want, tol) << "D " << D << " threads " << THREADS << " row " << r << " column " << j;
    }
  }
}

TEST(RmsNormOnHost, K26WideRowsInTheHeuristicsBlocks) {
  check_against_double<7168, kp::BF16, 1024>(2);  // a layer's input norm (bf16 rows for q_a + kv_a)
  check_against_double<7168, kp::F32, 1024>(1);   // a MoE layer's post-attention norm (f32 for the router)
  check_against_double<7168, kp::BF16, 448>(1);   // the earlier block
  check_against_double<1536, kp::BF16, 128>(2);   // q_a's norm (the exact fold's block)
}

}  // namespace
}  // namespace kplan::codegen
