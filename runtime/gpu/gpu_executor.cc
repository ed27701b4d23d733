#include "runtime/gpu/gpu_executor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "schemas/plan_arch.h"
#include "ir/support/dtype.h"
#include "ir/support/error.h"
#include "runtime/gpu/cuda_driver.h"
#include "runtime/gpu/launch_resolve.h"

namespace kplan::gpu {

// One launch resolved for this device (launch_resolve.h): argument bytes, tensor maps, grid.
struct GpuExecutor::LaunchParams {
  ResolvedLaunch launch;
};

namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

}  // namespace

bool probe_device(DeviceInfo* info, std::string* why) {
  const CudaDriver* cu = cuda_driver(why);
  if (!cu) return false;
  CUdevice dev = 0;
  CUresult r = cu->cuDeviceGet(&dev, 0);
  if (r != CUDA_SUCCESS) {
    if (why) *why = "no GPU: cuDeviceGet failed: " + cuda_error_text(*cu, r);
    return false;
  }
  char name[256] = {};
  cu->cuDeviceGetName(name, sizeof name - 1, dev);
  int major = 0, minor = 0, sms = 0;
  cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  cu->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
  size_t mem = 0;
  cu->cuDeviceTotalMem(&mem, dev);
  int version = 0;
  cu->cuDriverGetVersion(&version);
  info->name = name;
  info->arch = plan::arch_name(major, minor);
  info->sm_count = sms;
  info->memory_bytes = mem;
  info->driver_version = version;
  return true;
}

GpuExecutor::GpuExecutor(std::shared_ptr<const plan::Plan> plan, std::string source, Options options)
    : plan_(std::move(plan)), source_(std::move(source)) {
  auto start = std::chrono::steady_clock::now();
  std::string why;
  if (!probe_device(&device_, &why)) throw Error(why);
  cu_ = cuda_driver(nullptr);
  arch_ = plan::select_arch(*plan_, device_.arch, source_);
  use_graphs_ = options.use_graphs && !env_flag("KPLAN_NO_GRAPHS");

  CUdevice dev = 0;
  cuda_check(*cu_, cu_->cuDeviceGet(&dev, device_index_), "cuDeviceGet");
  CUcontext ctx = nullptr;
  cuda_check(*cu_, cu_->cuDevicePrimaryCtxRetain(&ctx, dev), "cannot create a CUDA context");
  context_ = ctx;
  try {
    cuda_check(*cu_, cu_->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    CUstream stream = nullptr;
    cuda_check(*cu_, cu_->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    stream_ = stream;

    const plan::Plan& p = *plan_;
    arena_bytes_ = std::max<uint64_t>(p.buffers.arena_size, 256);
    CUdeviceptr arena = 0;
    cuda_check(*cu_, cu_->cuMemAlloc(&arena, arena_bytes_),
               source_ + ": cannot allocate the " + std::to_string(arena_bytes_) + "-byte activation arena");
    arena_ = arena;
    clear_arena();

    // Pinned staging: every input slot, then every output of the largest bucket.
    uint64_t inputs = 0, outputs = 0;
    for (const plan::StepInputBinding& s : p.step_inputs) inputs += align_up(p.buffers.slots[s.slot].size, 64);
    for (const plan::Bucket& b : p.buckets) {
      uint64_t n = 0;
      for (const plan::StepOutput& o : b.outputs)
        n += align_up(static_cast<uint64_t>(o.rows * o.cols) * dtype_size(o.dtype), 64);
      outputs = std::max(outputs, n);
    }
    pinned_bytes_ = std::max<uint64_t>(inputs + outputs, 64);
    void* pinned = nullptr;
    cuda_check(*cu_, cu_->cuMemHostAlloc(&pinned, pinned_bytes_, 0), "cuMemHostAlloc");
    pinned_ = static_cast<uint8_t*>(pinned);

    upload_weights();
    load_modules();
    prepare_launches();
    if (use_graphs_) build_graphs();
  } catch (...) {
    release();
    throw;
  }
  load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

GpuExecutor::~GpuExecutor() { release(); }

void GpuExecutor::release() {
  if (!cu_) return;
  if (context_) cu_->cuCtxSetCurrent(static_cast<CUcontext>(context_));
  if (stream_) cu_->cuStreamSynchronize(static_cast<CUstream>(stream_));
  for (void* g : graphs_)
    if (g) cu_->cuGraphExecDestroy(static_cast<CUgraphExec>(g));
  graphs_.clear();
  for (void* m : modules_)
    if (m) cu_->cuModuleUnload(static_cast<CUmodule>(m));
  modules_.clear();
  if (weights_) cu_->cuMemFree(weights_);
  weights_ = 0;
  if (arena_) cu_->cuMemFree(arena_);
  arena_ = 0;
  if (pinned_) cu_->cuMemFreeHost(pinned_);
  pinned_ = nullptr;
  if (stream_) cu_->cuStreamDestroy(static_cast<CUstream>(stream_));
  stream_ = nullptr;
  if (context_) {
    CUdevice dev = 0;
    if (cu_->cuDeviceGet(&dev, device_index_) == CUDA_SUCCESS) cu_->cuDevicePrimaryCtxRelease(dev);
  }
  context_ = nullptr;
  cu_ = nullptr;
}

void GpuExecutor::upload_weights() {
  const plan::Plan& p = *plan_;
  // Only weights some launch reads go to the device (a plan may also carry tensors for the CPU
  // reference only).
  std::vector<bool> used(p.weights.size(), false);
  for (const plan::Bucket& b : p.buckets)
    for (const plan::Launch& l : b.launches)
      for (const plan::LaunchArg& a : l.args)
        if (a.kind == plan::ArgKind::Weight) used[a.index] = true;
  weight_offsets_.assign(p.weights.size(), 0);
  uint64_t total = 0;
  for (size_t i = 0; i < p.weights.size(); ++i) {
    if (!used[i]) continue;
    weight_offsets_[i] = align_up(total, plan::kWeightAlignment);
    total = weight_offsets_[i] + p.weights[i].data().size();
  }
  weight_bytes_ = total;
  if (total == 0) return;
  CUdeviceptr base = 0;
  cuda_check(*cu_, cu_->cuMemAlloc(&base, total),
             source_ + ": cannot allocate " + std::to_string(total) + " bytes of device memory for the weights");
  weights_ = base;
  // Straight from the mapped file (or the owned bytes): no host-side copy.
  for (size_t i = 0; i < p.weights.size(); ++i) {
    std::span<const uint8_t> bytes = p.weights[i].data();
    if (bytes.empty() || !used[i]) continue;
    cuda_check(*cu_, cu_->cuMemcpyHtoD(base + weight_offsets_[i], bytes.data(), bytes.size()),
               source_ + ": uploading weight " + p.weights[i].name);
  }
}

void GpuExecutor::load_modules() {
  const plan::Plan& p = *plan_;
  modules_.assign(p.kernels.size(), nullptr);
  functions_.assign(p.kernels.size(), nullptr);
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const plan::Kernel& kern = p.kernels[k];
    const plan::KernelBinary* bin = kern.binary_for(arch_);
    if (!bin) throw Error(source_ + ": kernel " + kern.id + " has no cubin for " + arch_);
    CUmodule mod = nullptr;
    cuda_check(*cu_, cu_->cuModuleLoadData(&mod, bin->cubin.data()),
               source_ + ": cannot load the " + arch_ + " cubin of kernel " + kern.id);
    modules_[k] = mod;
    CUfunction fn = nullptr;
    cuda_check(*cu_, cu_->cuModuleGetFunction(&fn, mod, kern.entry.c_str()),
               source_ + ": kernel " + kern.id + " has no entry " + kern.entry + " in its cubin");
    functions_[k] = fn;
  }
  // Kernels that ask for more than the default 48 KiB of dynamic shared memory must opt in.
  std::vector<uint32_t> max_smem(p.kernels.size(), 0);
  for (const plan::Bucket& b : p.buckets)
    for (const plan::Launch& l : b.launches) max_smem[l.kernel] = std::max(max_smem[l.kernel], l.smem_bytes);
  for (size_t k = 0; k < p.kernels.size(); ++k)
    if (max_smem[k] > 48 * 1024)
      cuda_check(*cu_,
                 cu_->cuFuncSetAttribute(static_cast<CUfunction>(functions_[k]),
                                         CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         static_cast<int>(max_smem[k])),
                 source_ + ": kernel " + p.kernels[k].id + " cannot get " + std::to_string(max_smem[k]) +
                     " bytes of shared memory");
}

void GpuExecutor::prepare_launches() {
  const plan::Plan& p = *plan_;
  const DeviceAddresses at{arena_, weights_, &weight_offsets_, device_.sm_count};
  params_.assign(p.buckets.size(), {});
  for (size_t b = 0; b < p.buckets.size(); ++b) {
    for (size_t i = 0; i < p.buckets[b].launches.size(); ++i) {
      const std::string what = source_ + ": launch " + std::to_string(i) + " of bucket " + p.buckets[b].program + "/" +
                               std::to_string(p.buckets[b].tokens);
      params_[b].push_back({resolve_launch(*cu_, p, p.buckets[b].launches[i], at, what)});
    }
  }
}

void GpuExecutor::enqueue(const plan::Bucket& bucket) {
  size_t b = bucket_index(bucket);
  CUstream stream = static_cast<CUstream>(stream_);
  for (size_t i = 0; i < bucket.launches.size(); ++i) {
    const plan::Launch& l = bucket.launches[i];
    LaunchParams& lp = params_[b][i];
    CUresult r = launch_resolved(*cu_, static_cast<CUfunction>(functions_[l.kernel]), lp.launch, stream);
    if (r != CUDA_SUCCESS)
      throw Error(source_ + ": launch " + std::to_string(i) + " (" + plan_->kernels[l.kernel].id + ") of bucket " +
                  bucket.program + "/" + std::to_string(bucket.tokens) + " failed: " + cuda_error_text(*cu_, r));
  }
}

void GpuExecutor::build_graphs() {
  const plan::Plan& p = *plan_;
  CUstream stream = static_cast<CUstream>(stream_);
  graphs_.assign(p.buckets.size(), nullptr);
  for (size_t b = 0; b < p.buckets.size(); ++b) {
    std::string what = source_ + ": building the CUDA graph of bucket " + p.buckets[b].program + "/" +
                       std::to_string(p.buckets[b].tokens);
    cuda_check(*cu_, cu_->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), what);
    try {
      enqueue(p.buckets[b]);
    } catch (...) {
      CUgraph g = nullptr;
      cu_->cuStreamEndCapture(stream, &g);
      if (g) cu_->cuGraphDestroy(g);
      throw;
    }
    CUgraph graph = nullptr;
    cuda_check(*cu_, cu_->cuStreamEndCapture(stream, &graph), what);
    CUgraphExec exec = nullptr;
    CUresult r = cu_->cuGraphInstantiate(&exec, graph, 0);
    cu_->cuGraphDestroy(graph);
    cuda_check(*cu_, r, what);
    graphs_[b] = exec;
  }
}

size_t GpuExecutor::bucket_index(const plan::Bucket& bucket) const {
  const plan::Plan& p = *plan_;
  size_t b = static_cast<size_t>(&bucket - p.buckets.data());
  if (b >= p.buckets.size()) throw Error("internal: bucket does not belong to this plan");
  return b;
}

void GpuExecutor::write_inputs(const StepInputs& in) {
  const plan::Plan& p = *plan_;
  CUstream stream = static_cast<CUstream>(stream_);
  uint64_t at = 0;
  for (const plan::StepInputBinding& s : p.step_inputs) {
    const plan::BufferSlot& slot = p.buffers.slots[s.slot];
    const void* src = nullptr;
    size_t n = 0;
    switch (s.kind) {
      case plan::StepInputKind::Tokens: src = in.tokens.data(); n = in.tokens.size() * 4; break;
      case plan::StepInputKind::Positions: src = in.positions.data(); n = in.positions.size() * 4; break;
      case plan::StepInputKind::TreeMask: src = in.tree_mask.data(); n = in.tree_mask.size() * 4; break;
      case plan::StepInputKind::CacheLength: src = &in.cache_length; n = 4; break;
      case plan::StepInputKind::TokenCount: src = &in.token_count; n = 4; break;
    }
    if (n > slot.size)
      throw Error(source_ + ": step input " + plan::step_input_name(s.kind) + " of " + std::to_string(n) +
                  " bytes does not fit its " + std::to_string(slot.size) + "-byte slot");
    if (n == 0) continue;
    std::memcpy(pinned_ + at, src, n);
    cuda_check(*cu_, cu_->cuMemcpyHtoDAsync(arena_ + slot.offset, pinned_ + at, n, stream), "writing step inputs");
    at += align_up(slot.size, 64);
  }
}

void GpuExecutor::run(const plan::Bucket& bucket, const StepInputs& in) {
  cuda_check(*cu_, cu_->cuCtxSetCurrent(static_cast<CUcontext>(context_)), "cuCtxSetCurrent");
  write_inputs(in);
  CUstream stream = static_cast<CUstream>(stream_);
  if (use_graphs_) {
    cuda_check(*cu_, cu_->cuGraphLaunch(static_cast<CUgraphExec>(graphs_[bucket_index(bucket)]), stream),
               source_ + ": graph launch");
  } else {
    enqueue(bucket);
  }
  cuda_check(*cu_, cu_->cuStreamSynchronize(stream),
             source_ + ": step of bucket " + bucket.program + "/" + std::to_string(bucket.tokens) + " failed");
}

void GpuExecutor::read_output(const plan::StepOutput& out, int64_t rows, float* dst) {
  const plan::Plan& p = *plan_;
  rows = std::min(rows, out.rows);
  size_t elem = dtype_size(out.dtype);
  size_t count = static_cast<size_t>(rows * out.cols);
  uint64_t stage_at = pinned_bytes_ - align_up(count * elem, 64);  // outputs staged at the end
  uint8_t* stage = pinned_ + stage_at;
  CUstream stream = static_cast<CUstream>(stream_);
  cuda_check(*cu_,
             cu_->cuMemcpyDtoHAsync(stage, arena_ + p.buffers.slots[out.slot].offset + out.offset, count * elem, stream),
             source_ + ": reading a step output");
  cuda_check(*cu_, cu_->cuStreamSynchronize(stream), source_ + ": reading a step output");
  switch (out.dtype) {
    case DType::F32: std::memcpy(dst, stage, count * 4); break;
    case DType::BF16:
    case DType::F16: {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(stage);
      for (size_t i = 0; i < count; ++i) dst[i] = out.dtype == DType::BF16 ? bf16_to_float(h[i]) : f16_to_float(h[i]);
      break;
    }
    case DType::I32: {
      const int32_t* v = reinterpret_cast<const int32_t*>(stage);
      for (size_t i = 0; i < count; ++i) dst[i] = static_cast<float>(v[i]);
      break;
    }
    default: throw Error(source_ + ": step output of dtype " + std::string(dtype_name(out.dtype)) + " is not readable");
  }
}

void GpuExecutor::move_kv_rows(std::span<const int64_t> from, std::span<const int64_t> to) {
  const plan::Plan& p = *plan_;
  CUstream stream = static_cast<CUstream>(stream_);
  for (const plan::KvCache& kv : p.kv_caches) {
    uint64_t base = arena_ + p.buffers.slots[kv.slot].offset;
    for (size_t i = 0; i < from.size(); ++i) {
      if (from[i] == to[i]) continue;
      if (from[i] < 0 || to[i] < 0 || static_cast<uint64_t>(std::max(from[i], to[i])) >= kv.rows)
        throw Error(source_ + ": KV row move outside cache " + kv.name);
      cuda_check(*cu_,
                 cu_->cuMemcpyDtoDAsync(base + static_cast<uint64_t>(to[i]) * kv.row_bytes,
                                        base + static_cast<uint64_t>(from[i]) * kv.row_bytes, kv.row_bytes, stream),
                 source_ + ": compacting KV cache " + kv.name);
    }
  }
  cuda_check(*cu_, cu_->cuStreamSynchronize(stream), source_ + ": compacting the KV caches");
}

std::vector<float> GpuExecutor::time_bucket(const plan::Bucket& bucket, int warmup, int reps) {
  cuda_check(*cu_, cu_->cuCtxSetCurrent(static_cast<CUcontext>(context_)), "cuCtxSetCurrent");
  CUstream stream = static_cast<CUstream>(stream_);
  auto replay = [&] {
    if (use_graphs_)
      cuda_check(*cu_, cu_->cuGraphLaunch(static_cast<CUgraphExec>(graphs_[bucket_index(bucket)]), stream),
                 "graph launch");
    else
      enqueue(bucket);
  };
  for (int i = 0; i < warmup; ++i) replay();
  std::vector<CUevent> events(static_cast<size_t>(reps) + 1, nullptr);
  for (CUevent& e : events) cuda_check(*cu_, cu_->cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  cuda_check(*cu_, cu_->cuEventRecord(events[0], stream), "cuEventRecord");
  for (int i = 0; i < reps; ++i) {
    replay();
    cuda_check(*cu_, cu_->cuEventRecord(events[static_cast<size_t>(i) + 1], stream), "cuEventRecord");
  }
  CUresult sync = cu_->cuEventSynchronize(events.back());
  std::vector<float> ms(static_cast<size_t>(reps), 0.0f);
  for (int i = 0; i < reps && sync == CUDA_SUCCESS; ++i)
    cu_->cuEventElapsedTime(&ms[static_cast<size_t>(i)], events[static_cast<size_t>(i)],
                            events[static_cast<size_t>(i) + 1]);
  for (CUevent e : events) cu_->cuEventDestroy(e);
  cuda_check(*cu_, sync, source_ + ": timed replays failed");
  return ms;
}

void GpuExecutor::clear_arena() {
  CUstream stream = static_cast<CUstream>(stream_);
  cuda_check(*cu_, cu_->cuMemsetD8Async(arena_, 0, arena_bytes_, stream), "clearing the arena");
  cuda_check(*cu_, cu_->cuStreamSynchronize(stream), "clearing the arena");
}

}  // namespace kplan::gpu
