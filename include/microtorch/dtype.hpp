/// \file
/// Element types (Dtype) and the promotion rules between them.
#pragma once

#include <cstdint>
#include <string_view>

namespace microtorch {

/// The element type of a Tensor. float32 is the default; float64 exists so gradients
/// can be checked tightly; int64 holds indices and class targets; bool holds masks.
enum class Dtype : std::uint8_t {
  Float32,  ///< 32-bit IEEE float (C++ `float`), the default
  Float64,  ///< 64-bit IEEE float (C++ `double`), for tight gradient checks
  Int64,    ///< 64-bit signed integer (`std::int64_t`): indices, class targets, counters
  Bool      ///< `bool`: masks and the results of comparisons
};

/// \name libtorch-style spellings of the dtypes
/// `zeros({2, 3}, kFloat64)`, `x.to(kInt64)`, as `torch::kFloat64` in libtorch.
///@{

/// Dtype::Float32 under its libtorch name.
inline constexpr Dtype kFloat32 = Dtype::Float32;
/// Dtype::Float64 under its libtorch name.
inline constexpr Dtype kFloat64 = Dtype::Float64;
/// Dtype::Int64 under its libtorch name.
inline constexpr Dtype kInt64 = Dtype::Int64;
/// Dtype::Bool under its libtorch name.
inline constexpr Dtype kBool = Dtype::Bool;
///@}

/// "float32", "float64", "int64", "bool" (numpy's names).
std::string_view dtype_name(Dtype d);
/// Bytes per element: 4, 8, 8 and 1.
std::size_t dtype_size(Dtype d);
/// True for float32 and float64, the dtypes that can require gradients.
inline constexpr bool is_floating(Dtype d) { return d == Dtype::Float32 || d == Dtype::Float64; }

/// PyTorch's type promotion for two tensors: the later of the two in bool < int64 <
/// float32 < float64.
Dtype promote_types(Dtype a, Dtype b);

/// The Dtype of the C++ type T, in `value`; defined for float, double, std::int64_t and bool
/// only (any other T does not compile).
template <class T> struct dtype_of;
/// \cond SPECIALIZATIONS
template <> struct dtype_of<float> { static constexpr Dtype value = Dtype::Float32; };
template <> struct dtype_of<double> { static constexpr Dtype value = Dtype::Float64; };
template <> struct dtype_of<std::int64_t> { static constexpr Dtype value = Dtype::Int64; };
template <> struct dtype_of<bool> { static constexpr Dtype value = Dtype::Bool; };
/// \endcond
/// `dtype_of<T>::value`: the Dtype of the C++ type T (`dtype_of_v<float>` is kFloat32).
template <class T> inline constexpr Dtype dtype_of_v = dtype_of<T>::value;

/// A type tag passed to the lambdas of visit_dtype, which recover the type T from it:
///
/// \code
///   visit_dtype(t.dtype(), [&](auto tag) {
///     using T = typename decltype(tag)::type;
///     T* p = t.data<T>();
///   });
/// \endcode
template <class T> struct TypeTag {
  using type = T;  ///< the C++ type the tag stands for
};

/// Calls `f(TypeTag<T>{})` with the C++ type T of d (float, double, std::int64_t or bool)
/// and returns what f returns: one generic lambda serves all four dtypes.
template <class F>
decltype(auto) visit_dtype(Dtype d, F&& f) {
  switch (d) {
    case Dtype::Float32: return f(TypeTag<float>{});
    case Dtype::Float64: return f(TypeTag<double>{});
    case Dtype::Int64: return f(TypeTag<std::int64_t>{});
    case Dtype::Bool: break;
  }
  return f(TypeTag<bool>{});
}

}  // namespace microtorch
