#include "compiler/codegen/kernel_instance.h"

namespace kplan::codegen {

const char* arg_kind_name(ArgKind k) {
  switch (k) {
    case ArgKind::DevicePtr: return "ptr";
    case ArgKind::I32: return "i32";
    case ArgKind::F32: return "f32";
    case ArgKind::TensorMap: return "tensor_map";
  }
  return "?";
}

}  // namespace kplan::codegen
