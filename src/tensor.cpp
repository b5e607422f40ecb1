#include "microtorch/tensor.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <new>

#include <fmt/format.h>

#include "microtorch/autograd.hpp"
#include "microtorch/ops.hpp"
#include "microtorch/xtensor.hpp"  // Buffer, which a tensor's own storage holds
#include "ops/broadcast.hpp"

namespace microtorch {

namespace detail {

namespace {

// Storage holding a Buffer: `data` points into it, and it is freed with the storage (the
// shared pointer that make_shared returns destroys a BufferStorage<T>).
template <class T>
struct BufferStorage final : Storage {
  explicit BufferStorage(Buffer<T>&& b) : buffer(std::move(b)) { data = buffer.data(); }
  Buffer<T> buffer;
};

}  // namespace

template <class T>
std::shared_ptr<Storage> adopt_buffer(Buffer<T>&& buffer) {
  return std::make_shared<BufferStorage<T>>(std::move(buffer));
}
template std::shared_ptr<Storage> adopt_buffer(Buffer<float>&&);
template std::shared_ptr<Storage> adopt_buffer(Buffer<double>&&);
template std::shared_ptr<Storage> adopt_buffer(Buffer<std::int64_t>&&);
template std::shared_ptr<Storage> adopt_buffer(Buffer<bool>&&);

std::shared_ptr<TensorImpl> make_impl(std::shared_ptr<Storage> storage, Shape shape, Dtype dtype) {
  const std::int64_t numel = numel_of(shape, "tensor");  // every tensor's shape is checked here
  auto impl = std::make_shared<TensorImpl>();
  impl->numel = numel;
  impl->storage = std::move(storage);
  impl->xshape.assign(shape.begin(), shape.end());
  impl->shape = std::move(shape);
  impl->dtype = dtype;
  return impl;
}

Tensor wrap_external(void* data, const Shape& shape, Dtype dtype, std::function<void(void*)> deleter) {
  const std::int64_t n = numel_of(shape, "from_blob");
  if (data == nullptr && n > 0) {
    throw ValueError(fmt::format("from_blob: a null pointer for {} elements of shape {}", n, shape_str(shape)));
  }
  auto storage = std::make_shared<Storage>();
  storage->data = data;
  storage->external = std::shared_ptr<void>(data, [deleter = std::move(deleter)](void* p) {
    if (deleter) deleter(p);
  });
  return Tensor(make_impl(std::move(storage), shape, dtype));
}

void throw_dtype_access(Dtype have, Dtype want, const char* what) {
  throw DtypeError(fmt::format("{}: the tensor holds {} but {} was requested; convert first with .to(k{})", what,
                               dtype_name(have), dtype_name(want),
                               want == Dtype::Float32   ? "Float32"
                               : want == Dtype::Float64 ? "Float64"
                               : want == Dtype::Int64   ? "Int64"
                                                        : "Bool"));
}

std::size_t flat_index(const Shape& shape, const std::vector<std::int64_t>& index) {
  if (index.size() != shape.size()) {
    throw IndexError(fmt::format("at: {} indices given for a tensor of shape {}; give one index per dim",
                                 index.size(), shape_str(shape)));
  }
  std::int64_t flat = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    std::int64_t i = index[d];
    if (i < -shape[d] || i >= shape[d]) {
      throw IndexError(fmt::format("at: index {} is out of range for dim {} of size {} (shape {})", i, d, shape[d],
                                   shape_str(shape)));
    }
    if (i < 0) i += shape[d];
    flat = flat * shape[d] + i;
  }
  return static_cast<std::size_t>(flat);
}

}  // namespace detail

namespace {

// In-place writes are refused on tensors the tape depends on: a leaf that requires grad
// (update it inside a NoGradGuard, as optimizers do) or a tensor produced by a recorded op.
void check_inplace(const Tensor& t, const char* op, const Tensor& src = Tensor()) {
  if (!is_grad_enabled()) return;
  if (src.requires_grad()) {  // the write is not recorded, so the gradient would be lost silently
    throw AutogradError(fmt::format("{}: the source (shape {}) requires grad, but in-place writes are not recorded; "
                                    "use the out-of-place op (y = x + s, y = s.clone()), or do it inside a NoGradGuard "
                                    "if no gradient should flow",
                                    op, shape_str(src.shape())));
  }
  if (t.grad_fn()) {
    throw AutogradError(fmt::format("{}: in-place update of a tensor computed by a recorded op ({}); use the "
                                    "out-of-place op or detach() first",
                                    op, t.grad_fn()->name()));
  }
  if (t.requires_grad()) {
    throw AutogradError(fmt::format("{}: in-place update of a leaf tensor that requires grad (shape {}); do it "
                                    "inside a NoGradGuard, as optimizers do",
                                    op, shape_str(t.shape())));
  }
}

}  // namespace

Tensor Tensor::empty(const Shape& shape, Dtype dtype) {
  const auto n = static_cast<std::size_t>(numel_of(shape, "empty"));
  auto storage = visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    try {
      return detail::adopt_buffer(Buffer<T>(n));
    } catch (const OutOfMemoryError&) {
      throw OutOfMemoryError(fmt::format("empty: cannot allocate {} bytes for a {} tensor of shape {}; use a smaller "
                                         "shape or free tensors (memory::empty_cache() returns cached blocks)",
                                         n * sizeof(T), dtype_name(dtype), shape_str(shape)));
    }
  });
  return Tensor(detail::make_impl(std::move(storage), shape, dtype));
}

TensorImpl& Tensor::impl() const {
  if (!impl_) {
    throw ValueError("this Tensor is undefined (default-constructed, or a grad() that no backward has reached); "
                     "check defined() first");
  }
  return *impl_;
}

std::int64_t Tensor::size(std::int64_t d) const { return shape()[static_cast<std::size_t>(wrap_dim(d, dim(), "size"))]; }

bool Tensor::shares_storage(const Tensor& o) const {
  return defined() && o.defined() && impl().storage == o.impl().storage;
}

Tensor& Tensor::requires_grad_(bool on) {
  if (on && !is_floating(dtype())) {
    throw DtypeError(fmt::format("requires_grad_: only floating tensors can require gradients, this one is {}; "
                                 "convert with .to(kFloat32) first",
                                 dtype_name(dtype())));
  }
  if (!on && !is_leaf()) {
    throw AutogradError("requires_grad_(false): only leaf tensors can change requires_grad; use detach()");
  }
  impl().requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return Tensor(impl().grad); }

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined() && (g.shape() != shape() || g.dtype() != dtype())) {
    throw ShapeError(fmt::format("set_grad: gradient {} {} does not match the tensor {} {}", dtype_name(g.dtype()),
                                 shape_str(g.shape()), dtype_name(dtype()), shape_str(shape())));
  }
  impl().grad = g.impl_ptr();
}

void Tensor::zero_grad() const { impl().grad.reset(); }

void Tensor::retain_grad() const {
  if (!requires_grad()) {
    throw AutogradError("retain_grad: the tensor does not require grad, so no gradient will reach it");
  }
  impl().retains_grad = true;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::run_backward(*this, gradient, retain_graph);
}

Tensor Tensor::detach() const { return Tensor(detail::make_impl(impl().storage, shape(), dtype())); }

// y = x ;  dx = dy
Tensor Tensor::clone() const {
  Tensor out = Tensor::empty(shape(), dtype());
  visit_dtype(dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::copy_n(data<T>(), numel(), out.data<T>());
  });
  return autograd::record(out, "clone", {*this}, [](const Tensor& g) { return TensorList{g}; });
}

// y = cast(x) ;  dx = cast_back(dy) (the engine casts gradients to the input's dtype)
Tensor Tensor::to(Dtype d) const {
  if (d == dtype()) return *this;
  Tensor out = Tensor::empty(shape(), d);
  visit_dtype(dtype(), [&](auto src) {
    using S = typename decltype(src)::type;
    visit_dtype(d, [&](auto dst) {
      using D = typename decltype(dst)::type;
      std::transform(data<S>(), data<S>() + numel(), out.data<D>(), [](S v) { return static_cast<D>(v); });
    });
  });
  if (!is_floating(d)) return out;  // integer and bool results are not differentiable
  return autograd::record(out, "to", {*this}, [](const Tensor& g) { return TensorList{g}; },
                          {{"dtype", std::string(dtype_name(d))}});
}

Tensor& Tensor::fill_(double value) {
  check_inplace(*this, "fill_");
  visit_dtype(dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::fill_n(data<T>(), numel(), static_cast<T>(value));
  });
  bump_version();
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace(*this, "copy_", src);
  Shape b = broadcast_shapes(shape(), src.shape(), "copy_");
  if (b != shape()) {
    throw ShapeError(fmt::format("copy_: source {} does not broadcast to destination {}", shape_str(src.shape()),
                                 shape_str(shape())));
  }
  Tensor s = src.to(dtype()).detach();
  visit_dtype(dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    // A source that shares this memory has this shape (up to leading 1s): every element is
    // read before it is written.
    const T* from = s.data<T>();
    T* to = data<T>();
    const std::array<Shape, 1> strides{detail::broadcast_strides(s.shape(), shape())};
    detail::for_each_broadcast(shape(), strides, [&](std::int64_t i, const auto& at) { to[i] = from[at[0]]; });
  });
  bump_version();
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_inplace(*this, "add_", other);
  if (!is_floating(dtype()) && dtype() != Dtype::Int64) {
    throw DtypeError("add_: bool tensors do not support arithmetic; convert with .to(kFloat32)");
  }
  Shape b = broadcast_shapes(shape(), other.shape(), "add_");
  if (b != shape()) {
    throw ShapeError(fmt::format("add_: {} does not broadcast to the destination {}", shape_str(other.shape()),
                                 shape_str(shape())));
  }
  Tensor o = other.to(dtype()).detach();
  visit_dtype(dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      // A source that shares this memory has this shape: each element is read, then written.
      const T* from = o.data<T>();
      T* to = data<T>();
      const std::array<Shape, 1> strides{detail::broadcast_strides(o.shape(), shape())};
      if (alpha == 1.0) {
        detail::for_each_broadcast(shape(), strides, [&](std::int64_t i, const auto& at) { to[i] = to[i] + from[at[0]]; });
      } else {
        const T a = static_cast<T>(alpha);
        detail::for_each_broadcast(shape(), strides,
                                   [&](std::int64_t i, const auto& at) { to[i] = to[i] + a * from[at[0]]; });
      }
    }
  });
  bump_version();
  return *this;
}

Tensor& Tensor::mul_(double factor) {
  check_inplace(*this, "mul_");
  if (dtype() == Dtype::Bool) throw DtypeError("mul_: bool tensors do not support arithmetic");
  visit_dtype(dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      T* p = data<T>();
      const T f = static_cast<T>(factor);
      for (std::int64_t i = 0, n = numel(); i < n; ++i) p[i] *= f;
    }
  });
  bump_version();
  return *this;
}

// ---- method spellings ------------------------------------------------------------------
Tensor Tensor::reshape(const Shape& s) const { return microtorch::reshape(*this, s); }
Tensor Tensor::view(const Shape& s) const { return microtorch::view(*this, s); }
Tensor Tensor::flatten(std::int64_t s, std::int64_t e) const { return microtorch::flatten(*this, s, e); }
Tensor Tensor::transpose(std::int64_t a, std::int64_t b) const { return microtorch::transpose(*this, a, b); }
Tensor Tensor::t() const {
  if (dim() > 2) {
    throw ShapeError(fmt::format("t: expects a tensor with at most 2 dims, got {}; use transpose(-2, -1)",
                                 shape_str(shape())));
  }
  return dim() < 2 ? *this : microtorch::transpose(*this, 0, 1);
}
Tensor Tensor::permute(const std::vector<std::int64_t>& d) const { return microtorch::permute(*this, d); }
Tensor Tensor::unsqueeze(std::int64_t d) const { return microtorch::unsqueeze(*this, d); }
Tensor Tensor::squeeze() const { return microtorch::squeeze(*this); }
Tensor Tensor::squeeze(std::int64_t d) const { return microtorch::squeeze(*this, d); }
Tensor Tensor::expand(const Shape& s) const { return microtorch::expand(*this, s); }
Tensor Tensor::slice(std::int64_t d, std::int64_t s, std::int64_t e, std::int64_t st) const {
  return microtorch::slice(*this, d, s, e, st);
}
Tensor Tensor::narrow(std::int64_t d, std::int64_t s, std::int64_t l) const { return microtorch::narrow(*this, d, s, l); }
Tensor Tensor::select(std::int64_t d, std::int64_t i) const { return microtorch::select(*this, d, i); }
Tensor Tensor::index_select(std::int64_t d, const Tensor& i) const { return microtorch::index_select(*this, d, i); }
TensorList Tensor::split(std::int64_t s, std::int64_t d) const { return microtorch::split(*this, s, d); }
TensorList Tensor::chunk(std::int64_t c, std::int64_t d) const { return microtorch::chunk(*this, c, d); }

Tensor Tensor::matmul(const Tensor& o) const { return microtorch::matmul(*this, o); }
Tensor Tensor::exp() const { return microtorch::exp(*this); }
Tensor Tensor::log() const { return microtorch::log(*this); }
Tensor Tensor::sqrt() const { return microtorch::sqrt(*this); }
Tensor Tensor::rsqrt() const { return microtorch::rsqrt(*this); }
Tensor Tensor::pow(double e) const { return microtorch::pow(*this, e); }
Tensor Tensor::abs() const { return microtorch::abs(*this); }
Tensor Tensor::neg() const { return microtorch::neg(*this); }
Tensor Tensor::tanh() const { return microtorch::tanh(*this); }
Tensor Tensor::sigmoid() const { return microtorch::sigmoid(*this); }
Tensor Tensor::relu() const { return microtorch::relu(*this); }
Tensor Tensor::clamp(double lo, double hi) const { return microtorch::clamp(*this, lo, hi); }
Tensor Tensor::masked_fill(const Tensor& m, double v) const { return microtorch::masked_fill(*this, m, v); }

Tensor Tensor::sum() const { return microtorch::sum(*this); }
Tensor Tensor::sum(const std::vector<std::int64_t>& d, bool k) const { return microtorch::sum(*this, d, k); }
Tensor Tensor::mean() const { return microtorch::mean(*this); }
Tensor Tensor::mean(const std::vector<std::int64_t>& d, bool k) const { return microtorch::mean(*this, d, k); }
Tensor Tensor::max() const { return microtorch::max(*this); }
std::tuple<Tensor, Tensor> Tensor::max(std::int64_t d, bool k) const { return microtorch::max(*this, d, k); }
Tensor Tensor::min() const { return microtorch::min(*this); }
std::tuple<Tensor, Tensor> Tensor::min(std::int64_t d, bool k) const { return microtorch::min(*this, d, k); }
Tensor Tensor::argmax() const { return microtorch::argmax(*this); }
Tensor Tensor::argmax(std::int64_t d, bool k) const { return microtorch::argmax(*this, d, k); }
Tensor Tensor::var(const std::vector<std::int64_t>& d, bool u, bool k) const { return microtorch::var(*this, d, u, k); }
Tensor Tensor::logsumexp(const std::vector<std::int64_t>& d, bool k) const {
  return microtorch::logsumexp(*this, d, k);
}
Tensor Tensor::softmax(std::int64_t d) const { return microtorch::softmax(*this, d); }
Tensor Tensor::log_softmax(std::int64_t d) const { return microtorch::log_softmax(*this, d); }

}  // namespace microtorch
