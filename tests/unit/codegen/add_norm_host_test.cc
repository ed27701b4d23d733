// kernels_templates/add_norm.cuh run on the host (cuda_host_shim.h): the add and the norm of its
// sum in one launch give bit for bit what add.cuh's launch and then rms_norm.cuh's give, the sum
// stored f32 (the residual stream) or bf16 (normalised as stored). The device runs the same source
// through NVRTC (GpuOps.AddNormIsTheAddThenTheNorm).
#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/codegen/codegen_test_util.h"
// The shim's macros stay below every other include.
#include "tests/unit/codegen/cuda_host_shim.h"
#include "kernels_templates/add.cuh"  // (built with -Wno-unknown-pragmas: #pragma unroll)
#include "kernels_templates/add_norm.cuh"

namespace kplan::codegen {
namespace {

std::vector<unsigned short> bf16_rows(const std::vector<float>& v) {
  std::vector<unsigned short> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<unsigned short>(cuda_host::float_to_bf16_bits(v[i]));
  return out;
}

// bf16 a + bf16 b (a layer's first add: the gathered rows and o_proj's) over T tokens, the sum in
// O_DT, the normalised rows in Y_DT; the token past n_tokens is left alone.
template <int H, int O_DT, int Y_DT, int THREADS>
void check_against_the_two_launches(int T) {
  using O = std::conditional_t<O_DT == kp::F32, float, unsigned short>;
  using Y = std::conditional_t<Y_DT == kp::F32, float, unsigned short>;
  const int rows = T + 1;
  const std::vector<unsigned short> a = bf16_rows(testing_util::xorshift_uniform(rows * H, 31, 2.f)),
                                    b = bf16_rows(testing_util::xorshift_uniform(rows * H, 32, 2.f)),
                                    w = bf16_rows(testing_util::xorshift_uniform(H, 33, 1.f));
  std::vector<O> sum(rows * H, O{}), sum2(rows * H, O{});
  std::vector<Y> y(rows * H, Y{}), y2(rows * H, Y{});
  cuda_host::launch(rows, 1, THREADS, [&] {
    kp::add_rms_norm<H, kp::BF16, kp::BF16, O_DT, Y_DT, THREADS>(a.data(), b.data(), w.data(), sum.data(), y.data(), T, 1e-6f);
  });
  cuda_host::launch(T, 1, THREADS, [&] { kp::add<H, kp::BF16, kp::BF16, O_DT, THREADS>(a.data(), b.data(), sum2.data(), T); });
  cuda_host::launch(T, 1, THREADS, [&] { kp::rms_norm<H, O_DT, Y_DT, THREADS>(sum2.data(), w.data(), y2.data(), T, H, H, 1e-6f); });
  for (int i = 0; i < rows * H; ++i) {
    ASSERT_EQ(sum[i], sum2[i]) << "H " << H << " threads " << THREADS << " sum element " << i;
    ASSERT_EQ(y[i], y2[i]) << "H " << H << " threads " << THREADS << " norm element " << i;
  }
}

// K2.6's width (7168 over 448 threads, 16 a thread) with the residual stream f32 and the norm's rows
// bf16 (the bf16-activations plan) or f32; an odd width past the block; a bf16 sum.
TEST(AddNormOnHost, IsTheAddThenTheNorm) {
  check_against_the_two_launches<7168, kp::F32, kp::BF16, 448>(2);
  check_against_the_two_launches<7168, kp::F32, kp::F32, 448>(1);
  check_against_the_two_launches<333, kp::F32, kp::F32, 128>(3);
  check_against_the_two_launches<256, kp::BF16, kp::BF16, 64>(2);
}

}  // namespace
}  // namespace kplan::codegen
