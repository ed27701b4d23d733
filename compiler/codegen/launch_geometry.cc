#include "compiler/codegen/launch_geometry.h"

#include "ir/support/error.h"

namespace kplan::codegen {

LaunchDims launch_dims(const KernelSource& k, int64_t rows, int64_t batch) {
  if (rows < 0 || batch < 1) throw Error("codegen: bad launch shape for " + k.id);
  return find_family(k.family).geometry(k, {rows, batch});
}

}  // namespace kplan::codegen
