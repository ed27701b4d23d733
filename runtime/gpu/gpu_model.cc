#include "runtime/gpu/gpu_model.h"

#include <algorithm>
#include <chrono>

#include "ir/support/error.h"
#include "runtime/gpu/cuda_driver.h"
#include "runtime/gpu/device_layout.h"
#include "runtime/gpu/synthetic_weights.h"
#include "schemas/plan_arch.h"

namespace kplan::gpu {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

GpuModel::GpuModel(std::shared_ptr<const plan::Plan> plan, std::string source, UploadProgress on_upload)
    : plan_(std::move(plan)), source_(std::move(source)) {
  auto start = std::chrono::steady_clock::now();
  std::string why;
  if (!probe_device(&device_, &why)) throw Error(why);
  cu_ = cuda_driver(nullptr);
  arch_ = plan::select_arch(*plan_, device_.arch, source_);
  CUdevice dev = 0;
  cuda_check(*cu_, cu_->cuDeviceGet(&dev, device_index_), "cuDeviceGet");
  CUcontext ctx = nullptr;
  cuda_check(*cu_, cu_->cuDevicePrimaryCtxRetain(&ctx, dev), "cannot create a CUDA context");
  context_ = ctx;
  try {
    make_current();
    upload_weights(on_upload);
    load_modules();
    // Synthetic weights are written by plan kernels: after the modules are loaded.
    synthetic_bytes_ = generate_synthetic_weights(*cu_, *plan_, synthetic_pending_, functions_, weights_, weight_offsets_,
                                                  device_.sm_count, source_);
  } catch (...) {
    release();
    throw;
  }
  load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

GpuModel::~GpuModel() { release(); }

void GpuModel::make_current() const {
  cuda_check(*cu_, cu_->cuCtxSetCurrent(static_cast<CUcontext>(context_)), "cuCtxSetCurrent");
}

void GpuModel::release() {
  if (!cu_) return;
  if (context_) cu_->cuCtxSetCurrent(static_cast<CUcontext>(context_));
  for (void* m : modules_)
    if (m) cu_->cuModuleUnload(static_cast<CUmodule>(m));
  modules_.clear();
  if (weights_) cu_->cuMemFree(weights_);
  weights_ = 0;
  if (context_) {
    CUdevice dev = 0;
    if (cu_->cuDeviceGet(&dev, device_index_) == CUDA_SUCCESS) cu_->cuDevicePrimaryCtxRelease(dev);
  }
  context_ = nullptr;
  cu_ = nullptr;
}

uint64_t GpuModel::weight_address(uint32_t index, uint64_t offset) const {
  return weights_ + weight_offsets_[index] + offset;
}

void GpuModel::upload_weights(const UploadProgress& on_upload) {
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
    total = weight_offsets_[i] + p.weights[i].byte_size();
    if (p.weights[i].synthetic) synthetic_pending_.push_back(static_cast<uint32_t>(i));  // generated after load_modules
  }
  weight_bytes_ = total;
  if (total == 0) return;
  CUdeviceptr base = 0;
  cuda_check(*cu_, cu_->cuMemAlloc(&base, total),
             source_ + ": cannot allocate " + std::to_string(total) + " bytes of device memory for the weights");
  weights_ = base;
  uint64_t to_upload = 0;
  for (size_t i = 0; i < p.weights.size(); ++i)
    if (used[i]) to_upload += p.weights[i].data().size();
  if (on_upload) on_upload(0, to_upload);
  // Straight from the mapped file (or the owned bytes): no host-side copy, except for weights
  // whose device copy has its own order (device_layout.h: laid out chunk by chunk); in chunks,
  // so a progress bar moves within a large stacked weight too.
  std::vector<uint8_t> laid_out;
  for (size_t i = 0; i < p.weights.size(); ++i) {
    std::span<const uint8_t> bytes = p.weights[i].data();
    if (bytes.empty() || !used[i]) continue;
    const bool relayout = int4_frag_columns(p.weights[i]) > 0;
    const uint64_t chunk = upload_chunk_bytes(p.weights[i], kUploadChunkBytes);
    for (uint64_t at = 0; at < bytes.size(); at += chunk) {
      const uint64_t n = std::min<uint64_t>(chunk, bytes.size() - at);
      const uint8_t* from = bytes.data() + at;
      if (relayout) {
        to_device_layout(p.weights[i], bytes.subspan(at, n), laid_out);
        from = laid_out.data();
      }
      cuda_check(*cu_, cu_->cuMemcpyHtoD(base + weight_offsets_[i] + at, from, n),
                 source_ + ": uploading weight " + p.weights[i].name);
      weight_upload_bytes_ += n;
      if (on_upload) on_upload(weight_upload_bytes_, to_upload);
    }
  }
  ++weight_uploads_;
}

void GpuModel::load_modules() {
  const plan::Plan& p = *plan_;
  modules_.assign(p.kernels.size(), nullptr);
  functions_.assign(p.kernels.size(), nullptr);
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const plan::Kernel& kern = p.kernels[k];
    if (!kern.library.empty()) continue;  // a library call (library_matmul.h): no module
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
  // Kernels whose static plus dynamic shared memory passes the default 48 KiB must opt in to their
  // dynamic size; every kernel with dynamic shared memory does (harmless below the limit), since
  // static arrays count against it too (the MoE tensor-core path's transposition buffers: 16 warps
  // hold 32 KiB, so 16 KiB of staged rows already fail the launch with CUDA_ERROR_INVALID_VALUE).
  std::vector<uint32_t> max_smem(p.kernels.size(), 0);
  for (const plan::Bucket& b : p.buckets)
    for (const plan::Launch& l : b.launches) max_smem[l.kernel] = std::max(max_smem[l.kernel], l.smem_bytes);
  for (size_t k = 0; k < p.kernels.size(); ++k)
    if (max_smem[k] > 0 && functions_[k])
      cuda_check(*cu_,
                 cu_->cuFuncSetAttribute(static_cast<CUfunction>(functions_[k]),
                                         CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         static_cast<int>(max_smem[k])),
                 source_ + ": kernel " + p.kernels[k].id + " cannot get " + std::to_string(max_smem[k]) +
                     " bytes of shared memory");
}

}  // namespace kplan::gpu
