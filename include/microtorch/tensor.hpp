/// \file
/// The Tensor: a shared handle to an n-d array with autograd, and its creation Options.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "microtorch/dtype.hpp"
#include "microtorch/error.hpp"
#include "microtorch/memory.hpp"
#include "microtorch/shape.hpp"

namespace microtorch {

namespace autograd {
class Node;
}

/// Memory shared by a tensor and the tensors that alias it (view, reshape, detach).
/// Public because Tensor's inline templates reach it; user code goes through Tensor.
/// Storage that owns its elements is made by the library (a buffer of the block cache of
/// memory.hpp, 64-byte aligned, freed with the storage); from_blob's refers to yours.
struct Storage {
  /// The first element, in row-major order, of the tensor's dtype (null when there are none).
  void* data = nullptr;
  /// Bumped by every in-place write (add_, copy_, an optimizer step, ...). Recorded ops
  /// note it for the tensors their backward reads, and backward refuses to run when it
  /// has moved since (PyTorch's "modified by an inplace operation").
  std::uint64_t version = 0;
  /// Memory the tensor does not own (from_blob), which `data` points to; its deleter
  /// (the caller's, or none) runs when the last tensor sharing it dies.
  std::shared_ptr<void> external = nullptr;
};

namespace detail {
/// True for xtensor expressions (their types name an `expression_tag`): the argument types
/// of Tensor's xtensor constructor (microtorch/xtensor.hpp).
template <class E, class = void>
struct is_xexpression : std::false_type {};
/// \cond SPECIALIZATIONS
template <class E>
struct is_xexpression<E, std::void_t<typename std::decay_t<E>::expression_tag>> : std::true_type {};
/// \endcond
}  // namespace detail

/// What a Tensor handle points to. Public only because Tensor's inline templates and the
/// autograd engine read it; users never touch it directly (use Tensor's methods).
struct TensorImpl {
  std::shared_ptr<Storage> storage;  ///< the memory, shared with aliasing tensors
  Shape shape;                       ///< the sizes, outermost first
  std::vector<std::size_t> xshape;   ///< the same sizes, in xtensor's type
  std::int64_t numel = 1;            ///< numel_of(shape), checked once when the impl is made
  Dtype dtype = Dtype::Float32;      ///< the element type
  bool requires_grad = false;        ///< see Tensor::requires_grad()
  bool retains_grad = false;         ///< set by Tensor::retain_grad()
  std::shared_ptr<TensorImpl> grad;  ///< the accumulated gradient (null until a backward reaches it)
  std::shared_ptr<autograd::Node> grad_fn;  ///< the op that produced this tensor; null for a leaf
};

/// Creation options in the libtorch style: `zeros({2, 3}, Options(kFloat64).requires_grad(true))`.
/// A bare Dtype converts to Options, so `zeros({2, 3}, kFloat64)` works too.
class Options {
 public:
  /// Options of dtype d (float32 by default) that do not require grad; implicit, so a Dtype
  /// can stand for Options.
  Options(Dtype d = Dtype::Float32) : dtype_(d) {}  // NOLINT: implicit on purpose
  /// A copy with the dtype set to d.
  Options dtype(Dtype d) const { Options o = *this; o.dtype_ = d; return o; }
  /// A copy that makes the new tensor a leaf requiring grad (floating dtypes only).
  Options requires_grad(bool r) const { Options o = *this; o.requires_grad_ = r; return o; }
  /// The dtype of the tensors these options create.
  Dtype dtype() const { return dtype_; }
  /// Whether the created tensors require grad.
  bool requires_grad() const { return requires_grad_; }

 private:
  Dtype dtype_;
  bool requires_grad_ = false;
};

/// An n-dimensional array of float32, float64, int64 or bool with reverse-mode autograd.
///
/// Copying a Tensor copies the handle: both names alias the same data (as in PyTorch);
/// `clone()` copies the data. A default-constructed Tensor is *undefined* (`defined()`
/// is false), like an unset `.grad`.
///
/// The members that take or give xtensor arrays (a constructor, from_array, array,
/// to_xarray) are defined in microtorch/xtensor.hpp: include it to use them, so that
/// programs that do not use xtensor do not compile it.
///
/// \code
///   using namespace microtorch;
///   Tensor w = randn({3, 2}, Options().requires_grad(true));
///   Tensor x = tensor({{1.0, 2.0, 3.0}});
///   Tensor loss = relu(x.matmul(w)).sum();
///   loss.backward();                 // w.grad() now holds dloss/dw, shape [3, 2]
///   fmt::print("{}\n", w.grad());
/// \endcode
class Tensor {
 public:
  /// An undefined tensor (`defined()` is false): a placeholder, like an unset `.grad`.
  Tensor() = default;
  /// A tensor of an xtensor array or expression (`Tensor(xt::xarray<double>{...})`), as
  /// from_array. Needs microtorch/xtensor.hpp.
  template <class E, class = std::enable_if_t<detail::is_xexpression<E>::value>>
  explicit Tensor(E&& e) : Tensor(from_array(std::forward<E>(e))) {}
  /// Evaluates any xtensor expression into a new Tensor of its value type; an Array<T>
  /// passed as an rvalue gives up its buffer (no copy). Needs microtorch/xtensor.hpp.
  template <class E>
  static auto from_array(E&& e);
  /// A tensor of the given shape and dtype over a fresh, uninitialised buffer. A negative
  /// size or more than kMaxNumel elements throw ShapeError; memory the system refuses,
  /// OutOfMemoryError.
  static Tensor empty(const Shape& shape, Dtype dtype);
  /// Wraps an implementation record (a null pointer gives an undefined tensor). Public for
  /// the library's own use (autograd hands out gradients this way); not needed in user code.
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  /// \name Metadata
  /// On an undefined tensor every accessor throws ValueError, except defined(), is_same(),
  /// shares_storage() (false) and impl_ptr() (null).
  ///@{

  /// True unless the tensor is default-constructed (or an unset grad()).
  bool defined() const { return impl_ != nullptr; }
  /// The sizes, outermost first ([] for a 0-d tensor).
  const Shape& shape() const { return impl().shape; }
  /// The same as shape() (libtorch's spelling).
  const Shape& sizes() const { return shape(); }
  /// The size of one dim; negative dims count from the end; IndexError when out of range.
  std::int64_t size(std::int64_t dim) const;
  /// The number of dims (0 for a scalar tensor).
  std::int64_t dim() const { return static_cast<std::int64_t>(shape().size()); }
  /// The number of elements: the product of the sizes (1 for a 0-d tensor).
  std::int64_t numel() const { return impl().numel; }
  /// The element type.
  Dtype dtype() const { return impl().dtype; }
  /// True for float32 and float64 tensors.
  bool is_floating_point() const { return is_floating(dtype()); }
  /// True when both handles point to the same tensor.
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  /// True when both tensors share memory (one is a view, reshape or detach of the other).
  bool shares_storage(const Tensor& o) const;
  /// The implementation record, for microtorch's own ops and autograd (not needed in user code).
  TensorImpl& impl() const;
  /// The shared pointer to the implementation record (null when undefined); for the library's own use.
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  ///@}

  /// \name Data access
  /// Tensors are always contiguous and row-major. A T that does not match dtype() throws
  /// DtypeError in data() and array(); the copying accessors convert instead.
  ///@{

  /// Raw pointer to the contiguous row-major data; T must match dtype().
  template <class T>
  T* data() const;
  /// An xtensor adaptor over the data (no copy): usable in xtensor expressions and
  /// assignable. T must match dtype(). Needs microtorch/xtensor.hpp.
  template <class T>
  auto array() const;
  /// A copy of the data as an `xt::xarray<T>`; converts to T when dtype() differs. Needs
  /// microtorch/xtensor.hpp.
  template <class T>
  auto to_xarray() const;
  /// A copy of the data, row-major, as a std::vector; converts to T when dtype() differs.
  template <class T>
  std::vector<T> to_vector() const;
  /// The value of a one-element tensor, converted to T (ValueError for more elements).
  template <class T = double>
  T item() const;
  /// One element by index (negative indices count from the end), converted to T. Needs one
  /// index per dim; IndexError names the index and the shape otherwise.
  template <class T = double>
  T at(const std::vector<std::int64_t>& index) const;
  ///@}

  /// \name Autograd
  /// See autograd.hpp for the tape, grad mode and gradcheck.
  ///@{

  /// True when gradients will be computed for this tensor: a leaf marked with
  /// requires_grad_(), or the output of a recorded op on such tensors. False when undefined.
  bool requires_grad() const { return defined() && impl().requires_grad; }
  /// Marks a leaf as a parameter to differentiate (PyTorch's `requires_grad_`). Only floating
  /// dtypes can require grad (DtypeError); only leaves can be switched off (AutogradError).
  Tensor& requires_grad_(bool on = true);
  /// The accumulated gradient (undefined until a backward reaches this tensor).
  Tensor grad() const;
  /// Sets the gradient to g (an undefined g clears it); g must have this tensor's shape
  /// and dtype (ShapeError otherwise).
  void set_grad(const Tensor& g) const;
  /// Forgets the gradient (PyTorch's `zero_grad(set_to_none=True)`).
  void zero_grad() const;
  /// Also keep .grad on a non-leaf tensor during backward; AutogradError when the tensor
  /// does not require grad.
  void retain_grad() const;
  /// True when no recorded op produced this tensor (tensors you create, parameters).
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  /// The recorded op that produced this tensor (PyTorch's `grad_fn`); null for a leaf.
  const std::shared_ptr<autograd::Node>& grad_fn() const { return impl().grad_fn; }
  /// Backpropagates from this tensor, accumulating into the grad() of every leaf that
  /// requires grad. `gradient` (dL/dthis, of this shape: ShapeError otherwise) may be
  /// omitted for one-element tensors. The graph is freed afterwards unless retain_graph is
  /// true. AutogradError when this tensor does not require grad, when the graph was already
  /// freed, or when a tensor backward needs was modified in place since its op ran.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  /// The same data, cut from the graph (shares memory; requires_grad is false).
  Tensor detach() const;
  ///@}

  /// \name Copies and in-place updates
  /// While grad mode is on, an in-place update throws AutogradError when it would corrupt the
  /// graph: on a leaf that requires grad (update parameters inside a NoGradGuard, as optimizers
  /// do), on a tensor produced by a recorded op, or from a source that requires grad.
  ///@{

  /// A copy of the data in new memory; recorded, so gradients flow back to this tensor.
  Tensor clone() const;
  /// This tensor converted to dtype d (the same handle when it already has dtype d).
  /// Differentiable into float32 and float64; int64 and bool results are not.
  Tensor to(Dtype d) const;
  /// Returns this tensor: storage is always contiguous (here for code written for PyTorch).
  Tensor contiguous() const { return *this; }
  /// Sets every element to value, converted to the dtype.
  Tensor& fill_(double value);
  /// Sets every element to 0.
  Tensor& zero_() { return fill_(0.0); }
  /// Copies src into this tensor's memory, converted to this dtype; src must broadcast to
  /// this shape (ShapeError otherwise).
  Tensor& copy_(const Tensor& src);
  /// this += alpha * other (other broadcasts to this shape; ShapeError otherwise). Bool
  /// tensors throw DtypeError.
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  /// Multiplies every element by factor; bool tensors throw DtypeError.
  Tensor& mul_(double factor);
  /// Fills with draws from U(low, high) of the current generator (random.hpp). Allowed on a
  /// parameter (it is not recorded: initialisation); floating dtypes only (DtypeError); low >
  /// high throws ValueError.
  Tensor& uniform_(double low = 0.0, double high = 1.0);
  /// Fills with draws from N(mean, std^2) of the current generator, like uniform_; std < 0
  /// throws ValueError.
  Tensor& normal_(double mean = 0.0, double std = 1.0);
  /// How many in-place writes the memory of this tensor has seen (shared by its views;
  /// PyTorch's `_version`).
  std::uint64_t version() const { return impl().storage->version; }
  /// Call after writing through data<T>() behind the tape's back (as optimizers do), so
  /// that a backward that still needs the old values refuses to run.
  void bump_version() const { ++impl().storage->version; }
  ///@}

  // ---- method spellings of the free functions in ops.hpp -----------------------------
  ///@{

  /// The method spelling of the function of the same name in ops.hpp: `x.op(args...)` is
  /// `op(x, args...)`, with the same result, gradient and errors.
  Tensor reshape(const Shape& shape) const;
  Tensor view(const Shape& shape) const;
  Tensor flatten(std::int64_t start_dim = 0, std::int64_t end_dim = -1) const;
  Tensor transpose(std::int64_t dim0, std::int64_t dim1) const;
  /// The matrix transpose, as torch.Tensor.t(): transpose(0, 1) of a 2-D tensor, the tensor
  /// itself for 0-D and 1-D; more dims throw ShapeError (use transpose(-2, -1)). There is
  /// no free t().
  Tensor t() const;
  Tensor permute(const std::vector<std::int64_t>& dims) const;
  Tensor unsqueeze(std::int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(std::int64_t dim) const;
  Tensor expand(const Shape& shape) const;
  Tensor slice(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  Tensor select(std::int64_t dim, std::int64_t index) const;
  Tensor index_select(std::int64_t dim, const Tensor& index) const;
  std::vector<Tensor> split(std::int64_t split_size, std::int64_t dim = 0) const;
  std::vector<Tensor> chunk(std::int64_t chunks, std::int64_t dim = 0) const;

  Tensor matmul(const Tensor& other) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor pow(double exponent) const;
  Tensor abs() const;
  Tensor neg() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor clamp(double min, double max) const;
  Tensor masked_fill(const Tensor& mask, double value) const;

  Tensor sum() const;
  Tensor sum(const std::vector<std::int64_t>& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const std::vector<std::int64_t>& dims, bool keepdim = false) const;
  Tensor max() const;
  std::tuple<Tensor, Tensor> max(std::int64_t dim, bool keepdim = false) const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> min(std::int64_t dim, bool keepdim = false) const;
  Tensor argmax() const;
  Tensor argmax(std::int64_t dim, bool keepdim = false) const;
  Tensor var(const std::vector<std::int64_t>& dims = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor logsumexp(const std::vector<std::int64_t>& dims, bool keepdim = false) const;
  Tensor softmax(std::int64_t dim) const;
  Tensor log_softmax(std::int64_t dim) const;
  ///@}

 private:
  std::shared_ptr<TensorImpl> impl_;
};

/// A list of tensors: the inputs and results of ops such as cat, split and gradcheck.
using TensorList = std::vector<Tensor>;
/// Named tensors in order, e.g. {"0.weight", W}, {"0.bias", b}: state dicts, .npz archives.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// ---- implementation of the templates -----------------------------------------------

namespace detail {
std::shared_ptr<TensorImpl> make_impl(std::shared_ptr<Storage> storage, Shape shape, Dtype dtype);
/// A tensor over external memory (from_blob in ops.hpp).
Tensor wrap_external(void* data, const Shape& shape, Dtype dtype, std::function<void(void*)> deleter);
[[noreturn]] void throw_dtype_access(Dtype have, Dtype want, const char* what);
std::size_t flat_index(const Shape& shape, const std::vector<std::int64_t>& index);
}  // namespace detail

template <class T>
T* Tensor::data() const {
  if (impl().dtype != dtype_of_v<T>) detail::throw_dtype_access(impl().dtype, dtype_of_v<T>, "data");
  return static_cast<T*>(impl().storage->data);
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  const Tensor converted = detach().to(dtype_of_v<T>);
  const T* p = converted.data<T>();
  return std::vector<T>(p, p + numel());
}

template <class T>
T Tensor::item() const {
  if (numel() != 1) {
    throw ValueError("item: only one-element tensors can be converted to a number, got shape " +
                     shape_str(shape()) + "; select an element with at({...}) or reduce with sum()/mean()");
  }
  return at<T>(std::vector<std::int64_t>(shape().size(), 0));
}

template <class T>
T Tensor::at(const std::vector<std::int64_t>& index) const {
  const std::size_t i = detail::flat_index(shape(), index);
  return visit_dtype(dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    return static_cast<T>(data<S>()[i]);
  });
}

}  // namespace microtorch
