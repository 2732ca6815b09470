// File: python/torch_backend/tensors.cc
// Argument checks, dtype/op translation, staging, and the two composite operations (reductions
// tutti has no direct form for, and all-to-all with unequal blocks). See tensors.h.
#include "python/torch_backend/tensors.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>

namespace tutti::torch_backend {

namespace {

// torch's Python spelling of a dtype ("torch.int16"), as users wrote it.
std::string dtypeName(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kChar: return "torch.int8";
    case at::kByte: return "torch.uint8";
    case at::kShort: return "torch.int16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kBool: return "torch.bool";
    case at::kComplexFloat: return "torch.complex64";
    case at::kComplexDouble: return "torch.complex128";
    case at::kComplexHalf: return "torch.complex32";
    default: return std::string("torch.") + c10::toString(t);
  }
}

const char* torchOpName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

std::string shape(const at::Tensor& t) {
  std::string s = "(";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + (t.dim() == 1 ? ",)" : ")");
}

}  // namespace

std::optional<DataType> reduceType(at::ScalarType t) {
  switch (t) {
    case at::kChar: return DataType::kInt8;
    case at::kByte: return DataType::kUint8;
    case at::kInt: return DataType::kInt32;
    case at::kLong: return DataType::kInt64;
    case at::kUInt32: return DataType::kUint32;
    case at::kUInt64: return DataType::kUint64;
    case at::kHalf: return DataType::kFloat16;
    case at::kFloat: return DataType::kFloat32;
    case at::kDouble: return DataType::kFloat64;
    case at::kBFloat16: return DataType::kBfloat16;
    case at::kFloat8_e4m3fn: return DataType::kFp8E4M3;
    case at::kFloat8_e5m2: return DataType::kFp8E5M2;
    default: return std::nullopt;
  }
}

Reduction resolveReduction(const char* api, const std::string& arg, const at::Tensor& t,
                           const c10d::ReduceOp& op) {
  Reduction r;
  r.torchOp = op.op_;
  const at::ScalarType st = t.scalar_type();
  switch (op.op_) {
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK_TYPE(at::isIntegralType(st, /*includeBool=*/true), "tutti ", api,
                       ": ReduceOp.", torchOpName(op.op_), " needs an integer or bool tensor, but '",
                       arg, "' has dtype ", dtypeName(st));
      r.bitwise = true;
      r.dtype = DataType::kUint8;  // moved as bytes, reduced by torch
      return r;
    case c10d::ReduceOp::SUM: r.op = RedOp::kSum; break;
    case c10d::ReduceOp::AVG: r.op = RedOp::kAvg; break;
    case c10d::ReduceOp::PRODUCT: r.op = RedOp::kProd; break;
    case c10d::ReduceOp::MIN: r.op = RedOp::kMin; break;
    case c10d::ReduceOp::MAX: r.op = RedOp::kMax; break;
    case c10d::ReduceOp::PREMUL_SUM: {
      r.op = RedOp::kSum;
      r.premul = true;
      // torch makes PREMUL_SUM only with this supplement (_make_nccl_premul_sum).
      auto* s = static_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK_VALUE(s != nullptr, "tutti ", api,
                        ": ReduceOp.PREMUL_SUM without its factor (make it with "
                        "torch.distributed._make_nccl_premul_sum)");
      if (s->tensor_factor.defined()) {
        TORCH_CHECK_TYPE(s->tensor_factor.device().is_cpu(), "tutti ", api,
                         ": PREMUL_SUM's factor tensor is on ", s->tensor_factor.device().str(),
                         "; the tutti backend needs a CPU tensor");
        r.tensorFactor = s->tensor_factor;
      } else {
        r.factor = s->double_factor;
      }
      TORCH_CHECK_TYPE(at::isFloatingType(st) || at::isComplexType(st), "tutti ", api,
                       ": ReduceOp.PREMUL_SUM needs a floating tensor, but '", arg,
                       "' has dtype ", dtypeName(st));
      break;
    }
    default:
      TORCH_CHECK_VALUE(false, "tutti ", api, ": 'op' is ReduceOp.", torchOpName(op.op_),
                        ", which is not a reduction");
  }
  if (at::isComplexType(st)) {
    TORCH_CHECK_TYPE(r.op == RedOp::kSum || r.op == RedOp::kAvg, "tutti ", api, ": ReduceOp.",
                     torchOpName(op.op_), " is undefined on complex numbers ('", arg,
                     "' has dtype ", dtypeName(st), "); SUM, AVG and PREMUL_SUM work");
    r.lanes = 2;
    r.dtype = *reduceType(c10::toRealValueType(st));
    return r;
  }
  auto d = reduceType(st);
  TORCH_CHECK_TYPE(d.has_value(), "tutti ", api, ": '", arg, "' has dtype ", dtypeName(st),
                   ", which tutti cannot reduce with ReduceOp.", torchOpName(op.op_),
                   " (it reduces int8, uint8, int32, int64, uint32, uint64, float16, bfloat16, "
                   "float32, float64, float8_e4m3fn, float8_e5m2 and complex for SUM/AVG)");
  r.dtype = *d;
  return r;
}

void checkCpu(const char* api, const std::string& arg, const at::Tensor& t) {
  TORCH_CHECK_TYPE(t.defined(), "tutti ", api, ": '", arg, "' is an undefined tensor");
  TORCH_CHECK_TYPE(t.device().is_cpu(), "tutti ", api, ": '", arg, "' is on device ",
                   t.device().str(), "; the tutti backend runs on CPU tensors");
  TORCH_CHECK_TYPE(t.layout() == at::kStrided, "tutti ", api, ": '", arg, "' has layout ",
                   t.layout(), "; the tutti backend needs dense (strided) tensors");
}

void checkCount(const char* api, const std::string& arg, size_t actual, size_t expected) {
  TORCH_CHECK_VALUE(actual == expected, "tutti ", api, ": '", arg, "' has ", actual,
                    " entries, expected ", expected);
}

void checkLike(const char* api, const std::string& arg, const at::Tensor& t,
               const std::string& refArg, const at::Tensor& ref) {
  checkCpu(api, arg, t);
  TORCH_CHECK_TYPE(t.scalar_type() == ref.scalar_type(), "tutti ", api, ": '", arg,
                   "' has dtype ", dtypeName(t.scalar_type()), " but '", refArg, "' has ",
                   dtypeName(ref.scalar_type()));
  TORCH_CHECK_VALUE(t.numel() == ref.numel(), "tutti ", api, ": '", arg, "' has shape ",
                    shape(t), " (", t.numel(), " elements) but '", refArg, "' has shape ",
                    shape(ref), " (", ref.numel(), " elements)");
}

void checkRoot(const char* api, const char* arg, int64_t root, int size) {
  TORCH_CHECK_VALUE(root >= 0 && root < size, "tutti ", api, ": '", arg, "' is ", root,
                    ", outside the group's ranks [0, ", size, ")");
}

Staged Staged::input(const at::Tensor& t) { return Staged{t, t.contiguous()}; }

Staged Staged::output(const at::Tensor& t) {
  return Staged{t, t.is_contiguous() ? t : at::empty_like(t, at::MemoryFormat::Contiguous)};
}

void Staged::writeBack() {
  if (!buf.is_same(user)) user.copy_(buf);
}

Status reduceTensor(Communicator& comm, const at::Tensor& buf, const Reduction& r, int root) {
  const size_t n = static_cast<size_t>(comm.size());
  if (r.bitwise) {
    // Every rank's bytes, then the same left-to-right reduction on each rank: exact, and equal
    // on all ranks.
    const size_t bytes = buf.numel() * buf.element_size();
    at::Tensor all = at::empty({static_cast<int64_t>(n), buf.numel()}, buf.options());
    Status s = root < 0 ? comm.allGather(buf.data_ptr(), all.data_ptr(), bytes, DataType::kUint8)
                        : comm.gather(buf.data_ptr(), all.data_ptr(), bytes, DataType::kUint8,
                                      root);
    if (!s.isOk() || (root >= 0 && comm.rank() != root)) return s;
    at::Tensor acc = all[0].clone();
    for (size_t i = 1; i < n; ++i) {
      const at::Tensor row = all[static_cast<int64_t>(i)];
      if (r.torchOp == c10d::ReduceOp::BAND) acc.bitwise_and_(row);
      else if (r.torchOp == c10d::ReduceOp::BOR) acc.bitwise_or_(row);
      else acc.bitwise_xor_(row);
    }
    buf.view(-1).copy_(acc);
    return Status::ok();
  }
  const size_t count = buf.numel() * r.lanes;
  const void* send = buf.data_ptr();
  at::Tensor scaled;
  if (r.premul) {
    scaled = r.tensorFactor.defined() ? buf * r.tensorFactor.to(buf.scalar_type())
                                      : buf * r.factor;
    send = scaled.data_ptr();
  }
  if (root < 0) return comm.allReduce(send, buf.data_ptr(), count, r.dtype, r.op);
  return comm.reduce(send, buf.data_ptr(), count, r.dtype, r.op, root);
}

Status allToAllBytes(Communicator& comm, const std::vector<const std::byte*>& send,
                     const std::vector<size_t>& sendBytes, const std::vector<std::byte*>& recv,
                     const std::vector<size_t>& recvBytes) {
  const size_t n = send.size();
  // [largest block, 1 if any block differs from it]: the max over all ranks tells whether every
  // block of every rank has one size, which all ranks must agree on to call the same allToAll.
  uint64_t local[2] = {0, 0};
  for (size_t j = 0; j < n; ++j)
    local[0] = std::max<uint64_t>(local[0], std::max(sendBytes[j], recvBytes[j]));
  for (size_t j = 0; j < n; ++j)
    if (sendBytes[j] != local[0] || recvBytes[j] != local[0]) local[1] = 1;
  uint64_t global[2];
  Status s = comm.allReduce(local, global, 2, DataType::kUint64, RedOp::kMax);
  if (!s.isOk()) return s;
  const size_t block = global[0];
  if (block == 0) return Status::ok();
  bool sendPacked = global[1] == 0, recvPacked = global[1] == 0;
  for (size_t j = 1; j < n && sendPacked; ++j) sendPacked = send[j] == send[0] + j * block;
  for (size_t j = 1; j < n && recvPacked; ++j) recvPacked = recv[j] == recv[0] + j * block;
  at::Tensor sendPad, recvPad;
  const std::byte* sp = send[0];
  std::byte* rp = recv[0];
  if (!sendPacked) {
    sendPad = at::empty({static_cast<int64_t>(n * block)}, at::kByte);
    auto* p = static_cast<std::byte*>(sendPad.data_ptr());
    for (size_t j = 0; j < n; ++j)
      if (sendBytes[j]) std::memcpy(p + j * block, send[j], sendBytes[j]);
    sp = p;
  }
  if (!recvPacked) {
    recvPad = at::empty({static_cast<int64_t>(n * block)}, at::kByte);
    rp = static_cast<std::byte*>(recvPad.data_ptr());
  }
  s = comm.allToAll(sp, rp, block, DataType::kUint8);
  if (!s.isOk() || recvPacked) return s;
  for (size_t j = 0; j < n; ++j)
    if (recvBytes[j]) std::memcpy(recv[j], rp + j * block, recvBytes[j]);
  return Status::ok();
}

}  // namespace tutti::torch_backend
