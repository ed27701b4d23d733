#pragma once
// Cooperative fibers on one OS thread, for cuda_host_shim.h: a block's CUDA threads each get a
// stack and a saved context; the launching thread resumes them round-robin and a fiber returns
// the CPU when it waits at a barrier or finishes. The switch saves the callee-saved registers
// and the stack pointer only (x86-64: a few instructions; glibc's swapcontext also saves the
// signal mask, a system call a switch, which made the shim no faster than OS threads);
// elsewhere ucontext. Under AddressSanitizer every switch is announced to it
// (__sanitizer_start/finish_switch_fiber), so the fiber stacks are not taken for corruption.
#include <sys/mman.h>
#include <ucontext.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KP_HOST_FIBERS_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define KP_HOST_FIBERS_ASAN 1
#endif
#ifdef KP_HOST_FIBERS_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__)
// kp_host_fiber_switch(save, load): pushes rbp rbx r12-r15, stores rsp to *save, takes load as
// rsp, pops them and returns there. Weak: every test file including this defines it.
extern "C" void kp_host_fiber_switch(void** save, void* load);
asm(R"(
  .text
  .weak kp_host_fiber_switch
  .type kp_host_fiber_switch, @function
kp_host_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size kp_host_fiber_switch, .-kp_host_fiber_switch
)");
#endif

namespace kplan::cuda_host {

struct FiberContext {
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t uc{};
#endif
};

// A block's fibers. run() starts `n` fibers each calling entry(i) and returns when every one
// has finished; wait() (from inside a fiber) hands the CPU back until the fiber is resumed.
// `progress` counts what a fiber does that can let another go on (a barrier's arrivals, an
// end): a round-robin pass over waiting fibers that moves none of it is a deadlock.
class FiberBlock {
 public:
  static constexpr size_t kStack = 256 * 1024;  // reserved, touched on use; a guard page below

  explicit FiberBlock(unsigned n) : ctx_(n), stacks_(n), fake_(n) {
    for (char*& s : stacks_) {
      void* p = mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) fail("no memory for the fiber stacks");
      mprotect(p, 4096, PROT_NONE);  // an overflow faults instead of writing the next stack
      s = static_cast<char*>(p);
    }
  }
  ~FiberBlock() {
    for (char* s : stacks_) munmap(s, kStack);
  }
  FiberBlock(const FiberBlock&) = delete;
  FiberBlock& operator=(const FiberBlock&) = delete;

  // Runs entry(0) .. entry(n - 1) as fibers to their ends; `resume(i)` is called before fiber
  // i gets the CPU (the shim sets threadIdx). `where` names the block in a deadlock message.
  void run(const std::function<void(unsigned)>& entry, const std::function<void(unsigned)>& resume, const char* where) {
    entry_ = &entry;
    const unsigned n = static_cast<unsigned>(ctx_.size());
    done_.assign(n, false);
    for (unsigned i = 0; i < n; ++i) prepare(i);
    for (unsigned left = n; left > 0;) {
      const unsigned long long before = progress;
      for (unsigned i = 0; i < n; ++i) {
        if (done_[i]) continue;
        running_ = i;
        resume(i);
        enter(i);
        if (done_[i]) --left;
      }
      if (left > 0 && progress == before) {
        std::fprintf(stderr, "cuda_host: %s deadlocked: %u threads wait at barriers no other thread reaches\n", where, left);
        std::abort();
      }
    }
    entry_ = nullptr;
  }

  // From inside a fiber: back to run()'s loop until this fiber's next turn.
  void wait() { leave(&fake_[running_]); }

  unsigned long long progress = 0;

  // The block whose run() is under way (what a barrier inside a fiber waits on).
  static FiberBlock& running() { return *self(); }

 private:
  static FiberBlock*& self() {
    static FiberBlock* b = nullptr;
    return b;
  }
  static void trampoline() {
    FiberBlock& b = *self();
#ifdef KP_HOST_FIBERS_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &b.sched_bottom_, &b.sched_size_);
#endif
    (*b.entry_)(b.running_);
    ++b.progress;
    b.done_[b.running_] = true;
    b.leave(nullptr);  // never resumed
  }
  static void fail(const char* what) {
    std::fprintf(stderr, "cuda_host: %s\n", what);
    std::abort();
  }

  void prepare(unsigned i) {
    char* top = stacks_[i] + kStack;
#if defined(__x86_64__)
    // As kp_host_fiber_switch leaves a stack: six saved registers, then the return address
    // (trampoline), above it a null "caller" so trampoline starts with rsp = 8 mod 16.
    void** sp = reinterpret_cast<void**>(top) - 2;
    sp[1] = nullptr;
    sp[0] = reinterpret_cast<void*>(&trampoline);
    sp -= 6;
    for (int r = 0; r < 6; ++r) sp[r] = nullptr;
    ctx_[i].sp = sp;
#else
    getcontext(&ctx_[i].uc);
    ctx_[i].uc.uc_stack = {stacks_[i], 0, kStack};
    ctx_[i].uc.uc_link = nullptr;
    makecontext(&ctx_[i].uc, &trampoline, 0);
#endif
  }
  // The scheduler gives fiber i the CPU until it waits or ends.
  void enter(unsigned i) {
    self() = this;
#ifdef KP_HOST_FIBERS_ASAN
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, stacks_[i], kStack);
#endif
    switch_to(sched_, ctx_[i]);
#ifdef KP_HOST_FIBERS_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  }
  // The running fiber hands the CPU back (fake: its ASan fake stack; null when it ends).
  void leave(void** fake) {
#ifdef KP_HOST_FIBERS_ASAN
    __sanitizer_start_switch_fiber(fake, sched_bottom_, sched_size_);
#endif
    switch_to(ctx_[running_], sched_);
#ifdef KP_HOST_FIBERS_ASAN
    __sanitizer_finish_switch_fiber(*fake, nullptr, nullptr);
#else
    (void)fake;
#endif
  }
  static void switch_to(FiberContext& from, FiberContext& to) {
#if defined(__x86_64__)
    kp_host_fiber_switch(&from.sp, to.sp);
#else
    swapcontext(&from.uc, &to.uc);
#endif
  }

  FiberContext sched_;
  std::vector<FiberContext> ctx_;
  std::vector<char*> stacks_;
  std::vector<void*> fake_;
  std::vector<bool> done_;
  unsigned running_ = 0;
  const std::function<void(unsigned)>* entry_ = nullptr;
  const void* sched_bottom_ = nullptr;
  size_t sched_size_ = 0;
};

}  // namespace kplan::cuda_host
