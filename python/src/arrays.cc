// File: python/src/arrays.cc
// Buffer arguments of the collectives: import without copying, then check device, dtype and
// layout, and raise the Python exception the documentation promises.
#include "python/src/arrays.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string_view>

namespace tutti::py {

namespace {

namespace dlpack = nb::dlpack;
using dlpack::dtype_code;

// NumPy's names, in DataType order.
constexpr const char* kDtypeNames[kNumDataTypes] = {
    "int8",    "uint8",   "int32",   "uint32",   "int64",         "uint64",
    "float16", "float32", "float64", "bfloat16", "float8_e4m3fn", "float8_e5m2"};

std::optional<DataType> fromDlpack(dlpack::dtype t) {
  if (t.lanes != 1) return std::nullopt;
  switch (static_cast<dtype_code>(t.code)) {
    case dtype_code::Int:
      if (t.bits == 8) return DataType::kInt8;
      if (t.bits == 32) return DataType::kInt32;
      if (t.bits == 64) return DataType::kInt64;
      break;
    case dtype_code::UInt:
      if (t.bits == 8) return DataType::kUint8;
      if (t.bits == 32) return DataType::kUint32;
      if (t.bits == 64) return DataType::kUint64;
      break;
    case dtype_code::Float:
      if (t.bits == 16) return DataType::kFloat16;
      if (t.bits == 32) return DataType::kFloat32;
      if (t.bits == 64) return DataType::kFloat64;
      break;
    case dtype_code::Bfloat:
      if (t.bits == 16) return DataType::kBfloat16;
      break;
    // tutti's FP8 types are OCP's: E4M3 without infinities ("fn"), E5M2 IEEE-like.
    case dtype_code::Float8_E4M3FN:
      return DataType::kFp8E4M3;
    case dtype_code::Float8_E5M2:
      return DataType::kFp8E5M2;
    default:
      break;
  }
  return std::nullopt;
}

// A DLPack dtype as NumPy would name it, for error messages about types tutti lacks.
std::string dlpackName(dlpack::dtype t) {
  std::string base;
  switch (static_cast<dtype_code>(t.code)) {
    case dtype_code::Int:
      base = "int";
      break;
    case dtype_code::UInt:
      base = "uint";
      break;
    case dtype_code::Float:
      base = "float";
      break;
    case dtype_code::Bfloat:
      base = "bfloat";
      break;
    case dtype_code::Complex:
      base = "complex";
      break;
    case dtype_code::Bool:
      return "bool";
    default:
      base = "dlpack_code" + std::to_string(t.code) + "_";
      break;
  }
  std::string name = base + std::to_string(t.bits);
  if (t.lanes != 1) name += "x" + std::to_string(t.lanes);
  return name;
}

std::string shapeText(const int64_t* v, size_t n) {
  std::string s = "(";
  for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (n == 1 ? ",)" : ")");
}

std::string typeName(nb::handle obj) { return Py_TYPE(obj.ptr())->tp_name; }

[[noreturn]] void notAnArray(const char* api, const char* arg, nb::handle obj) {
  // nanobind swallows the reason a __dlpack__ export failed (a torch tensor that requires
  // grad, say): ask again to show it.
  std::string why;
  if (!obj.is_none() && nb::hasattr(obj, "__dlpack__")) {
    try {
      obj.attr("__dlpack__")();
      why = " (its __dlpack__ export was refused)";
    } catch (nb::python_error& e) {
      why = std::string(" (its __dlpack__ failed: ") + nb::str(e.value()).c_str() + ")";
    }
  }
  throw nb::type_error((std::string(api) + ": '" + arg +
                        "' must be an array (a NumPy array, a torch CPU tensor, or an object with "
                        "__dlpack__ or the buffer protocol), got " +
                        typeName(obj) + why)
                           .c_str());
}

// Device, dtype and layout checks shared by inputs and outputs.
template <typename Array>
Buffer<Array> check(const char* api, const char* arg, Array a) {
  const int dev = a.device_type();
  if (dev != nb::device::cpu::value && dev != nb::device::cuda_host::value)
    throw nb::type_error((std::string(api) + ": '" + arg + "' is in device memory (device_type=" +
                          std::to_string(dev) + ", device_id=" + std::to_string(a.device_id()) +
                          "); the tutti module runs on host memory only for now")
                             .c_str());
  auto dt = fromDlpack(a.dtype());
  if (!dt)
    throw nb::type_error((std::string(api) + ": '" + arg + "' has dtype " + dlpackName(a.dtype()) +
                          ", which tutti does not have (it has int8, uint8, int32, uint32, int64, "
                          "uint64, float16, float32, float64, bfloat16, float8_e4m3fn, "
                          "float8_e5m2)")
                             .c_str());
  // C order: each dimension's stride is the product of the later extents (extents of 1 may
  // have any stride, as NumPy allows). An empty array has nothing to lay out.
  if (a.size() > 0) {
    int64_t expect = 1;
    for (size_t i = a.ndim(); i-- > 0;) {
      if (a.shape(i) != 1 && a.stride(i) != expect)
        throw nb::value_error((std::string(api) + ": '" + arg + "' is not C-contiguous (shape=" +
                               shapeText(a.shape_ptr(), a.ndim()) +
                               ", strides in elements=" + shapeText(a.stride_ptr(), a.ndim()) +
                               "); pass a contiguous copy (numpy.ascontiguousarray, "
                               "tensor.contiguous())")
                                  .c_str());
      expect *= static_cast<int64_t>(a.shape(i));
    }
  }
  Buffer<Array> b;
  b.data = const_cast<void*>(static_cast<const void*>(a.data()));
  b.count = a.size();
  b.dtype = *dt;
  b.array = std::move(a);
  return b;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

InBuffer importInput(const char* api, const char* arg, nb::handle obj) {
  nb::ndarray<nb::ro> a;
  if (obj.is_none() || !nb::try_cast(obj, a, /*convert=*/false)) notAnArray(api, arg, obj);
  return check(api, arg, std::move(a));
}

OutBuffer importOutput(const char* api, const char* arg, nb::handle obj) {
  nb::ndarray<> a;
  if (obj.is_none() || !nb::try_cast(obj, a, /*convert=*/false)) {
    nb::ndarray<nb::ro> readOnly;
    if (!obj.is_none() && nb::try_cast(obj, readOnly, /*convert=*/false))
      throw nb::value_error((std::string(api) + ": '" + arg +
                             "' is read-only, but the collective writes its result there")
                                .c_str());
    notAnArray(api, arg, obj);
  }
  return check(api, arg, std::move(a));
}

const char* dtypeName(DataType t) {
  return isValid(t) ? kDtypeNames[static_cast<int>(t)] : "invalid";
}

DataType parseDtype(const char* api, const char* arg, const std::string& name) {
  std::string n = lower(name);
  if (n.rfind("torch.", 0) == 0) n = n.substr(6);
  for (int i = 0; i < kNumDataTypes; ++i)
    if (n == kDtypeNames[i]) return static_cast<DataType>(i);
  // NumPy/torch aliases first, then tutti's own names and NCCL's ("half", "float", "bf16").
  if (n == "half") return DataType::kFloat16;
  if (n == "float8_e4m3") return DataType::kFp8E4M3;
  if (auto t = parseDataType(n)) return *t;
  throw nb::type_error(
      (std::string(api) + ": '" + arg + "' names dtype '" + name + "', which tutti does not have")
          .c_str());
}

void requireSameDtype(const char* api, const char* arg, DataType b, const char* refArg,
                      DataType ref) {
  if (b != ref)
    throw nb::type_error((std::string(api) + ": '" + arg + "' has dtype " + dtypeName(b) +
                          " but '" + refArg + "' has " + dtypeName(ref) +
                          " (they must be the same)")
                             .c_str());
}

void requireCount(const char* api, const char* arg, size_t count, size_t expected,
                  const std::string& why) {
  if (count != expected)
    throw nb::value_error((std::string(api) + ": '" + arg + "' has " + std::to_string(count) +
                           " elements, expected " + std::to_string(expected) + " (" + why + ")")
                              .c_str());
}

}  // namespace tutti::py
