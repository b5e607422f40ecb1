// microtorch/dtype.hpp — element types and the promotion rules between them.
#pragma once

#include <cstdint>
#include <string_view>

namespace microtorch {

/// The element type of a Tensor. float32 is the default; float64 exists so gradients
/// can be checked tightly; int64 holds indices and class targets; bool holds masks.
enum class Dtype : std::uint8_t { Float32, Float64, Int64, Bool };

inline constexpr Dtype kFloat32 = Dtype::Float32;
inline constexpr Dtype kFloat64 = Dtype::Float64;
inline constexpr Dtype kInt64 = Dtype::Int64;
inline constexpr Dtype kBool = Dtype::Bool;

/// "float32", "float64", "int64", "bool" (numpy's names).
std::string_view dtype_name(Dtype d);
/// Bytes per element.
std::size_t dtype_size(Dtype d);
inline constexpr bool is_floating(Dtype d) { return d == Dtype::Float32 || d == Dtype::Float64; }

/// PyTorch's type promotion for two tensors: bool < int64 < float32 < float64.
Dtype promote_types(Dtype a, Dtype b);

/// The C++ type behind each dtype, and back.
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr Dtype value = Dtype::Float32; };
template <> struct dtype_of<double> { static constexpr Dtype value = Dtype::Float64; };
template <> struct dtype_of<std::int64_t> { static constexpr Dtype value = Dtype::Int64; };
template <> struct dtype_of<bool> { static constexpr Dtype value = Dtype::Bool; };
template <class T> inline constexpr Dtype dtype_of_v = dtype_of<T>::value;

/// A type tag passed to the lambdas of visit_dtype: `using T = typename decltype(tag)::type;`.
template <class T> struct TypeTag { using type = T; };

/// Calls f(TypeTag<T>{}) with the C++ type of d.
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
