// File: python/src/arrays.h
// Turns the Python objects passed to a collective (NumPy arrays, torch CPU tensors, anything
// with __dlpack__ or the buffer protocol) into a host pointer, an element count and a tutti
// DataType, raising TypeError/ValueError that name the API and the argument. Nothing is copied
// or converted: a collective writes into the caller's memory, so an implicit copy would silently
// drop the result.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <string>
#include <tutti/types.hpp>

namespace tutti::py {

namespace nb = nanobind;

/// One checked buffer argument. `array` holds the import (a DLPack capsule or a buffer-protocol
/// view) so the memory stays valid, and a bytearray cannot be resized, while an asynchronous
/// call uses it.
template <typename Array>
struct Buffer {
  Array array;
  void* data = nullptr;
  size_t count = 0;  // elements
  DataType dtype = DataType::kUint8;
};
using InBuffer = Buffer<nb::ndarray<nb::ro>>;  // read by the collective
using OutBuffer = Buffer<nb::ndarray<>>;       // written by the collective

/// Imports `obj` as argument `arg` of `api`. Raises TypeError when it is no array (neither
/// __dlpack__ nor the buffer protocol), lives in device memory, or has a dtype tutti lacks;
/// ValueError when it is not C-contiguous, or (importOutput) read-only.
InBuffer importInput(const char* api, const char* arg, nb::handle obj);
OutBuffer importOutput(const char* api, const char* arg, nb::handle obj);

/// The dtype's name as NumPy spells it ("float32", "bfloat16", "float8_e4m3fn").
const char* dtypeName(DataType t);
/// Parses a NumPy or torch dtype name ("float32", "torch.float16", "half", "bf16"); raises
/// TypeError naming `arg` when tutti has no such type.
DataType parseDtype(const char* api, const char* arg, const std::string& name);

/// Raises TypeError unless `b` has the same dtype as `ref` (both named).
void requireSameDtype(const char* api, const char* arg, DataType b, const char* refArg,
                      DataType ref);
/// Raises ValueError "<api>: '<arg>' has <count> elements, expected <expected> (<why>)".
void requireCount(const char* api, const char* arg, size_t count, size_t expected,
                  const std::string& why);

}  // namespace tutti::py
