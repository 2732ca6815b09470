// File: include/tutti/types.hpp
// Element types, reduction operators and collective kinds. DataType and RedOp values equal
// NCCL's ncclDataType_t / ncclRedOp_t so that the NCCL shim passes them through unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include <tutti/status.hpp>

namespace tutti {

/// The 12 NCCL element types (values as in nccl.h 2.28: ncclInt8 = 0 ... ncclFloat8e5m2 = 11).
enum class DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,   ///< IEEE 754 binary16
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,  ///< bfloat16: float32 with the low 16 mantissa bits cut
  kFp8E4M3 = 10,  ///< OCP FP8 E4M3 (no infinities, max 448)
  kFp8E5M2 = 11,  ///< OCP FP8 E5M2 (IEEE-like, max 57344)
};
inline constexpr int kNumDataTypes = 12;

/// Reduction operators (values as ncclRedOp_t: ncclSum = 0 ... ncclAvg = 4).
/// kAvg is the sum divided by the number of ranks: integer types truncate toward zero (as NCCL),
/// floating types divide the float sum and round to nearest even.
enum class RedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };
inline constexpr int kNumRedOps = 5;

/// Collective kinds.
enum class Coll : int {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kGather,
  kScatter,
  kSendRecv,
  kBarrier,
};
inline constexpr int kNumColls = 10;

/// Bytes per element (1, 2, 4 or 8); 0 for a value outside the enum.
constexpr size_t dataTypeBytes(DataType t) {
  switch (t) {
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kFp8E4M3:
    case DataType::kFp8E5M2:
      return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

constexpr bool isValid(DataType t) { return static_cast<unsigned>(t) < kNumDataTypes; }
constexpr bool isValid(RedOp op) { return static_cast<unsigned>(op) < kNumRedOps; }
constexpr bool isFloating(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64 ||
         t == DataType::kBfloat16 || t == DataType::kFp8E4M3 || t == DataType::kFp8E5M2;
}

/// Short names as nccl-tests prints them: "int8", "uint8", "int32", "uint32", "int64", "uint64",
/// "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2". "invalid" outside the enum.
TUTTI_API std::string_view dataTypeName(DataType t);
/// "sum", "prod", "max", "min", "avg".
TUTTI_API std::string_view redOpName(RedOp op);
/// "allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "gather",
/// "scatter", "sendrecv", "barrier".
TUTTI_API std::string_view collName(Coll c);

/// Parses the names above; dataType also accepts NCCL aliases (float16, float32, float64, fp16,
/// bf16, fp8e4m3, fp8e5m2, char, int, uint, ...). Case-insensitive. nullopt when unknown.
TUTTI_API std::optional<DataType> parseDataType(std::string_view name);
TUTTI_API std::optional<RedOp> parseRedOp(std::string_view name);
TUTTI_API std::optional<Coll> parseColl(std::string_view name);

}  // namespace tutti
