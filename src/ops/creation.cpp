// Creation ops: tensors from values, constants, ranges and identities.
#include <cmath>

#include <xtensor/xbuilder.hpp>

#include "common.hpp"
#include "microtorch/xtensor.hpp"

namespace microtorch {

namespace detail {

void check_fill(std::size_t count, const Shape& shape) {
  const std::int64_t n = numel_of(shape, "tensor");
  if (n != static_cast<std::int64_t>(count)) {
    throw ShapeError(fmt::format("tensor: {} values cannot fill shape {} ({} elements)", count, shape_str(shape), n));
  }
}

}  // namespace detail

namespace {

Tensor finish(Tensor t, const Options& options) {
  if (t.dtype() != options.dtype()) t = t.to(options.dtype());
  if (options.requires_grad()) t.requires_grad_(true);
  return t;
}

}  // namespace

Shape NestedList::shape() const {
  if (!is_list_) return {};
  Shape inner = items_.empty() ? Shape{} : items_[0].shape();
  for (std::size_t i = 1; i < items_.size(); ++i) {
    if (items_[i].shape() != inner) {
      throw ValueError(fmt::format("tensor: ragged nested list: item 0 has shape {} but item {} has shape {}; every "
                                   "row must have the same length",
                                   shape_str(inner), i, shape_str(items_[i].shape())));
    }
  }
  inner.insert(inner.begin(), static_cast<std::int64_t>(items_.size()));
  return inner;
}

void NestedList::flatten_into(std::vector<double>& out) const {
  if (!is_list_) {
    out.push_back(value_);
    return;
  }
  for (const auto& item : items_) item.flatten_into(out);
}

Tensor tensor(const NestedList& values, Options options) {
  const Shape shape = values.shape();
  std::vector<double> flat;
  values.flatten_into(flat);
  Tensor t = Tensor::empty(shape, Dtype::Float64);
  std::copy(flat.begin(), flat.end(), t.data<double>());
  return finish(t, options);
}

Tensor tensor(std::initializer_list<double> values, const Shape& shape, Options options) {
  return finish(tensor(std::vector<double>(values), shape), options);
}

Tensor scalar_tensor(double value, Options options) { return full({}, value, options); }

Tensor empty(const Shape& shape, Options options) {
  return finish(Tensor::empty(shape, options.dtype()), options);
}

Tensor full(const Shape& shape, double value, Options options) {
  Tensor t = Tensor::empty(shape, options.dtype());
  t.fill_(value);
  return finish(t, options);
}

Tensor zeros(const Shape& shape, Options options) { return full(shape, 0.0, options); }
Tensor ones(const Shape& shape, Options options) { return full(shape, 1.0, options); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), t.dtype()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype()); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, t.dtype()); }

Tensor arange(double end) { return arange(0.0, end, 1.0); }

Tensor arange(double start, double end, double step) {
  auto integral = [](double v) { return std::nearbyint(v) == v; };
  const Dtype d = integral(start) && integral(end) && integral(step) ? Dtype::Int64 : Dtype::Float32;
  return arange(start, end, step, d);
}

Tensor arange(double start, double end, double step, Options options) {
  if (step == 0.0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step)) {
    throw ValueError(fmt::format("arange: start={}, end={}, step={}: the step must be non-zero and all finite", start,
                                 end, step));
  }
  if ((end - start) * step < 0) {
    throw ValueError(fmt::format("arange: start={} end={} step={}: the step points away from end", start, end, step));
  }
  // n = ceil((end - start) / step), checked as a double before it becomes a size
  const double count = std::ceil((end - start) / step);
  if (!(count <= static_cast<double>(kMaxNumel))) {
    throw ShapeError(fmt::format("arange: start={} end={} step={} gives {} elements, more than the 2^60 a tensor may "
                                 "hold; use a larger step",
                                 start, end, step, count));
  }
  const auto n = static_cast<std::int64_t>(count);
  Tensor t = Tensor::empty({n}, Dtype::Float64);
  double* p = t.data<double>();
  for (std::int64_t i = 0; i < n; ++i) p[i] = start + step * static_cast<double>(i);
  return finish(t, options);
}

Tensor linspace(double start, double end, std::int64_t steps, Options options) {
  if (steps < 0) throw ValueError(fmt::format("linspace: steps must be >= 0, got {}", steps));
  numel_of({steps}, "linspace");  // a count no tensor can hold is refused before xtensor allocates
  return finish(Tensor::from_array(xt::linspace<double>(start, end, static_cast<std::size_t>(steps))), options);
}

Tensor eye(std::int64_t n, Options options) { return eye(n, n, options); }

Tensor eye(std::int64_t n, std::int64_t m, Options options) {
  if (n < 0 || m < 0) throw ValueError(fmt::format("eye: sizes must be >= 0, got {} x {}", n, m));
  Tensor t = zeros({n, m}, options.dtype());
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (std::int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = static_cast<T>(1);
  });
  return finish(t, options);
}

}  // namespace microtorch
