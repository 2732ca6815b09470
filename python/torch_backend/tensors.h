// File: python/torch_backend/tensors.h
// How the backend hands torch tensors to tutti: argument checks that raise torch's ValueError /
// TypeError naming the argument and its value, the dtype and ReduceOp translation, and staging
// of non-contiguous tensors through contiguous copies.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <tutti/tutti.hpp>
#include <vector>

namespace tutti::torch_backend {

/// A reduction as tutti runs it. Complex tensors reduce as their real and imaginary parts
/// (`lanes` 2); PREMUL_SUM multiplies the input by `factor` (or `tensorFactor`) before a sum;
/// BAND/BOR/BXOR, which tutti lacks, run as an allgather and a local reduction in rank order.
struct Reduction {
  DataType dtype = DataType::kFloat32;
  int lanes = 1;
  RedOp op = RedOp::kSum;
  c10d::ReduceOp::RedOpType torchOp = c10d::ReduceOp::SUM;
  bool bitwise = false;
  bool premul = false;
  double factor = 1.0;
  at::Tensor tensorFactor;  ///< defined when PREMUL_SUM's factor is a tensor
};

/// The tutti type of a torch dtype, for reductions; nullopt when tutti cannot reduce it.
std::optional<DataType> reduceType(at::ScalarType t);

/// Checks that `t` can be reduced with `op` and returns how. TypeError (dtype) or ValueError (op)
/// naming `api`, `arg` and the value otherwise.
Reduction resolveReduction(const char* api, const std::string& arg, const at::Tensor& t,
                           const c10d::ReduceOp& op);

/// TypeError unless `t` is a dense (strided) CPU tensor.
void checkCpu(const char* api, const std::string& arg, const at::Tensor& t);
/// ValueError unless `v` has exactly `expected` entries.
void checkCount(const char* api, const std::string& arg, size_t actual, size_t expected);
/// TypeError/ValueError unless `t` has `ref`'s dtype and element count.
void checkLike(const char* api, const std::string& arg, const at::Tensor& t,
               const std::string& refArg, const at::Tensor& ref);
/// ValueError unless `root` is in [0, size).
void checkRoot(const char* api, const char* arg, int64_t root, int size);

/// A tensor as tutti sees it: contiguous memory. A non-contiguous tensor goes through a
/// contiguous copy (`buf`) that writeBack() copies into the caller's tensor.
struct Staged {
  at::Tensor user;
  at::Tensor buf;
  /// An input: contiguous copy when needed (made on the worker thread, at run time).
  static Staged input(const at::Tensor& t);
  /// An output whose contents are replaced: an uninitialised contiguous buffer when needed.
  static Staged output(const at::Tensor& t);
  /// Both read and written (allreduce, broadcast): a contiguous copy when needed.
  static Staged inout(const at::Tensor& t) { return input(t); }
  void writeBack();
  void* data() const { return buf.data_ptr(); }
  size_t bytes() const { return buf.numel() * buf.element_size(); }
};

/// Reduces `buf` (contiguous) in place across the group: allreduce, or reduce to `root` when
/// root >= 0 (other ranks' `buf` unchanged). Handles PREMUL_SUM, complex and bitwise ops.
Status reduceTensor(Communicator& comm, const at::Tensor& buf, const Reduction& r, int root);

/// All-to-all of byte blocks of any sizes: block j of the send side goes to rank j, block j of
/// the receive side comes from rank j. Equal sizes run as one allToAll; otherwise the blocks
/// are padded to the largest block of any rank (one allreduce of a size first).
Status allToAllBytes(Communicator& comm, const std::vector<const std::byte*>& send,
                     const std::vector<size_t>& sendBytes, const std::vector<std::byte*>& recv,
                     const std::vector<size_t>& recvBytes);

}  // namespace tutti::torch_backend
