// Every kernel template against the CPU reference ops (runtime/cpu), one op at a time, on the
// GPU: odd and aligned widths, f32 and bf16 storage, tile edges, strided views, tree masks,
// clamped indices. Skips where there is no GPU (CI); run on the device machine with
//   codegen_tests --gtest_filter='GpuOps*'
// Tolerances: f32 storage 1e-4 relative to the output's largest magnitude (only summation
// order differs), bf16 storage 1e-2.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "compiler/codegen/compile_kernels.h"
#include "compiler/passes/lower_to_launches.h"
#include "compiler/driver/compile.h"
#include "launch_emulator.h"
#include "compiler/codegen/launch_geometry.h"
#include "compiler/codegen/model_kernels.h"
#include "compiler/codegen/rope_args.h"
#include "compiler/frontend/int4_pack.h"
#include "ir/support/dtype.h"
#include "ir/support/int4_frag.h"
#include "runtime/cpu/basic_ops.h"
#include "runtime/cpu/dflash_attention.h"
#include "runtime/cpu/mla_attention.h"
#include "runtime/cpu/moe.h"
#include "runtime/cpu/rope.h"
#include "runtime/gpu/cuda_driver.h"
#include "runtime/gpu/launch_resolve.h"
#include "tests/unit/codegen/codegen_test_util.h"

namespace kplan::codegen {
namespace {

using gpu::CudaDriver;
using testing_util::relative_error;

// ---------------------------------------------------------------------------------------------
// A tiny harness: one context, device buffers, kernels compiled for this GPU's arch and launched
// with the geometry launch_dims() gives.

struct DevBuf {
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
};

class Gpu {
 public:
  static Gpu* get() {
    static std::string why;
    static std::unique_ptr<Gpu> gpu = [] {
      const CudaDriver* cu = gpu::cuda_driver(&why);
      if (!cu) return std::unique_ptr<Gpu>();
      int count = 0;
      if (cu->cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
        why = "no GPU: no CUDA device";
        return std::unique_ptr<Gpu>();
      }
      return std::unique_ptr<Gpu>(new Gpu(*cu));
    }();
    if (!gpu) std::fprintf(stderr, "%s\n", why.c_str());
    return gpu.get();
  }

  DevBuf alloc(size_t bytes) {
    DevBuf b;
    b.bytes = std::max<size_t>(bytes, 4);
    gpu::cuda_check(cu_, cu_.cuMemAlloc(&b.ptr, b.bytes), "cuMemAlloc");
    gpu::cuda_check(cu_, cu_.cuMemsetD8Async(b.ptr, 0, b.bytes, nullptr), "cuMemset");
    owned_.push_back(b.ptr);
    return b;
  }
  DevBuf upload(const void* data, size_t bytes) {
    DevBuf b = alloc(bytes);
    gpu::cuda_check(cu_, cu_.cuMemcpyHtoD(b.ptr, data, bytes), "cuMemcpyHtoD");
    return b;
  }
  void copy_to(CUdeviceptr dst, const void* src, size_t bytes) {
    gpu::cuda_check(cu_, cu_.cuMemcpyHtoD(dst, src, bytes), "cuMemcpyHtoD");
  }
  template <typename T>
  DevBuf upload(const std::vector<T>& v) { return upload(v.data(), v.size() * sizeof(T)); }
  // f32 values stored as `t` (bf16: rounded to nearest even).
  DevBuf upload_as(const std::vector<float>& v, ElemType t) {
    if (t == ElemType::F32) return upload(v);
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i) bits[i] = float_to_bf16(v[i]);
    return upload(bits);
  }
  template <typename T>
  std::vector<T> download(const DevBuf& b, size_t n) {
    sync();
    std::vector<T> out(n);
    gpu::cuda_check(cu_, cu_.cuMemcpyDtoH(out.data(), b.ptr, n * sizeof(T)), "cuMemcpyDtoH");
    return out;
  }
  std::vector<float> download_as(const DevBuf& b, size_t n, ElemType t) {
    if (t == ElemType::F32) return download<float>(b, n);
    std::vector<float> out(n);
    const std::vector<uint16_t> bits = download<uint16_t>(b, n);
    for (size_t i = 0; i < n; ++i) out[i] = bf16_to_float(bits[i]);
    return out;
  }

  struct Arg {
    ArgKind kind;
    uint64_t u = 0;
    int32_t i = 0;
    float f = 0;
  };
  static Arg ptr(const DevBuf& b, size_t byte_offset = 0) { return {ArgKind::DevicePtr, b.ptr + byte_offset}; }
  static Arg null() { return {ArgKind::DevicePtr, 0}; }
  static Arg i32(int64_t v) { return {ArgKind::I32, 0, static_cast<int32_t>(v)}; }
  static Arg f32(float v) { return {ArgKind::F32, 0, 0, v}; }

  void launch(const KernelSource& k, int64_t rows, const std::vector<Arg>& args, int64_t batch = 1) {
    ASSERT_EQ(args.size(), k.signature.size()) << k.id;
    std::vector<void*> params;
    for (size_t a = 0; a < args.size(); ++a) {
      ASSERT_EQ(args[a].kind, k.signature[a].kind) << k.id << " argument " << k.signature[a].name;
      const Arg& arg = args[a];
      params.push_back(arg.kind == ArgKind::DevicePtr ? const_cast<uint64_t*>(&arg.u)
                       : arg.kind == ArgKind::I32   ? static_cast<void*>(const_cast<int32_t*>(&arg.i))
                                                    : static_cast<void*>(const_cast<float*>(&arg.f)));
    }
    const LaunchDims d = launch_dims(k, rows, batch);
    gpu::cuda_check(cu_, launch_raw(function(k, d.smem_bytes), d.grid, d.block, d.smem_bytes, d.cluster, params), "launch " + k.id);
    if (sync_each_) sync();
  }

  // Microseconds `launches` take on the device (its launches do not sync the host in between).
  float time_us(const std::function<void()>& launches) {
    CUevent start, stop;
    gpu::cuda_check(cu_, cu_.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
    gpu::cuda_check(cu_, cu_.cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
    sync_each_ = false;
    gpu::cuda_check(cu_, cu_.cuEventRecord(start, nullptr), "cuEventRecord");
    launches();
    gpu::cuda_check(cu_, cu_.cuEventRecord(stop, nullptr), "cuEventRecord");
    sync_each_ = true;
    gpu::cuda_check(cu_, cu_.cuEventSynchronize(stop), "cuEventSynchronize");
    float ms = 0;
    gpu::cuda_check(cu_, cu_.cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
    cu_.cuEventDestroy(start);
    cu_.cuEventDestroy(stop);
    return 1000.f * ms;
  }
  const std::string& arch() const { return arch_; }

  // Registers per thread and resident blocks per SM of an instance at its launch's block and
  // shared memory: how many waves a grid takes (the sweeps print it next to each time).
  struct Occupancy {
    int regs = 0, blocks_per_sm = 0, sms = 0;
  };
  Occupancy occupancy(const KernelSource& k, int64_t rows, int64_t batch = 1) {
    const LaunchDims d = launch_dims(k, rows, batch);
    const CUfunction f = function(k, d.smem_bytes);
    Occupancy o;
    gpu::cuda_check(cu_, cu_.cuFuncGetAttribute(&o.regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f), "cuFuncGetAttribute");
    gpu::cuda_check(cu_, cu_.cuOccupancyMaxActiveBlocksPerMultiprocessor(&o.blocks_per_sm, f, static_cast<int>(d.block[0] * d.block[1] * d.block[2]),
                                                                          d.smem_bytes),
                    "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    CUdevice dev;
    gpu::cuda_check(cu_, cu_.cuDeviceGet(&dev, 0), "cuDeviceGet");
    cu_.cuDeviceGetAttribute(&o.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    return o;
  }

  void sync() { gpu::cuda_check(cu_, cu_.cuCtxSynchronize(), "kernel execution"); }
  // Compiles and loads many instances at once (NVRTC on every core), for sweeps.
  void precompile(const std::vector<KernelSource>& kernels) {
    std::vector<KernelSource> todo;
    for (const KernelSource& k : kernels)
      if (!functions_.count(k.id)) todo.push_back(k);
    if (todo.empty()) return;
    CompileOptions o;
    o.archs = {arch_};
    o.threads = std::max(2u, std::thread::hardware_concurrency());
    o.progress = [](const std::string&) {};
    const std::vector<KernelInstance> inst = compile_kernels(todo, o);
    for (size_t i = 0; i < todo.size(); ++i) {
      CUmodule module;
      gpu::cuda_check(cu_, cu_.cuModuleLoadData(&module, inst[i].cubin.data()), "load " + todo[i].id);
      CUfunction f;
      gpu::cuda_check(cu_, cu_.cuModuleGetFunction(&f, module, todo[i].entry.c_str()), "entry " + todo[i].entry);
      functions_[todo[i].id] = f;
    }
  }

  // Milliseconds per launch over `reps` back-to-back launches (CUDA events), after one warm-up.
  double time_ms(const KernelSource& k, int64_t rows, const std::vector<Arg>& args, int reps, int64_t batch = 1) {
    launch(k, rows, args, batch);
    std::vector<void*> params;
    for (const Arg& arg : args)
      params.push_back(arg.kind == ArgKind::DevicePtr ? const_cast<uint64_t*>(&arg.u)
                       : arg.kind == ArgKind::I32   ? static_cast<void*>(const_cast<int32_t*>(&arg.i))
                                                    : static_cast<void*>(const_cast<float*>(&arg.f)));
    const LaunchDims d = launch_dims(k, rows, batch);
    CUevent e0, e1;
    gpu::cuda_check(cu_, cu_.cuEventCreate(&e0, 0), "cuEventCreate");
    gpu::cuda_check(cu_, cu_.cuEventCreate(&e1, 0), "cuEventCreate");
    gpu::cuda_check(cu_, cu_.cuEventRecord(e0, nullptr), "cuEventRecord");
    for (int r = 0; r < reps; ++r)
      gpu::cuda_check(cu_, launch_raw(function(k, d.smem_bytes), d.grid, d.block, d.smem_bytes, d.cluster, params), "launch " + k.id);
    gpu::cuda_check(cu_, cu_.cuEventRecord(e1, nullptr), "cuEventRecord");
    gpu::cuda_check(cu_, cu_.cuEventSynchronize(e1), "cuEventSynchronize");
    float ms = 0;
    gpu::cuda_check(cu_, cu_.cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
    cu_.cuEventDestroy(e0);
    cu_.cuEventDestroy(e1);
    return ms / reps;
  }

  // One launch of a lowered plan; `address` resolves its pointer arguments.
  void launch_planned(const KernelSource& k, const plan::Launch& l, const std::function<uint64_t(const plan::LaunchArg&)>& address) {
    std::vector<uint64_t> storage(l.args.size());
    std::vector<void*> params;
    for (size_t a = 0; a < l.args.size(); ++a) {
      const plan::LaunchArg& arg = l.args[a];
      switch (arg.kind) {
        case plan::ArgKind::I32: { const int32_t v = static_cast<int32_t>(arg.ival); std::memcpy(&storage[a], &v, 4); break; }
        case plan::ArgKind::I64: { const int64_t v = arg.ival; std::memcpy(&storage[a], &v, 8); break; }
        case plan::ArgKind::F32: std::memcpy(&storage[a], &arg.fval, 4); break;
        case plan::ArgKind::TensorMap: ADD_FAILURE() << "tensor maps need runtime/gpu/launch_resolve"; break;
        default: storage[a] = address(arg);
      }
      params.push_back(&storage[a]);
    }
    gpu::cuda_check(cu_, launch_raw(function(k, l.smem_bytes), l.grid, l.block, l.smem_bytes, l.cluster, params), "launch " + k.id);
    sync();
  }

 private:
  // As the runtime launches (cuLaunchKernelEx with the cluster attribute when there is one).
  CUresult launch_raw(CUfunction fn, const std::array<uint32_t, 3>& grid, const std::array<uint32_t, 3>& block, uint32_t smem,
                 const std::array<uint32_t, 3>& cluster, std::vector<void*>& params) {
    gpu::ResolvedLaunch l;
    l.grid = grid;
    l.block = block;
    l.cluster = cluster;
    l.smem_bytes = smem;
    l.params = params;
    return gpu::launch_resolved(cu_, fn, l, nullptr);
  }

  explicit Gpu(const CudaDriver& cu) : cu_(cu) {
    CUdevice dev;
    gpu::cuda_check(cu_, cu_.cuDeviceGet(&dev, 0), "cuDeviceGet");
    int major = 0, minor = 0;
    cu_.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    cu_.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    arch_ = "sm_" + std::to_string(major * 10 + minor);
    CUcontext ctx;
    gpu::cuda_check(cu_, cu_.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    gpu::cuda_check(cu_, cu_.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  }

  // The loaded instance, opted in to `smem_bytes` of dynamic shared memory past the default 48 KiB
  // (as runtime/gpu/gpu_model.cc does for a plan's launches).
  // Opts in once per instance and size (not on every launch: time_ms launches in a timed loop).
  CUfunction function(const KernelSource& k, uint32_t smem_bytes) {
    const CUfunction f = function(k);
    uint32_t& opted = smem_opted_in_[k.id];
    if (smem_bytes > opted) {  // static shared memory counts against the 48 KiB default too
      gpu::cuda_check(cu_, cu_.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(smem_bytes)),
                      k.id + ": " + std::to_string(smem_bytes) + " bytes of shared memory");
      opted = smem_bytes;
    }
    return f;
  }
  CUfunction function(const KernelSource& k) {
    auto it = functions_.find(k.id);
    if (it != functions_.end()) return it->second;
    CompileOptions o;
    o.archs = {arch_};
    o.progress = [](const std::string&) {};
    const std::vector<KernelInstance> inst = compile_kernels({k}, o);
    CUmodule module;
    gpu::cuda_check(cu_, cu_.cuModuleLoadData(&module, inst[0].cubin.data()), "load " + k.id);
    CUfunction f;
    gpu::cuda_check(cu_, cu_.cuModuleGetFunction(&f, module, k.entry.c_str()), "entry " + k.entry);
    functions_[k.id] = f;
    return f;
  }

  const CudaDriver& cu_;
  std::string arch_;
  bool sync_each_ = true;
  std::map<std::string, CUfunction> functions_;
  std::map<std::string, uint32_t> smem_opted_in_;  // dynamic shared memory each instance may use
  std::vector<CUdeviceptr> owned_;  // freed with the process: a test binary
};

#define REQUIRE_GPU()                                     \
  Gpu* gpu = Gpu::get();                                  \
  if (!gpu) GTEST_SKIP() << "no GPU on this machine";

// Deterministic values in [-scale, scale), rounded to bf16 when `bf16` (weights, and inputs
// the GPU stores as bf16), so the CPU oracle sees exactly what the GPU reads.
std::vector<float> random_values(size_t n, uint64_t seed, float scale = 1.f, bool bf16 = false) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = (static_cast<float>((s >> 40) & 0xffffff) / 16777216.f * 2.f - 1.f) * scale;
    if (bf16) x = bf16_to_float(float_to_bf16(x));
  }
  return v;
}

std::vector<uint16_t> to_bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = float_to_bf16(v[i]);
  return bits;
}

Matrix matrix(int64_t rows, int64_t cols, std::vector<float> data) {
  Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.data = std::move(data);
  return m;
}

double tolerance(ElemType storage) { return storage == ElemType::F32 ? 1e-4 : 1e-2; }

const ElemType F32 = ElemType::F32, BF16 = ElemType::BF16;

// ---------------------------------------------------------------------------------------------

TEST(GpuOps, EmbeddingClampsIds) {
  REQUIRE_GPU();
  for (auto [hidden, out_t] : {std::pair<int64_t, ElemType>{24, F32}, {64, BF16}}) {
    const int64_t vocab = 50;
    const std::vector<float> table = random_values(vocab * hidden, 1, 1.f, true);
    const std::vector<int32_t> ids = {3, 0, 49, -5, 77};
    DevBuf d_table = gpu->upload(to_bf16_bits(table)), d_ids = gpu->upload(ids);
    DevBuf d_out = gpu->alloc(ids.size() * hidden * 4);
    const KernelSource k = embedding_kernel(hidden, out_t);
    gpu->launch(k, ids.size(), {Gpu::ptr(d_ids), Gpu::ptr(d_table), Gpu::ptr(d_out), Gpu::i32(ids.size()), Gpu::i32(vocab)});
    const std::vector<float> got = gpu->download_as(d_out, ids.size() * hidden, out_t);
    for (size_t t = 0; t < ids.size(); ++t) {
      const int64_t id = std::clamp<int64_t>(ids[t], 0, vocab - 1);
      for (int64_t j = 0; j < hidden; ++j) ASSERT_EQ(got[t * hidden + j], table[id * hidden + j]) << k.id << " t=" << t;
    }
  }
}

// The gather in the first norm's launch (embedding_norm.cuh) gives bit for bit the two launches'
// rows and norm: K2.6's width (bf16 rows, 448 threads) and odd ones, clamped ids.
TEST(GpuOps, EmbeddingNormIsTheGatherThenTheNorm) {
  REQUIRE_GPU();
  for (auto [hidden, t] : {std::pair<int64_t, ElemType>{7168, BF16}, {333, F32}, {64, BF16}}) {
    const int64_t vocab = 50;
    const std::vector<float> table = random_values(vocab * hidden, 1, 1.f, true), w = random_values(hidden, 2, 1.f, true);
    const std::vector<int32_t> ids = {3, 0, 49, -5, 77};
    const int64_t n = static_cast<int64_t>(ids.size());
    DevBuf d_table = gpu->upload(to_bf16_bits(table)), d_ids = gpu->upload(ids), d_w = gpu->upload(to_bf16_bits(w));
    DevBuf rows = gpu->alloc(n * hidden * 4), y = gpu->alloc(n * hidden * 4), rows2 = gpu->alloc(n * hidden * 4), y2 = gpu->alloc(n * hidden * 4);
    const KernelSource fused = embedding_norm_kernel(hidden, t, t);
    gpu->launch(fused, n, {Gpu::ptr(d_ids), Gpu::ptr(d_table), Gpu::ptr(rows), Gpu::ptr(d_w), Gpu::ptr(y), Gpu::i32(n), Gpu::i32(vocab), Gpu::f32(1e-5f)});
    gpu->launch(embedding_kernel(hidden, t), n, {Gpu::ptr(d_ids), Gpu::ptr(d_table), Gpu::ptr(rows2), Gpu::i32(n), Gpu::i32(vocab)});
    gpu->launch(rms_norm_kernel(hidden, t, t), n,
                {Gpu::ptr(rows2), Gpu::ptr(d_w), Gpu::ptr(y2), Gpu::i32(n), Gpu::i32(hidden), Gpu::i32(hidden), Gpu::f32(1e-5f)});
    EXPECT_EQ(gpu->download_as(rows, n * hidden, t), gpu->download_as(rows2, n * hidden, t)) << fused.id << ": the gathered rows";
    EXPECT_EQ(gpu->download_as(y, n * hidden, t), gpu->download_as(y2, n * hidden, t)) << fused.id << ": the norm";
  }
}

// The add in its norm's launch (add_norm.cuh) gives bit for bit the add's launch and the norm's:
// K2.6's first add (bf16 rows into the f32 residual stream, bf16 normalised rows) and odd widths.
TEST(GpuOps, AddNormIsTheAddThenTheNorm) {
  REQUIRE_GPU();
  struct Case {
    int64_t hidden;
    ElemType in, sum, y;
  };
  for (const Case c : {Case{7168, BF16, F32, BF16}, Case{333, F32, F32, F32}, Case{64, BF16, BF16, BF16}}) {
    const int64_t n = 5, h = c.hidden;
    const std::vector<float> av = random_values(n * h, 1, 2.f, c.in == BF16), bv = random_values(n * h, 2, 2.f, c.in == BF16),
                             w = random_values(h, 3, 1.f, true);
    DevBuf a = gpu->upload_as(av, c.in), b = gpu->upload_as(bv, c.in), d_w = gpu->upload(to_bf16_bits(w));
    DevBuf sum = gpu->alloc(n * h * 4), y = gpu->alloc(n * h * 4), sum2 = gpu->alloc(n * h * 4), y2 = gpu->alloc(n * h * 4);
    const KernelSource fused = add_norm_kernel(h, c.in, c.in, c.sum, c.y);
    gpu->launch(fused, n, {Gpu::ptr(a), Gpu::ptr(b), Gpu::ptr(d_w), Gpu::ptr(sum), Gpu::ptr(y), Gpu::i32(n), Gpu::f32(1e-6f)});
    gpu->launch(add_kernel(h, c.in, c.in, c.sum), n, {Gpu::ptr(a), Gpu::ptr(b), Gpu::ptr(sum2), Gpu::i32(n)});
    gpu->launch(rms_norm_kernel(h, c.sum, c.y), n,
                {Gpu::ptr(sum2), Gpu::ptr(d_w), Gpu::ptr(y2), Gpu::i32(n), Gpu::i32(h), Gpu::i32(h), Gpu::f32(1e-6f)});
    EXPECT_EQ(gpu->download_as(sum, n * h, c.sum), gpu->download_as(sum2, n * h, c.sum)) << fused.id << ": the sums";
    EXPECT_EQ(gpu->download_as(y, n * h, c.y), gpu->download_as(y2, n * h, c.y)) << fused.id << ": the norm";
  }
}

TEST(GpuOps, RmsNormStridedRows) {
  REQUIRE_GPU();
  for (auto [d, out_t] : {std::pair<int64_t, ElemType>{333, F32}, {256, BF16}, {64, F32}}) {
    const int64_t rows = 5, x_stride = d + 7, y_stride = d;
    const std::vector<float> x = random_values(rows * x_stride, 2, 3.f), w = random_values(d, 3, 1.f, true);
    DevBuf d_x = gpu->upload(x), d_w = gpu->upload(to_bf16_bits(w)), d_y = gpu->alloc(rows * y_stride * 4);
    const KernelSource k = rms_norm_kernel(d, F32, out_t);
    gpu->launch(k, rows, {Gpu::ptr(d_x), Gpu::ptr(d_w), Gpu::ptr(d_y), Gpu::i32(rows), Gpu::i32(x_stride), Gpu::i32(y_stride), Gpu::f32(1e-6f)});
    std::vector<float> want(rows * d);
    for (int64_t r = 0; r < rows; ++r) cpu::rms_norm_row(x.data() + r * x_stride, d, w.data(), 1e-6f, want.data() + r * d);
    EXPECT_LT(relative_error(gpu->download_as(d_y, rows * d, out_t), want), tolerance(out_t)) << k.id;
  }
}

struct MatmulCase {
  int64_t k, n, tokens;
  ElemType x_t;
  bool acc;
};

TEST(GpuOps, MatmulTokenTilesOddWidthsAccumulate) {
  REQUIRE_GPU();
  // Beyond the small shapes: split-K (K 4096 / 2056 at N 40 / 37, with ACC), 4 rows per warp
  // (N 17000), K not a multiple of 8 (the scalar path), bf16 x, 1 / 7 / 17 / 64 tokens.
  for (const MatmulCase& c : {MatmulCase{256, 1030, 17, F32, false}, MatmulCase{333, 20, 3, F32, true},
                              MatmulCase{64, 48, 1, BF16, false}, MatmulCase{96, 8, 8, F32, true},
                              MatmulCase{4096, 40, 64, F32, true}, MatmulCase{2056, 37, 7, BF16, false},
                              MatmulCase{264, 17000, 17, F32, true}, MatmulCase{7168, 576, 1, F32, false},
                              MatmulCase{1000, 33, 64, BF16, true}}) {
    const std::vector<float> x = random_values(c.tokens * c.k, 4, 1.f, c.x_t == BF16);
    const std::vector<float> w = random_values(c.n * c.k, 5, 0.2f, true);
    const std::vector<float> y0 = random_values(c.tokens * c.n, 6);
    std::vector<float> want(c.tokens * c.n);
    for (int64_t t = 0; t < c.tokens; ++t) cpu::matvec(x.data() + t * c.k, w.data(), c.n, c.k, want.data() + t * c.n);
    if (c.acc) for (size_t i = 0; i < want.size(); ++i) want[i] += y0[i];
    // The CUDA-core stream and the tensor-core instances (tiles of 16 and 64 tokens: any step
    // size runs on them, padded tokens dropped) where K allows them.
    std::vector<KernelSource> kernels = {matmul_kernel(c.k, c.n, c.x_t, F32, false, c.acc, gpu->arch())};
    if (c.k % 8 == 0)
      for (int64_t tile : {16, 64}) kernels.push_back(matmul_kernel(c.k, c.n, c.x_t, F32, false, c.acc, gpu->arch(), tile));
    for (const KernelSource& k : kernels) {
      DevBuf d_x = gpu->upload_as(x, c.x_t), d_w = gpu->upload(to_bf16_bits(w)), d_y = gpu->upload(y0);
      gpu->launch(k, c.tokens, {Gpu::ptr(d_x), Gpu::ptr(d_w), Gpu::ptr(d_y), Gpu::ptr(d_y), Gpu::i32(c.tokens), Gpu::i32(c.k), Gpu::i32(0),
                                Gpu::i32(c.n), Gpu::i32(0), Gpu::i32(0), Gpu::null(), Gpu::null(), Gpu::f32(0), Gpu::null()});
      EXPECT_LT(relative_error(gpu->download<float>(d_y, want.size()), want), 1e-4) << k.id;
    }
  }
}

// Sibling matmuls (kernels_templates/matmul_siblings.cuh) against the CPU op for each sibling:
// two and three siblings, row blocks straddling their boundaries (odd N), K not a multiple of 8,
// bf16 x, the 1-, 2- and 8-token instances at 1, 5 and 11 tokens; K2.6's q_a + kv_a and router +
// shared gate + up shapes at 1 token; the rows-as-M tensor-core tiles (rows_m: MMA 2, token tiles
// of 8 and 16) at 5, 8 and 13 tokens.
TEST(GpuOps, MatmulSiblingsMatchTheCpuOpPerSibling) {
  REQUIRE_GPU();
  struct Case { int64_t k, n, n2, n3, tokens, tile; ElemType x_t; int64_t rows_m = 0; };
  for (const Case& c : {Case{256, 37, 21, 0, 1, 1, F32}, Case{264, 40, 17, 9, 5, 2, F32}, Case{333, 13, 29, 0, 11, 0, BF16},
                        Case{7168, 1536, 576, 0, 1, 1, F32}, Case{7168, 384, 2048, 2048, 1, 1, F32}, Case{264, 40, 17, 9, 5, 0, F32, 8},
                        Case{336, 13, 29, 0, 13, 0, BF16, 16}, Case{7168, 1536, 576, 0, 8, 0, F32, 8}}) {
    const std::vector<float> x = random_values(c.tokens * c.k, 31, 1.f, c.x_t == BF16);
    const int64_t rows[3] = {c.n, c.n2, c.n3};
    std::vector<std::vector<float>> w, want;
    std::vector<DevBuf> d_w, d_y;
    for (int s = 0; s < 3; ++s) {
      const int64_t n = std::max<int64_t>(rows[s], 1);  // an unused third: one row, never written
      w.push_back(random_values(n * c.k, 32 + s, 0.2f, true));
      want.emplace_back(c.tokens * n);
      for (int64_t t = 0; t < c.tokens; ++t) cpu::matvec(x.data() + t * c.k, w[s].data(), n, c.k, want[s].data() + t * n);
      d_w.push_back(gpu->upload(to_bf16_bits(w[s])));
      d_y.push_back(gpu->upload(std::vector<float>(c.tokens * n, std::nanf(""))));
    }
    const KernelSource k = matmul_siblings_kernel(c.k, c.n, c.n2, c.n3, c.x_t, F32, gpu->arch(), c.tile, false, 0, c.rows_m);
    DevBuf d_x = gpu->upload_as(x, c.x_t);
    gpu->launch(k, c.tokens, {Gpu::ptr(d_x), Gpu::ptr(d_w[0]), Gpu::ptr(d_w[1]), Gpu::ptr(d_w[2]), Gpu::ptr(d_y[0]), Gpu::ptr(d_y[1]),
                              Gpu::ptr(d_y[2]), Gpu::i32(c.tokens), Gpu::i32(c.k), Gpu::i32(c.n), Gpu::i32(c.n2), Gpu::i32(c.n3), Gpu::null(), Gpu::null(), Gpu::f32(0), Gpu::null(), Gpu::null(), Gpu::null(), Gpu::null(), Gpu::f32(1)});
    for (int s = 0; s < 3; ++s) {
      if (rows[s] == 0) {
        for (float v : gpu->download<float>(d_y[s], want[s].size())) EXPECT_TRUE(std::isnan(v)) << k.id << ": an absent third written";
        continue;
      }
      EXPECT_LT(relative_error(gpu->download<float>(d_y[s], want[s].size()), want[s]), 1e-4) << k.id << " sibling " << s;
    }
  }
}

// GLU 1 (a gate and up pair's SwiGLU in the siblings' launch): y2 = silu(x Wg^T) * (x Wu^T)
// against the CPU ops, the plain sibling into y, y3 never written; a dense MLP's pair alone
// (N 0), a MoE layer's router beside its shared expert (K2.6 widths), odd widths at 2 rows a
// warp, bf16 outputs; the rows-as-M tensor-core tiles (rows_m) the same; an f32 plain sibling
// beside a bf16 pair (first_f32, YA_F32: a router's logits with bf16 activations).
TEST(GpuOps, MatmulSiblingsGluMatchesTheCpuOps) {
  REQUIRE_GPU();
  struct Case { int64_t k, n, m, tokens, tile; ElemType y_t; int64_t rows_m = 0; bool first_f32 = false; };
  for (const Case& c : {Case{256, 0, 37, 1, 1, F32}, Case{264, 40, 17, 5, 2, F32}, Case{336, 12, 29, 11, 0, BF16},
                        Case{7168, 384, 2048, 1, 1, F32}, Case{7168, 384, 2048, 8, 2, F32}, Case{7168, 0, 18432, 1, 1, F32},
                        Case{336, 12, 29, 11, 0, BF16, 16}, Case{7168, 384, 2048, 8, 0, F32, 8}, Case{7168, 0, 18432, 13, 0, F32, 16},
                        Case{7168, 384, 2048, 1, 1, BF16, 0, true}, Case{7168, 384, 2048, 5, 2, BF16, 0, true},
                        Case{7168, 384, 2048, 11, 0, BF16, 16, true}}) {
    const std::vector<float> x = random_values(c.tokens * c.k, 41);
    const int64_t n = std::max<int64_t>(c.n, 1);
    const std::vector<float> w = random_values(n * c.k, 42, 0.2f, true), wg = random_values(c.m * c.k, 43, 0.2f, true),
                             wu = random_values(c.m * c.k, 44, 0.2f, true);
    std::vector<float> plain(c.tokens * n), gate(c.tokens * c.m), up(c.tokens * c.m), want(c.tokens * c.m);
    for (int64_t t = 0; t < c.tokens; ++t) {
      cpu::matvec(x.data() + t * c.k, w.data(), n, c.k, plain.data() + t * n);
      cpu::matvec(x.data() + t * c.k, wg.data(), c.m, c.k, gate.data() + t * c.m);
      cpu::matvec(x.data() + t * c.k, wu.data(), c.m, c.k, up.data() + t * c.m);
    }
    for (size_t i = 0; i < want.size(); ++i) want[i] = gate[i] / (1.f + std::exp(-gate[i])) * up[i];
    const size_t esize = c.y_t == BF16 ? 2 : 4;
    const std::vector<uint8_t> nan_bytes(std::max(c.tokens * n, c.tokens * c.m) * esize, 0xff);  // NaN in f32 and bf16
    DevBuf d_x = gpu->upload(x), d_w = gpu->upload(to_bf16_bits(w)), d_wg = gpu->upload(to_bf16_bits(wg)), d_wu = gpu->upload(to_bf16_bits(wu));
    DevBuf d_y = gpu->upload(nan_bytes), d_y2 = gpu->upload(nan_bytes), d_y3 = gpu->upload(nan_bytes);
    const KernelSource k = matmul_siblings_kernel(c.k, c.n, c.m, c.m, F32, c.y_t, gpu->arch(), c.tile, /*glu=*/true, 0, c.rows_m, c.first_f32);
    gpu->launch(k, c.tokens, {Gpu::ptr(d_x), Gpu::ptr(d_w), Gpu::ptr(d_wg), Gpu::ptr(d_wu), Gpu::ptr(d_y), Gpu::ptr(d_y2), Gpu::ptr(d_y3),
                              Gpu::i32(c.tokens), Gpu::i32(c.k), Gpu::i32(c.n), Gpu::i32(c.m), Gpu::i32(c.m), Gpu::null(), Gpu::null(), Gpu::f32(0), Gpu::null(), Gpu::null(), Gpu::null(), Gpu::null(), Gpu::f32(1)});
    const double tol = c.y_t == BF16 ? 1e-2 : 1e-4;
    EXPECT_LT(relative_error(gpu->download_as(d_y2, want.size(), c.y_t), want), tol) << k.id << " swiglu";
    if (c.n > 0) {
      const ElemType plain_t = c.first_f32 ? F32 : c.y_t;
      EXPECT_LT(relative_error(gpu->download_as(d_y, plain.size(), plain_t), plain), plain_t == BF16 ? 1e-2 : 1e-4) << k.id << " plain sibling";
    }
    for (uint8_t b : gpu->download<uint8_t>(d_y3, nan_bytes.size())) ASSERT_EQ(b, 0xff) << k.id << ": the up rows written";
  }
}

// The fused RMSNorm (NORM 1 / 2, compiler/passes/norm_matmuls.h): y = rms_norm(x, g) W^T against
// the CPU ops, for kp::matmul (q_b after q_a's norm: K 1536, bf16 x; lm_head-like K 7168 rows;
// 1-, 2- and 8-token instances at 1, 5 and 11 tokens) and kp::matmul_siblings (q_a + kv_a after
// the layer norm; a router beside its shared expert's GLU pair, NORM 2: the routed experts read
// the norm's rows, checked too, written once in x's dtype).
// NORM 3 (norm_matmuls.h's exact fold, q_a's norm in q_b at K2.6 width): the norm launch's bf16 rows
// then the unfused matmul, against the one launch, bit for bit, wherever the instance's block is
// the norm launch's (the plan folds only there; the 1-token instance must be).
TEST(GpuOps, ExactNormMatmulIsTheNormLaunchThenTheMatmul) {
  REQUIRE_GPU();
  const float eps = 1e-6f;
  struct Case { int64_t k, n, tokens, tile; ElemType x_t; };
  for (const Case& c : {Case{1536, 12288, 1, 1, BF16}, Case{1536, 12288, 5, 2, BF16}, Case{1536, 12288, 11, 0, BF16},
                        Case{1536, 4096, 3, 2, F32}}) {
    const KernelSource fused = matmul_kernel(c.k, c.n, c.x_t, BF16, false, false, gpu->arch(), 0, c.tile, 0, 3);
    const KernelSource norm = rms_norm_kernel(c.k, c.x_t, BF16, gpu->arch());
    if (32 * kernel_param(fused, "WARPS") != kernel_param(norm, "THREADS")) {
      ASSERT_NE(c.tokens, 1) << fused.id << ": the 1-token instance's block is not the norm launch's";
      continue;
    }
    const KernelSource plain = matmul_kernel(c.k, c.n, BF16, BF16, false, false, gpu->arch(), 0, c.tile, 0, 0);
    const std::vector<float> x = random_values(c.tokens * c.k, 71, 3.f, c.x_t == BF16);
    std::vector<float> g = random_values(c.k, 72, 0.5f);
    for (float& v : g) v = bf16_to_float(float_to_bf16(v + 1.f));
    DevBuf d_x = gpu->upload_as(x, c.x_t), d_g = gpu->upload(to_bf16_bits(g)), d_w = gpu->upload(to_bf16_bits(random_values(c.n * c.k, 73, 0.2f, true)));
    DevBuf d_rows = gpu->alloc(c.tokens * c.k * 2), d_y = gpu->alloc(c.tokens * c.n * 2), d_y2 = gpu->alloc(c.tokens * c.n * 2);
    gpu->launch(norm, c.tokens, {Gpu::ptr(d_x), Gpu::ptr(d_g), Gpu::ptr(d_rows), Gpu::i32(c.tokens), Gpu::i32(c.k), Gpu::i32(c.k), Gpu::f32(eps)});
    gpu->launch(plain, c.tokens, {Gpu::ptr(d_rows), Gpu::ptr(d_w), Gpu::ptr(d_y2), Gpu::ptr(d_y2), Gpu::i32(c.tokens), Gpu::i32(c.k), Gpu::i32(0),
                                  Gpu::i32(c.n), Gpu::i32(0), Gpu::i32(0), Gpu::ptr(d_g), Gpu::ptr(d_rows), Gpu::f32(0.f), Gpu::null()});
    gpu->launch(fused, c.tokens, {Gpu::ptr(d_x), Gpu::ptr(d_w), Gpu::ptr(d_y), Gpu::ptr(d_y), Gpu::i32(c.tokens), Gpu::i32(c.k), Gpu::i32(0),
                                  Gpu::i32(c.n), Gpu::i32(0), Gpu::i32(0), Gpu::ptr(d_g), Gpu::ptr(d_rows), Gpu::f32(eps), Gpu::null()});
    EXPECT_EQ(gpu->download<uint16_t>(d_y, c.tokens * c.n), gpu->download<uint16_t>(d_y2, c.tokens * c.n)) << fused.id;
  }
}

TEST(GpuOps, MatmulNormMatchesTheCpuOps) {
  REQUIRE_GPU();
  const float eps = 1e-6f;
  auto normed = [&](const std::vector<float>& x, const std::vector<float>& g, int64_t tokens, int64_t k) {
    std::vector<float> y(x.size());
    for (int64_t t = 0; t < tokens; ++t) cpu::rms_norm_row(x.data() + t * k, k, g.data(), eps, y.data() + t * k);
    return y;
  };
  auto product = [](const std::vector<float>& x, const std::vector<float>& w, int64_t tokens, int64_t n, int64_t k) {
    std::vector<float> y(tokens * n);
    for (int64_t t = 0; t < tokens; ++t) cpu::matvec(x.data() + t * k, w.data(), n, k, y.data() + t * n);
    return y;
  };
  struct Case { int64_t k, n, tokens, tile, norm; ElemType x_t; };
  for (const Case& c : {Case{1536, 12288, 1, 1, 1, BF16}, Case{1536, 12288, 5, 2, 2, BF16}, Case{7168, 4096, 1, 1, 1, F32},
                        Case{7168, 4096, 11, 0, 2, F32}}) {
    const std::vector<float> x = random_values(c.tokens * c.k, 51, 3.f, c.x_t == BF16);
    std::vector<float> g = random_values(c.k, 52, 0.5f);
    for (float& v : g) v = bf16_to_float(float_to_bf16(v + 1.f));
    const std::vector<float> w = random_values(c.n * c.k, 53, 0.2f, true);
    const std::vector<float> xn = normed(x, g, c.tokens, c.k);
    DevBuf d_x = gpu->upload_as(x, c.x_t), d_g = gpu->upload(to_bf16_bits(g)), d_w = gpu->upload(to_bf16_bits(w));
    DevBuf d_y = gpu->alloc(c.tokens * c.n * 4), d_out = gpu->upload(std::vector<uint8_t>(c.tokens * c.k * 4, 0xff));
    const KernelSource k = matmul_kernel(c.k, c.n, c.x_t, F32, false, false, gpu->arch(), 0, c.tile, 0, c.norm);
    gpu->launch(k, c.tokens, {Gpu::ptr(d_x), Gpu::ptr(d_w), Gpu::ptr(d_y), Gpu::ptr(d_y), Gpu::i32(c.tokens), Gpu::i32(c.k), Gpu::i32(0),
                              Gpu::i32(c.n), Gpu::i32(0), Gpu::i32(0), Gpu::ptr(d_g), Gpu::ptr(d_out), Gpu::f32(eps), Gpu::null()});
    EXPECT_LT(relative_error(gpu->download<float>(d_y, c.tokens * c.n), product(xn, w, c.tokens, c.n, c.k)), 1e-4) << k.id;
    if (c.norm == 2) {
      EXPECT_LT(relative_error(gpu->download_as(d_out, c.tokens * c.k, c.x_t), xn), c.x_t == BF16 ? 1e-2 : 1e-5) << k.id << " norm rows";
    } else {
      for (uint8_t b : gpu->download<uint8_t>(d_out, c.tokens * c.k * 4)) ASSERT_EQ(b, 0xff) << k.id << ": NORM 1 wrote the norm's rows";
    }
  }
  struct Siblings { int64_t k, n, n2, tokens, tile, norm; bool glu; };
  for (const Siblings& c : {Siblings{7168, 1536, 576, 1, 1, 1, false}, Siblings{7168, 1536, 576, 5, 2, 1, false},
                            Siblings{7168, 384, 2048, 1, 1, 2, true}, Siblings{7168, 384, 2048, 11, 0, 2, true}}) {
    const std::vector<float> x = random_values(c.tokens * c.k, 61, 3.f);
    std::vector<float> g = random_values(c.k, 62, 0.5f);
    for (float& v : g) v = bf16_to_float(float_to_bf16(v + 1.f));
    const std::vector<float> w = random_values(c.n * c.k, 63, 0.2f, true), w2 = random_values(c.n2 * c.k, 64, 0.2f, true),
                             w3 = random_values(c.n2 * c.k, 65, 0.2f, true);
    const std::vector<float> xn = normed(x, g, c.tokens, c.k);
    DevBuf d_x = gpu->upload(x), d_g = gpu->upload(to_bf16_bits(g)), d_w = gpu->upload(to_bf16_bits(w)), d_w2 = gpu->upload(to_bf16_bits(w2)),
           d_w3 = gpu->upload(to_bf16_bits(w3));
    DevBuf d_y = gpu->alloc(c.tokens * c.n * 4), d_y2 = gpu->alloc(c.tokens * c.n2 * 4), d_y3 = gpu->alloc(c.tokens * c.n2 * 4);
    DevBuf d_out = gpu->upload(std::vector<uint8_t>(c.tokens * c.k * 4, 0xff));
    const int64_t n3 = c.glu ? c.n2 : 0;
    const KernelSource k = matmul_siblings_kernel(c.k, c.n, c.n2, n3, F32, F32, gpu->arch(), c.tile, c.glu, c.norm);
    gpu->launch(k, c.tokens, {Gpu::ptr(d_x), Gpu::ptr(d_w), Gpu::ptr(d_w2), Gpu::ptr(d_w3), Gpu::ptr(d_y), Gpu::ptr(d_y2), Gpu::ptr(d_y3),
                              Gpu::i32(c.tokens), Gpu::i32(c.k), Gpu::i32(c.n), Gpu::i32(c.n2), Gpu::i32(std::max<int64_t>(n3, 1)),
                              Gpu::ptr(d_g), Gpu::ptr(d_out), Gpu::f32(eps), Gpu::null(), Gpu::null(), Gpu::null(), Gpu::null(), Gpu::f32(1)});
    EXPECT_LT(relative_error(gpu->download<float>(d_y, c.tokens * c.n), product(xn, w, c.tokens, c.n, c.k)), 1e-4) << k.id << " sibling 0";
    std::vector<float> want2 = product(xn, w2, c.tokens, c.n2, c.k);
    if (c.glu) {
      const std::vector<float> up = product(xn, w3, c.tokens, c.n2, c.k);
      for (size_t i = 0; i < want2.size(); ++i) want2[i] = want2[i] / (1.f + std::exp(-want2[i])) * up[i];
    }
    EXPECT_LT(relative_error(gpu->download<float>(d_y2, c.tokens * c.n2), want2), 1e-4) << k.id << (c.glu ? " swiglu" : " sibling 1");
    if (c.norm == 2) {
      EXPECT_LT(relative_error(gpu->download<float>(d_out, c.tokens * c.k), xn), 1e-5) << k.id << " norm rows";
    } else {
      for (uint8_t b : gpu->download<uint8_t>(d_out, c.tokens * c.k * 4)) ASSERT_EQ(b, 0xff) << k.id << ": NORM 1 wrote the norm's rows";
    }
  }
}

// A MoE layer's combine in its shared expert's down projection (ROUTED, epilogue_adds.h): y =
// residual + (the token's 8 pair rows summed + x W^T) at K2.6's shared down (K 2048, N 7168), in
// place as the plan runs it, on the CUDA cores (1 and 5 tokens) and the tensor cores (17, 64).
TEST(GpuOps, MatmulCombineSumsTheRoutedPairs) {
  REQUIRE_GPU();
  const int64_t K = 2048, N = 7168, R = 8;
  struct Case { int64_t tokens, tile, mma; };
  for (const Case& c : {Case{1, 1, 0}, Case{5, 2, 0}, Case{17, 0, 16}, Case{64, 0, 64}}) {
    const std::vector<float> x = random_values(c.tokens * K, 71), residual = random_values(c.tokens * N, 72);
    const std::vector<float> w = random_values(N * K, 73, 0.2f, true), pairs = random_values(c.tokens * R * N, 74);
    std::vector<float> want(c.tokens * N);
    for (int64_t t = 0; t < c.tokens; ++t) cpu::matvec(x.data() + t * K, w.data(), N, K, want.data() + t * N);
    for (int64_t t = 0; t < c.tokens; ++t)
      for (int64_t n = 0; n < N; ++n) {
        float sum = 0.f;
        for (int64_t r = 0; r < R; ++r) sum += pairs[(t * R + r) * N + n];
        want[t * N + n] = residual[t * N + n] + (sum + want[t * N + n]);
      }
    DevBuf d_x = gpu->upload(x), d_w = gpu->upload(to_bf16_bits(w)), d_y = gpu->upload(residual), d_p = gpu->upload(pairs);
    const KernelSource k = matmul_kernel(K, N, F32, F32, false, true, gpu->arch(), c.mma, c.tile, 0, 0, R);
    gpu->launch(k, c.tokens, {Gpu::ptr(d_x), Gpu::ptr(d_w), Gpu::ptr(d_y), Gpu::ptr(d_y), Gpu::i32(c.tokens), Gpu::i32(K), Gpu::i32(0),
                              Gpu::i32(N), Gpu::i32(0), Gpu::i32(0), Gpu::null(), Gpu::null(), Gpu::f32(0), Gpu::ptr(d_p)});
    EXPECT_LT(relative_error(gpu->download<float>(d_y, c.tokens * N), want), 1e-4) << k.id << " at " << c.tokens << " tokens";
  }
}

// The weight stream's other entry paths: x rows that are not 16-byte aligned (scalar x loads)
// and a weight view that is not (the scalar weight path), each at 9 tokens (two token tiles).
TEST(GpuOps, MatmulUnalignedViews) {
  REQUIRE_GPU();
  const int64_t K = 512, N = 300, T = 9, x_stride = K + 3;
  const std::vector<float> x = random_values(T * x_stride, 21);
  const std::vector<float> w = random_values((N * K) + 8, 22, 0.1f, true);
  for (const int64_t w_offset : {int64_t{0}, int64_t{1}}) {
    std::vector<float> want(T * N);
    for (int64_t t = 0; t < T; ++t) cpu::matvec(x.data() + t * x_stride + 1, w.data() + w_offset, N, K, want.data() + t * N);
    for (const int64_t mma : {int64_t{0}, int64_t{16}}) {
      DevBuf d_x = gpu->upload(x), d_w = gpu->upload(to_bf16_bits(w)), d_y = gpu->alloc(T * N * 4);
      const KernelSource k = matmul_kernel(K, N, F32, F32, false, false, gpu->arch(), mma);
      gpu->launch(k, T, {Gpu::ptr(d_x, 4), Gpu::ptr(d_w, 2 * w_offset), Gpu::ptr(d_y), Gpu::ptr(d_y), Gpu::i32(T), Gpu::i32(x_stride), Gpu::i32(0),
                         Gpu::i32(N), Gpu::i32(0), Gpu::i32(0), Gpu::null(), Gpu::null(), Gpu::f32(0), Gpu::null()});
      EXPECT_LT(relative_error(gpu->download<float>(d_y, want.size()), want), 1e-4) << k.id << " w offset " << w_offset;
    }
  }
}

// lm_head at Kimi K2.6 width (163840 x 7168 bf16, 2.35 GB): the CPU op's values at 1 and 3
// tokens, then the time of a 1-, 8- and 64-token launch and the bandwidth over the weight bytes
// (printed, for bench/RESULTS.md; the floor is the HBM's ~4.3 TB/s on an H200).
TEST(GpuOps, MatmulAtLmHeadWidth) {
  REQUIRE_GPU();
  const int64_t K = 7168, N = 163840, T = 64;
  const std::vector<float> x = random_values(T * K, 23);
  std::vector<uint16_t> w_bits(static_cast<size_t>(N * K));
  {
    const std::vector<float> w = random_values(static_cast<size_t>(N * K), 24, 0.02f, true);
    for (size_t i = 0; i < w.size(); ++i) w_bits[i] = float_to_bf16(w[i]);
  }
  DevBuf d_x = gpu->upload(x), d_w = gpu->upload(w_bits), d_y = gpu->alloc(T * N * 4);
  const KernelSource k = matmul_kernel(K, N, F32, F32);
  auto args = [&](int64_t t) {
    return std::vector<Gpu::Arg>{Gpu::ptr(d_x), Gpu::ptr(d_w), Gpu::ptr(d_y), Gpu::ptr(d_y), Gpu::i32(t), Gpu::i32(K), Gpu::i32(0),
                                 Gpu::i32(N), Gpu::i32(0), Gpu::i32(0), Gpu::null(), Gpu::null(), Gpu::f32(0), Gpu::null()};
  };
  for (const int64_t t : {int64_t{1}, int64_t{3}}) {
    gpu->launch(k, t, args(t));
    const std::vector<float> got = gpu->download<float>(d_y, t * N);
    std::vector<float> wf(static_cast<size_t>(K));
    double worst = 0, largest = 0;
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t j = 0; j < K; ++j) wf[j] = bf16_to_float(w_bits[n * K + j]);
      for (int64_t r = 0; r < t; ++r) {
        float want = 0;
        cpu::matvec(x.data() + r * K, wf.data(), 1, K, &want);
        worst = std::max(worst, std::fabs(static_cast<double>(got[r * N + n]) - want));
        largest = std::max(largest, std::fabs(static_cast<double>(want)));
      }
    }
    EXPECT_LT(worst / largest, 1e-4) << k.id << " at " << t << " tokens";
  }
  // The tensor-core instances against the CUDA-core one at 17 and 64 tokens (GPU against GPU).
  const KernelSource mma16 = matmul_kernel(K, N, F32, F32, false, false, gpu->arch(), 16);
  const KernelSource mma64 = matmul_kernel(K, N, F32, F32, false, false, gpu->arch(), 64);
  for (const int64_t t : {int64_t{17}, int64_t{64}}) {
    gpu->launch(k, t, args(t));
    const std::vector<float> want = gpu->download<float>(d_y, t * N);
    for (const KernelSource* m : {&mma16, &mma64}) {
      gpu->launch(*m, t, args(t));
      EXPECT_LT(relative_error(gpu->download<float>(d_y, t * N), want), 1e-4) << m->id << " at " << t << " tokens";
    }
  }
  struct Timed {
    const KernelSource* k;
    int64_t t;
  };
  for (const Timed& run : {Timed{&k, 1}, Timed{&k, 8}, Timed{&k, 16}, Timed{&mma16, 16}, Timed{&k, 64}, Timed{&mma16, 64}, Timed{&mma64, 64}}) {
    const double ms = gpu->time_ms(*run.k, run.t, args(run.t), 20);
    const double bytes = 2.0 * N * K + 4.0 * run.t * (K + N);
    std::printf("[ lm_head ] %s tokens %lld: %.4f ms, %.1f GB/s (%.1f%% of 4.3 TB/s)\n", run.k->id.c_str(), static_cast<long long>(run.t),
                ms, bytes / (ms * 1e-3) / 1e9, 100.0 * bytes / (ms * 1e-3) / 4.3e12);
  }
}

// A dense weight at a K2.6 shape on the device for the matmul figures: x (T rows of K, f32), W
// [N, K] bf16 of small deterministic values, y; args(t) are kp::matmul's for a step of t tokens.
struct DenseOperands {
  int64_t k, n;
  DevBuf x, w, y;
  DenseOperands(Gpu& g, int64_t k_, int64_t n_, int64_t T, uint32_t seed) : k(k_), n(n_) {
    std::vector<uint16_t> w_bits(static_cast<size_t>(n * k));
    for (size_t i = 0; i < w_bits.size(); ++i) w_bits[i] = float_to_bf16(static_cast<float>(static_cast<int64_t>(i * 2654435761u % 2001) - 1000) * 1e-5f);
    x = g.upload(random_values(T * k, seed));
    w = g.upload(w_bits);
    y = g.alloc(T * n * 4);
  }
  std::vector<Gpu::Arg> args(int64_t t) const {
    return {Gpu::ptr(x), Gpu::ptr(w), Gpu::ptr(y), Gpu::ptr(y), Gpu::i32(t), Gpu::i32(k), Gpu::i32(0),
            Gpu::i32(n), Gpu::i32(0), Gpu::i32(0), Gpu::null(), Gpu::null(), Gpu::f32(0), Gpu::null()};
  }
};

// The variants of the weight stream at Kimi K2.6's dense shapes, measured in one run: each
// tiling (rows per warp, loads in flight, split-K, warps) against the heuristics' choice (marked
// *), the same values up to summation order, and a table of ms / GB/s over the weight bytes at
// 1, 8, 16 and 64 tokens, CUDA-core and tensor-core (mma1) instances alike: what
// heuristics.cc's matmul_tiling and matmul_mma_min_tokens should pick (bench/RESULTS.md).
TEST(GpuOps, MatmulVariantSweepAtK26Shapes) {
  REQUIRE_GPU();
  struct Shape {
    const char* name;
    int64_t k, n;
  };
  // Every bf16 [N, K] weight of a K2.6 layer (the dense layer's MLP, the shared expert's, the
  // attention projections) and lm_head.
  const Shape shapes[] = {{"lm_head", 7168, 163840}, {"kv_a", 7168, 576},      {"q_a", 7168, 1536},        {"q_b", 1536, 12288},
                          {"o_proj", 8192, 7168},    {"mlp_up", 7168, 18432},  {"mlp_down", 18432, 7168},  {"shexp_up", 7168, 2048},
                          {"shexp_down", 2048, 7168}};
  struct Tiling {
    int64_t rpw, unroll, ksplit, warps, mma = 0, tok_tile = 8;
  };
  // CUDA-core tilings at 8 tokens a tile, then the same with K split inside a block (finer row
  // blocks: more waves, a shorter tail), then 1- and 2-token tiles (fewer accumulators, more
  // resident warps: an AR step's instance), then the tensor-core ones.
  const Tiling tilings[] = {{1, 8, 1, 4},          {2, 8, 1, 4},          {4, 4, 1, 4},          {1, 8, 4, 4},          {1, 8, 8, 8},
                            {4, 4, 2, 4},          {4, 4, 4, 4},          {2, 8, 2, 4},          {2, 8, 4, 4},          {4, 4, 2, 8},
                            {2, 4, 2, 4},          {4, 4, 1, 4, 0, 1},    {4, 4, 4, 4, 0, 1},    {2, 8, 2, 4, 0, 1},    {4, 4, 1, 4, 0, 2},
                            {4, 4, 2, 4, 0, 2},    {8, 2, 2, 4, 0, 1},    {8, 4, 4, 4, 0, 1},    {16, 4, 1, 4, 1, 16},  {32, 2, 1, 4, 1, 16},
                            {16, 2, 4, 4, 1, 16},  {16, 4, 1, 4, 1, 64},  {8, 4, 1, 8, 1, 64}};
  const int64_t T = 64;
  std::printf("%-10s %-66s %9s %9s %9s %9s %8s %4s %3s %6s\n", "shape", "kernel", "ms t=1", "ms t=8", "ms t=16", "ms t=64", "GB/s t=1",
              "regs", "occ", "waves");
  for (const Shape& sh : shapes) {
    const DenseOperands op(*gpu, sh.k, sh.n, T, 31);
    auto args = [&](int64_t t) { return op.args(t); };
    const KernelSource chosen = matmul_kernel(sh.k, sh.n, F32, F32, false, false, gpu->arch());
    const KernelSource chosen16 = matmul_kernel(sh.k, sh.n, F32, F32, false, false, gpu->arch(), 16);
    const KernelSource chosen64 = matmul_kernel(sh.k, sh.n, F32, F32, false, false, gpu->arch(), 64);
    gpu->launch(chosen, T, args(T));
    const std::vector<float> want = gpu->download<float>(op.y, T * sh.n);
    std::vector<KernelSource> variants = {chosen, chosen16, chosen64};
    for (const Tiling& tl : tilings) {
      const ParamValues p = {{"K", sh.k},         {"N", sh.n},          {"X_DT", 0},         {"Y_DT", 0},
                             {"W_LAYOUT", 0},     {"ACC", 0},           {"ROUTED", 0},       {"NORM", 0},         {"WARPS", tl.warps}, {"TOK_TILE", tl.tok_tile},
                             {"RPW", tl.rpw},     {"KSPLIT", tl.ksplit}, {"UNROLL", tl.unroll}, {"MMA", tl.mma}};
      const KernelSource v = instantiate(matmul::family(), p, gpu->arch());
      if (v.id == chosen.id || v.id == chosen16.id || v.id == chosen64.id) continue;
      try {  // a tiling whose grid this shape cannot launch (e.g. more row blocks than grid.y holds) is no variant
        for (int64_t t : {int64_t{1}, int64_t{64}}) (void)launch_dims(v, t, 1);
      } catch (const Error& e) {
        std::printf("%-9s %-66s skipped: %s\n", sh.name, v.id.c_str(), e.what());
        continue;
      }
      variants.push_back(v);
    }
    gpu->precompile(variants);
    for (const KernelSource& v : variants) {
      gpu->launch(v, T, args(T));
      EXPECT_LT(relative_error(gpu->download<float>(op.y, T * sh.n), want), 1e-4) << v.id;
      double ms[4];
      const int64_t tokens[4] = {1, 8, 16, 64};
      for (int i = 0; i < 4; ++i) ms[i] = gpu->time_ms(v, tokens[i], args(tokens[i]), sh.n * sh.k > 100000000 ? 10 : 50);
      const bool is_chosen = v.id == chosen.id || v.id == chosen16.id || v.id == chosen64.id;
      const Gpu::Occupancy occ = gpu->occupancy(v, 1);
      const LaunchDims d1 = launch_dims(v, 1, 1);
      const double blocks = static_cast<double>(d1.grid[0]) * d1.grid[1] * d1.grid[2];
      std::printf("%-10s %-66s %9.4f %9.4f %9.4f %9.4f %8.1f %4d %3d %6.2f%s\n", sh.name, v.id.c_str(), ms[0], ms[1], ms[2], ms[3],
                  2.0 * sh.n * sh.k / (ms[0] * 1e-3) / 1e9, occ.regs, occ.blocks_per_sm,
                  blocks / std::max(1, occ.blocks_per_sm * occ.sms), is_chosen ? " *" : "");
    }
  }
}

// The rows-as-M tensor-core tiles (matmul.cuh MMA 2) at Kimi K2.6's dense shapes, against the
// instances a plan takes today at each step size (CUDA cores below 16 tokens, tokens as M from
// 16): the same values as the CUDA-core instance (to summation order and x's hi + lo split), then
// a table of ms and GB/s over the weight bytes at 2, 4, 8, 12, 16 and 32 tokens for the
// heuristics' choice (*) and the other row / unroll / split tilings, then the fused siblings
// (the dense MLP's gate + up, q_a + kv_a) on both paths at 8 and 16 tokens: what
// matmul_mma_min_tokens and matmul_rows_m_max_tokens should say (bench/RESULTS.md).
TEST(GpuOps, MatmulRowsAsMAtK26Shapes) {
  REQUIRE_GPU();
  struct Shape {
    const char* name;
    int64_t k, n;
  };
  const Shape shapes[] = {{"lm_head", 7168, 163840}, {"q_b", 1536, 12288},       {"o_proj", 8192, 7168}, {"mlp_up", 7168, 18432},
                          {"mlp_down", 18432, 7168}, {"shexp_down", 2048, 7168}, {"q_a", 7168, 1536}};
  const int64_t tokens[] = {2, 4, 8, 12, 16, 32}, T = 32;
  std::printf("%-10s %-66s", "shape", "kernel");
  for (const int64_t t : tokens) std::printf(" %7s%-2lld", "ms t=", static_cast<long long>(t));
  std::printf(" %9s %9s\n", "GB/s t=8", "GB/s t=16");
  auto row = [&](const char* name, const std::string& id, const double (&ms)[6], double bytes, bool chosen) {
    std::printf("%-10s %-66s", name, id.c_str());
    for (const double v : ms) std::printf(" %9.4f", v);
    std::printf(" %9.1f %9.1f%s\n", bytes / (ms[2] * 1e-3) / 1e9, bytes / (ms[4] * 1e-3) / 1e9, chosen ? " *" : "");
  };
  for (const Shape& sh : shapes) {
    const DenseOperands op(*gpu, sh.k, sh.n, T, 51);
    auto args = [&](int64_t t) { return op.args(t); };
    // Today's instances: 1-token tiles at 1, 2-token tiles to 8, 8-token tiles to 15, tokens as M from 16.
    const KernelSource two = matmul_kernel(sh.k, sh.n, F32, F32, false, false, gpu->arch(), 0, 2);
    const KernelSource eight = matmul_kernel(sh.k, sh.n, F32, F32, false, false, gpu->arch());
    const KernelSource mma16 = matmul_kernel(sh.k, sh.n, F32, F32, false, false, gpu->arch(), 16);
    std::vector<KernelSource> rows_m;
    for (const int64_t tile : {int64_t{8}, int64_t{16}, int64_t{32}}) rows_m.push_back(matmul_rows_m_kernel(sh.k, sh.n, F32, F32, false, gpu->arch(), tile));
    std::vector<KernelSource> variants;
    for (const int64_t tile : {int64_t{8}, int64_t{16}})
      for (const std::array<int64_t, 4>& v : {std::array<int64_t, 4>{16, 8, 1, 4}, {16, 4, 2, 4}, {32, 4, 1, 4}, {32, 2, 2, 4}, {32, 4, 4, 4},
                                              {16, 8, 4, 4}, {32, 4, 8, 8}, {64, 2, 1, 4}}) {
        const ParamValues p = {{"K", sh.k},    {"N", sh.n},      {"X_DT", 0},       {"Y_DT", 0},        {"W_LAYOUT", 0},
                               {"ACC", 0},     {"ROUTED", 0},    {"NORM", 0},       {"WARPS", v[3]},    {"TOK_TILE", tile},
                               {"RPW", v[0]},  {"KSPLIT", v[2]}, {"UNROLL", v[1]},  {"MMA", 2}};
        const KernelSource k = instantiate(matmul::family(), p, gpu->arch());
        if (std::none_of(rows_m.begin(), rows_m.end(), [&](const KernelSource& r) { return r.id == k.id; })) variants.push_back(k);
      }
    std::vector<KernelSource> all = {two, eight, mma16};
    all.insert(all.end(), rows_m.begin(), rows_m.end());
    all.insert(all.end(), variants.begin(), variants.end());
    gpu->precompile(all);
    const double bytes = 2.0 * sh.n * sh.k;
    const int reps = sh.n * sh.k > 100000000 ? 10 : 50;
    // Today's plan: the instance each step size takes.
    double today[6];
    for (int i = 0; i < 6; ++i) {
      const int64_t t = tokens[i];
      today[i] = gpu->time_ms(t <= 8 ? two : t < 16 ? eight : mma16, t, args(t), reps);
    }
    row(sh.name, "today (tt2 / tt8 / mma1 tt16)", today, bytes, false);
    for (const KernelSource& k : all) {
      if (k.id == two.id || k.id == eight.id || k.id == mma16.id) continue;
      const bool chosen = std::any_of(rows_m.begin(), rows_m.end(), [&](const KernelSource& r) { return r.id == k.id; });
      // Values: against the CUDA-core 8-token tiles at 13 and 32 tokens (ragged tiles, tiles side by side).
      for (const int64_t t : {int64_t{13}, T}) {
        gpu->launch(eight, t, args(t));
        const std::vector<float> want = gpu->download<float>(op.y, t * sh.n);
        gpu->launch(k, t, args(t));
        EXPECT_LT(relative_error(gpu->download<float>(op.y, t * sh.n), want), 1e-4) << k.id << " at " << t << " tokens";
      }
      double ms[6];
      for (int i = 0; i < 6; ++i) ms[i] = gpu->time_ms(k, tokens[i], args(tokens[i]), reps);
      row(sh.name, k.id, ms, bytes, chosen);
    }
  }
  // The fused siblings on both paths.
  struct Group {
    const char* name;
    int64_t k, n, n2, n3;
    bool glu;
  };
  for (const Group& g : {Group{"mlp_gate_up", 7168, 0, 18432, 18432, true}, Group{"q_a+kv_a", 7168, 1536, 576, 0, false},
                         Group{"router+shexp", 7168, 384, 2048, 2048, true}}) {
    const std::vector<float> x = random_values(T * g.k, 52);
    const int64_t rows[3] = {std::max<int64_t>(g.n, 1), g.n2, std::max<int64_t>(g.n3, 1)};
    std::vector<DevBuf> d_w, d_y;
    for (int s = 0; s < 3; ++s) {
      d_w.push_back(gpu->upload(to_bf16_bits(random_values(rows[s] * g.k, 53 + s, 0.02f, true))));
      d_y.push_back(gpu->alloc(T * rows[s] * 4));
    }
    DevBuf d_x = gpu->upload(x);
    auto args = [&](int64_t t) {
      return std::vector<Gpu::Arg>{Gpu::ptr(d_x), Gpu::ptr(d_w[0]), Gpu::ptr(d_w[1]), Gpu::ptr(d_w[2]), Gpu::ptr(d_y[0]), Gpu::ptr(d_y[1]),
                                   Gpu::ptr(d_y[2]), Gpu::i32(t), Gpu::i32(g.k), Gpu::i32(g.n), Gpu::i32(g.n2), Gpu::i32(g.n3), Gpu::null(), Gpu::null(), Gpu::f32(0), Gpu::null(), Gpu::null(), Gpu::null(), Gpu::null(), Gpu::f32(1)};
    };
    const KernelSource two = matmul_siblings_kernel(g.k, g.n, g.n2, g.n3, F32, F32, gpu->arch(), 2, g.glu);
    const KernelSource eight = matmul_siblings_kernel(g.k, g.n, g.n2, g.n3, F32, F32, gpu->arch(), 0, g.glu);
    const KernelSource m8 = matmul_siblings_kernel(g.k, g.n, g.n2, g.n3, F32, F32, gpu->arch(), 0, g.glu, 0, 8);
    const KernelSource m16 = matmul_siblings_kernel(g.k, g.n, g.n2, g.n3, F32, F32, gpu->arch(), 0, g.glu, 0, 16);
    const KernelSource m32 = matmul_siblings_kernel(g.k, g.n, g.n2, g.n3, F32, F32, gpu->arch(), 0, g.glu, 0, 32);
    gpu->precompile({two, eight, m8, m16, m32});
    const double bytes = 2.0 * (g.n + g.n2 + g.n3) * g.k;
    for (const int64_t t : {int64_t{8}, int64_t{16}}) {
      const KernelSource& cuda = t <= 8 ? two : eight;
      gpu->launch(cuda, t, args(t));
      const std::vector<float> want = gpu->download<float>(d_y[1], t * g.n2);
      for (const KernelSource* k : {&cuda, t <= 8 ? &m8 : &m16, &m32}) {
        gpu->launch(*k, t, args(t));
        EXPECT_LT(relative_error(gpu->download<float>(d_y[1], t * g.n2), want), 1e-4) << k->id << " at " << t << " tokens";
        const double ms = gpu->time_ms(*k, t, args(t), 20);
        std::printf("%-12s %-72s t=%-3lld %9.4f ms %9.1f GB/s\n", g.name, k->id.c_str(), static_cast<long long>(t), ms, bytes / (ms * 1e-3) / 1e9);
      }
    }
  }
}

// The absorbed MLA projections as head_matmul launches over views of kv_b_proj: W_UK transposed
// (W_LAYOUT 1) on the q_nope slices of q, and W_UV (W_LAYOUT 0) at an offset into kv_b. Shapes:
// small ones, a latent width that is no multiple of 8 (W_UK's scalar path), and K2.6's 64 heads
// (W_UK's column stream with K split over 8 warps; its time and bandwidth at 1 token printed).
TEST(GpuOps, HeadMatmulsOfMlaAbsorption) {
  REQUIRE_GPU();
  for (const cpu::MlaDims d : {cpu::MlaDims{4, 64, 32, 16, 32}, cpu::MlaDims{6, 48, 24, 8, 20}, cpu::MlaDims{3, 36, 40, 8, 16},
                               cpu::MlaDims{64, 512, 128, 64, 128}}) {
    const int64_t T = d.heads == 64 ? 5 : 3, qw = d.nope + d.rope;
    const std::vector<float> q = random_values(T * d.heads * qw, 7);
    const std::vector<float> kv_b = random_values(d.heads * (d.nope + d.v) * d.kv_lora, 8, 0.3f, true);
    const std::vector<float> o_lat = random_values(T * d.heads * d.kv_lora, 9);
    DevBuf d_q = gpu->upload(q), d_kvb = gpu->upload(to_bf16_bits(kv_b)), d_olat = gpu->upload(o_lat);
    DevBuf d_qlat = gpu->alloc(T * d.heads * d.kv_lora * 4), d_v = gpu->alloc(T * d.heads * d.v * 4);
    const int64_t w_batch = (d.nope + d.v) * d.kv_lora;
    const KernelSource uk = matmul_kernel(d.nope, d.kv_lora, F32, F32, /*weight_kn=*/true);
    gpu->launch(uk, T, {Gpu::ptr(d_q), Gpu::ptr(d_kvb), Gpu::ptr(d_qlat), Gpu::ptr(d_qlat), Gpu::i32(T), Gpu::i32(d.heads * qw), Gpu::i32(qw),
                        Gpu::i32(d.heads * d.kv_lora), Gpu::i32(d.kv_lora), Gpu::i32(w_batch), Gpu::null(), Gpu::null(), Gpu::f32(0), Gpu::null()}, d.heads);
    auto uv_args = [&](const DevBuf& in, const DevBuf& out, int64_t tokens) {  // W_UV: kv_b's value rows of each head
      return std::vector<Gpu::Arg>{Gpu::ptr(in), Gpu::ptr(d_kvb, d.nope * d.kv_lora * 2), Gpu::ptr(out), Gpu::ptr(out), Gpu::i32(tokens),
                                   Gpu::i32(d.heads * d.kv_lora), Gpu::i32(d.kv_lora), Gpu::i32(d.heads * d.v), Gpu::i32(d.v), Gpu::i32(w_batch),
                                   Gpu::null(), Gpu::null(), Gpu::f32(0), Gpu::null()};
    };
    const KernelSource uv = matmul_kernel(d.kv_lora, d.v, F32, F32);
    gpu->launch(uv, T, uv_args(d_olat, d_v, T), d.heads);
    Matrix q_nope(T, d.heads * d.nope);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < d.heads; ++h)
        for (int64_t n = 0; n < d.nope; ++n) q_nope.row(t)[h * d.nope + n] = q[(t * d.heads + h) * qw + n];
    const Matrix kvb = matrix(d.heads * (d.nope + d.v), d.kv_lora, kv_b);
    EXPECT_LT(relative_error(gpu->download<float>(d_qlat, T * d.heads * d.kv_lora), cpu::mla_absorb_query(q_nope, kvb, d).data), 1e-4) << uk.id;
    const std::vector<float> want_v = cpu::mla_expand_value(matrix(T, d.heads * d.kv_lora, o_lat), kvb, d).data;
    EXPECT_LT(relative_error(gpu->download<float>(d_v, T * d.heads * d.v), want_v), 1e-4) << uv.id;
    if (d.heads == 64) {
      // K2.6's W_UV on the rows-as-M tiles (MMA 2, batched over the heads; the lowering takes them
      // for a head matmul only under KPLAN_MATMUL_MMA_MIN_TOKENS): the same values from the tensor
      // cores, and at 16 tokens the two paths' times. With its weights in L2 (these repeated
      // launches) MMA 2 took 11.4 us against the CUDA cores' 24.6 (H100); inside the K2.6 slice,
      // streaming them from HBM, 28.8 against 27.1 us a layer (bench/RESULTS.md 2026-12-06 08:00),
      // so the lowering keeps W_UV on the CUDA cores.
      const KernelSource uv8 = matmul_rows_m_kernel(d.kv_lora, d.v, F32, F32, false, gpu->arch(), 8);
      DevBuf d_v8 = gpu->alloc(T * d.heads * d.v * 4);
      gpu->launch(uv8, T, uv_args(d_olat, d_v8, T), d.heads);
      EXPECT_LT(relative_error(gpu->download<float>(d_v8, T * d.heads * d.v), want_v), 1e-4) << uv8.id;
      const int64_t T16 = 16;
      DevBuf d_olat16 = gpu->upload(random_values(T16 * d.heads * d.kv_lora, 10)), d_v16 = gpu->alloc(T16 * d.heads * d.v * 4);
      for (const KernelSource& k : {matmul_kernel(d.kv_lora, d.v, F32, F32, false, false, gpu->arch()),
                                    matmul_rows_m_kernel(d.kv_lora, d.v, F32, F32, false, gpu->arch(), 16)}) {
        const double ms = gpu->time_ms(k, T16, uv_args(d_olat16, d_v16, T16), 100, d.heads);
        std::printf("[ figures  ] W_UV K2.6 %s: 16 tokens, 8.4 MB: %.2f us\n", k.id.c_str(), 1e3 * ms);
      }
      const double ms = gpu->time_ms(uk, 1, {Gpu::ptr(d_q), Gpu::ptr(d_kvb), Gpu::ptr(d_qlat), Gpu::ptr(d_qlat), Gpu::i32(1), Gpu::i32(d.heads * qw), Gpu::i32(qw),
                                            Gpu::i32(d.heads * d.kv_lora), Gpu::i32(d.kv_lora), Gpu::i32(w_batch), Gpu::null(), Gpu::null(), Gpu::f32(0), Gpu::null()},
                                     100, d.heads);
      const double bytes = 2.0 * d.heads * d.nope * d.kv_lora;
      std::printf("[ figures  ] W_UK K2.6 %s: 1 token, %.1f MB: %.2f us, %.0f GB/s\n", uk.id.c_str(), bytes / 1e6, 1e3 * ms, bytes / (ms * 1e-3) / 1e9);
    }
  }
}

TEST(GpuOps, MatmulInt4MatchesDequantisedWeights) {
  REQUIRE_GPU();
  // The INT4 stream's tilings: 1 row a warp, split-K 2 (K 4096), 2 rows a warp (N 9000), 3
  // groups a row at 64 tokens, bf16 x with ACC.
  struct Case {
    int64_t k, n, t;
    ElemType x_t;
    bool acc;
  };
  for (const Case& c : {Case{256, 40, 9, F32, false}, Case{4096, 24, 17, F32, false}, Case{2048, 9000, 5, F32, true},
                        Case{96, 70, 64, F32, false}, Case{7168, 300, 3, BF16, true}}) {
    const PackedInt4 p = pack_int4(random_values(c.n * c.k, 10, 0.5f), c.n, c.k, 32);
    const std::vector<float> w = unpack_int4(p);
    const std::vector<float> x = random_values(c.t * c.k, 11, 1.f, c.x_t == BF16);
    const std::vector<float> y0 = random_values(c.t * c.n, 12);
    DevBuf d_x = gpu->upload_as(x, c.x_t), d_p = gpu->upload(p.packed), d_s = gpu->upload(p.scale), d_y = gpu->upload(y0);
    const KernelSource k = matmul_int4_kernel(c.k, c.n, c.x_t, F32, c.acc);
    gpu->launch(k, c.t, {Gpu::ptr(d_x), Gpu::ptr(d_p), Gpu::ptr(d_s), Gpu::ptr(d_y), Gpu::i32(c.t), Gpu::i32(c.k), Gpu::i32(c.n)});
    std::vector<float> want(c.t * c.n);
    for (int64_t t = 0; t < c.t; ++t) cpu::matvec(x.data() + t * c.k, w.data(), c.n, c.k, want.data() + t * c.n);
    if (c.acc) for (size_t i = 0; i < want.size(); ++i) want[i] += y0[i];
    EXPECT_LT(relative_error(gpu->download<float>(d_y, c.t * c.n), want), 1e-4) << k.id;
  }
}

TEST(GpuOps, RopeYarnInterleavedAndRotateHalf) {
  REQUIRE_GPU();
  const std::vector<int32_t> positions = {0, 5, 17, 300, 511};
  const int64_t T = positions.size();
  DevBuf d_pos = gpu->upload(positions);
  {  // DeepSeek: YaRN, interleaved, in place on the rope slice of each head of q.
    RopeScaling yarn;
    yarn.type = "yarn";
    yarn.factor = 4;
    yarn.original_max_position_embeddings = 128;
    yarn.mscale = 1;
    yarn.mscale_all_dim = 1;
    const int64_t H = 4, nope = 32, dim = 16, qw = nope + dim;
    const cpu::Rope ref(dim, 10000.0, yarn, 512);
    const RopeArgs a = rope_args(dim, 10000.0, "yarn", 4, 128, 32, 1, ref.attention_factor());
    std::vector<float> q = random_values(T * H * qw, 12);
    DevBuf d_q = gpu->upload(q);
    const KernelSource k = rope_kernel(dim, H, true, F32, F32);
    gpu->launch(k, T, {Gpu::ptr(d_q, nope * 4), Gpu::ptr(d_q, nope * 4), Gpu::ptr(d_pos), Gpu::i32(T), Gpu::i32(H * qw), Gpu::i32(qw),
                       Gpu::i32(H * qw), Gpu::i32(qw), Gpu::f32(a.theta), Gpu::f32(a.yarn_factor), Gpu::f32(a.yarn_low),
                       Gpu::f32(a.yarn_high), Gpu::f32(a.cos_sin_scale)});
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) ref.apply_interleaved(q.data() + (t * H + h) * qw + nope, positions[t]);
    EXPECT_LT(relative_error(gpu->download<float>(d_q, q.size()), q), 2e-4) << k.id;
  }
  {  // Qwen3 drafter: plain, rotate_half, out of place into bf16.
    const int64_t H = 3, dim = 40;
    const cpu::Rope ref(dim, 5000.0, RopeScaling{}, 384);
    const RopeArgs a = rope_args(dim, 5000.0, "none", 1, 0, 0, 0, 1.0);
    std::vector<float> x = random_values(T * H * dim, 13);
    DevBuf d_x = gpu->upload(x), d_y = gpu->alloc(x.size() * 2);
    const KernelSource k = rope_kernel(dim, H, false, F32, BF16);
    gpu->launch(k, T, {Gpu::ptr(d_x), Gpu::ptr(d_y), Gpu::ptr(d_pos), Gpu::i32(T), Gpu::i32(H * dim), Gpu::i32(dim), Gpu::i32(H * dim),
                       Gpu::i32(dim), Gpu::f32(a.theta), Gpu::f32(a.yarn_factor), Gpu::f32(a.yarn_low), Gpu::f32(a.yarn_high),
                       Gpu::f32(a.cos_sin_scale)});
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) ref.apply_rotate_half(x.data() + (t * H + h) * dim, positions[t]);
    EXPECT_LT(relative_error(gpu->download_as(d_y, x.size(), BF16), x), 1e-2) << k.id;
  }
}

// Ancestor-or-self mask of a random tree over T nodes (parent < child), [T, ceil(T/32)] words.
std::vector<uint32_t> random_tree_mask(int64_t T, uint64_t seed) {
  const int64_t words = (T + 31) / 32;
  std::vector<uint32_t> mask(T * words, 0);
  std::vector<int64_t> parent(T, -1);
  const std::vector<float> r = random_values(T, seed);
  for (int64_t i = 1; i < T; ++i) parent[i] = static_cast<int64_t>((r[i] * 0.5f + 0.5f) * i) % i;
  for (int64_t i = 0; i < T; ++i)
    for (int64_t a = i; a >= 0; a = parent[a]) mask[i * words + a / 32] |= 1u << (a % 32);
  return mask;
}

TEST(GpuOps, MlaAttentionCausalAndTreeOverCommittedCache) {
  REQUIRE_GPU();
  struct Case { cpu::MlaDims d; int64_t past, T; bool tree; ElemType kv_t; };
  for (const Case& c : {Case{{4, 64, 32, 16, 32}, 37, 5, false, F32}, Case{{4, 64, 32, 16, 32}, 11, 40, true, F32},
                        Case{{6, 48, 24, 8, 20}, 0, 7, false, F32}, Case{{6, 48, 24, 8, 20}, 20, 9, true, BF16}}) {
    const cpu::MlaDims& d = c.d;
    const int64_t D = d.kv_lora + d.rope, max_slots = c.past + c.T + 3, words = (c.T + 31) / 32;
    const std::vector<float> qlat = random_values(c.T * d.heads * d.kv_lora, 14);
    const std::vector<float> qrope = random_values(c.T * d.heads * d.rope, 15);
    const std::vector<float> cache = random_values(max_slots * D, 16, 1.f, c.kv_t == BF16);
    const std::vector<uint32_t> mask = c.tree ? random_tree_mask(c.T, 17) : std::vector<uint32_t>();
    const std::vector<int32_t> len = {static_cast<int32_t>(c.past)};
    DevBuf d_ql = gpu->upload(qlat), d_qr = gpu->upload(qrope), d_cache = gpu->upload_as(cache, c.kv_t), d_len = gpu->upload(len);
    DevBuf d_mask = gpu->upload(c.tree ? mask : std::vector<uint32_t>{0}), d_out = gpu->alloc(c.T * d.heads * d.kv_lora * 4);
    const float scale = 0.125f;
    const KernelSource k = mla_attention_kernel(d.heads, d.kv_lora, d.rope, F32, c.kv_t, F32);
    gpu->launch(k, c.T, {Gpu::ptr(d_ql), Gpu::ptr(d_qr), Gpu::ptr(d_cache), Gpu::ptr(d_len), c.tree ? Gpu::ptr(d_mask) : Gpu::null(),
                         Gpu::ptr(d_out), Gpu::i32(c.T), Gpu::i32(d.heads * d.kv_lora), Gpu::i32(d.heads * d.rope), Gpu::i32(d.rope),
                         Gpu::i32(d.heads * d.kv_lora), Gpu::i32(words), Gpu::f32(scale)});
    Matrix latent(c.past + c.T, d.kv_lora), krope(c.past + c.T, d.rope);
    for (int64_t s = 0; s < c.past + c.T; ++s) {
      for (int64_t j = 0; j < d.kv_lora; ++j) latent.row(s)[j] = cache[s * D + j];
      for (int64_t j = 0; j < d.rope; ++j) krope.row(s)[j] = cache[s * D + d.kv_lora + j];
    }
    const Matrix want = cpu::mla_attention_absorbed(matrix(c.T, d.heads * d.kv_lora, qlat), matrix(c.T, d.heads * d.rope, qrope),
                                                    latent, krope, c.past, mask, d, scale);
    EXPECT_LT(relative_error(gpu->download<float>(d_out, want.data.size()), want.data), 1e-4) << k.id << " tree=" << c.tree;
  }
}

// The split-context pair (kernels_templates/mla_split.cuh): mla_split_partial over n_splits
// ranges of the keys into a workspace, then mla_split_combine into out (as mla_attention lays it).
struct MlaSplitPair {
  KernelSource partial, combine;
  int64_t heads = 0, C = 0, R = 0;
  ElemType q_t = ElemType::F32;  // the queries' dtype (MMA 2: bf16)
  // mma: the tensor-core partials (1: 16 heads a block; 2, 3: every head, bf16 queries), a bf16
  // cache; 0 the CUDA-core one, asked for by name (the lowering's default takes MMA 2 where it fits).
  MlaSplitPair(const cpu::MlaDims& d, ElemType kv_t, const std::string& arch, int mma = 0)
      : partial(instantiate(mla_split_partial::family(),
                            {{"HEADS", d.heads}, {"C", d.kv_lora}, {"R", d.rope}, {"Q_DT", mma >= 2 ? 1 : 0}, {"KV_DT", dtype_code(kv_t)}, {"MMA", mma}},
                            arch)),
        combine(mla_split_combine_kernel(d.heads, d.kv_lora, ElemType::F32, arch)), heads(d.heads), C(d.kv_lora), R(d.rope),
        q_t(mma >= 2 ? ElemType::BF16 : ElemType::F32) {}
  size_t workspace_bytes(int64_t T, int64_t splits) const { return static_cast<size_t>(T * heads * splits * (C + 2) * 4); }
  // q rows dense ([T, heads * C] and [T, heads * R]), out [T, heads * C].
  void launch(Gpu& g, const DevBuf& ql, const DevBuf& qr, const DevBuf& cache, const DevBuf& len, const DevBuf* mask, const DevBuf& ws,
              const DevBuf& out, int64_t T, int64_t splits, float scale) const {
    launch_partial(g, ql, qr, cache, len, mask, ws, T, splits, scale);
    g.launch(combine, T, {Gpu::ptr(ws), Gpu::ptr(out), Gpu::i32(T), Gpu::i32(splits), Gpu::i32(heads * C)});
  }
  void launch_partial(Gpu& g, const DevBuf& ql, const DevBuf& qr, const DevBuf& cache, const DevBuf& len, const DevBuf* mask,
                      const DevBuf& ws, int64_t T, int64_t splits, float scale) const {
    g.launch(partial, T,
             {Gpu::ptr(ql), Gpu::ptr(qr), Gpu::ptr(cache), Gpu::ptr(len), mask ? Gpu::ptr(*mask) : Gpu::null(), Gpu::ptr(ws), Gpu::i32(T),
              Gpu::i32(splits), Gpu::i32(heads * C), Gpu::i32(heads * R), Gpu::i32(R), Gpu::i32((T + 31) / 32), Gpu::f32(scale)},
             splits);
  }
};

TEST(GpuOps, MlaSplitMatchesTheCpuOp) {
  REQUIRE_GPU();
  struct Case { cpu::MlaDims d; int64_t past, T, splits; bool tree; ElemType kv_t; int mma = 0; };
  for (const Case& c : {Case{{4, 64, 32, 16, 32}, 37, 5, 3, false, F32}, Case{{4, 64, 32, 16, 32}, 11, 40, 6, true, F32},
                        Case{{6, 48, 24, 8, 20}, 0, 7, 4, false, F32}, Case{{6, 48, 24, 8, 20}, 20, 9, 1, true, BF16},
                        Case{{10, 40, 0, 24, 0}, 0, 40, 12, true, BF16}, Case{{64, 512, 128, 64, 128}, 300, 3, 7, false, BF16},
                        // The tensor-core partial (MMA 1): K2.6 width causal, 16 heads tree-masked over empty splits.
                        Case{{64, 512, 128, 64, 128}, 300, 3, 7, false, BF16, 1}, Case{{16, 64, 32, 16, 32}, 11, 40, 6, true, BF16, 1},
                        Case{{16, 64, 32, 16, 32}, 0, 9, 12, false, BF16, 1},
                        // MMA 2 (every head a block, bf16 queries and probabilities: 1e-2): K2.6 width
                        // causal over several tiles a split, 16 heads tree-masked with splits past the keys.
                        Case{{64, 512, 128, 64, 128}, 300, 3, 2, false, BF16, 2}, Case{{16, 64, 32, 16, 32}, 11, 40, 6, true, BF16, 2},
                        Case{{64, 512, 128, 64, 128}, 1000, 1, 3, false, BF16, 2},
                        // MMA 3 (the queries' depth halves in registers): the same (C + R by 32).
                        Case{{64, 512, 128, 64, 128}, 300, 3, 2, false, BF16, 3}, Case{{16, 64, 32, 32, 32}, 11, 40, 6, true, BF16, 3},
                        Case{{64, 512, 128, 64, 128}, 1000, 1, 3, false, BF16, 3}}) {
    const cpu::MlaDims& d = c.d;
    const int64_t D = d.kv_lora + d.rope, max_slots = c.past + c.T + 3;
    const bool bf16_q = c.mma >= 2;
    const std::vector<float> qlat = random_values(c.T * d.heads * d.kv_lora, 14, 1.f, bf16_q);
    const std::vector<float> qrope = random_values(c.T * d.heads * d.rope, 15, 1.f, bf16_q);
    const std::vector<float> cache = random_values(max_slots * D, 16, 1.f, c.kv_t == BF16);
    const std::vector<uint32_t> mask = c.tree ? random_tree_mask(c.T, 17) : std::vector<uint32_t>();
    const std::vector<int32_t> len = {static_cast<int32_t>(c.past)};
    const MlaSplitPair pair(d, c.kv_t, gpu->arch(), c.mma);
    DevBuf d_ql = gpu->upload_as(qlat, pair.q_t), d_qr = gpu->upload_as(qrope, pair.q_t), d_cache = gpu->upload_as(cache, c.kv_t),
           d_len = gpu->upload(len);
    DevBuf d_mask = gpu->upload(c.tree ? mask : std::vector<uint32_t>{0}), d_out = gpu->alloc(c.T * d.heads * d.kv_lora * 4);
    DevBuf d_ws = gpu->alloc(pair.workspace_bytes(c.T, c.splits));
    const float scale = 0.125f;
    pair.launch(*gpu, d_ql, d_qr, d_cache, d_len, c.tree ? &d_mask : nullptr, d_ws, d_out, c.T, c.splits, scale);
    Matrix latent(c.past + c.T, d.kv_lora), krope(c.past + c.T, d.rope);
    for (int64_t s = 0; s < c.past + c.T; ++s) {
      for (int64_t j = 0; j < d.kv_lora; ++j) latent.row(s)[j] = cache[s * D + j];
      for (int64_t j = 0; j < d.rope; ++j) krope.row(s)[j] = cache[s * D + d.kv_lora + j];
    }
    const Matrix want = cpu::mla_attention_absorbed(matrix(c.T, d.heads * d.kv_lora, qlat), matrix(c.T, d.heads * d.rope, qrope),
                                                    latent, krope, c.past, mask, d, scale);
    EXPECT_LT(relative_error(gpu->download<float>(d_out, want.data.size()), want.data), c.mma >= 2 ? 1e-2 : 1e-4)
        << pair.partial.id << " tree=" << c.tree << " splits=" << c.splits;
  }
}

// mla_split_combine_uv (the combine and W_UV's product in one launch, attention_uv.h) at K2.6's
// width: over the all-heads partial's splits, against the combine's bf16 latent times W_UV on the
// host (the same rounding of the latent first), 1, 3 and 16 tokens, W_UV strided as kv_b_proj's.
TEST(GpuOps, MlaSplitCombineUvIsTheCombineThenWuv) {
  REQUIRE_GPU();
  const cpu::MlaDims d{64, 512, 128, 64, 128};
  constexpr int64_t N = 128, kHeadStride = 2 * N * 512;
  const MlaSplitPair pair(d, BF16, gpu->arch(), 2);
  const KernelSource uv = mla_split_combine_uv_kernel(d.heads, d.kv_lora, N, BF16, F32, gpu->arch());
  const KernelSource comb_bf16 = mla_split_combine_kernel(d.heads, d.kv_lora, BF16, gpu->arch());
  const std::vector<float> w = random_values(d.heads * kHeadStride, 21, 0.05f, true);
  DevBuf d_w = gpu->upload_as(w, BF16);
  for (const int64_t T : {int64_t{1}, int64_t{3}, int64_t{16}}) {
    const int64_t past = 500, splits = T == 1 ? 17 : 5, D = d.kv_lora + d.rope;
    const std::vector<float> qlat = random_values(T * d.heads * d.kv_lora, 22, 1.f, true), qrope = random_values(T * d.heads * d.rope, 23, 1.f, true);
    const std::vector<float> cache = random_values((past + T) * D, 24, 1.f, true);
    DevBuf d_ql = gpu->upload_as(qlat, BF16), d_qr = gpu->upload_as(qrope, BF16), d_cache = gpu->upload_as(cache, BF16),
           d_len = gpu->upload(std::vector<int32_t>{static_cast<int32_t>(past)});
    DevBuf d_ws = gpu->alloc(pair.workspace_bytes(T, splits)), d_lat = gpu->alloc(T * d.heads * d.kv_lora * 2), d_y = gpu->alloc(T * d.heads * N * 4);
    pair.launch_partial(*gpu, d_ql, d_qr, d_cache, d_len, nullptr, d_ws, T, splits, 0.125f);
    gpu->launch(comb_bf16, T, {Gpu::ptr(d_ws), Gpu::ptr(d_lat), Gpu::i32(T), Gpu::i32(splits), Gpu::i32(d.heads * d.kv_lora)});
    // W_UV: each head's rows after its N W_UK rows.
    gpu->launch(uv, T, {Gpu::ptr(d_ws), Gpu::ptr(d_w, N * d.kv_lora * 2), Gpu::ptr(d_y), Gpu::i32(T), Gpu::i32(splits),
                        Gpu::i32(kHeadStride), Gpu::i32(d.heads * N)});
    const std::vector<uint16_t> lat = gpu->download<uint16_t>(d_lat, T * d.heads * d.kv_lora);
    std::vector<float> want(T * d.heads * N);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < d.heads; ++h)
        for (int64_t n = 0; n < N; ++n) {
          double acc = 0;
          for (int64_t c = 0; c < d.kv_lora; ++c)
            acc += static_cast<double>(bf16_to_float(lat[(t * d.heads + h) * d.kv_lora + c])) * w[h * kHeadStride + (N + n) * d.kv_lora + c];
          want[(t * d.heads + h) * N + n] = static_cast<float>(acc);
        }
    // The fused merge adds the splits in one order, the chunked combine in two groups: a latent
    // element may round to the neighbouring bf16 (2^-8 of itself), ~2e-5 of the product.
    EXPECT_LT(relative_error(gpu->download<float>(d_y, want.size()), want), 1e-4) << uv.id << " T=" << T;
  }
}

// The split pair at Kimi K2.6's width (64 heads, latent 512, rope 64) against mla_attention: the
// CPU op's values at 1 token over 4,096 keys (the split count the lowering picks,
// mla_split_count at max_context = the keys), then ms, TB/s over the cache and TFLOP/s of both
// paths at 1 and 64 (tree) tokens over 4,096 and 32,768 keys, f32 and bf16 caches; the all-heads
// partials over 131,072 keys too.
TEST(GpuOps, MlaSplitAtK26WidthFigures) {
  REQUIRE_GPU();
  const cpu::MlaDims d{64, 512, 128, 64, 128};
  const int64_t D = d.kv_lora + d.rope, T = 64, words = (T + 31) / 32;
  // bf16-exact queries: MMA 2 reads them as bf16, the others as f32, all the same values.
  const std::vector<float> qlat = random_values(T * d.heads * d.kv_lora, 41, 1.f, true);
  const std::vector<float> qrope = random_values(T * d.heads * d.rope, 42, 1.f, true);
  std::vector<uint32_t> mask(static_cast<size_t>(T * words), 0u);  // a chain: every token sees its ancestors
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j <= t; ++j) mask[t * words + j / 32] |= 1u << (j % 32);
  DevBuf d_mask = gpu->upload(mask), d_out = gpu->alloc(T * d.heads * d.kv_lora * 4);
  const float scale = 0.0723f;
  for (const auto& [kv_t, mma] : {std::pair{F32, 0}, std::pair{BF16, 0}, std::pair{BF16, 1}, std::pair{BF16, 2}, std::pair{BF16, 3}}) {
    const MlaSplitPair pair(d, kv_t, gpu->arch(), mma);
    DevBuf d_ql = gpu->upload_as(qlat, pair.q_t), d_qr = gpu->upload_as(qrope, pair.q_t);
    const KernelSource old = mla_attention_kernel(d.heads, d.kv_lora, d.rope, F32, kv_t, F32, gpu->arch());
    for (const int64_t past : {int64_t{4096}, int64_t{32768}, int64_t{131072}}) {
      if (past > 32768 && mma < 2) continue;  // 128K keys (K2.6's long contexts): the all-heads partials only
      const std::vector<float> cache = random_values((past + T) * D, 43, 1.f, kv_t == BF16);
      const std::vector<int32_t> len = {static_cast<int32_t>(past)};
      DevBuf d_cache = gpu->upload_as(cache, kv_t), d_len = gpu->upload(len);
      int64_t max_splits = 132;  // the 1-token sweep's largest
      for (const int64_t t : {int64_t{1}, int64_t{8}, int64_t{16}, T}) max_splits = std::max(max_splits, t * mla_split_count(pair.partial, past, t, gpu->arch()));
      DevBuf d_ws = gpu->alloc(pair.workspace_bytes(1, max_splits));
      if (past == 4096) {
        pair.launch(*gpu, d_ql, d_qr, d_cache, d_len, nullptr, d_ws, d_out, 1, mla_split_count(pair.partial, past, 1, gpu->arch()), scale);
        Matrix latent(past + 1, d.kv_lora), krope(past + 1, d.rope);
        for (int64_t s = 0; s <= past; ++s) {
          for (int64_t j = 0; j < d.kv_lora; ++j) latent.row(s)[j] = cache[s * D + j];
          for (int64_t j = 0; j < d.rope; ++j) krope.row(s)[j] = cache[s * D + d.kv_lora + j];
        }
        const Matrix want = cpu::mla_attention_absorbed(matrix(1, d.heads * d.kv_lora, qlat), matrix(1, d.heads * d.rope, qrope), latent,
                                                        krope, past, {}, d, scale);
        EXPECT_LT(relative_error(gpu->download<float>(d_out, want.data.size()), want.data), mma >= 2 ? 1e-2 : 1e-4) << pair.partial.id;
      }
      const double elem = kv_t == BF16 ? 2.0 : 4.0;
      if (mma >= 2)  // the split count's trade: SMs busy against the partials the combine reads back
        for (const int64_t splits : {int64_t{33}, int64_t{66}, int64_t{132}}) {
          const double ms = gpu->time_us([&] {
            for (int r = 0; r < 10; ++r) pair.launch(*gpu, d_ql, d_qr, d_cache, d_len, nullptr, d_ws, d_out, 1, splits, scale);
          }) / 1000.0 / 10;
          const double part_ms = gpu->time_us([&] {
            for (int r = 0; r < 10; ++r) pair.launch_partial(*gpu, d_ql, d_qr, d_cache, d_len, nullptr, d_ws, 1, splits, scale);
          }) / 1000.0 / 10;
          std::printf("[ figures  ] mla_split pair (all heads, MMA %d) K2.6 bf16 cache, %lld keys, 1 token, %lld splits: %.4f ms (partial %.4f), %.2f TB/s over the cache\n",
                      mma, static_cast<long long>(past), static_cast<long long>(splits), ms, part_ms, elem * (past + 1) * D / (ms * 1e-3) / 1e12);
        }
      for (const int64_t t : {int64_t{1}, int64_t{8}, int64_t{16}, T}) {
        const bool tree = t > 1;
        const int64_t splits = mla_split_count(pair.partial, past, t, gpu->arch());
        const int reps = tree ? 3 : 10;
        const double split_ms = gpu->time_us([&] {
          for (int r = 0; r < reps; ++r) pair.launch(*gpu, d_ql, d_qr, d_cache, d_len, tree ? &d_mask : nullptr, d_ws, d_out, t, splits, scale);
        }) / 1000.0 / reps;
        if (mma >= 2) {  // (its queries are bf16: mla_attention's f32 rows are timed with the others)
          const double bytes = elem * (past + t) * D, flop = 2.0 * t * d.heads * (past + t) * (D + d.kv_lora);
          std::printf("[ figures  ] mla_split pair (all heads, MMA %d) K2.6 bf16 cache, %lld keys, %lld tokens (%lld splits): %.4f ms, %.2f TB/s over the cache, %.1f TFLOP/s\n",
                      mma, static_cast<long long>(past), static_cast<long long>(t), static_cast<long long>(splits), split_ms,
                      bytes / (split_ms * 1e-3) / 1e12, flop / (split_ms * 1e-3) / 1e12);
          continue;
        }
        const double old_ms = gpu->time_ms(old, t,
                                           {Gpu::ptr(d_ql), Gpu::ptr(d_qr), Gpu::ptr(d_cache), Gpu::ptr(d_len), tree ? Gpu::ptr(d_mask) : Gpu::null(),
                                            Gpu::ptr(d_out), Gpu::i32(t), Gpu::i32(d.heads * d.kv_lora), Gpu::i32(d.heads * d.rope), Gpu::i32(d.rope),
                                            Gpu::i32(d.heads * d.kv_lora), Gpu::i32(words), Gpu::f32(scale)},
                                           reps);
        const double bytes = elem * (past + t) * D, flop = 2.0 * t * d.heads * (past + t) * (D + d.kv_lora);
        const char* cache_t = kv_t == BF16 ? "bf16" : "f32";
        std::printf("[ figures  ] mla_split pair%s K2.6 %s cache, %lld keys, %lld tokens (%lld splits): %.4f ms, %.2f TB/s over the cache, %.1f TFLOP/s\n",
                    mma ? " (tensor cores)" : "", cache_t, static_cast<long long>(past), static_cast<long long>(t), static_cast<long long>(splits), split_ms,
                    bytes / (split_ms * 1e-3) / 1e12, flop / (split_ms * 1e-3) / 1e12);
        std::printf("[ figures  ] mla_attention  K2.6 %s cache, %lld keys, %lld tokens: %.3f ms, %.2f TB/s over the cache, %.1f TFLOP/s\n",
                    cache_t, static_cast<long long>(past), static_cast<long long>(t), old_ms, bytes / (old_ms * 1e-3) / 1e12,
                    flop / (old_ms * 1e-3) / 1e12);
        std::printf("[ figures  ] speed-up of the split pair: %.1fx\n", old_ms / split_ms);
      }
    }
  }
}

TEST(GpuOps, KvAppendThenCompactKeepsThePath) {
  REQUIRE_GPU();
  const int64_t C = 48, R = 8, D = C + R, past = 10, T = 6, max_slots = 20, src_stride = D + 5;
  const std::vector<float> cache0 = random_values(max_slots * D, 18);
  const std::vector<float> src = random_values(T * src_stride, 19);
  DevBuf d_cache = gpu->upload(cache0), d_src = gpu->upload(src), d_len = gpu->upload(std::vector<int32_t>{past});
  const KernelSource append = kv_append_kernel(C, R, F32, F32);
  // latent = columns [0, C) of src rows, rope = columns [C+2, C+2+R) (any strided views).
  gpu->launch(append, T, {Gpu::ptr(d_src), Gpu::ptr(d_src, (C + 2) * 4), Gpu::ptr(d_cache), Gpu::ptr(d_len), Gpu::i32(T),
                          Gpu::i32(src_stride), Gpu::i32(src_stride), Gpu::i32(max_slots)});
  std::vector<float> want = cache0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < D; ++j) want[(past + t) * D + j] = src[t * src_stride + (j < C ? j : j + 2)];
  ASSERT_EQ(gpu->download<float>(d_cache, want.size()), want);

  const std::vector<int32_t> keep = {0, 2, 3, 5, 99, 99};  // entries past n_keep are ignored
  DevBuf d_keep = gpu->upload(keep), d_n = gpu->upload(std::vector<int32_t>{4});
  const KernelSource compact = kv_compact_kernel(C, R, F32);
  gpu->launch(compact, T, {Gpu::ptr(d_cache), Gpu::ptr(d_len), Gpu::ptr(d_keep), Gpu::ptr(d_n), Gpu::i32(T), Gpu::i32(max_slots)});
  std::vector<float> compacted = want;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < D; ++j) compacted[(past + i) * D + j] = want[(past + keep[i]) * D + j];
  ASSERT_EQ(gpu->download<float>(d_cache, want.size()), compacted);

  // Garbage step inputs (graph warm-up) stay in bounds: rows clamp to the last slot.
  DevBuf d_bad_len = gpu->upload(std::vector<int32_t>{100000}), d_bad_n = gpu->upload(std::vector<int32_t>{-7});
  gpu->launch(append, T, {Gpu::ptr(d_src), Gpu::ptr(d_src), Gpu::ptr(d_cache), Gpu::ptr(d_bad_len), Gpu::i32(T), Gpu::i32(src_stride),
                          Gpu::i32(src_stride), Gpu::i32(max_slots)});
  gpu->launch(compact, T, {Gpu::ptr(d_cache), Gpu::ptr(d_bad_len), Gpu::ptr(d_keep), Gpu::ptr(d_bad_n), Gpu::i32(T), Gpu::i32(max_slots)});
  const std::vector<float> after = gpu->download<float>(d_cache, want.size());
  EXPECT_TRUE(std::equal(after.begin(), after.begin() + (max_slots - 1) * D, compacted.begin()));
}

// The fused kv_a_layernorm + key rope + append + query rope (mla_rope_append.cuh) against the
// CPU ops one by one: K2.6 widths (C 512, R 64, 64 heads, YaRN) with an f32 cache and with a bf16
// one; odd widths (C 40, 5 heads: a partial head block) out of place into bf16; no query heads;
// rows past the cache clamp to the last slot.
// W_UK and the rope-append in one launch (uk_rope_append.cuh) give bit for bit the two launches'
// q_latent, cache rows and rotated queries at K2.6 width (W_UK's 8-warp blocks are the rope-append's
// 256 threads), bf16 and f32 data, 1 to 8 tokens (W_UK's tiles of 2, the rope-append's blocks laid
// over several z-slices).
TEST(GpuOps, UkRopeAppendIsWukThenTheRopeAppend) {
  REQUIRE_GPU();
  constexpr int64_t C = 512, R = 64, H = 64, NOPE = 128, past = 5, max_slots = 48;
  const RopeArgs a = rope_args(R, 50000.0, "yarn", 64, 4096, 32, 1, 1.0);
  for (const ElemType t : {BF16, F32})
    for (const int64_t T : {1, 5, 8}) {
      std::vector<int32_t> positions;
      for (int64_t i = 0; i < T; ++i) positions.push_back(static_cast<int32_t>(past + i));
      DevBuf d_pos = gpu->upload(positions), d_len = gpu->upload(std::vector<int32_t>{past});
      // q_b's rows (H heads of nope | rope), kv_a's rows (latent | k_pe), W_UK [H][K = NOPE][N = C].
      const int64_t qs = H * (NOPE + R), kv_stride = C + R;
      const std::vector<float> q = random_values(T * qs, 41, 1.f, t == BF16), kva = random_values(T * kv_stride, 42, 2.f, t == BF16);
      const std::vector<float> wuk = random_values(H * NOPE * C, 43, 0.1f, true), w = random_values(C, 44, 1.f, true);
      const std::vector<float> cache0 = random_values(max_slots * (C + R), 45, 1.f, true);
      DevBuf d_q = gpu->upload_as(q, t), d_kva = gpu->upload_as(kva, t), d_wuk = gpu->upload(to_bf16_bits(wuk)), d_w = gpu->upload(to_bf16_bits(w));
      DevBuf cache = gpu->upload(to_bf16_bits(cache0)), cache2 = gpu->upload(to_bf16_bits(cache0));
      DevBuf y = gpu->alloc(T * H * C * 4), y2 = gpu->alloc(T * H * C * 4), qd = gpu->alloc(T * H * R * 4), qd2 = gpu->alloc(T * H * R * 4);
      const size_t e = t == BF16 ? 2 : 4;
      const KernelSource uk = matmul_kernel(NOPE, C, t, t, /*weight_kn=*/true);
      const KernelSource ra = mla_rope_append_kernel(C, R, H, true, t, t, BF16);
      const KernelSource fused = uk_rope_append_kernel(uk, C, R, H, true, t, BF16);
      const std::vector<Gpu::Arg> uk_args = {Gpu::ptr(d_q), Gpu::ptr(d_wuk), Gpu::ptr(y2), Gpu::ptr(y2), Gpu::i32(T), Gpu::i32(qs),
                                             Gpu::i32(NOPE + R), Gpu::i32(H * C), Gpu::i32(C), Gpu::i32(NOPE * C), Gpu::ptr(d_wuk),
                                             Gpu::ptr(y2), Gpu::f32(0.f), Gpu::ptr(d_wuk)};
      gpu->launch(uk, T, uk_args, H);
      auto rope_args = [&](const DevBuf& c, const DevBuf& qdst) {
        return std::vector<Gpu::Arg>{Gpu::ptr(d_kva), Gpu::ptr(d_w), Gpu::ptr(d_kva, C * e), Gpu::ptr(c), Gpu::ptr(d_len), Gpu::ptr(d_q, NOPE * e),
                                     Gpu::ptr(qdst), Gpu::ptr(d_pos), Gpu::i32(T), Gpu::i32(kv_stride), Gpu::i32(kv_stride), Gpu::i32(max_slots),
                                     Gpu::i32(qs), Gpu::i32(NOPE + R), Gpu::i32(H * R), Gpu::i32(R), Gpu::f32(1e-6f), Gpu::f32(a.theta),
                                     Gpu::f32(a.yarn_factor), Gpu::f32(a.yarn_low), Gpu::f32(a.yarn_high), Gpu::f32(a.cos_sin_scale)};
      };
      gpu->launch(ra, T, rope_args(cache2, qd2));
      std::vector<Gpu::Arg> args = {Gpu::ptr(d_q), Gpu::ptr(d_wuk), Gpu::ptr(y), Gpu::i32(T), Gpu::i32(qs), Gpu::i32(NOPE + R),
                                    Gpu::i32(H * C), Gpu::i32(C), Gpu::i32(NOPE * C)};
      const std::vector<Gpu::Arg> r = rope_args(cache, qd);
      args.insert(args.end(), r.begin(), r.begin() + 8);  // the rope-append's pointers,
      args.insert(args.end(), r.begin() + 9, r.end());    // its strides and floats (n_tokens: W_UK's, once)
      gpu->launch(fused, T, args, H);
      EXPECT_EQ(gpu->download_as(y, T * H * C, t), gpu->download_as(y2, T * H * C, t)) << fused.id << " T " << T << ": q_latent";
      EXPECT_EQ(gpu->download_as(cache, max_slots * (C + R), BF16), gpu->download_as(cache2, max_slots * (C + R), BF16))
          << fused.id << " T " << T << ": the cache";
      EXPECT_EQ(gpu->download_as(qd, T * H * R, t), gpu->download_as(qd2, T * H * R, t)) << fused.id << " T " << T << ": the rotated queries";
    }
}

TEST(GpuOps, MlaRopeAppendMatchesTheCpuOps) {
  REQUIRE_GPU();
  struct Case {
    int64_t C, R, H;
    ElemType q_t, kv_t;
    bool yarn;
  };
  const std::vector<int32_t> positions = {3, 40, 41, 700};
  const int64_t T = positions.size(), past = 5, max_slots = 48;
  DevBuf d_pos = gpu->upload(positions), d_len = gpu->upload(std::vector<int32_t>{past});
  for (const Case& c : {Case{512, 64, 64, F32, F32, true}, Case{512, 64, 64, F32, BF16, true}, Case{40, 16, 5, BF16, F32, false},
                        Case{40, 16, 0, F32, F32, false}}) {
    RopeScaling scaling;
    if (c.yarn) scaling.type = "yarn", scaling.factor = 64, scaling.original_max_position_embeddings = 4096, scaling.mscale = 1,
                scaling.mscale_all_dim = 1;
    const cpu::Rope ref(c.R, 50000.0, scaling, 8192);
    const RopeArgs a = c.yarn ? rope_args(c.R, 50000.0, "yarn", 64, 4096, 32, 1, ref.attention_factor())
                              : rope_args(c.R, 50000.0, "none", 1, 0, 0, 0, 1.0);
    // kv_a's output rows [latent | k_pe] with 3 columns of padding; q_b's rows of H heads of
    // (nope 8 | rope R).
    const int64_t kv_stride = c.C + c.R + 3, qh = 8 + c.R, qs = std::max<int64_t>(c.H, 1) * qh;
    const std::vector<float> kva = random_values(T * kv_stride, 31, 2.f), w = random_values(c.C, 32, 1.f, true);
    const std::vector<float> q = random_values(T * qs, 33), cache0 = random_values(max_slots * (c.C + c.R), 34);
    DevBuf d_kva = gpu->upload(kva), d_w = gpu->upload(to_bf16_bits(w)), d_q = gpu->upload(q);
    DevBuf d_cache = c.kv_t == F32 ? gpu->upload(cache0) : gpu->upload(to_bf16_bits(cache0));
    DevBuf d_qy = gpu->alloc(T * std::max<int64_t>(c.H, 1) * c.R * 4);
    const KernelSource k = mla_rope_append_kernel(c.C, c.R, c.H, true, F32, c.q_t, c.kv_t);
    auto run = [&](const DevBuf& len) {
      gpu->launch(k, T, {Gpu::ptr(d_kva), Gpu::ptr(d_w), Gpu::ptr(d_kva, c.C * 4), Gpu::ptr(d_cache), Gpu::ptr(len), Gpu::ptr(d_q, 8 * 4),
                         Gpu::ptr(d_qy), Gpu::ptr(d_pos), Gpu::i32(T), Gpu::i32(kv_stride), Gpu::i32(kv_stride), Gpu::i32(max_slots),
                         Gpu::i32(qs), Gpu::i32(qh), Gpu::i32(c.H * c.R), Gpu::i32(c.R), Gpu::f32(1e-6f), Gpu::f32(a.theta),
                         Gpu::f32(a.yarn_factor), Gpu::f32(a.yarn_low), Gpu::f32(a.yarn_high), Gpu::f32(a.cos_sin_scale)});
    };
    const int64_t D = c.C + c.R;
    const std::vector<float> before = gpu->download_as(d_cache, max_slots * D, c.kv_t);
    run(d_len);
    std::vector<float> want = cache0;
    for (int64_t t = 0; t < T; ++t) {
      float* row = want.data() + (past + t) * D;
      cpu::rms_norm_row(kva.data() + t * kv_stride, c.C, w.data(), 1e-6f, row);
      std::copy_n(kva.data() + t * kv_stride + c.C, c.R, row + c.C);
      ref.apply_interleaved(row + c.C, positions[t]);
    }
    const std::vector<float> got = gpu->download_as(d_cache, want.size(), c.kv_t);
    EXPECT_LT(relative_error(got, want), tolerance(c.kv_t)) << k.id;
    EXPECT_TRUE(std::equal(got.begin(), got.begin() + past * D, before.begin())) << k.id << ": rows before L kept";
    EXPECT_TRUE(std::equal(got.begin() + (past + T) * D, got.end(), before.begin() + (past + T) * D)) << k.id << ": rows after the step kept";
    if (c.H > 0) {
      std::vector<float> qwant(T * c.H * c.R);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < c.H; ++h) {
          float* r = qwant.data() + (t * c.H + h) * c.R;
          std::copy_n(q.data() + t * qs + h * qh + 8, c.R, r);
          ref.apply_interleaved(r, positions[t]);
        }
      EXPECT_LT(relative_error(gpu->download_as(d_qy, qwant.size(), c.q_t), qwant), tolerance(c.q_t)) << k.id << " queries";
    }
    // A garbage cache length (graph warm-up) writes the last slot, nothing past it.
    DevBuf d_bad = gpu->upload(std::vector<int32_t>{100000});
    run(d_bad);
    const std::vector<float> clamped = gpu->download_as(d_cache, want.size(), c.kv_t);
    EXPECT_TRUE(std::equal(clamped.begin(), clamped.begin() + (max_slots - 1) * D, got.begin())) << k.id << ": only the last slot written";
  }
}

TEST(GpuOps, MoeRouterPlainAndGroupLimited) {
  REQUIRE_GPU();
  struct Case { int64_t e, k, groups, topk_group; bool norm; float scaling; };
  for (const Case& c : {Case{8, 2, 1, 1, true, 2.5f}, Case{16, 4, 4, 2, false, 1.5f}, Case{384, 8, 1, 1, true, 2.827f}}) {
    const int64_t T = 7;
    const std::vector<float> logits = random_values(T * c.e, 20, 4.f), bias = random_values(c.e, 21, 0.5f);
    ModelConfig cfg;
    cfg.n_routed_experts = c.e;
    cfg.num_experts_per_tok = c.k;
    cfg.n_group = c.groups;
    cfg.topk_group = c.topk_group;
    cfg.norm_topk_prob = c.norm;
    DevBuf d_l = gpu->upload(logits), d_b = gpu->upload(bias), d_ids = gpu->alloc(T * c.k * 4), d_w = gpu->alloc(T * c.k * 4);
    const KernelSource k = moe_router_kernel(cfg);
    gpu->launch(k, T, {Gpu::ptr(d_l), Gpu::ptr(d_b), Gpu::ptr(d_ids), Gpu::ptr(d_w), Gpu::i32(T), Gpu::f32(c.scaling)});
    cpu::RouterParams p{c.e, c.k, c.groups, c.topk_group, c.norm, c.scaling};
    const cpu::Routing want = cpu::moe_route_logits(matrix(T, c.e, logits), bias, p);
    EXPECT_EQ(gpu->download<int32_t>(d_ids, T * c.k), want.experts) << k.id;
    EXPECT_LT(relative_error(gpu->download<float>(d_w, T * c.k), want.weights), 1e-5) << k.id;
  }
}

// The router routed by its logits' launch (matmul_siblings.cuh ROUTE_K, K2.6's router beside the
// shared expert's gate and up): the ids and weights of the router kernel over the launch's own
// logits, bit for bit, on the CUDA-core and rows-as-M instances, twice in a row (the count is put
// back to 0 by each launch).
TEST(GpuOps, SiblingsRouteTheStepAsTheRouter) {
  REQUIRE_GPU();
  const int64_t H = 7168, E = 384, I = 2048, K = 8;
  const float scaling = 2.827f;
  ModelConfig cfg;
  cfg.n_routed_experts = E;
  cfg.num_experts_per_tok = K;
  cfg.norm_topk_prob = true;
  const KernelSource router = moe_router_kernel(cfg);
  DevBuf d_w = gpu->upload(to_bf16_bits(random_values(E * H, 81, 0.02f, true))), d_wg = gpu->upload(to_bf16_bits(random_values(I * H, 82, 0.02f, true))),
         d_wu = gpu->upload(to_bf16_bits(random_values(I * H, 83, 0.02f, true))), d_b = gpu->upload(random_values(E, 84, 0.5f));
  DevBuf d_count = gpu->upload(std::vector<uint32_t>{0u});
  struct Case { int64_t tokens, tile, rows_m; };
  for (const Case& c : {Case{1, 1, 0}, Case{5, 2, 0}, Case{11, 0, 0}, Case{16, 0, 16}}) {
    const KernelSource k = matmul_siblings_kernel(H, E, I, I, F32, BF16, gpu->arch(), c.tile, /*glu=*/true, 0, c.rows_m, /*first_f32=*/true, K, true);
    DevBuf d_x = gpu->upload(random_values(c.tokens * H, 85 + c.tokens, 2.f)), d_y = gpu->alloc(c.tokens * E * 4), d_y2 = gpu->alloc(c.tokens * I * 2);
    DevBuf d_ids = gpu->alloc(c.tokens * K * 4), d_wts = gpu->alloc(c.tokens * K * 4), d_ids2 = gpu->alloc(c.tokens * K * 4),
           d_wts2 = gpu->alloc(c.tokens * K * 4);
    for (int round = 0; round < 2; ++round) {
      gpu->launch(k, c.tokens, {Gpu::ptr(d_x), Gpu::ptr(d_w), Gpu::ptr(d_wg), Gpu::ptr(d_wu), Gpu::ptr(d_y), Gpu::ptr(d_y2), Gpu::ptr(d_y2),
                                Gpu::i32(c.tokens), Gpu::i32(H), Gpu::i32(E), Gpu::i32(I), Gpu::i32(I), Gpu::null(), Gpu::null(), Gpu::f32(0),
                                Gpu::ptr(d_b), Gpu::ptr(d_ids), Gpu::ptr(d_wts), Gpu::ptr(d_count), Gpu::f32(scaling)});
      EXPECT_EQ(gpu->download<uint32_t>(d_count, 1)[0], 0u) << k.id << ": the count is put back";
      gpu->launch(router, c.tokens, {Gpu::ptr(d_y), Gpu::ptr(d_b), Gpu::ptr(d_ids2), Gpu::ptr(d_wts2), Gpu::i32(c.tokens), Gpu::f32(scaling)});
      EXPECT_EQ(gpu->download<int32_t>(d_ids, c.tokens * K), gpu->download<int32_t>(d_ids2, c.tokens * K)) << k.id << " round " << round;
      EXPECT_EQ(gpu->download<uint32_t>(d_wts, c.tokens * K), gpu->download<uint32_t>(d_wts2, c.tokens * K)) << k.id << " round " << round;
    }
  }
}

// ---- Routed experts grouped by expert (kernels_templates/moe_grouped.cuh) -------------------

// E experts' gate, up [I, H] and down [H, I] on the device (bf16, or INT4 with bf16 scales) and
// their values on the host as the CPU op reads them. Experts not in `filled` stay zero bytes on
// the device and empty on the host (no pair may choose them).
struct DeviceExperts {
  int64_t E = 0, H = 0, I = 0;
  bool int4 = false;
  int64_t layout = 0;  // the INT4 matrices' device layout (W_LAYOUT: 1 is ir/support/int4_frag.h's)
  DevBuf gate, up, down, gate_s, up_s, down_s;
  std::vector<std::vector<float>> host_gate, host_up, host_down;

  std::vector<cpu::ExpertWeights> cpu_view() const {
    std::vector<cpu::ExpertWeights> w(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e)
      w[e] = {host_gate[e].empty() ? nullptr : host_gate[e].data(), host_up[e].empty() ? nullptr : host_up[e].data(),
              host_down[e].empty() ? nullptr : host_down[e].data(), I};
    return w;
  }
};

// Random packed words and scales (any 32-bit word is 8 valid nibbles), dequantised on the host
// with the compressed-tensors rule: (nibble - 8) * scale.
void random_int4(int64_t rows, int64_t cols, uint64_t seed, std::vector<int32_t>& packed, std::vector<uint16_t>& scales,
                 std::vector<float>& values) {
  packed.resize(static_cast<size_t>(rows * cols / 8));
  scales.resize(static_cast<size_t>(rows * cols / 32));
  uint64_t st = seed * 0x9E3779B97F4A7C15ull + 7;
  for (int32_t& w : packed) {
    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
    w = static_cast<int32_t>(st >> 16);
  }
  const std::vector<float> sv = random_values(scales.size(), seed + 1, 1.f);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = float_to_bf16(0.02f + 0.01f * sv[i]);
  values.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint32_t word = static_cast<uint32_t>(packed[r * (cols / 8) + c / 8]);
      const int q = static_cast<int>((word >> (4 * (c % 8))) & 15u) - 8;
      values[r * cols + c] = static_cast<float>(q) * bf16_to_float(scales[r * (cols / 32) + c / 32]);
    }
}

// layout 1: the INT4 experts uploaded in int4_frag order, as the GPU runtime lays a plan's out.
DeviceExperts make_experts(Gpu& gpu, int64_t E, int64_t H, int64_t I, bool int4, const std::vector<int32_t>& filled, int64_t layout = 0) {
  DeviceExperts d;
  d.E = E, d.H = H, d.I = I, d.int4 = int4, d.layout = layout;
  const size_t w_bytes = int4 ? 4 * (I * H / 8) : 2 * (I * H);  // one expert's matrix
  const size_t s_bytes = int4 ? 2 * (I * H / 32) : 0;
  for (DevBuf* b : {&d.gate, &d.up, &d.down}) *b = gpu.alloc(E * w_bytes);
  for (DevBuf* b : {&d.gate_s, &d.up_s, &d.down_s}) *b = gpu.alloc(int4 ? E * s_bytes : 4);
  d.host_gate.resize(E), d.host_up.resize(E), d.host_down.resize(E);
  for (int32_t e : filled) {
    auto one = [&](int64_t rows, int64_t cols, uint64_t seed, DevBuf& w, DevBuf& sc, std::vector<float>& host) {
      if (int4) {
        std::vector<int32_t> packed;
        std::vector<uint16_t> scales;
        random_int4(rows, cols, seed, packed, scales, host);
        if (layout == 1) {  // an expert's rows are whole octets: its slice keeps its byte range
          std::vector<int32_t> p2(packed.size());
          std::vector<uint16_t> s2(scales.size());
          int4_frag::repack_words(reinterpret_cast<const unsigned*>(packed.data()), reinterpret_cast<unsigned*>(p2.data()), rows, cols);
          int4_frag::repack_scales(scales.data(), s2.data(), rows, cols);
          packed.swap(p2), scales.swap(s2);
        }
        gpu.copy_to(w.ptr + e * w_bytes, packed.data(), w_bytes);
        gpu.copy_to(sc.ptr + e * s_bytes, scales.data(), s_bytes);
      } else {
        host = random_values(rows * cols, seed, 0.3f, true);
        const std::vector<uint16_t> bits = to_bf16_bits(host);
        gpu.copy_to(w.ptr + e * w_bytes, bits.data(), w_bytes);
      }
    };
    one(I, H, 1000 + e, d.gate, d.gate_s, d.host_gate[e]);
    one(I, H, 2000 + e, d.up, d.up_s, d.host_up[e]);
    one(H, I, 3000 + e, d.down, d.down_s, d.host_down[e]);
  }
  return d;
}

struct GroupedKernels {
  KernelSource gate_up, down, combine;
};

// The three launches of one MoE layer at T tokens: out (+)= experts(x) (ACC as `k.combine`).
void run_grouped(Gpu& gpu, const GroupedKernels& k, const DeviceExperts& d, int64_t T, const DevBuf& x, const DevBuf& ids,
                 const DevBuf& weights, const DevBuf& scratch, const DevBuf& out) {
  const int64_t K = kernel_param(k.gate_up, "TOPK");
  const size_t partial_at = 4 * static_cast<size_t>(T * K * d.I);
  // ROUTE 0: the router's arguments are unread (ROUTE > 0 launches: check_routed_grouped).
  gpu.launch(k.gate_up, T, {Gpu::ptr(x), Gpu::ptr(ids), Gpu::ptr(d.gate), Gpu::ptr(d.gate_s), Gpu::ptr(d.up), Gpu::ptr(d.up_s),
                            Gpu::ptr(scratch), Gpu::i32(T), Gpu::i32(d.H), Gpu::ptr(ids), Gpu::ptr(weights), Gpu::ptr(weights),
                            Gpu::f32(1.f)});
  gpu.launch(k.down, T, {Gpu::ptr(scratch), Gpu::ptr(ids), Gpu::ptr(weights), Gpu::ptr(d.down), Gpu::ptr(d.down_s),
                         Gpu::ptr(scratch, partial_at), Gpu::i32(T)});
  gpu.launch(k.combine, T, {Gpu::ptr(scratch, partial_at), Gpu::ptr(out), Gpu::ptr(out), Gpu::i32(T), Gpu::i32(d.H)});
}

// Checks one step of T tokens against cpu::moe_experts (ids clamped on the host as the kernels
// clamp them), accumulating onto a random y0.
void check_grouped(Gpu& gpu, const GroupedKernels& k, const DeviceExperts& d, int64_t T, const std::vector<int32_t>& ids,
                   uint64_t seed, double tol) {
  const int64_t K = kernel_param(k.gate_up, "TOPK");
  const std::vector<float> x = random_values(T * d.H, seed);
  const std::vector<float> weights = random_values(T * K, seed + 1);
  cpu::Routing routing;
  routing.top_k = K;
  for (int32_t e : ids) routing.experts.push_back(std::clamp<int32_t>(e, 0, static_cast<int32_t>(d.E - 1)));
  routing.weights = weights;
  const Matrix moe = cpu::moe_experts(matrix(T, d.H, x), routing, d.cpu_view());
  const std::vector<float> y0 = random_values(T * d.H, seed + 2);
  const DevBuf d_x = gpu.upload(x), d_ids = gpu.upload(ids), d_w = gpu.upload(weights), d_y = gpu.upload(y0);
  const DevBuf scratch = gpu.alloc(4 * static_cast<size_t>(T * K * (d.I + d.H)));
  run_grouped(gpu, k, d, T, d_x, d_ids, d_w, scratch, d_y);
  std::vector<float> want = moe.data;
  for (size_t i = 0; i < want.size(); ++i) want[i] += y0[i];
  EXPECT_LT(relative_error(gpu.download<float>(d_y, want.size()), want), tol) << k.gate_up.id << " at " << T << " tokens";
}

// The router folded into gate/up (ROUTE, compiler/passes/router_experts.h): the launch routes the
// step from the logits; the ids and weights it writes equal the CPU router's, and down + combine
// on them give the CPU router + experts' step.
void check_routed_grouped(Gpu& gpu, const GroupedKernels& k, const DeviceExperts& d, int64_t T, uint64_t seed, double tol) {
  const int64_t K = kernel_param(k.gate_up, "TOPK");
  const std::vector<float> x = random_values(T * d.H, seed), logits = random_values(T * d.E, seed + 1, 4.f);
  const std::vector<float> bias = random_values(d.E, seed + 2, 0.5f);
  const float scaling = 2.5f;
  const cpu::Routing want = cpu::moe_route_logits(matrix(T, d.E, logits), bias, cpu::RouterParams{d.E, K, 1, 1, true, scaling});
  const Matrix moe = cpu::moe_experts(matrix(T, d.H, x), want, d.cpu_view());
  const DevBuf d_x = gpu.upload(x), d_l = gpu.upload(logits), d_b = gpu.upload(bias), d_y = gpu.upload(std::vector<float>(T * d.H, 0.f));
  const DevBuf d_ids = gpu.upload(std::vector<int32_t>(T * K, -1)), d_w = gpu.upload(std::vector<float>(T * K, -1.f));
  const DevBuf scratch = gpu.alloc(4 * static_cast<size_t>(T * K * (d.I + d.H)));
  const size_t partial_at = 4 * static_cast<size_t>(T * K * d.I);
  gpu.launch(k.gate_up, T, {Gpu::ptr(d_x), Gpu::ptr(d_ids), Gpu::ptr(d.gate), Gpu::ptr(d.gate_s), Gpu::ptr(d.up), Gpu::ptr(d.up_s),
                            Gpu::ptr(scratch), Gpu::i32(T), Gpu::i32(d.H), Gpu::ptr(d_l), Gpu::ptr(d_b), Gpu::ptr(d_w), Gpu::f32(scaling)});
  EXPECT_EQ(gpu.download<int32_t>(d_ids, T * K), want.experts) << k.gate_up.id << " at " << T << " tokens";
  EXPECT_LT(relative_error(gpu.download<float>(d_w, T * K), want.weights), 1e-5) << k.gate_up.id;
  gpu.launch(k.down, T, {Gpu::ptr(scratch), Gpu::ptr(d_ids), Gpu::ptr(d_w), Gpu::ptr(d.down), Gpu::ptr(d.down_s),
                         Gpu::ptr(scratch, partial_at), Gpu::i32(T)});
  gpu.launch(k.combine, T, {Gpu::ptr(scratch, partial_at), Gpu::ptr(d_y), Gpu::ptr(d_y), Gpu::i32(T), Gpu::i32(d.H)});
  EXPECT_LT(relative_error(gpu.download<float>(d_y, moe.data.size()), moe.data), tol) << k.gate_up.id << " at " << T << " tokens";
}

TEST(GpuOps, MoeGroupedRoutesItsStep) {
  REQUIRE_GPU();
  const int64_t E = 40, K = 4, H = 256, I = 64;
  std::vector<int32_t> all(E);
  for (int32_t e = 0; e < E; ++e) all[e] = e;
  for (const bool int4 : {false, true}) {
    const DeviceExperts d = make_experts(*gpu, E, H, I, int4, all);
    for (const int64_t T : {1, 5, 16, 64}) {  // 64: 4 passes of gate/up's 16 warps (INT4) routing
      GroupedKernels k{moe_grouped_gate_up_kernel(H, I, E, K, int4, ElemType::F32, kDefaultArch, {}, MoeRouteFold{64, true}),
                       moe_grouped_down_kernel(H, I, E, K, int4), moe_combine_kernel(H, K, ElemType::F32, false)};
      check_routed_grouped(*gpu, k, d, T, 70 + T, int4 ? 1e-4 : 1e-5);
    }
  }
}

// Small shapes: several tokens per expert (1..64 tokens over 6 experts), clamped ids, bf16
// rows of odd length (the one-element path), ragged row tiles and pair chunks (tuning given),
// INT4 rows spanning two staged column chunks (H 1056: 1024 + 32).
TEST(GpuOps, MoeGroupedSharedExpertsOddTilesClampedIds) {
  REQUIRE_GPU();
  struct Shape {
    bool int4;
    int64_t H, I;
    ParamValues tuning;  // empty: the arch's heuristics
  };
  const int64_t E = 6, K = 3;
  const std::vector<Shape> shapes = {
      {false, 75, 37, {}},                                          // bf16, K % 8 != 0
      {false, 72, 40, {{"WARPS", 3}, {"ROWS", 3}, {"NT", 3}}},      // bf16 vector path, 9-row tiles
      {true, 1056, 96, {}},                                         // INT4, two column chunks
      {true, 96, 160, {{"WARPS", 2}, {"ROWS", 3}, {"NT", 2}}},      // INT4, 6-row tiles, 2-pair chunks
      // Deeper load rings (moe_ring_stream): bf16 CUDA cores PF 2, INT4 tensor cores PF 2 and 3.
      {false, 72, 40, {{"WARPS", 3}, {"ROWS", 3}, {"NT", 3}, {"PF", 2}}},
      {true, 1056, 96, {{"PF", 2}}},
      {true, 1056, 96, {{"PF", 3}}},
  };
  std::vector<int32_t> all(E);
  for (int64_t e = 0; e < E; ++e) all[e] = static_cast<int32_t>(e);
  for (const Shape& sh : shapes) {
    const DeviceExperts d = make_experts(*gpu, E, sh.H, sh.I, sh.int4, all);
    auto with = [&](ParamValues p) {
      for (const auto& [name, v] : sh.tuning) p[name] = v;
      return p;
    };
    const int64_t wf = sh.int4 ? 1 : 0;
    GroupedKernels k{
        instantiate(moe_grouped_gate_up::family(), with({{"H", sh.H}, {"I", sh.I}, {"E", E}, {"TOPK", K}, {"W_FMT", wf}, {"X_DT", 0}, {"ROUTE", 0}, {"RNORM", 0}, {"W_LAYOUT", 0}}),
                    kDefaultArch),
        instantiate(moe_grouped_down::family(), with({{"H", sh.H}, {"I", sh.I}, {"E", E}, {"TOPK", K}, {"W_FMT", wf}, {"W_LAYOUT", 0}}), kDefaultArch),
        moe_combine_kernel(sh.H, K, F32, /*accumulate=*/true)};
    for (int64_t T : {1, 5, 17, 64}) {
      std::vector<int32_t> ids(T * K);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < K; ++j) ids[t * K + j] = static_cast<int32_t>((t * 7 + 2 * j) % E);
      if (T >= 5) ids[3] = -4, ids[T * K - 1] = static_cast<int32_t>(E + 9);  // clamped to 0 and E - 1
      check_grouped(*gpu, k, d, T, ids, 40 + T, 1e-4);
    }
  }
}

// One expert kernel's tuning in GpuOps.MoeGroupedKimiK26WidthInt4's variants.
struct K26Int4Tuning {
  int64_t rows, nt, pf, blocks;  // rows 0: the arch's heuristics
  int64_t mma = 0, warps = 0;    // warps 0: the arch's heuristics
  int64_t ring = 0;              // shared-memory stages a warp (cp.async), 0: the PF register ring
  int64_t xb = 0;                // 1: activations rounded to bf16 once staged (one MMA a k-step)
  int64_t tma = 0;               // 1: the ring's copies by the copy engine (cp.async.bulk; RING >= 2, W_LAYOUT 1)
  int64_t ks = 0;                // gate/up's K parts a tile's rows are split into (TMA 1), 0: none
  int64_t minb = 0;              // __launch_bounds__'s minimum blocks an SM, 0: none
  int64_t gpf = 0;               // KiB of a warp's first tile its prologue asks L2 for (W_LAYOUT 1), 0: none
};
struct K26Int4Variant {
  K26Int4Tuning gu, dn;
  bool ring_baseline = false;  // timed beside the rings (KPLAN_MOE_VARIANTS=ring)
  int64_t layout = 0;          // W_LAYOUT: 1 reads experts uploaded in int4_frag order
};

// The variants GpuOps.MoeGroupedKimiK26WidthInt4 checks and times (the first: the arch's tuning).
const std::vector<K26Int4Variant>& k26_int4_variants() {
  static const std::vector<K26Int4Variant> variants = {
      {{0, 0, 0, 0}, {0, 0, 0, 0}},          {{2, 2, 1, 528}, {4, 3, 0, 528}},  // two waves
      {{2, 2, 0, 264}, {4, 3, 1, 264}},      {{4, 2, 1, 264}, {8, 2, 0, 264}},  // PF swapped; more rows a warp
      {{2, 3, 1, 264}, {2, 3, 1, 264}},      {{1, 2, 1, 396}, {2, 2, 1, 396}},  // fewer rows a warp: 3 blocks an SM
      {{2, 2, 1, 132}, {4, 3, 0, 132}},                                         // one block an SM
      // MMA 1 (gate/up ROWS 8 | 16, down 16 | 32; NT up to 16 where shared memory allows):
      {{8, 2, 1, 264, 1}, {16, 3, 1, 264, 1}},   {{8, 3, 1, 264, 1}, {16, 8, 1, 264, 1}},          // MMA 0's NT; 2 blocks an SM
      {{8, 7, 1, 132, 1}, {16, 16, 1, 132, 1}},  {{8, 4, 0, 264, 1}, {16, 16, 0, 264, 1}},         // the most NT; PF 0
      {{16, 4, 1, 264, 1}, {32, 16, 1, 264, 1}}, {{8, 3, 1, 528, 1}, {16, 8, 1, 528, 1}},          // two m-tiles a warp; two waves
      {{8, 6, 1, 132, 1, 16}, {16, 8, 1, 132, 1, 16}}, {{8, 4, 1, 132, 1, 16}, {16, 8, 1, 264, 1}},  // 16 warps a block
      // Deeper load rings of the default (PF 2, 3; moe_ring_stream).
      {{8, 4, 2, 132, 1, 16}, {16, 8, 2, 264, 1}}, {{8, 4, 3, 132, 1, 16}, {16, 8, 3, 264, 1}},
      // The default's 128 + q forms (gate/up MMA 3, down MMA 4: the bias in the MMA's C), together and each alone.
      {{8, 4, 1, 132, 3, 16}, {16, 8, 1, 264, 4}}, {{8, 4, 1, 132, 3, 16}, {16, 8, 1, 264, 1}},
      {{8, 4, 1, 132, 2, 16}, {16, 8, 1, 264, 4}},
      // The PF 1 register ring (the default's) and the shared-memory ring (RING stages of 2 KiB +
      // scales a warp, cp.async): 16 warps an SM with NT 4 / 2 / 1 staged pairs beside 3 / 4 / 5
      // stages; 8-warp blocks, two an SM; down
      // with NT 8 (one block an SM) or 4, 2 (two); the 128 + q forms (gate/up's C fragments leave
      // room for NT 2 beside 3 stages).
      {{8, 4, 1, 132, 2, 16, 0}, {16, 8, 1, 264, 1, 8, 0}, true}, {{8, 4, 0, 132, 2, 16, 3}, {16, 8, 0, 264, 1, 8, 3}},
      {{8, 2, 0, 132, 2, 16, 4}, {16, 4, 0, 264, 1, 8, 3}},
      {{8, 1, 0, 132, 2, 16, 5}, {16, 4, 0, 264, 2, 8, 4}}, {{8, 2, 0, 264, 2, 8, 3}, {16, 2, 0, 264, 1, 8, 6}},
      {{8, 4, 0, 132, 2, 8, 4}, {16, 8, 0, 132, 1, 16, 3}}, {{8, 2, 0, 132, 3, 16, 3}, {16, 8, 0, 264, 4, 8, 3}},
      // The arch's tuning over experts in int4_frag order (W_LAYOUT 1: fragment words straight
      // from 512-byte runs, no transposition), then its PF 2 and 128 + q forms.
      {{0, 0, 0, 0}, {0, 0, 0, 0}, false, 1}, {{8, 4, 2, 132, 2, 16}, {16, 8, 2, 264, 1}, false, 1},
      {{8, 4, 1, 132, 3, 16}, {16, 8, 1, 264, 4}, false, 1},
      // XB 1 over int4_frag: the arch's rows with one MMA a k-step, then the pairs a chunk the
      // halved staging allows (gate/up NT 8: 112 KiB; down NT 16: 64 KiB), then PF 2.
      {{8, 4, 1, 132, 2, 16, 0, 1}, {16, 8, 1, 264, 1, 8, 0, 1}, false, 1},
      {{8, 8, 1, 132, 2, 16, 0, 1}, {16, 16, 1, 264, 1, 8, 0, 1}, false, 1},
      {{8, 8, 2, 132, 2, 16, 0, 1}, {16, 16, 2, 264, 1, 8, 0, 1}, false, 1},
      // The same with the 128 + q forms (gate/up MMA 3, down MMA 4: no HFMA2 a weight pair, the
      // group's -136 x activation sum in the MMA's C; gate/up's C fragments beside NT 8: 126 KiB).
      {{8, 8, 2, 132, 3, 16, 0, 1}, {16, 16, 2, 264, 4, 8, 0, 1}, false, 1},
      // XB 1 over int4_frag through the shared-memory ring (cp.async, waited for by count: the
      // register ring's loads share one scoreboard and drain at a step's first use): gate/up 3
      // stages beside NT 8 (down the default's register ring), then down's 2 stages too, then
      // gate/up's 4 stages beside NT 4 and down's 3 beside NT 8.
      {{8, 8, 0, 132, 2, 16, 3, 1}, {16, 16, 2, 264, 1, 8, 0, 1}, false, 1},
      {{8, 8, 0, 132, 2, 16, 3, 1}, {16, 16, 0, 264, 1, 8, 2, 1}, false, 1},
      {{8, 4, 0, 132, 2, 16, 4, 1}, {16, 8, 0, 264, 1, 8, 3, 1}, false, 1},
      // The same rings copied by the copy engine (TMA 1: lane 0's four cp.async.bulk runs a step
      // onto the stage's mbarrier, all RING stages in flight): gate/up 3 stages beside NT 8 (down
      // the register ring), then 4 beside NT 4 and 5 beside NT 2 with down's 3 and 4 stages, then
      // gate/up as two 8-warp blocks an SM (4 stages beside NT 2).
      {{8, 8, 0, 132, 2, 16, 3, 1, 1}, {16, 16, 2, 264, 1, 8, 0, 1}, false, 1},
      {{8, 4, 0, 132, 2, 16, 4, 1, 1}, {16, 8, 0, 264, 1, 8, 3, 1, 1}, false, 1},
      {{8, 2, 0, 132, 2, 16, 5, 1, 1}, {16, 8, 0, 264, 1, 8, 4, 1, 1}, false, 1},
      {{8, 2, 0, 264, 2, 8, 4, 1, 1}, {16, 8, 0, 264, 1, 8, 4, 1, 1}, false, 1},
      // The 1-token step's many short warps (KPLAN_MOE_VARIANTS=ks): four 8-warp blocks an SM at
      // 64 registers (MINB 4) over the copy engine's 2-stage rings, one pair a chunk; gate/up's
      // rows in two K parts (KS 2: 14 steps a warp), down one 16-row tile a warp (BLOCKS 448).
      {{8, 1, 0, 512, 2, 8, 2, 1, 1, 2, 4}, {16, 1, 0, 448, 1, 8, 2, 1, 1, 0, 4}, false, 1},
      {{8, 1, 0, 256, 2, 16, 2, 1, 1, 4, 2}, {16, 1, 0, 448, 1, 8, 2, 1, 1, 0, 4}, false, 1},
      // The arch's int4_frag tuning (XB 1, PF 2) with the GPF prologue (KPLAN_MOE_VARIANTS=gpf):
      // without PDL it runs just before the kernel's own loads, so only its results are checked here.
      {{8, 8, 2, 132, 2, 16, 0, 1, 0, 0, 0, 8}, {16, 16, 2, 264, 1, 8, 0, 1, 0, 0, 0, 8}, false, 1}};
  return variants;
}

// The three instances of a variant at K2.6 width (INT4 experts) for `arch`.
GroupedKernels k26_int4_instances(const K26Int4Variant& v, std::string_view arch) {
  const int64_t H = 7168, I = 2048, E = 384, K = 8;
  auto tuned = [&](ParamValues p, const K26Int4Tuning& t) {
    if (t.rows)
      p["ROWS"] = t.rows, p["NT"] = t.nt, p["PF"] = t.pf, p["BLOCKS"] = t.blocks, p["MMA"] = t.mma, p["RING"] = t.ring, p["XB"] = t.xb,
      p["TMA"] = t.tma, p["MINB"] = t.minb;
    if (t.ks) p["KS"] = t.ks;  // gate/up's only
    if (t.gpf) p["GPF"] = t.gpf;
    if (t.warps) p["WARPS"] = t.warps;
    return p;
  };
  return {instantiate(moe_grouped_gate_up::family(),
                      tuned({{"H", H}, {"I", I}, {"E", E}, {"TOPK", K}, {"W_FMT", 1}, {"X_DT", 0}, {"ROUTE", 0}, {"RNORM", 0}, {"W_LAYOUT", v.layout}}, v.gu),
                      arch),
          instantiate(moe_grouped_down::family(), tuned({{"H", H}, {"I", I}, {"E", E}, {"TOPK", K}, {"W_FMT", 1}, {"W_LAYOUT", v.layout}}, v.dn), arch),
          moe_combine_kernel(H, K, F32, /*accumulate=*/true, arch)};
}

// Every variant the width test times is a valid instance (shared memory, ring and MMA rules) on
// sm_90: checked here without a GPU, so a bad variant fails in CI, not in a device call.
TEST(GpuOpsVariants, KimiK26WidthInt4VariantsInstantiate) {
  for (const K26Int4Variant& v : k26_int4_variants()) EXPECT_NO_THROW(k26_int4_instances(v, "sm_90"));
}

// Kimi K2.6 width: H 7168, I 2048, 384 INT4 experts, top-8, at 1, 2, 4, 8, 16 and 64 tokens;
// the step's pairs choose among 16 experts (as a verify tree's tokens share experts), the others
// stay zero bytes. Also prints each step's time and bandwidth over the bytes of the experts
// touched (median of 20 runs of the three launches; target >= 65% of 4.3 TB/s), for the arch's
// tuning and for a few other (ROWS, NT, PF, BLOCKS, MMA) choices of the two expert kernels
// (each checked too, at 1..16 tokens): MMA 1 is the tensor-core path.
TEST(GpuOps, MoeGroupedKimiK26WidthInt4) {
  REQUIRE_GPU();
  const int64_t H = 7168, I = 2048, E = 384, K = 8;
  std::vector<int32_t> pool;
  for (int32_t e = 0; e < 16; ++e) pool.push_back(e * 23 + 5);  // 16 experts spread over the stack
  const DeviceExperts rows = make_experts(*gpu, E, H, I, true, pool), frag = make_experts(*gpu, E, H, I, true, pool, 1);
  const std::vector<K26Int4Variant>& variants = k26_int4_variants();
  std::vector<GroupedKernels> instances;
  std::vector<KernelSource> all;
  for (const K26Int4Variant& v : variants) {
    instances.push_back(k26_int4_instances(v, gpu->arch()));
    all.insert(all.end(), {instances.back().gate_up, instances.back().down, instances.back().combine});
  }
  gpu->precompile(all);  // NVRTC on every core
  // KPLAN_MOE_VARIANTS=mma: the heuristics' instance and the MMA 1 variants only (each variant's
  // CPU checks at K2.6 width take most of this test's minutes).
  const char* only = std::getenv("KPLAN_MOE_VARIANTS");
  // KPLAN_MOE_VARIANTS=pf: the heuristics' instance and the deeper load rings (PF 2, 3) only;
  // =bias: the heuristics' instance and the 128 + q forms (MMA 3, 4; both layouts) only; =ring: the
  // heuristics' instance, the shared-memory rings and the register ring timed beside them only;
  // =frag: the heuristics' instance over both layouts and the int4_frag variants only; =xb: the
  // heuristics' instance and the XB 1 variants (checked against the CPU op at the bf16 tolerance,
  // 1e-2: their activations are rounded to bf16) only; =fring: the heuristics' instance and the
  // XB 1 int4_frag shared-memory rings only; =tma: the heuristics' instance and the copy engine's rings (TMA 1) only.
  const bool mma_only = only && std::string(only) == "mma";
  const bool pf_only = only && std::string(only) == "pf";
  const bool bias_only = only && std::string(only) == "bias";
  const bool ring_only = only && std::string(only) == "ring";
  const bool frag_only = only && std::string(only) == "frag";
  const bool xb_only = only && std::string(only) == "xb";
  const bool fring_only = only && std::string(only) == "fring";
  const bool tma_only = only && std::string(only) == "tma";
  const bool ks_only = only && std::string(only) == "ks";  // the heuristics' instance and the K-split / MINB variants only
  const bool gpf_only = only && std::string(only) == "gpf";  // the heuristics' instance and the GPF prologue's variant only
  if (only && !mma_only && !pf_only && !bias_only && !ring_only && !frag_only && !xb_only && !fring_only && !tma_only && !ks_only && !gpf_only)
    FAIL() << "KPLAN_MOE_VARIANTS: mma, pf, bias, ring, frag, xb, fring, tma, ks or gpf, not " << only;
  for (size_t vi = 0; vi < variants.size(); ++vi) {
    const K26Int4Variant& v = variants[vi];
    const GroupedKernels& k = instances[vi];
    const DeviceExperts& d = v.layout == 1 ? frag : rows;
    if (frag_only && v.gu.rows && (v.layout == 0 || v.gu.xb)) continue;
    if (xb_only && v.gu.rows && !v.gu.xb) continue;
    if (fring_only && v.gu.rows && !(v.layout == 1 && (v.gu.ring || v.dn.ring))) continue;
    if (tma_only && v.gu.rows && !(v.gu.tma || v.dn.tma)) continue;
    if (ks_only && v.gu.rows && !(v.gu.ks || v.gu.minb || v.dn.minb)) continue;
    if (gpf_only && v.gu.rows && !v.gu.gpf) continue;
    if (mma_only && v.gu.rows && !v.gu.mma) continue;
    if (pf_only && v.gu.rows && v.gu.pf < 2) continue;
    if (bias_only && v.gu.rows && (v.gu.ring || v.dn.ring || (v.gu.mma < 3 && v.dn.mma < 3))) continue;
    if (ring_only && v.gu.rows && !v.gu.ring && !v.ring_baseline) continue;
    if ((mma_only || pf_only || ring_only) && v.layout == 1 && v.gu.rows) continue;
    for (int64_t T : {1, 2, 4, 8, 16, 64}) {
      if (v.gu.rows && T == 64) continue;  // the variants' CPU checks at 1..16 tokens only
      std::vector<int32_t> ids;
      std::set<int32_t> touched;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < K; ++j) {  // 8 distinct experts of the pool per token
          ids.push_back(pool[(t * 3 + j * (T == 1 ? 1 : 2)) % 16]);
          touched.insert(ids.back());
        }
      check_grouped(*gpu, k, d, T, ids, 70 + T, v.gu.xb || v.dn.xb ? 1e-2 : 1e-4);
      // Timing: the same launches without a host sync between them.
      const DevBuf x = gpu->upload(random_values(T * H, 5)), dids = gpu->upload(ids), w = gpu->upload(random_values(T * K, 6));
      const DevBuf scratch = gpu->alloc(4 * static_cast<size_t>(T * K * (I + H))), out = gpu->alloc(4 * T * H);
      std::vector<float> us;
      for (int rep = 0; rep < 21; ++rep)
        us.push_back(gpu->time_us([&] { run_grouped(*gpu, k, d, T, x, dids, w, scratch, out); }));
      std::sort(us.begin() + 1, us.end());
      const double median = us[11];
      const double bytes = static_cast<double>(touched.size()) * 3 * (I * H / 2 + I * H / 32 * 2);
      std::printf("moe_grouped K2.6 INT4 %s + %s: %lld tokens, %zu experts touched, %.1f MB: %.1f us, %.2f TB/s (%.0f%% of 4.3 TB/s)\n",
                  k.gate_up.id.c_str(), k.down.id.c_str(), static_cast<long long>(T), touched.size(), bytes / 1e6, median,
                  bytes / median / 1e6, 100 * bytes / median / 1e6 / 4.3);
    }
  }
}

// The same at K2.6 width with bf16 experts (bench/configs/k26-bf16-experts: the slice the compiled
// peer is measured on), CUDA-core variants only: a bf16 expert is 4x the INT4 bytes at the same
// math, so this path is bound by the bytes a warp keeps in flight (ROWS x 4 loads of 16 bytes a
// lane, PF doubling them), not by instructions. Each variant against the CPU op at 1 and 4
// tokens; times at 1, 4 and 16 tokens over the bytes of the experts touched.
TEST(GpuOps, MoeGroupedKimiK26WidthBf16) {
  REQUIRE_GPU();
  const int64_t H = 7168, I = 2048, E = 384, K = 8;
  std::vector<int32_t> pool;
  for (int32_t e = 0; e < 16; ++e) pool.push_back(e * 23 + 5);
  const DeviceExperts d = make_experts(*gpu, E, H, I, false, pool);
  struct Tuning {
    int64_t rows, nt, pf, blocks;  // rows 0: the arch's heuristics
  };
  struct Variant {
    Tuning gu, dn;
  };
  const std::vector<Variant> variants = {
      {{0, 0, 0, 0}, {0, 0, 0, 0}},      {{2, 2, 1, 264}, {4, 3, 1, 264}},  // the heuristics; PF on
      {{1, 2, 1, 264}, {2, 3, 1, 264}},  {{4, 2, 0, 264}, {8, 2, 0, 264}},  // fewer rows with PF; more rows without
      {{2, 2, 1, 528}, {4, 3, 1, 528}},  {{1, 1, 1, 396}, {2, 1, 1, 396}},  // two waves; one pair a chunk
      {{1, 2, 2, 264}, {2, 3, 1, 264}},  {{1, 2, 1, 132}, {2, 3, 1, 132}}}; // a deeper ring (PF 2); one block an SM
  auto tuned = [&](ParamValues p, const Tuning& t) {
    if (t.rows) p["ROWS"] = t.rows, p["NT"] = t.nt, p["PF"] = t.pf, p["BLOCKS"] = t.blocks, p["MMA"] = 0;
    return p;
  };
  std::vector<GroupedKernels> instances;
  std::vector<KernelSource> all;
  for (const Variant& v : variants) {
    instances.push_back(
        {instantiate(moe_grouped_gate_up::family(), tuned({{"H", H}, {"I", I}, {"E", E}, {"TOPK", K}, {"W_FMT", 0}, {"X_DT", 0}, {"ROUTE", 0}, {"RNORM", 0}}, v.gu), gpu->arch()),
         instantiate(moe_grouped_down::family(), tuned({{"H", H}, {"I", I}, {"E", E}, {"TOPK", K}, {"W_FMT", 0}}, v.dn), gpu->arch()),
         moe_combine_kernel(H, K, F32, /*accumulate=*/true, gpu->arch())});
    all.insert(all.end(), {instances.back().gate_up, instances.back().down, instances.back().combine});
  }
  gpu->precompile(all);
  for (size_t vi = 0; vi < variants.size(); ++vi) {
    const GroupedKernels& k = instances[vi];
    for (int64_t T : {1, 4, 16}) {
      std::vector<int32_t> ids;
      std::set<int32_t> touched;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < K; ++j) {
          ids.push_back(pool[(t * 3 + j * (T == 1 ? 1 : 2)) % 16]);
          touched.insert(ids.back());
        }
      if (T < 16) check_grouped(*gpu, k, d, T, ids, 90 + T, 1e-4);
      const DevBuf x = gpu->upload(random_values(T * H, 5)), dids = gpu->upload(ids), w = gpu->upload(random_values(T * K, 6));
      const DevBuf scratch = gpu->alloc(4 * static_cast<size_t>(T * K * (I + H))), out = gpu->alloc(4 * T * H);
      std::vector<float> us;
      for (int rep = 0; rep < 21; ++rep) us.push_back(gpu->time_us([&] { run_grouped(*gpu, k, d, T, x, dids, w, scratch, out); }));
      std::sort(us.begin() + 1, us.end());
      const double median = us[11];
      const double bytes = static_cast<double>(touched.size()) * 3 * (2.0 * I * H);
      std::printf("moe_grouped K2.6 bf16 %s + %s: %lld tokens, %zu experts touched, %.1f MB: %.1f us, %.2f TB/s (%.0f%% of 4.3 TB/s)\n",
                  k.gate_up.id.c_str(), k.down.id.c_str(), static_cast<long long>(T), touched.size(), bytes / 1e6, median,
                  bytes / median / 1e6, 100 * bytes / median / 1e6 / 4.3);
    }
  }
}

TEST(GpuOps, SwigluAddCopyRows) {
  REQUIRE_GPU();
  const int64_t T = 4, I = 333;
  const std::vector<float> gu = random_values(T * 2 * I, 25, 3.f), a = random_values(T * I, 26);
  DevBuf d_gu = gpu->upload(gu), d_a = gpu->upload(a), d_s = gpu->alloc(T * I * 4), d_sum = gpu->alloc(T * I * 2), d_c = gpu->alloc(T * I * 4);
  // gate and up: the two halves of a fused gate_up output.
  gpu->launch(swiglu_kernel(I, F32, F32, F32), T, {Gpu::ptr(d_gu), Gpu::ptr(d_gu, I * 4), Gpu::ptr(d_s), Gpu::i32(T), Gpu::i32(2 * I),
                                                   Gpu::i32(2 * I), Gpu::i32(I)});
  gpu->launch(add_kernel(I, F32, F32, BF16), T, {Gpu::ptr(d_s), Gpu::ptr(d_a), Gpu::ptr(d_sum), Gpu::i32(T)});
  gpu->launch(copy_rows_kernel(I, BF16, F32), T, {Gpu::ptr(d_sum), Gpu::ptr(d_c), Gpu::i32(T), Gpu::i32(I), Gpu::i32(I)});
  std::vector<float> want_s(T * I), want_sum(T * I);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < I; ++i) {
      want_s[t * I + i] = cpu::silu(gu[t * 2 * I + i]) * gu[t * 2 * I + I + i];
      want_sum[t * I + i] = want_s[t * I + i] + a[t * I + i];
    }
  EXPECT_LT(relative_error(gpu->download<float>(d_s, T * I), want_s), 1e-5);
  EXPECT_LT(relative_error(gpu->download<float>(d_c, T * I), want_sum), 1e-2);
}

TEST(GpuOps, ArgmaxAndTopkLogProbs) {
  REQUIRE_GPU();
  const int64_t V = 1001, rows = 3, K = 4;
  std::vector<float> logits = random_values(rows * V, 27, 5.f);
  logits[1 * V + 10] = logits[1 * V + 900] = 9.f;  // a tie: the lower index wins
  DevBuf d_l = gpu->upload(logits), d_am = gpu->alloc(rows * 4), d_ids = gpu->alloc(rows * K * 4), d_v = gpu->alloc(rows * K * 4);
  gpu->launch(argmax_kernel(V, F32), rows, {Gpu::ptr(d_l), Gpu::ptr(d_am), Gpu::i32(rows), Gpu::i32(V)});
  gpu->launch(topk_kernel(V, K, F32, true), rows, {Gpu::ptr(d_l), Gpu::ptr(d_ids), Gpu::ptr(d_v), Gpu::i32(rows), Gpu::i32(V)});
  const std::vector<int32_t> am = gpu->download<int32_t>(d_am, rows), ids = gpu->download<int32_t>(d_ids, rows * K);
  const std::vector<float> vals = gpu->download<float>(d_v, rows * K);
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(am[r], cpu::argmax(logits.data() + r * V, V));
    std::vector<float> lp(logits.begin() + r * V, logits.begin() + (r + 1) * V);
    cpu::log_softmax_inplace(lp.data(), V);
    const std::vector<int64_t> top = cpu::top_k(logits.data() + r * V, V, K);
    for (int64_t j = 0; j < K; ++j) {
      EXPECT_EQ(ids[r * K + j], top[j]) << "row " << r;
      EXPECT_NEAR(vals[r * K + j], lp[top[j]], 1e-4);
    }
  }
  EXPECT_EQ(am[1], 10);
  // A row holding a NaN or an infinity is marked -1 (the host refuses it), whatever else it holds.
  logits[0 * V + 500] = std::nanf("");
  logits[2 * V + 7] = -INFINITY;
  DevBuf d_bad = gpu->upload(logits);
  gpu->launch(argmax_kernel(V, F32), rows, {Gpu::ptr(d_bad), Gpu::ptr(d_am), Gpu::i32(rows), Gpu::i32(V)});
  EXPECT_EQ(gpu->download<int32_t>(d_am, rows), (std::vector<int32_t>{-1, 10, -1}));
}

// A K2.6 vocabulary row (163840 logits) is dealt over a cluster of 8 blocks: the largest logit
// in any block's stripes wins, a tie across blocks, within a 16-byte load or between one
// thread's loads goes to the lower index, a NaN in any
// block's part marks the row -1, and rows of a step are independent clusters.
TEST(GpuOps, ArgmaxAcrossAClusterAtK26Vocab) {
  REQUIRE_GPU();
  const int64_t V = 163840, rows = 4;
  const KernelSource k = argmax_kernel(V, F32);
  EXPECT_EQ(kernel_param(k, "CLUSTER"), 8) << k.id;
  std::vector<float> logits = random_values(rows * V, 41, 5.f);
  logits[0 * V + 163839] = 9.f;                            // the last logit, in the last block's stripe
  logits[1 * V + 1030] = logits[1 * V + 150001] = 9.f;     // a tie across blocks: 1030 wins,
  logits[1 * V + 1031] = 9.f;                              // and within its 16-byte load
  logits[2 * V + 5] = logits[2 * V + 5 + 4 * 8192] = 9.f;  // block 0's own stripe; a tie in one thread's loads
  logits[3 * V + 4096 * 3 + 17] = 9.f;                     // block 3's stripe (1024 float4s a block)...
  logits[3 * V + 99999] = std::nanf("");                   // ...but a NaN elsewhere marks the row
  DevBuf d_l = gpu->upload(logits), d_am = gpu->alloc(rows * 4);
  gpu->launch(k, rows, {Gpu::ptr(d_l), Gpu::ptr(d_am), Gpu::i32(rows), Gpu::i32(V)});
  EXPECT_EQ(gpu->download<int32_t>(d_am, rows), (std::vector<int32_t>{163839, 1030, 5, -1}));
  const float us = gpu->time_us([&] { gpu->launch(k, 1, {Gpu::ptr(d_l), Gpu::ptr(d_am), Gpu::i32(1), Gpu::i32(V)}); });
  std::printf("[ figures  ] argmax of one 163840-logit row over a cluster of 8: %.1f us (%.0f GB/s)\n", us, V * 4 / (us * 1e3));
}

// The radix-select topk at the drafter's sizes: K up to 127 of a 4352-token row, rows of random
// values, of few distinct values (ties at the K-th value, taken by the lower index), all equal,
// -0 against +0, raw logits and log-probabilities.
TEST(GpuOps, TopkRadixSelectWithTiesAndLargeK) {
  REQUIRE_GPU();
  const int64_t V = 4352, rows = 4;
  std::vector<float> logits = random_values(rows * V, 31, 4.f);
  for (int64_t j = 0; j < V; ++j) logits[1 * V + j] = static_cast<float>((j * 7919) % 5);  // five values, many ties
  for (int64_t j = 0; j < V; ++j) logits[2 * V + j] = 1.5f;                                // all tied
  for (int64_t j = 0; j < V; ++j) logits[3 * V + j] = (j % 2) ? 0.f : -0.f;                 // +0 and -0 tie
  logits[3 * V + 4000] = 1.f;
  for (int64_t K : {1, 15, 63, 127})
    for (bool lp : {false, true}) {
      DevBuf d_l = gpu->upload(logits), d_ids = gpu->alloc(rows * K * 4), d_v = gpu->alloc(rows * K * 4);
      gpu->launch(topk_kernel(V, K, F32, lp), rows, {Gpu::ptr(d_l), Gpu::ptr(d_ids), Gpu::ptr(d_v), Gpu::i32(rows), Gpu::i32(V)});
      const std::vector<int32_t> ids = gpu->download<int32_t>(d_ids, rows * K);
      const std::vector<float> vals = gpu->download<float>(d_v, rows * K);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<float> want(logits.begin() + r * V, logits.begin() + (r + 1) * V);
        if (lp) cpu::log_softmax_inplace(want.data(), V);
        const std::vector<int64_t> top = cpu::top_k(logits.data() + r * V, V, K);
        int wrong = 0;
        for (int64_t j = 0; j < K; ++j) {
          wrong += ids[r * K + j] != top[j];
          EXPECT_NEAR(vals[r * K + j], want[top[j]], 1e-4) << "K " << K << " row " << r << " rank " << j;
        }
        EXPECT_EQ(wrong, 0) << "K " << K << " log-probs " << lp << " row " << r;
      }
    }
}

TEST(GpuOps, GqaAttentionOverContextAndBlock) {
  REQUIRE_GPU();
  const int64_t Hq = 6, Hkv = 2, D = 40, Tq = 8, ctx = 13, S = ctx + Tq;
  const std::vector<float> q = random_values(Tq * Hq * D, 28), k = random_values(S * Hkv * D, 29), v = random_values(S * Hkv * D, 30);
  DevBuf d_q = gpu->upload(q), d_k = gpu->upload(k), d_v = gpu->upload(v), d_n = gpu->upload(std::vector<int32_t>{ctx});
  DevBuf d_o = gpu->alloc(Tq * Hq * D * 4);
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  const KernelSource kern = gqa_attention_kernel(Hq, Hkv, D, F32, F32, F32);
  // context_window: 0 (every key), windows inside the context, one covering it.
  for (int32_t window : {0, 1, 5, 13, 40}) {
    gpu->launch(kern, Tq, {Gpu::ptr(d_q), Gpu::ptr(d_k), Gpu::ptr(d_v), Gpu::ptr(d_n), Gpu::ptr(d_o), Gpu::i32(Tq), Gpu::i32(Tq),
                           Gpu::i32(Hq * D), Gpu::i32(Hkv * D), Gpu::i32(Hkv * D), Gpu::i32(Hq * D), Gpu::f32(scale),
                           Gpu::i32(window)});
    const Matrix want =
        cpu::gqa_attention_full(matrix(Tq, Hq * D, q), matrix(S, Hkv * D, k), matrix(S, Hkv * D, v), Hq, Hkv, D, scale, window);
    EXPECT_LT(relative_error(gpu->download<float>(d_o, want.data.size()), want.data), 1e-4) << kern.id << " window " << window;
  }
}


// The whole lowered tiny program on the GPU, launch by launch, against the CPU launch emulator
// (which lower_emulated_test.cc ties to the CPU reference): the first launch whose result
// diverges is named, with the IR op it implements.
TEST(GpuOps, LoweredTinyProgramLaunchByLaunch) {
  REQUIRE_GPU();
  char tmpl[] = "/tmp/kplan_gpu_lowered_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string cmd = std::string(KPLAN_BINARY) + " synth tiny --seed 1 --out " + dir + "/ckpt > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  kplan::CompileOptions c;
  c.model = dir + "/ckpt";
  c.build.capture_layers = std::vector<int64_t>{1};
  CompileResult compiled = compile_to_ir(c);
  LowerOptions o;
  o.buckets = {5};
  o.max_context = 32;
  plan::LoweredPlan lp = lower_target(*compiled.module->function("target"), compiled.target->weights(), o);
  testing_util::LaunchEmulator emu(lp);  // assigns the arena offsets
  DevBuf arena = gpu->alloc(lp.buffers.arena_size);
  std::vector<DevBuf> weights;
  for (const plan::Weight& w : lp.weights) weights.push_back(gpu->upload(w.data().data(), w.data().size()));
  auto slot_address = [&](uint32_t slot) { return arena.ptr + lp.buffers.slots.at(slot).offset; };
  auto address = [&](const plan::LaunchArg& a) -> uint64_t {
    if (a.kind == plan::ArgKind::Buffer) return slot_address(a.index) + a.offset;
    if (a.kind == plan::ArgKind::Weight) return weights.at(a.index).ptr + a.offset;
    for (const plan::StepInputBinding& b : lp.step_inputs)
      if (static_cast<uint32_t>(b.kind) == a.index) return slot_address(b.slot);
    return 0;
  };
  // Prefill of 5 tokens at cache length 0 (causal mask rows written as the host does).
  emu.write_input(plan::StepInputKind::Tokens, std::vector<int32_t>{5, 17, 3, 900, 42});
  emu.write_input(plan::StepInputKind::Positions, std::vector<int32_t>{0, 1, 2, 3, 4});
  emu.write_input(plan::StepInputKind::TreeMask, std::vector<uint32_t>{1, 3, 7, 15, 31});
  emu.write_input(plan::StepInputKind::CacheLength, std::vector<int32_t>{0});
  emu.write_input(plan::StepInputKind::TokenCount, std::vector<int32_t>{5});
  for (const plan::StepInputBinding& b : lp.step_inputs) {
    const plan::BufferSlot& s = lp.buffers.slots[b.slot];
    gpu->copy_to(arena.ptr + s.offset, emu.arena().data() + s.offset, s.size);
  }
  const plan::Bucket& bucket = lp.buckets.at(0);
  for (size_t n = 0; n < bucket.launches.size(); ++n) {
    const plan::Launch& l = bucket.launches[n];
    emu.run_launch(l);
    gpu->launch_planned(lp.kernels.at(l.kernel), l, address);
    // Compare every pointer argument's slot (f32 views; exact data such as ids compare equal too).
    for (const plan::LaunchArg& a : l.args) {
      if (a.kind != plan::ArgKind::Buffer) continue;
      const plan::BufferSlot& s = lp.buffers.slots.at(a.index);
      const size_t n_floats = s.size / 4;
      std::vector<float> want(n_floats);
      std::memcpy(want.data(), emu.arena().data() + s.offset, n_floats * 4);
      DevBuf view{slot_address(a.index), s.size};
      const std::vector<float> got = gpu->download<float>(view, n_floats);
      ASSERT_LT(relative_error(got, want), 1e-3) << "launch " << n << " (" << l.note << ") slot " << s.name;
    }
  }
}

}  // namespace
}  // namespace kplan::codegen
