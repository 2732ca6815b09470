// File: base/fmt_impl.cc
// The out-of-line part of {fmt} 9, compiled into tutti so that neither libtutti.so nor
// libnccl.so.2 needs libfmt.so at run time (libnccl.so.2 must load next to PyTorch on machines
// without Debian's libfmt9). fmt splits itself into headers and a compiled part: format.h declares
// the non-template functions (vformat, format_error, ...) and, with `extern template`, a few
// template instantiations, all of which fmt's own library normally provides. Including
// fmt/format-inl.h (installed by libfmt-dev) in exactly one translation unit defines the
// non-template functions; the explicit instantiations below provide the templates that tutti's
// code (and spdlog's, in base/log.cc) uses. The alternative, fmt::fmt-header-only, compiles all of
// format-inl.h into every translation unit that formats (docs/NCCL.md has the build-time numbers).
// It is the static library tutti_fmt (top CMakeLists.txt), which every tutti target links.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

// Floating-point formatting (Dragonbox shortest round trip).
template auto dragonbox::to_decimal<float>(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal<double>(double x) noexcept -> dragonbox::decimal_fp<double>;

// Locale-dependent formatting ({:L}): separators and the decimal point, char only (tutti formats
// no wide strings).
template locale_ref::locale_ref(const std::locale& loc);
template auto locale_ref::get<std::locale>() const -> std::locale;
template auto thousands_sep_impl<char>(locale_ref loc) -> thousands_sep_result<char>;
template auto decimal_point_impl<char>(locale_ref loc) -> char;

}  // namespace detail
FMT_END_NAMESPACE
