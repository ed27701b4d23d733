// Links the compiler's kernel library (and so NVRTC) with --no-as-needed: every library on the
// link line lands in the dynamic section. The arrows test checks libcuda is not one of them
// (the driver is dlopen-ed; a binary that needs it at start-up fails without a GPU driver).
#include <cstdio>

#include "compiler/codegen/nvrtc_compile.h"

int main() {
  std::printf("%s\n", kplan::codegen::nvrtc_version().c_str());
  return 0;
}
