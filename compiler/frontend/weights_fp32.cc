#include "compiler/frontend/weights_fp32.h"

#include <cstring>

#include "ir/support/dtype.h"
#include "ir/support/error.h"
#include "ir/support/int4.h"

namespace kplan {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

[[noreturn]] void fail(const TensorView& t, const std::string& why) {
  throw Error("tensor " + t.name + (t.file.empty() ? "" : " in " + t.file) + ": " + why);
}

// Element i of a floating-point view, upcast to fp32.
float float_at(const TensorView& t, int64_t i) {
  if (!is_float_dtype(t.dtype))
    fail(t, "dtype " + std::string(dtype_safetensors_name(t.dtype)) + " is not a floating-point type");
  return element_to_float(t.bytes.data(), t.dtype, static_cast<size_t>(i));
}

void check_size(const TensorView& t) {
  if (static_cast<uint64_t>(t.bytes.size()) != static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype))
    fail(t, "holds " + std::to_string(t.bytes.size()) + " bytes, but its shape " + shape_text(t.shape) +
                " needs " + std::to_string(t.numel() * static_cast<int64_t>(dtype_size(t.dtype))));
}

}  // namespace

int64_t Fp32Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Fp32Tensor tensor_fp32(const TensorView& t) {
  if (!is_float_dtype(t.dtype))
    fail(t, "dtype " + std::string(dtype_safetensors_name(t.dtype)) + " is not a floating-point type");
  check_size(t);
  Fp32Tensor out;
  out.shape = t.shape;
  const int64_t n = t.numel();
  out.data.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.data[i] = float_at(t, i);
  return out;
}

Fp32Tensor tensor_fp32(const SafetensorsCheckpoint& ckpt, const std::string& name) {
  return tensor_fp32(ckpt.get(name));
}

bool linear_is_int4(const SafetensorsCheckpoint& ckpt, const std::string& module) {
  return ckpt.contains(module + ".weight_packed");
}

Fp32Tensor dequantize_pack_quantized(const TensorView& packed, const TensorView& scale, const TensorView& shape) {
  if (shape.numel() != 2 || (shape.dtype != DType::I32 && shape.dtype != DType::I64))
    fail(shape, "weight_shape must be two I32 or I64 integers [out, in]");
  check_size(shape);
  int64_t out = 0, in = 0;
  if (shape.dtype == DType::I32) {
    int32_t v[2];
    std::memcpy(v, shape.bytes.data(), 8);
    out = v[0], in = v[1];
  } else {
    int64_t v[2];
    std::memcpy(v, shape.bytes.data(), 16);
    out = v[0], in = v[1];
  }
  if (out <= 0 || in <= 0) fail(shape, "holds a non-positive dimension " + shape_text({out, in}));

  if (packed.dtype != DType::I32) fail(packed, "weight_packed must be I32");
  check_size(packed);
  const int64_t packed_cols = (in + 7) / 8;
  if (packed.shape != std::vector<int64_t>{out, packed_cols})
    fail(packed, "has shape " + shape_text(packed.shape) + ", expected " + shape_text({out, packed_cols}) +
                     " for weight_shape " + shape_text({out, in}));

  if (!is_float_dtype(scale.dtype)) fail(scale, "weight_scale must be a floating-point tensor");
  check_size(scale);
  if (scale.shape.size() != 2 || scale.shape[0] != out || scale.shape[1] <= 0)
    fail(scale, "has shape " + shape_text(scale.shape) + ", expected [" + std::to_string(out) + ", groups]");
  const int64_t groups = scale.shape[1];
  const int64_t group_size = (in + groups - 1) / groups;
  if ((in + group_size - 1) / group_size != groups)
    fail(scale, "has " + std::to_string(groups) + " groups, which no group size divides " + std::to_string(in) +
                    " input columns into");

  Fp32Tensor w;
  w.shape = {out, in};
  w.data.resize(static_cast<size_t>(out * in));
  const uint8_t* words = packed.bytes.data();
  for (int64_t r = 0; r < out; ++r) {
    for (int64_t c = 0; c < in; ++c) {
      const int q = int4::value_unaligned(words + 4 * r * packed_cols, c);
      w.data[r * in + c] = static_cast<float>(q) * float_at(scale, r * groups + c / group_size);
    }
  }
  return w;
}

Fp32Tensor linear_weight_fp32(const SafetensorsCheckpoint& ckpt, const std::string& module) {
  if (linear_is_int4(ckpt, module)) {
    for (const char* part : {".weight_scale", ".weight_shape"})
      if (!ckpt.contains(module + part))
        throw Error("INT4 module " + module + ": has weight_packed but no " + std::string(part + 1));
    return dequantize_pack_quantized(ckpt.get(module + ".weight_packed"), ckpt.get(module + ".weight_scale"),
                                     ckpt.get(module + ".weight_shape"));
  }
  if (!ckpt.contains(module + ".weight"))
    throw Error("Linear module " + module + ": neither " + module + ".weight nor " + module +
                ".weight_packed is in the checkpoint");
  Fp32Tensor w = tensor_fp32(ckpt.get(module + ".weight"));
  if (w.shape.size() != 2) fail(ckpt.get(module + ".weight"), "a Linear weight must be 2-D, got " + shape_text(w.shape));
  return w;
}

}  // namespace kplan
