// kernels_templates/add.cuh run on the host (cuda_host_shim.h): the residual add reads every column
// of its chunk before it stores any (out may alias a or b), so the chunking must still cover every
// column once, in place too. The device runs the same source through NVRTC (the ops table's GPU
// cases of add).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/unit/codegen/codegen_test_util.h"
// The shim's macros stay below every other include.
#include "tests/unit/codegen/cuda_host_shim.h"
#include "kernels_templates/add.cuh"  // (built with -Wno-unknown-pragmas: #pragma unroll)

namespace kplan::codegen {
namespace {

unsigned short bf16_bits(float f) { return static_cast<unsigned short>(cuda_host::float_to_bf16_bits(f)); }

// K2.6's dense-layer add: bf16 + bf16 -> f32, 7168 columns over 256 threads (28 a thread: two
// chunks, the second partly past the row), three tokens.
TEST(AddOnHost, Bf16RowsIntoF32ColumnsInChunks) {
  constexpr int D = 7168, T = 3;
  const std::vector<float> av = testing_util::xorshift_uniform(T * D, 11, 3.f), bv = testing_util::xorshift_uniform(T * D, 12, 3.f);
  std::vector<unsigned short> a(T * D), b(T * D);
  for (int i = 0; i < T * D; ++i) a[i] = bf16_bits(av[i]), b[i] = bf16_bits(bv[i]);
  std::vector<float> out(T * D, -1.f);
  cuda_host::launch(T, 1, 256, [&] { kp::add<D, kp::BF16, kp::BF16, kp::F32, 256>(a.data(), b.data(), out.data(), T); });
  for (int i = 0; i < T * D; ++i)
    ASSERT_EQ(out[i], cuda_host::bf16_bits_to_float(a[i]) + cuda_host::bf16_bits_to_float(b[i])) << "element " << i;
}

// f32 in place (out is a) over T tokens; the row past n_tokens is left alone.
template <int D, int THREADS>
void check_in_place(int T) {
  const std::vector<float> a0 = testing_util::xorshift_uniform((T + 1) * D, 21, 1.f), b = testing_util::xorshift_uniform((T + 1) * D, 22, 1.f);
  std::vector<float> a = a0;
  cuda_host::launch(T + 1, 1, THREADS, [&] { kp::add<D, kp::F32, kp::F32, kp::F32, THREADS>(a.data(), b.data(), a.data(), T); });
  for (int i = 0; i < (T + 1) * D; ++i)
    ASSERT_EQ(a[i], i < T * D ? a0[i] + b[i] : a0[i]) << "D " << D << " threads " << THREADS << " element " << i;
}

// A row shorter than the block, one of a single chunk not a multiple of the threads, one of two
// whole chunks (32 columns a thread).
TEST(AddOnHost, F32InPlaceOddWidths) {
  check_in_place<20, 32>(2);
  check_in_place<300, 32>(2);
  check_in_place<1024, 32>(2);
}

}  // namespace
}  // namespace kplan::codegen
