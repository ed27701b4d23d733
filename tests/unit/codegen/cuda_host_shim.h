#pragma once
// Runs a kernel template's CUDA source on the host, for tests without a GPU: each CUDA thread of
// a block is a fiber on the calling thread (host_fibers.h), blocks one after another,
// __syncthreads and the warp intrinsics as cooperative barriers over the block / the warp (a
// fiber that waits yields to the next; no OS threads, locks or atomics: one OS thread per CUDA
// thread made the MoE and MLA host suites spend more time in the kernel's scheduler than in the
// kernels); the warp-collective mma.sync and ldmatrix (and its .trans) of the MMA paths as
// emulations of their PTX fragment layouts, cp.async as an immediate copy (its commit and wait
// then nothing to do) (the template calls them under KP_HOST_SHIM). Only the subset the templates
// tested this way use (kernels_templates/moe_grouped.cuh, mla_split.cuh, ...): include this, then
// the template. The template's `__shared__` variables become function statics (one per
// instantiation, shared by the block's fibers), so a launch must finish before the next begins.
// Streaming loads (__ldcs) are reported to `on_stream_load` when set, so a test can count the
// bytes a kernel reads where. A launch's dynamic shared memory (kp::dynamic_smem) is one buffer
// of its smem_bytes. A block whose fibers all wait at barriers no other fiber will reach (a
// barrier inside a branch only some threads take) stops the test binary with a message instead
// of hanging.
#include <math.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/unit/codegen/host_fibers.h"

#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define KP_HOST_SHIM 1

struct uint2 {
  unsigned x, y;
};
struct uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
struct float2 {
  float x, y;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
struct float4 {
  float x, y, z, w;
};

namespace kplan::cuda_host {

struct Index {
  unsigned x = 0, y = 0, z = 0;
};
inline Index thread_index, block_index;  // the running fiber's (set by the scheduler)
inline Index grid_dim;

// A barrier of `expected` fibers: all but the last to arrive yield until the phase moves on.
struct CoopBarrier {
  unsigned expected, count = 0;
  unsigned long long phase = 0;
  explicit CoopBarrier(unsigned n) : expected(n) {}
  void arrive_and_wait() {
    ++FiberBlock::running().progress;
    const unsigned long long mine = phase;
    if (++count == expected) {
      count = 0;
      ++phase;
      return;
    }
    while (phase == mine) FiberBlock::running().wait();
  }
};

struct LaunchState {
  CoopBarrier* block = nullptr;
  std::vector<std::unique_ptr<CoopBarrier>> warps;
  std::vector<unsigned long long> exchange;  // one slot per thread, for warp exchanges
  std::vector<std::array<unsigned, 8>> frag;  // one per thread, for the warp-collective mma
  std::vector<float4> dynamic_smem;          // the launch's smem_bytes, 16-byte aligned
};
inline LaunchState* current = nullptr;
inline std::function<void(const void*, size_t)> on_stream_load;

// Every thread of the warp publishes v; each gets the value of lane src(lane).
template <class T, class Src>
T warp_exchange(T v, Src src) {
  static_assert(sizeof(T) <= 8);
  unsigned long long u = 0;
  std::memcpy(&u, &v, sizeof(T));
  const unsigned lane = thread_index.x % 32, base = thread_index.x - lane;
  CoopBarrier& warp = *current->warps[thread_index.x / 32];
  current->exchange[thread_index.x] = u;
  warp.arrive_and_wait();
  const unsigned long long r = current->exchange[base + src(lane)];
  warp.arrive_and_wait();
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}

inline void* dynamic_smem() { return current->dynamic_smem.data(); }

inline CoopBarrier& warp_barrier() { return *current->warps[thread_index.x / 32]; }

inline float bf16_bits_to_float(unsigned h) {
  const unsigned u = (h & 0xffffu) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned float_to_bf16_bits(float f) {  // round to nearest even (finite values)
  unsigned u;
  std::memcpy(&u, &f, 4);
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// fma.rn.bf16x2: a * b + c per 16-bit lane (exact f32 FMA, then rounded to bf16).
inline unsigned bf16x2_fma(unsigned a, unsigned b, unsigned c) {
  unsigned d = 0;
  for (int h = 0; h < 2; ++h) {
    const float r = fmaf(bf16_bits_to_float(a >> (16 * h)), bf16_bits_to_float(b >> (16 * h)), bf16_bits_to_float(c >> (16 * h)));
    d |= float_to_bf16_bits(r) << (16 * h);
  }
  return d;
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, d += a * b, warp-collective: the 32
// lanes' fragments are gathered, each lane computes its four D elements from the PTX fragment
// layout (lane l: g = l / 4, q = l % 4; A a0 (g, 2q..2q+1), a1 (g+8, 2q..), a2 (g, 2q+8..),
// a3 (g+8, 2q+8..); B b0 (k 2q..2q+1, n g), b1 (k 2q+8.., n g); D d0 (g, 2q), d1 (g, 2q+1),
// d2 (g+8, 2q), d3 (g+8, 2q+1); the lower k in the low half of a word), in f32 (bf16 products
// are exact), k in order.
inline void mma_m16n8k16_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  const unsigned lane = thread_index.x % 32, base = thread_index.x - lane;
  current->frag[thread_index.x] = {a[0], a[1], a[2], a[3], b0, b1, 0u, 0u};
  warp_barrier().arrive_and_wait();
  auto A = [&](unsigned row, unsigned k) {
    const std::array<unsigned, 8>& f = current->frag[base + (row % 8) * 4 + (k % 8) / 2];
    return bf16_bits_to_float(f[(row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)] >> (16 * (k % 2)));
  };
  auto B = [&](unsigned k, unsigned col) {
    const std::array<unsigned, 8>& f = current->frag[base + col * 4 + (k % 8) / 2];
    return bf16_bits_to_float(f[4 + (k >= 8 ? 1 : 0)] >> (16 * (k % 2)));
  };
  float out[4];
  for (unsigned e = 0; e < 4; ++e) {
    const unsigned row = lane / 4 + (e >= 2 ? 8 : 0), col = 2 * (lane % 4) + e % 2;
    float s = d[e];
    for (unsigned k = 0; k < 16; ++k) s += A(row, k) * B(k, col);
    out[e] = s;
  }
  warp_barrier().arrive_and_wait();
  for (int e = 0; e < 4; ++e) d[e] = out[e];
}

// ldmatrix.sync.aligned.m8n8.x4.shared.b16: lane l names row l % 8 of matrix l / 8; lane
// (g, q) gets 32-bit word q of row g of matrix i in r[i].
inline void ldmatrix_x4(unsigned (&r)[4], const void* row) {
  const unsigned lane = thread_index.x % 32, base = thread_index.x - lane;
  current->exchange[thread_index.x] = reinterpret_cast<unsigned long long>(row);
  warp_barrier().arrive_and_wait();
  for (unsigned i = 0; i < 4; ++i) {
    const auto* p = reinterpret_cast<const unsigned char*>(current->exchange[base + 8 * i + lane / 4]);
    std::memcpy(&r[i], p + 4 * (lane % 4), 4);
  }
  warp_barrier().arrive_and_wait();
}

// ldmatrix...x4.trans.shared.b16: lane l names row l % 8 of matrix l / 8; lane (g, q) gets the
// elements (row 2q, column g) and (row 2q + 1, column g) of matrix i in r[i], row 2q low.
inline void ldmatrix_x4_trans(unsigned (&r)[4], const void* row) {
  const unsigned lane = thread_index.x % 32, base = thread_index.x - lane;
  current->exchange[thread_index.x] = reinterpret_cast<unsigned long long>(row);
  warp_barrier().arrive_and_wait();
  for (unsigned i = 0; i < 4; ++i) {
    uint16_t lo, hi;
    std::memcpy(&lo, reinterpret_cast<const unsigned char*>(current->exchange[base + 8 * i + 2 * (lane % 4)]) + 2 * (lane / 4), 2);
    std::memcpy(&hi, reinterpret_cast<const unsigned char*>(current->exchange[base + 8 * i + 2 * (lane % 4) + 1]) + 2 * (lane / 4), 2);
    r[i] = lo | (static_cast<unsigned>(hi) << 16);
  }
  warp_barrier().arrive_and_wait();
}

// cp.async.cg ... 16, src-size: 16 bytes copied at once (src_bytes 16) or zeros written (0);
// `stream` reports the copy to on_stream_load as __ldcs does (the weights, not their scales).
inline void cp_async16(void* dst, const void* src, unsigned src_bytes, bool stream) {
  if (src_bytes == 0) {
    std::memset(dst, 0, 16);
    return;
  }
  if (stream && on_stream_load) on_stream_load(src, 16);
  std::memcpy(dst, src, 16);
}

// cp.async.bulk into shared memory: the bytes copied at once by the issuing lane; the mbarrier
// wait is a warp barrier (the kernels' waits are warp-converged and the issuing lane is the
// waiting warp's), so the copy happens before any lane of the warp reads it.
inline void bulk_copy(void* dst, const void* src, unsigned bytes, bool stream) {
  if (stream && on_stream_load) on_stream_load(src, bytes);
  std::memcpy(dst, src, bytes);
}
inline void mbarrier_wait() { warp_barrier().arrive_and_wait(); }

// grid.x * grid.y * grid.z blocks of `threads` threads, each running body(), with smem_bytes of
// dynamic shared memory. The blocks run one after another, each to its end.
inline void launch(unsigned grid_x, unsigned grid_y, unsigned threads, const std::function<void()>& body, size_t smem_bytes = 0,
                   unsigned grid_z = 1) {
  CoopBarrier block(threads);
  LaunchState state;
  state.block = &block;
  state.dynamic_smem.resize((smem_bytes + sizeof(float4) - 1) / sizeof(float4));
  for (unsigned w = 0; w < threads / 32; ++w) state.warps.push_back(std::make_unique<CoopBarrier>(32));
  state.exchange.resize(threads);
  state.frag.resize(threads);
  FiberBlock fib(threads);
  current = &state;
  grid_dim = {grid_x, grid_y, grid_z};
  const std::function<void(unsigned)> entry = [&](unsigned) { body(); };
  const std::function<void(unsigned)> resume = [](unsigned t) { thread_index = {t, 0, 0}; };
  for (unsigned bz = 0; bz < grid_z; ++bz)
    for (unsigned by = 0; by < grid_y; ++by)
      for (unsigned bx = 0; bx < grid_x; ++bx) {
        block_index = {bx, by, bz};
        const std::string where = "block (" + std::to_string(bx) + ", " + std::to_string(by) + ", " + std::to_string(bz) + ")";
        fib.run(entry, resume, where.c_str());
      }
  current = nullptr;
}

}  // namespace kplan::cuda_host

#define threadIdx (::kplan::cuda_host::thread_index)
#define blockIdx (::kplan::cuda_host::block_index)
#define gridDim (::kplan::cuda_host::grid_dim)

inline void __syncthreads() { ::kplan::cuda_host::current->block->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { ::kplan::cuda_host::warp_barrier().arrive_and_wait(); }
template <class T>
T __shfl_sync(unsigned, T v, int src) {
  return ::kplan::cuda_host::warp_exchange(v, [&](unsigned) { return static_cast<unsigned>(src) & 31u; });
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int mask) {
  return ::kplan::cuda_host::warp_exchange(v, [&](unsigned lane) { return (lane ^ static_cast<unsigned>(mask)) & 31u; });
}
template <class T>
T __shfl_up_sync(unsigned, T v, int delta) {
  return ::kplan::cuda_host::warp_exchange(v, [&](unsigned lane) { return lane >= static_cast<unsigned>(delta) ? lane - delta : lane; });
}
// redux.sync's max / min over the warp (unsigned), by the shuffles above.
template <class Keep>
unsigned shim_warp_reduce(unsigned mask, unsigned v, Keep keep) {
  for (int o = 16; o > 0; o >>= 1) v = keep(v, __shfl_xor_sync(mask, v, o));
  return v;
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned v) { return shim_warp_reduce(mask, v, [](unsigned a, unsigned b) { return a > b ? a : b; }); }
inline unsigned __reduce_min_sync(unsigned mask, unsigned v) { return shim_warp_reduce(mask, v, [](unsigned a, unsigned b) { return a < b ? a : b; }); }
inline unsigned __ballot_sync(unsigned, bool b) {
  namespace h = ::kplan::cuda_host;
  const unsigned base = h::thread_index.x - h::thread_index.x % 32;
  h::CoopBarrier& warp = *h::current->warps[h::thread_index.x / 32];
  h::current->exchange[h::thread_index.x] = b;
  warp.arrive_and_wait();
  unsigned mask = 0;
  for (unsigned l = 0; l < 32; ++l) mask |= static_cast<unsigned>(h::current->exchange[base + l] != 0) << l;
  warp.arrive_and_wait();
  return mask;
}
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __ffs(unsigned v) { return __builtin_ffs(static_cast<int>(v)); }
inline unsigned atomicOr(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_or(v); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_add(v); }
inline void __threadfence() {}  // one OS thread: every store is visible at once
template <class T>
T __ldcs(const T* p) {
  if (::kplan::cuda_host::on_stream_load) ::kplan::cuda_host::on_stream_load(p, sizeof(T));
  return *p;
}
template <class T>
T __ldg(const T* p) {
  return *p;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
