#include "runtime/gpu/synthetic_weights.h"

#include <algorithm>

#include "ir/support/error.h"
#include "ir/support/synthetic_values.h"

namespace kplan::gpu {

SyntheticLaunch synthetic_launch(const plan::Plan& plan, const plan::Weight& w, CUdeviceptr out, int sm_count) {
  if (!w.synthetic) throw Error("weight " + w.name + " is not synthetic");
  const plan::SyntheticInit& s = *w.synthetic;
  const plan::Kernel& k = plan.kernels.at(s.kernel);
  const int64_t threads = k.constant("THREADS").value_or(0);
  if (threads < 32 || threads > 1024) throw Error("synthetic kernel " + k.id + " has no THREADS constant");
  const uint64_t units = plan::synthetic_units(w);
  const uint64_t key = synthetic::weight_key(s.seed, s.stream);
  SyntheticLaunch l;
  l.block = static_cast<uint32_t>(threads);
  // The kernel strides over its units: a few waves of blocks per SM keep every SM busy.
  const uint64_t blocks = (units + static_cast<uint64_t>(threads) - 1) / static_cast<uint64_t>(threads);
  l.grid = static_cast<uint32_t>(std::clamp<uint64_t>(blocks, 1, static_cast<uint64_t>(std::max(sm_count, 1)) * 16));
  l.out = out;
  l.n_lo = static_cast<int32_t>(static_cast<uint32_t>(units));
  l.n_hi = static_cast<int32_t>(static_cast<uint32_t>(units >> 32));
  l.key_lo = static_cast<int32_t>(static_cast<uint32_t>(key));
  l.key_hi = static_cast<int32_t>(static_cast<uint32_t>(key >> 32));
  l.mean = s.mean;
  l.step = synthetic::step_for(s.stddev);
  return l;
}

uint64_t generate_synthetic_weights(const CudaDriver& cu, const plan::Plan& plan, const std::vector<uint32_t>& weights,
                                    const std::vector<void*>& functions, CUdeviceptr weights_base,
                                    const std::vector<uint64_t>& offsets, int sm_count, const std::string& source) {
  uint64_t bytes = 0;
  for (uint32_t i : weights) {
    const plan::Weight& w = plan.weights[i];
    SyntheticLaunch l = synthetic_launch(plan, w, weights_base + offsets[i], sm_count);
    void* params[] = {&l.out, &l.n_lo, &l.n_hi, &l.key_lo, &l.key_hi, &l.mean, &l.step};
    cuda_check(cu,
               cu.cuLaunchKernel(static_cast<CUfunction>(functions[w.synthetic->kernel]), l.grid, 1, 1, l.block, 1, 1, 0,
                                 nullptr, params, nullptr),
               source + ": generating synthetic weight " + w.name);
    bytes += w.size;
  }
  if (!weights.empty()) cuda_check(cu, cu.cuCtxSynchronize(), source + ": generating the synthetic weights");
  return bytes;
}

}  // namespace kplan::gpu
