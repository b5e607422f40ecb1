// Elementwise formulas over tensor buffers: one generic lambda per formula, evaluated by
// map_elements on xsimd batches for the whole batches and one element at a time for the
// last n % W elements. That is how xtensor's expressions evaluated them, with the same
// functions (xsimd's exp, log, tanh, erf and pow on a batch, std::'s on one element), so the
// results keep their bits; and it compiles in a fraction of the time. unary_op records a
// one-input op whose backward needs either its input or its output, never both.
// Used by unary.cpp (math) and activation.cpp.
#pragma once

#include <cmath>
#include <limits>

#include <xsimd/xsimd.hpp>

#include "common.hpp"

namespace microtorch::detail::elementwise_map {

// The math the formulas call: std:: on one element, xsimd:: on a batch.
namespace fn {
using std::erf;
using std::exp;
using std::log;
using std::pow;
using std::sqrt;
using std::tanh;
using xsimd::erf;
using xsimd::exp;
using xsimd::log;
using xsimd::pow;
using xsimd::sqrt;
using xsimd::tanh;

// cond ? a : b, elementwise on a batch.
template <class T>
T select(bool cond, T a, T b) {
  return cond ? a : b;
}
using xsimd::select;

// sign(x): 1 or -1 with x's sign, +-0 for +-0, NaN for NaN (xtensor's xt::sign).
template <class T>
T sign(T x) {
  return std::isnan(x) ? std::numeric_limits<T>::quiet_NaN() : x == 0 ? std::copysign(T(0), x) : std::copysign(T(1), x);
}
template <class T, class A>
xsimd::batch<T, A> sign(const xsimd::batch<T, A>& x) {
  using B = xsimd::batch<T, A>;
  return xsimd::select(xsimd::isnan(x), B(std::numeric_limits<T>::quiet_NaN()),
                       xsimd::select(x == B(T(0)), xsimd::copysign(B(T(0)), x), xsimd::copysign(B(T(1)), x)));
}
}  // namespace fn

// The element type of a value or a batch: what T(0.5) in a formula converts to.
template <class V>
struct element {
  using type = V;
};
template <class T, class A>
struct element<xsimd::batch<T, A>> {
  using type = T;
};
template <class V>
using element_t = typename element<std::decay_t<V>>::type;

/// out[i] = f(in[i]...) for i in [0, n): on xsimd batches of W elements while whole batches
/// remain, then one element at a time.
template <class T, class F, class... In>
void map_elements(T* out, std::int64_t n, F f, const In*... in) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t kW = static_cast<std::int64_t>(B::size);
  std::int64_t i = 0;
  for (; i + kW <= n; i += kW) f(B::load_unaligned(in + i)...).store_unaligned(out + i);
  for (; i < n; ++i) out[i] = f(in[i]...);
}

/// y = fwd(x) for a tensor of T (float, double or int64), computed by map_elements.
template <class T, class F>
Tensor map_tensor(const Tensor& x, F f) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  map_elements(y.template data<T>(), x.numel(), f, x.template data<T>());
  return y;
}

enum class Saved { Input, Output };

/// y = fwd(x) elementwise over a floating x; dx = bwd(g, s) where s is the saved input or
/// output. Integer and bool inputs are converted to float32 first (as torch.exp does).
template <class Fwd, class Bwd>
Tensor unary_op(const char* op, const Tensor& x_in, Saved saved, Fwd fwd, Bwd bwd, autograd::Attrs attrs = {}) {
  const Tensor x = x_in.is_floating_point() ? x_in : x_in.detach().to(Dtype::Float32);
  Tensor y = detail::visit_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return map_tensor<T>(x, fwd);
  });
  return autograd::record(
      y, op, {x}, autograd::Saved{saved == Saved::Input ? x : y},
      [bwd](const Tensor& g, const autograd::NeedsGrad&, const TensorList& s) {
        return TensorList{detail::visit_floating(g.dtype(), "backward", [&](auto tag) {
          using T = typename decltype(tag)::type;
          Tensor dx = Tensor::empty(g.shape(), g.dtype());
          map_elements(dx.template data<T>(), g.numel(), bwd, g.template data<T>(), s[0].template data<T>());
          return dx;
        })};
      },
      std::move(attrs));
}

}  // namespace microtorch::detail::elementwise_map
