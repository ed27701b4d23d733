// ir/support/int4_frag.h, the INT4 experts' device order (W_LAYOUT 1), checked without a GPU:
// it is a permutation of the checkpoint's words and scales that keeps each octet of rows in its
// rows' byte range; lane l = 4 g + q of an octet's sub-block holds exactly its m16n8k16 A-fragment
// words (word q of the sub-block's 4 groups of row g); the synthetic generator
// (kernels_templates/synthetic_weights.cuh, FRAG_K) writes the order the upload's repack makes;
// and the runtime's upload step (runtime/gpu/device_layout.h) lays a plan weight's rows out so, and
// refuses bytes that are not whole octets.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <set>
#include <vector>

#include "ir/support/int4_frag.h"
#include "ir/support/error.h"
#include "ir/support/synthetic_values.h"
#include "runtime/gpu/device_layout.h"
#include "tests/unit/codegen/cuda_host_shim.h"
#include "kernels_templates/synthetic_weights.cuh"  // (built with -Wno-unknown-pragmas)

namespace kplan {
namespace {

namespace f = int4_frag;

TEST(Int4Frag, WordsAndScalesArePermutationsWithinEachOctet) {
  for (long long k : {128LL, 384LL, 7168LL}) {
    const long long rows = 24, words = rows * k / 8, scales = rows * k / 32;
    std::vector<bool> seen(static_cast<size_t>(words), false);
    for (long long w = 0; w < words; ++w) {
      const long long at = f::word_offset(w, k);
      ASSERT_GE(at, 0);
      ASSERT_LT(at, words);
      EXPECT_FALSE(seen[static_cast<size_t>(at)]) << "k " << k << " word " << w;
      seen[static_cast<size_t>(at)] = true;
      EXPECT_EQ(at / (8 * k / 8), w / (k / 8) / 8) << "an octet's words stay in its rows' range";
    }
    std::set<long long> s;
    for (long long i = 0; i < scales; ++i) {
      const long long at = f::scale_offset(i, k);
      EXPECT_EQ(at / (8 * k / 32), i / (k / 32) / 8);
      s.insert(at);
    }
    EXPECT_EQ(static_cast<long long>(s.size()), scales);
    EXPECT_EQ(*s.rbegin(), scales - 1);
  }
}

// Lane (g, q)'s 16 bytes of sub-block sb of an octet are word q of groups 4 sb .. 4 sb + 3 of
// row g (in that order), and row g's 4 scales of the sub-block sit at 4 g: what
// moe_grouped.cuh's fragments and scale reads take.
TEST(Int4Frag, LaneWordsAreTheFragmentWords) {
  const long long k = 512, rows = 16, per_row = k / 8;
  std::vector<unsigned> words(static_cast<size_t>(rows * per_row)), out(words.size());
  std::iota(words.begin(), words.end(), 0u);  // a word's value is its checkpoint index
  f::repack_words(words.data(), out.data(), rows, k);
  std::vector<unsigned short> sc(static_cast<size_t>(rows * k / 32)), sout(sc.size());
  std::iota(sc.begin(), sc.end(), static_cast<unsigned short>(0));
  f::repack_scales(sc.data(), sout.data(), rows, k);
  for (long long row = 0; row < rows; ++row)
    for (long long sb = 0; sb < k / 128; ++sb) {
      const long long base = f::sub_block_words(row, sb, k), sbase = f::sub_block_scales(row, sb, k);
      const long long g = row % 8;
      for (long long q = 0; q < 4; ++q)
        for (long long i = 0; i < 4; ++i)
          EXPECT_EQ(out[static_cast<size_t>(base + (4 * g + q) * 4 + i)], static_cast<unsigned>(row * per_row + (4 * sb + i) * 4 + q))
              << "row " << row << " sub-block " << sb << " lane " << 4 * g + q << " word " << i;
      for (long long i = 0; i < 4; ++i)
        EXPECT_EQ(sout[static_cast<size_t>(sbase + 4 * g + i)], static_cast<unsigned short>(row * (k / 32) + 4 * sb + i));
    }
}

// The generator's FRAG_K order is the checkpoint order repacked: the same words and scales the
// upload of a real checkpoint's bytes would put on the device.
TEST(Int4Frag, SyntheticGeneratorWritesTheRepackedOrder) {
  constexpr int K = 384;
  const long long rows = 16, n_words = rows * K / 8, n_scales = rows * K / 32;
  const unsigned long long key = synthetic::weight_key(7, 11);
  const int key_lo = static_cast<int>(static_cast<unsigned>(key)), key_hi = static_cast<int>(static_cast<unsigned>(key >> 32));
  const float step = synthetic::step_for(0.02f);
  std::vector<unsigned> plain(static_cast<size_t>(n_words)), frag(plain.size()), want(plain.size());
  std::vector<unsigned short> splain(static_cast<size_t>(n_scales)), sfrag(splain.size()), swant(splain.size());
  auto run = [&](auto kernel, void* out, long long n) {
    cuda_host::launch(2, 1, 64, [&] { kernel(out, static_cast<int>(n), 0, key_lo, key_hi, 0.f, step); });
  };
  run(kp::synthetic_weights<1, 0, 32, 0, 64>, plain.data(), n_words);
  run(kp::synthetic_weights<1, 0, 32, K, 64>, frag.data(), n_words);
  run(kp::synthetic_weights<2, 1, 32, 0, 64>, splain.data(), n_scales);
  run(kp::synthetic_weights<2, 1, 32, K, 64>, sfrag.data(), n_scales);
  f::repack_words(plain.data(), want.data(), rows, K);
  f::repack_scales(splain.data(), swant.data(), rows, K);
  EXPECT_EQ(frag, want);
  EXPECT_EQ(sfrag, swant);
  EXPECT_NE(frag, plain);
}

// The upload's step: a chunk of whole octets of a plan weight's rows in device order; a weight
// of another layout or bytes that are not whole octets are refused, naming the weight.
TEST(Int4Frag, DeviceLayoutOfAPlanWeight) {
  plan::Weight w;
  w.name = "experts.*.down_proj.weight_packed";
  w.dtype = DType::I32;
  w.shape = {2, 16, 32};  // 2 experts of 16 rows x 256 columns
  w.layout = "int4_frag";
  EXPECT_EQ(gpu::int4_frag_columns(w), 256);
  EXPECT_EQ(gpu::upload_chunk_bytes(w, 3000), 2048u);  // whole octets of 128-byte rows
  EXPECT_EQ(gpu::upload_chunk_bytes(w, 100), 1024u);   // at least one octet
  std::vector<unsigned> words(16 * 32);
  std::iota(words.begin(), words.end(), 5u);
  std::vector<uint8_t> out;
  const auto* bytes = reinterpret_cast<const uint8_t*>(words.data());
  gpu::to_device_layout(w, std::span<const uint8_t>(bytes, 4 * words.size()), out);
  std::vector<unsigned> want(words.size());
  f::repack_words(words.data(), want.data(), 16, 256);
  ASSERT_EQ(out.size(), 4 * want.size());
  EXPECT_EQ(0, std::memcmp(out.data(), want.data(), out.size()));
  try {
    gpu::to_device_layout(w, std::span<const uint8_t>(bytes, 4 * 32 * 4), out);  // 4 rows
    ADD_FAILURE() << "4 rows are not an octet";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not whole octets"), std::string::npos) << e.what();
  }
  w.shape = {2, 16, 12};  // 96 columns: not a multiple of 128
  try {
    gpu::to_device_layout(w, std::span<const uint8_t>(bytes, 4 * 16 * 12), out);
    ADD_FAILURE() << "96 columns";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of 128"), std::string::npos) << e.what();
  }
  w.layout = "stacked";
  EXPECT_EQ(gpu::int4_frag_columns(w), 0);
  EXPECT_EQ(gpu::upload_chunk_bytes(w, 100), 100u);
}

}  // namespace
}  // namespace kplan
