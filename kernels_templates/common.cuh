#pragma once
// Helpers shared by every kplan kernel template. Compiled by NVRTC with no CUDA headers at all
// (bf16 is handled as raw bits here), so a kernel's cache key covers every line it depends on.
//
// Element type codes (template parameters named *_DT): 0 = f32, 1 = bf16. Activations may be
// either; weights are bf16 (or INT4, see matmul_int4.cuh); accumulation is always f32.

// A TMA tensor map argument (`const __grid_constant__ CUtensorMap name` in a generated entry),
// laid out as cuda.h declares it: the runtime encodes it with cuTensorMapEncodeTiled at load.
// Declared here because NVRTC compiles without cuda.h.
struct alignas(64) CUtensorMap {
  unsigned long long opaque[16];
};

namespace kp {

enum : int { F32 = 0, BF16 = 1 };

// Programmatic dependent launch (sm_90 and later; every generated entry calls this first): the
// next grid in the stream may be scheduled once every block of this one has started, and this
// grid waits here until the one before it has finished and its writes are visible, so no block
// touches memory early. Launched without the attribute (KPLAN_PDL=none, larger buckets), both are no-ops.
__device__ __forceinline__ void grid_dependency_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
typedef long long i64;

// Asks L2 for [p, p + bytes) without waiting (cp.async.bulk.prefetch.L2, sm_90 and later: a hint
// that holds no registers and completes on its own). p 16-byte aligned, bytes a multiple of 16;
// a no-op before sm_90.
__device__ __forceinline__ void l2_prefetch_bulk(const void* p, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

// The calling warp asks L2 for [p, p + bytes) in 4 KiB pieces, lane l the pieces l, l + 32, ...
// (p 16-byte aligned, bytes a multiple of 16).
__device__ __forceinline__ void l2_prefetch_warp(const char* p, i64 bytes) {
  for (i64 off = static_cast<i64>(threadIdx.x % 32) * 4096; off < bytes; off += 32 * 4096)
    l2_prefetch_bulk(p + off, static_cast<unsigned>(min(static_cast<i64>(4096), bytes - off)));
}

// Thread-block clusters (sm_90 and later): every thread of every block of the cluster arrives,
// then waits; shared-memory writes before it are visible to the cluster's blocks after it.
__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}
// A 32-bit word of block `rank`'s shared memory at the address `p` has in this block's
// (distributed shared memory: mapa + ld.shared::cluster).
__device__ __forceinline__ unsigned cluster_load_u32(const void* p, unsigned rank) {
  unsigned v = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned local = static_cast<unsigned>(__cvta_generic_to_shared(p));
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(remote) : "memory");
#endif
  return v;
}

#ifndef KP_HOST_SHIM
// The 32-bit shared-state-space address of a generic pointer into shared memory (what ldmatrix
// and cp.async take).
__device__ __forceinline__ unsigned shared_address(const void* p) {
  unsigned a;
  asm("{ .reg .u64 p; cvta.to.shared.u64 p, %1; cvt.u32.u64 %0, p; }" : "=r"(a) : "l"(p));
  return a;
}
#endif

// ldmatrix.x4 (b16): lane l names row l % 8 of 8x8 matrix l / 8 (16 bytes of shared memory at
// `row`, 16-byte aligned). Without .trans lane (g = l / 4, q = l % 4) gets 32-bit word q of row g
// of matrix i in r[i] (an MMA A or B fragment of rows stored whole); with .trans it gets the
// elements (row 2q, column g) and (row 2q + 1, column g), the lower row in the low half (a B
// fragment of a matrix stored k-major, as attention's values are).
__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const void* row) {
#ifdef KP_HOST_SHIM
  ::kplan::cuda_host::ldmatrix_x4(r, row);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row))
               : "memory");
#endif
}
__device__ __forceinline__ void ldsm_x4_trans(unsigned (&r)[4], const void* row) {
#ifdef KP_HOST_SHIM
  ::kplan::cuda_host::ldmatrix_x4_trans(r, row);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row))
               : "memory");
#endif
}

// cp.async.cg (sm_80+): 16 bytes from global straight into shared memory, not through registers;
// !valid writes zeros (src-size 0: nothing read). STREAM: a weight stream's bytes (the host shim
// counts them as streamed bytes for the tests that check what a kernel reads), not its scales.
template <bool STREAM>
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
#ifdef KP_HOST_SHIM
  ::kplan::cuda_host::cp_async16(dst, src, valid ? 16u : 0u, STREAM);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(dst)), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#ifndef KP_HOST_SHIM
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#ifndef KP_HOST_SHIM
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

// The copy engine (cp.async.bulk, sm_90 and later) into shared memory, completed on an mbarrier
// there: one thread arms the barrier for the bytes of a phase (mbar_arm) and starts the copies
// (bulk_copy, each `bytes` a multiple of 16 from 16-byte aligned addresses); every thread that
// reads them waits for the phase (mbar_wait, parity = the phases completed so far, mod 2). Before
// the copy engine writes bytes the threads read, fence_async_smem orders those reads before it.
// The host shim copies at once and makes the wait a warp barrier (the copy's thread is the warp's).
__device__ __forceinline__ void mbar_init(unsigned long long* bar) {
#ifndef KP_HOST_SHIM
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");  // visible to the copy engine
#endif
}
__device__ __forceinline__ void mbar_inval(unsigned long long* bar) {
#ifndef KP_HOST_SHIM
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(shared_address(bar)) : "memory");
#endif
}
__device__ __forceinline__ void mbar_arm(unsigned long long* bar, unsigned bytes) {
#ifndef KP_HOST_SHIM
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
#ifdef KP_HOST_SHIM
  ::kplan::cuda_host::mbarrier_wait();
#else
  asm volatile(
      "{\n .reg .pred done;\n"
      "KP_MBAR_WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra KP_MBAR_WAIT_%=;\n}" ::"r"(shared_address(bar)),
      "r"(parity)
      : "memory");
#endif
}
__device__ __forceinline__ void fence_async_smem() {
#ifndef KP_HOST_SHIM
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
// STREAM: a weight stream's bytes (the host shim counts them, as cp_async16 does).
template <bool STREAM>
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
#ifdef KP_HOST_SHIM
  ::kplan::cuda_host::bulk_copy(dst, src, bytes, STREAM);
#else
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(shared_address(dst)),
               "l"(src), "r"(bytes), "r"(shared_address(bar))
               : "memory");
#endif
}

// The block's dynamic shared memory (the launch's smem_bytes), 16-byte aligned. The host shim of
// the CPU tests (tests/unit/codegen/cuda_host_shim.h) supplies its own.
#ifndef KP_HOST_SHIM
__device__ __forceinline__ void* dynamic_smem() {
  extern __shared__ float4 kp_dynamic_smem[];  // float4: 16-byte aligned
  return kp_dynamic_smem;
}
#else
inline void* dynamic_smem() { return ::kplan::cuda_host::dynamic_smem(); }
#endif

__device__ __forceinline__ float bf16_to_f32(unsigned short v) {
  return __uint_as_float(static_cast<unsigned>(v) << 16);
}

// Round to nearest even, like kplan::float_to_bf16 on the host; NaN stays NaN.
__device__ __forceinline__ unsigned short f32_to_bf16(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<unsigned short>(u >> 16);
}

// Element i of an array of type DT, as f32.
template <int DT>
__device__ __forceinline__ float load(const void* p, i64 i) {
  if constexpr (DT == F32) {
    return static_cast<const float*>(p)[i];
  } else {
    return bf16_to_f32(static_cast<const unsigned short*>(p)[i]);
  }
}

template <int DT>
__device__ __forceinline__ void store(void* p, i64 i, float v) {
  if constexpr (DT == F32) {
    static_cast<float*>(p)[i] = v;
  } else {
    static_cast<unsigned short*>(p)[i] = f32_to_bf16(v);
  }
}

template <int DT>
__device__ __forceinline__ const void* offset(const void* p, i64 elements) {
  return static_cast<const char*>(p) + elements * (DT == F32 ? 4 : 2);
}

// The eight bf16 values of a 16-byte word, as f32 (element 0 in the low half of v.x).
__device__ __forceinline__ void unpack8_bf16(const uint4 v, float out[8]) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(w[i] << 16);
    out[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

// Eight consecutive bf16 values from one 16-byte load (p must be 16-byte aligned).
__device__ __forceinline__ void load8_bf16(const void* p, float out[8]) { unpack8_bf16(*static_cast<const uint4*>(p), out); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Warp-wide best (value, index) under the order "larger value first, then smaller index".
__device__ __forceinline__ void warp_argmax(float& value, int& index) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, value, o);
    const int i = __shfl_xor_sync(0xffffffffu, index, o);
    if (v > value || (v == value && i < index)) {
      value = v;
      index = i;
    }
  }
}

// A float's order as an unsigned key (larger float, larger key); -0 is keyed as +0 so that
// equal values tie, as the host's comparison has them (sampling.cuh's radix top-k, the warp
// reductions below).
__device__ __forceinline__ unsigned order_key(float x) {
  const unsigned u = x == 0.f ? 0u : __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The index warp_argmax chooses (every lane gets it; indices >= 0), by two warp reductions
// (redux.sync, sm_80+): the largest key, then the smallest index holding it -- two dependent
// instructions where warp_argmax takes five rounds of two shuffles and a compare. The router's
// top-k runs TOPK of these one after another (the experts' gate/up waits on them).
__device__ __forceinline__ int warp_argmax_index(float value, int index) {
  const unsigned key = order_key(value);
  const unsigned best = __reduce_max_sync(0xffffffffu, key);
  return static_cast<int>(__reduce_min_sync(0xffffffffu, key == best ? static_cast<unsigned>(index) : 0xffffffffu));
}

// Sum over a block of THREADS threads (a multiple of 32). Every thread gets the result.
template <int THREADS>
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[THREADS / 32];
  v = warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float total = 0.f;
#pragma unroll
  for (int w = 0; w < THREADS / 32; ++w) total += partial[w];
  return total;
}

template <int THREADS>
__device__ __forceinline__ float block_max(float v) {
  __shared__ float partial[THREADS / 32];
  v = warp_max(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float best = partial[0];
#pragma unroll
  for (int w = 1; w < THREADS / 32; ++w) best = fmaxf(best, partial[w]);
  return best;
}

template <int THREADS>
__device__ __forceinline__ void block_argmax(float& value, int& index) {
  __shared__ float values[THREADS / 32];
  __shared__ int indices[THREADS / 32];
  warp_argmax(value, index);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) {
    values[warp] = value;
    indices[warp] = index;
  }
  __syncthreads();
  value = values[0];
  index = indices[0];
#pragma unroll
  for (int w = 1; w < THREADS / 32; ++w) {
    if (values[w] > value || (values[w] == value && indices[w] < index)) {
      value = values[w];
      index = indices[w];
    }
  }
}

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
__device__ __forceinline__ float silu(float x) { return x / (1.f + expf(-x)); }

__device__ __forceinline__ int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

}  // namespace kp
