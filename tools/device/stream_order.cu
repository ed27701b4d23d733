// Does the order in which warps walk their weight chunks bind the INT4 MoE's stream? (issue 10)
//
// The int4_frag experts (ir/support/int4_frag.h) are octet-major: an octet's whole K strip is one
// contiguous run, and each warp of moe_grouped_gate_up walks its own strip 1 KiB a step, so at any
// moment the device's ~2000 warps read 1 KiB pieces 28 KiB apart. The INT4 MoE streams at ~2.6
// TB/s on both the H100 and the H200 (bench/RESULTS.md 2026-12-06, session 39) whatever its
// instruction count, ring depth or L2 prefetch: if DRAM row locality is what binds it, a step-major
// order (step s of every warp's strip adjacent) streams faster from the same loads.
//
// This reads the same bytes in 1 KiB chunks, two 16-byte loads a lane a chunk, D chunks a warp in
// flight (issued together, then consumed), in three orders:
//   strip:       warp w's chunk s at w * steps + s (the int4_frag order: a warp's strip contiguous)
//   interleaved: chunk (w, s) at s * warps + w (the warps of a step adjacent)
//   linear:      a grid-stride read of the buffer, 16 bytes a lane (a copy's order: the roof)
//   bulk C/R:    the strip order read by the copy engine: lane 0 of each warp keeps R chunks of C
//                bytes in flight with cp.async.bulk into a shared-memory ring (one mbarrier a
//                slot), the warp reads each slot back (the TMA ring the MoE would use)
//   moe 4 / 1:   a gate/up warp step's 2304 bytes (8 gate + 8 up rows x 256 columns of int4_frag
//                words and their bf16 scales): "4" from four strips in four tensors as the kernel
//                reads them (1 KiB gate words, 1 KiB up words, 128 B of each's scales), "1" from one
//                contiguous 2304-byte run a step (a layout with a step's words and scales adjacent),
//                "2" gate and up words as one 2 KiB run and both scales as one 256-byte run
//                -- whether the scales' small runs and four streams a warp, not the kernel, hold
//                the 1-token experts at ~2.6 TB/s
// and prints GB/s for each (median of 21 runs over a buffer past L2). No correctness beyond the
// XOR each warp writes (keeps the loads alive). Build and run: tools/device/stream_order.sh.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace {

constexpr int kChunk = 64;  // uint4s a chunk: 1 KiB

template <int ORDER, int D>
__global__ void stream_chunks(const uint4* __restrict__ src, int steps, unsigned* out) {
  const int lane = threadIdx.x % 32;
  const long long warps = static_cast<long long>(gridDim.x) * (blockDim.x / 32);
  const long long warp = static_cast<long long>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  auto chunk = [&](int s) { return src + (ORDER == 0 ? warp * steps + s : s * warps + warp) * kChunk; };
  unsigned acc = 0;
  for (int s0 = 0; s0 + D <= steps; s0 += D) {
    uint4 v[D][2];
#pragma unroll
    for (int i = 0; i < D; ++i) {
      v[i][0] = __ldcs(chunk(s0 + i) + lane);
      v[i][1] = __ldcs(chunk(s0 + i) + 32 + lane);
    }
#pragma unroll
    for (int i = 0; i < D; ++i) acc ^= v[i][0].x ^ v[i][0].y ^ v[i][0].z ^ v[i][0].w ^ v[i][1].x ^ v[i][1].y ^ v[i][1].z ^ v[i][1].w;
  }
  if (lane == 0) out[warp] = acc;
}

// A gate/up warp step, D steps in flight a warp (issued together, then consumed). FUSED 0: four
// strips (region r of the buffer holds tensor r's strips: words 1 KiB a step, scales 128 B a
// step); FUSED 1: one strip of 2304-byte steps; FUSED 2: a words strip (2 KiB a step) and a scales
// strip (256 bytes a step).
template <int FUSED, int D>
__global__ void stream_moe(const uint4* __restrict__ src, int steps, long long warps, unsigned* out) {
  const int lane = threadIdx.x % 32;
  const long long warp = static_cast<long long>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const long long words = warps * steps * 64, scales = warps * steps * 8;  // uint4s a region
  unsigned acc = 0;
  for (int s0 = 0; s0 + D <= steps; s0 += D) {
    uint4 v[D][4];
    uint2 c[D][2];
#pragma unroll
    for (int i = 0; i < D; ++i) {
      const long long s = warp * steps + s0 + i;
      if constexpr (FUSED == 2) {
        const uint4* w = src + s * 128;
        const uint2* sc = reinterpret_cast<const uint2*>(src + 2 * words + s * 16);
#pragma unroll
        for (int j = 0; j < 4; ++j) v[i][j] = __ldcs(w + 32 * j + lane);
        c[i][0] = __ldcs(sc + lane);
        c[i][1] = make_uint2(0, 0);
      } else if constexpr (FUSED == 1) {
        const uint4* p = src + s * 144;
#pragma unroll
        for (int j = 0; j < 4; ++j) v[i][j] = __ldcs(p + 32 * j + lane);
        c[i][0] = __ldcs(reinterpret_cast<const uint2*>(p + 128) + lane);
        c[i][1] = make_uint2(0, 0);
      } else {
        const uint4* g = src + s * 64;
        const uint4* u = src + words + s * 64;
        const uint2* gs = reinterpret_cast<const uint2*>(src + 2 * words + s * 8);
        const uint2* us = reinterpret_cast<const uint2*>(src + 2 * words + scales + s * 8);
        v[i][0] = __ldcs(g + lane);
        v[i][1] = __ldcs(g + 32 + lane);
        v[i][2] = __ldcs(u + lane);
        v[i][3] = __ldcs(u + 32 + lane);
        c[i][0] = lane < 16 ? __ldcs(gs + lane) : make_uint2(0, 0);
        c[i][1] = lane < 16 ? __ldcs(us + lane) : make_uint2(0, 0);
      }
    }
#pragma unroll
    for (int i = 0; i < D; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) acc ^= v[i][j].x ^ v[i][j].y ^ v[i][j].z ^ v[i][j].w;
      acc ^= c[i][0].x ^ c[i][0].y ^ c[i][1].x ^ c[i][1].y;
    }
  }
  if (lane == 0) out[warp] = acc;
}

template <int D>
__global__ void stream_linear(const uint4* __restrict__ src, long long n, unsigned* out) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  unsigned acc = 0;
  for (long long i0 = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i0 < n; i0 += D * stride) {
    uint4 v[D];
#pragma unroll
    for (int i = 0; i < D; ++i) v[i] = i0 + i * stride < n ? __ldcs(src + i0 + i * stride) : uint4{0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < D; ++i) acc ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
  }
  if (threadIdx.x % 32 == 0) out[(static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32] = acc;
}

__device__ __forceinline__ unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

// Lane 0 of each warp streams its strip through R slots of C uint4s; the warp XORs every slot.
template <int C, int R>
__global__ void stream_bulk(const uint4* __restrict__ src, int steps, unsigned* out) {
  extern __shared__ uint4 ring_all[];
  __shared__ unsigned long long bars_all[16][R];
  const int lane = threadIdx.x % 32, wb = threadIdx.x / 32;
  const long long warp = static_cast<long long>(blockIdx.x) * (blockDim.x / 32) + wb;
  uint4* ring = ring_all + wb * R * C;
  unsigned long long* bars = bars_all[wb];
  const uint4* strip = src + warp * steps * C;
  auto issue = [&](int s) {
    const unsigned bar = smem_addr(&bars[s % R]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(C * 16) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(ring + (s % R) * C)),
                 "l"(strip + static_cast<long long>(s) * C), "r"(C * 16), "r"(bar)
                 : "memory");
  };
  if (lane == 0) {
    for (int i = 0; i < R; ++i) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bars[i])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (int s = 0; s < R && s < steps; ++s) issue(s);
  }
  __syncwarp();
  unsigned acc = 0;
  for (int s = 0; s < steps; ++s) {
    const unsigned bar = smem_addr(&bars[s % R]), parity = (s / R) & 1;
    asm volatile(
        "{ .reg .pred p;\n"
        "WAIT%=: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra WAIT%=; }" ::"r"(bar),
        "r"(parity)
        : "memory");
#pragma unroll
    for (int j = 0; j < C / 32; ++j) {
      const uint4 v = ring[(s % R) * C + j * 32 + lane];
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    __syncwarp();
    if (lane == 0 && s + R < steps) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // our reads before the copy's writes
      issue(s + R);
    }
  }
  if (lane == 0) out[warp] = acc;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "stream_order: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <class Launch>
double median_gbps(Launch launch, double bytes) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  std::vector<float> ms;
  for (int r = 0; r < 22; ++r) {
    check(cudaEventRecord(a), "record");
    launch();
    check(cudaEventRecord(b), "record");
    check(cudaEventSynchronize(b), "sync");
    float t = 0;
    check(cudaEventElapsedTime(&t, a, b), "elapsed");
    if (r > 0) ms.push_back(t);  // the first run warms the code
  }
  check(cudaGetLastError(), "launch");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return bytes / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "device");
  // The 1-token gate/up's shape: one 16-warp block an SM, 64 KiB a warp (its 16 rows x 7168
  // columns are 56 KiB of words): 132 x 16 x 64 KiB = 132 MiB, past any L2.
  const int blocks = prop.multiProcessorCount, threads = 512, warps = blocks * threads / 32, steps = 64;
  const long long n = static_cast<long long>(warps) * steps * kChunk;  // uint4s
  const double bytes = 16.0 * n;
  uint4* src = nullptr;
  unsigned* out = nullptr;
  check(cudaMalloc(&src, 16 * n), "alloc");
  check(cudaMalloc(&out, 4ull * blocks * 1024), "alloc");
  check(cudaMemset(src, 0x5a, 16 * n), "memset");
  std::printf("%s: %d SMs, %d warps, %.1f MiB read a run (1 KiB chunks, D in flight a warp)\n", prop.name, blocks, warps, bytes / 1048576);
  std::printf("%-14s %10s %10s %10s\n", "order", "D 2", "D 4", "D 8");
  auto row = [&](const char* name, auto l2, auto l4, auto l8) {
    std::printf("%-14s %7.0f GB/s %5.0f GB/s %5.0f GB/s\n", name, median_gbps(l2, bytes), median_gbps(l4, bytes), median_gbps(l8, bytes));
  };
  row("strip", [&] { stream_chunks<0, 2><<<blocks, threads>>>(src, steps, out); },
      [&] { stream_chunks<0, 4><<<blocks, threads>>>(src, steps, out); },
      [&] { stream_chunks<0, 8><<<blocks, threads>>>(src, steps, out); });
  row("interleaved", [&] { stream_chunks<1, 2><<<blocks, threads>>>(src, steps, out); },
      [&] { stream_chunks<1, 4><<<blocks, threads>>>(src, steps, out); },
      [&] { stream_chunks<1, 8><<<blocks, threads>>>(src, steps, out); });
  row("linear", [&] { stream_linear<2><<<blocks, threads>>>(src, n, out); },
      [&] { stream_linear<4><<<blocks, threads>>>(src, n, out); },
      [&] { stream_linear<8><<<blocks, threads>>>(src, n, out); });
  // The copy engine's ring: 64 KiB a warp in C-byte pieces, R pieces in flight a warp.
  auto bulk = [&](auto kernel, int c_uint4s, int r) {
    const int smem = 16 * r * c_uint4s * 16;
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem attribute");
    const int bsteps = steps * kChunk / c_uint4s;
    return [=] { kernel<<<blocks, threads, smem>>>(src, bsteps, out); };
  };
  row("bulk 1K R2/4/8", bulk(stream_bulk<64, 2>, 64, 2), bulk(stream_bulk<64, 4>, 64, 4), bulk(stream_bulk<64, 8>, 64, 8));
  row("bulk 2K R2/4/6", bulk(stream_bulk<128, 2>, 128, 2), bulk(stream_bulk<128, 4>, 128, 4), bulk(stream_bulk<128, 6>, 128, 6));
  row("bulk 4K R1/2/3", bulk(stream_bulk<256, 1>, 256, 1), bulk(stream_bulk<256, 2>, 256, 2), bulk(stream_bulk<256, 3>, 256, 3));
  // A gate/up step is 2304 bytes: 28 steps a warp read 63 KiB, the buffer's 64 KiB a warp.
  const int msteps = 28;
  const double mbytes = 2304.0 * warps * msteps;
  auto moe_row = [&](const char* name, auto l1, auto l2, auto l4) {
    std::printf("%-14s %7.0f GB/s %5.0f GB/s %5.0f GB/s  (D 1 / 2 / 4)\n", name, median_gbps(l1, mbytes), median_gbps(l2, mbytes),
                median_gbps(l4, mbytes));
  };
  moe_row("moe 4 strips", [&] { stream_moe<0, 1><<<blocks, threads>>>(src, msteps, warps, out); },
          [&] { stream_moe<0, 2><<<blocks, threads>>>(src, msteps, warps, out); },
          [&] { stream_moe<0, 4><<<blocks, threads>>>(src, msteps, warps, out); });
  moe_row("moe 2 strips", [&] { stream_moe<2, 1><<<blocks, threads>>>(src, msteps, warps, out); },
          [&] { stream_moe<2, 2><<<blocks, threads>>>(src, msteps, warps, out); },
          [&] { stream_moe<2, 4><<<blocks, threads>>>(src, msteps, warps, out); });
  moe_row("moe 1 strip", [&] { stream_moe<1, 1><<<blocks, threads>>>(src, msteps, warps, out); },
          [&] { stream_moe<1, 2><<<blocks, threads>>>(src, msteps, warps, out); },
          [&] { stream_moe<1, 4><<<blocks, threads>>>(src, msteps, warps, out); });
  cudaFree(src);
  cudaFree(out);
  return 0;
}
