// File: base/types.cc
// Names and parsing of DataType, RedOp and Coll.
#include <tutti/types.hpp>

#include "base/collectives.h"
#include "base/strings.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace tutti {

namespace {
struct TypeAlias {
  const char* name;
  DataType t;
};
constexpr TypeAlias kTypeAliases[] = {
    {"int8", DataType::kInt8},       {"char", DataType::kInt8},
    {"uint8", DataType::kUint8},     {"int32", DataType::kInt32},
    {"int", DataType::kInt32},       {"uint32", DataType::kUint32},
    {"uint", DataType::kUint32},     {"int64", DataType::kInt64},
    {"uint64", DataType::kUint64},   {"half", DataType::kFloat16},
    {"float16", DataType::kFloat16}, {"fp16", DataType::kFloat16},
    {"float", DataType::kFloat32},   {"float32", DataType::kFloat32},
    {"fp32", DataType::kFloat32},    {"double", DataType::kFloat64},
    {"float64", DataType::kFloat64}, {"fp64", DataType::kFloat64},
    {"bfloat16", DataType::kBfloat16}, {"bf16", DataType::kBfloat16},
    {"f8e4m3", DataType::kFp8E4M3},  {"fp8e4m3", DataType::kFp8E4M3},
    {"float8e4m3", DataType::kFp8E4M3}, {"e4m3", DataType::kFp8E4M3},
    {"f8e5m2", DataType::kFp8E5M2},  {"fp8e5m2", DataType::kFp8E5M2},
    {"float8e5m2", DataType::kFp8E5M2}, {"e5m2", DataType::kFp8E5M2},
};
}  // namespace

std::string_view dataTypeName(DataType t) {
  static constexpr const char* kNames[kNumDataTypes] = {
      "int8", "uint8", "int32", "uint32", "int64", "uint64",
      "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return isValid(t) ? kNames[static_cast<int>(t)] : "invalid";
}

std::string_view redOpName(RedOp op) {
  static constexpr const char* kNames[kNumRedOps] = {"sum", "prod", "max", "min", "avg"};
  return isValid(op) ? kNames[static_cast<int>(op)] : "invalid";
}

std::string_view collName(Coll c) {
  int i = static_cast<int>(c);
  return i >= 0 && i < kNumColls ? kCollTable[i].name : "invalid";
}

std::optional<DataType> parseDataType(std::string_view name) {
  std::string n = lower(name);
  for (const auto& a : kTypeAliases)
    if (n == a.name) return a.t;
  return std::nullopt;
}

std::optional<RedOp> parseRedOp(std::string_view name) {
  std::string n = lower(name);
  for (int i = 0; i < kNumRedOps; ++i)
    if (n == redOpName(static_cast<RedOp>(i))) return static_cast<RedOp>(i);
  return std::nullopt;
}

std::optional<Coll> parseColl(std::string_view name) {
  std::string n = lower(name);
  n.erase(std::remove(n.begin(), n.end(), '_'), n.end());
  for (int i = 0; i < kNumColls; ++i)
    if (n == kCollTable[i].name) return static_cast<Coll>(i);
  return std::nullopt;
}

}  // namespace tutti
