#include "runtime/gpu/library_matmul.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <optional>

#include "ir/support/error.h"

namespace kplan::gpu {

// The entry points the runtime calls, resolved from libcublasLt.so.13 (else libcublasLt.so).
class CublasLt {
 public:
#define KPLAN_CUBLASLT_FUNCTIONS(X)                                                                          \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) X(cublasLtMatmulPreferenceCreate)              \
  X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic) \
  X(cublasLtMatmul)
#define KPLAN_CUBLASLT_MEMBER(name) decltype(&::name) name = nullptr;
  KPLAN_CUBLASLT_FUNCTIONS(KPLAN_CUBLASLT_MEMBER)
#undef KPLAN_CUBLASLT_MEMBER
  std::string why;  // set when loading failed
};

namespace {

#define KPLAN_CUBLASLT_STRINGIFY2(x) #x
#define KPLAN_CUBLASLT_STRINGIFY(x) KPLAN_CUBLASLT_STRINGIFY2(x)

CublasLt load() {
  CublasLt lt;
  void* lib = ::dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = ::dlopen("libcublasLt.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = ::dlerror();
    lt.why = std::string("libcublasLt.so.13 not found (") + (e ? e : "dlopen failed") + "): install cuBLAS (the CUDA toolkit's or the nvidia-cublas wheel's), or compile the plan with "
             "KPLAN_CUBLASLT_MIN_TOKENS=0 (templates only)";
    return lt;
  }
  std::string missing;
#define KPLAN_CUBLASLT_RESOLVE(name)                                                                     \
  lt.name = reinterpret_cast<decltype(&::name)>(::dlsym(lib, KPLAN_CUBLASLT_STRINGIFY(name)));           \
  if (!lt.name) missing += std::string(missing.empty() ? "" : ", ") + KPLAN_CUBLASLT_STRINGIFY(name);
  KPLAN_CUBLASLT_FUNCTIONS(KPLAN_CUBLASLT_RESOLVE)
#undef KPLAN_CUBLASLT_RESOLVE
  if (!missing.empty()) lt.why = "libcublasLt lacks " + missing + " (too old a cuBLAS)";
  return lt;
}

int64_t constant(const plan::Kernel& k, const char* name, const std::string& what) {
  if (const std::optional<int64_t> v = k.constant(name)) return *v;
  throw Error(what + ": the cuBLASLt call " + k.id + " has no constant " + name);
}

size_t arg_index(const plan::Kernel& k, const plan::Launch& launch, const char* name, const std::string& what) {
  const std::optional<size_t> i = k.param_index(name);
  if (!i || *i >= launch.args.size()) throw Error(what + ": the cuBLASLt call " + k.id + " has no argument " + name);
  return *i;
}

// The largest power of two up to 256 dividing a device address: cuBLASLt's heuristic assumes 256
// unless told, and an algorithm needing more than an operand has (a view at an offset into a slot)
// would read or write it misaligned.
uint32_t alignment_of(CUdeviceptr p) {
  uint32_t a = 256;
  while (a > 1 && p % a != 0) a /= 2;
  return a;
}

void check(cublasStatus_t st, const std::string& what, const char* call) {
  if (st != CUBLAS_STATUS_SUCCESS) throw Error(what + ": " + call + " failed with cuBLAS status " + std::to_string(static_cast<int>(st)));
}

}  // namespace

const CublasLt& cublaslt(const std::string& what) {
  static const CublasLt lt = load();
  if (!lt.why.empty()) throw Error(what + " is a cuBLASLt call, but " + lt.why);
  return lt;
}

LibraryHandle::LibraryHandle(const CublasLt& lt, const std::string& what) : lt_(lt) {
  cublasLtHandle_t h = nullptr;
  check(lt.cublasLtCreate(&h), what, "cublasLtCreate");
  handle_ = h;
}

LibraryHandle::~LibraryHandle() {
  if (handle_) lt_.cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

struct LibraryMatmul::State {
  const CublasLt* lt = nullptr;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  CUdeviceptr x = 0, w = 0, y = 0, residual = 0, workspace = 0;  // workspace: kLibraryWorkspaceBytes
  float alpha = 1.f, beta = 0.f;
};

LibraryMatmul::LibraryMatmul(const LibraryHandle& handle, const plan::Kernel& k, const plan::Launch& launch, const uint64_t* cells,
                             CUdeviceptr workspace, const std::string& what)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  const CublasLt& lt = handle.lt();
  s.lt = &lt;
  s.handle = static_cast<cublasLtHandle_t>(handle.get());
  const int64_t K = constant(k, "K", what), N = constant(k, "N", what), x_dt = constant(k, "X_DT", what),
                y_dt = constant(k, "Y_DT", what), acc = constant(k, "ACC", what);
  if (x_dt != 1 || (y_dt != 0 && y_dt != 1) || (acc != 0 && acc != 1) || K <= 0 || N <= 0)
    throw Error(what + ": the cuBLASLt call " + k.id + " has constants this runtime does not call (bf16 x, f32 or bf16 y)");
  auto cell = [&](const char* name) { return cells[arg_index(k, launch, name, what)]; };
  auto scalar = [&](const char* name) { return launch.args[arg_index(k, launch, name, what)].ival; };
  s.x = cell("x"), s.w = cell("w"), s.y = cell("y"), s.residual = cell("residual");
  const int64_t T = scalar("n_tokens"), ldx = scalar("x_row_stride"), ldy = scalar("y_row_stride");
  if (T <= 0 || ldx < K || ldy < N) throw Error(what + ": the cuBLASLt call " + k.id + " has tokens or strides out of range");
  s.beta = acc ? 1.f : 0.f;
  s.workspace = workspace;
  const cudaDataType_t y_type = y_dt == 0 ? CUDA_R_32F : CUDA_R_16BF;

  // D [N, T] (column-major, ld ldy) = op(A) B + beta C: A = W as a column-major [K, N], transposed.
  check(lt.cublasLtMatmulDescCreate(&s.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), what, "cublasLtMatmulDescCreate");
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  check(lt.cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa), what, "TRANSA");
  check(lt.cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb), what, "TRANSB");
  check(lt.cublasLtMatrixLayoutCreate(&s.a, CUDA_R_16BF, static_cast<uint64_t>(K), static_cast<uint64_t>(N), K), what, "layout of W");
  check(lt.cublasLtMatrixLayoutCreate(&s.b, CUDA_R_16BF, static_cast<uint64_t>(K), static_cast<uint64_t>(T), ldx), what, "layout of x");
  check(lt.cublasLtMatrixLayoutCreate(&s.c, y_type, static_cast<uint64_t>(N), static_cast<uint64_t>(T), ldy), what, "layout of y");

  cublasLtMatmulPreference_t pref = nullptr;
  check(lt.cublasLtMatmulPreferenceCreate(&pref), what, "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = kLibraryWorkspaceBytes;
  lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  const uint32_t align_a = alignment_of(s.w), align_b = alignment_of(s.x), align_c = alignment_of(acc ? s.residual : s.y),
                 align_d = alignment_of(s.y);
  lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a);
  lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b);
  lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c);
  lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof align_d);
  cublasLtMatmulHeuristicResult_t found{};
  int n_found = 0;
  const cublasStatus_t st = lt.cublasLtMatmulAlgoGetHeuristic(s.handle, s.desc, s.a, s.b, s.c, s.c, pref, 1, &found, &n_found);
  lt.cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || n_found < 1)
    throw Error(what + ": cuBLASLt has no algorithm for " + k.id + " at " + std::to_string(T) + " tokens (status " +
                std::to_string(static_cast<int>(st)) + ")");
  s.algo = found.algo;
}

LibraryMatmul::~LibraryMatmul() {
  if (!s_ || !s_->lt) return;
  const CublasLt& lt = *s_->lt;
  if (s_->a) lt.cublasLtMatrixLayoutDestroy(s_->a);
  if (s_->b) lt.cublasLtMatrixLayoutDestroy(s_->b);
  if (s_->c) lt.cublasLtMatrixLayoutDestroy(s_->c);
  if (s_->desc) lt.cublasLtMatmulDescDestroy(s_->desc);
}

std::string LibraryMatmul::run(CUstream stream) const {
  const State& s = *s_;
  auto p = [](CUdeviceptr v) { return reinterpret_cast<void*>(v); };
  const cublasStatus_t st = s.lt->cublasLtMatmul(s.handle, s.desc, &s.alpha, p(s.w), s.a, p(s.x), s.b, &s.beta,
                                                 p(s.beta != 0.f ? s.residual : s.y), s.c, p(s.y), s.c, &s.algo, p(s.workspace),
                                                 kLibraryWorkspaceBytes, stream);
  return st == CUBLAS_STATUS_SUCCESS ? std::string() : "cublasLtMatmul failed with cuBLAS status " + std::to_string(static_cast<int>(st));
}

}  // namespace kplan::gpu
