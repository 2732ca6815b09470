// File: kernels/wrap_arith.h
// Integer sum and product that wrap modulo 2^bits, shared by the CPU kernels and (through
// nvcc's --expt-relaxed-constexpr) the CUDA kernels, so both define the same results.
// Computed in the unsigned type of the same width, at least unsigned int wide: signed overflow is
// undefined, narrower types promote to int before the operation, and the conversion back is
// modular since C++20. Floating types use plain + and *.
#pragma once

#include <type_traits>

namespace tutti::kernels {

template <typename C>
constexpr C wrapAdd(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<C>(static_cast<U>(static_cast<W>(static_cast<U>(a)) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <typename C>
constexpr C wrapMul(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<C>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

}  // namespace tutti::kernels
