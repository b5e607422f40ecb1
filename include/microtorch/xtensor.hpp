/// \file
/// Tensors as xtensor arrays, and xtensor arrays as tensors: what microtorch's own ops are
/// built on, for code that wants xtensor's expressions too.
///
/// \code
///   #include <microtorch/xtensor.hpp>
///   Tensor x = Tensor(xt::xarray<double>{{1.0, 2.0}, {3.0, 4.0}});   // a copy
///   Tensor y = Tensor::from_array(xt::exp(x.array<double>()));        // evaluated into y
///   x.array<double>() *= 2.0;                                          // x itself, in place
///   xt::xarray<float> back = y.to_xarray<float>();                     // a copy, converted
/// \endcode
///
/// The members are declared with Tensor (tensor.hpp) and defined here, so that a program
/// that does not include this header does not compile xtensor; without it, their use stops
/// the compiler ("use of ... before deduction of 'auto'"). Build flags must agree on
/// XTENSOR_USE_XSIMD with the library (pkg-config and CMake give it).
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>

#include "microtorch/memory.hpp"
#include "microtorch/tensor.hpp"

namespace microtorch {

/// The contiguous buffer of one dtype: xtensor's uninitialised vector, its memory from the
/// block cache of memory.hpp (64-byte aligned).
template <class T>
using Buffer = xt::uvector<T, memory::CachingAllocator<T>>;

/// An xtensor array over a Buffer: xtensor expressions evaluated into it become a
/// tensor's storage without a copy (Tensor::from_array).
template <class T>
using Array = xt::xarray_container<Buffer<T>, xt::layout_type::row_major, xt::dynamic_shape<std::size_t>>;

namespace detail {
/// Storage owning `buffer`'s memory (moved in, not copied); T is float, double,
/// std::int64_t or bool (defined in tensor.cpp).
template <class T>
std::shared_ptr<Storage> adopt_buffer(Buffer<T>&& buffer);
}  // namespace detail

template <class E>
auto Tensor::from_array(E&& e) {
  using T = typename std::decay_t<E>::value_type;
  Array<T> a(std::forward<E>(e));
  Shape shape(a.shape().begin(), a.shape().end());  // sizes come from valid tensors: they fit int64
  return Tensor(detail::make_impl(detail::adopt_buffer(std::move(a.storage())), std::move(shape), dtype_of_v<T>));
}

template <class T>
auto Tensor::array() const {
  return xt::adapt(data<T>(), static_cast<std::size_t>(numel()), xt::no_ownership(), impl().xshape);
}

template <class T>
auto Tensor::to_xarray() const {
  const Tensor converted = detach().to(dtype_of_v<T>);
  return xt::xarray<T>(converted.array<T>());
}

}  // namespace microtorch
