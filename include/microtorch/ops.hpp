// microtorch/ops.hpp — the differentiable operations, PyTorch's names and semantics.
//
// Dims may be negative (-1 is the last). Elementwise binary ops broadcast NumPy-style and
// promote dtypes bool < int64 < float32 < float64 (a C++ number adopts the tensor's dtype
// unless it is a fraction meeting an integer tensor, which gives float32).
// Shape ops return new tensors; reshape/view/flatten/squeeze/unsqueeze share memory with
// their input when no copy is needed, the others copy into fresh contiguous storage.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <tuple>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <xtensor/xarray.hpp>

#include "microtorch/mask.hpp"
#include "microtorch/tensor.hpp"

namespace microtorch {

// ---- creation (ops/creation.cpp) --------------------------------------------------------
/// Nested braces of numbers, as torch::tensor takes them: {{1, 2}, {3, 4}} is [2, 2],
/// {{1}, {2}} is [2, 1], a bare number is 0-d. Ragged nesting is refused.
class NestedList {
 public:
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  NestedList(T value) : value_(static_cast<double>(value)) {}  // NOLINT: implicit on purpose
  NestedList(std::initializer_list<NestedList> items) : items_(items), is_list_(true) {}

  /// The shape of the nesting; throws ValueError when it is ragged.
  Shape shape() const;
  /// All numbers in row-major order.
  void flatten_into(std::vector<double>& out) const;

 private:
  double value_ = 0.0;
  std::vector<NestedList> items_;
  bool is_list_ = false;
};

/// tensor({{1, 2}, {3, 4}}); float32 unless options say otherwise.
Tensor tensor(const NestedList& values, Options options = {});
/// tensor({1, 2, 3, 4, 5, 6}, {2, 3}): flat values in row-major order and a shape holding
/// exactly as many elements (ShapeError otherwise); float32 unless options say otherwise.
Tensor tensor(std::initializer_list<double> values, const Shape& shape, Options options = {});
/// A copy of `values` in `shape` (row-major), of T's dtype: float -> float32, double ->
/// float64, bool -> bool, any other integer type -> int64.
template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& shape);
/// A tensor over memory you own, without a copy (torch::from_blob): `data` holds the
/// numel(shape) elements of T (float, double, std::int64_t or bool) in row-major order. It
/// must stay alive, and unmoved, as long as the tensor or anything sharing its memory lives:
/// views (reshape, view, detach), and tensors a recorded op saved for backward. Writes through
/// the tensor (in-place ops, optimizer steps) write your memory. `deleter`, when given, is
/// called with `data` once the last of them is gone. For a copy instead, use tensor(vector,
/// shape) or from_blob(...).clone().
template <class T>
Tensor from_blob(T* data, const Shape& shape, std::function<void(void*)> deleter = nullptr);
Tensor scalar_tensor(double value, Options options = {});
Tensor empty(const Shape& shape, Options options = {});
Tensor zeros(const Shape& shape, Options options = {});
Tensor ones(const Shape& shape, Options options = {});
Tensor full(const Shape& shape, double value, Options options = {});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
/// [start, end) in steps of `step` (int64 when all three are integral and no dtype given).
Tensor arange(double end);
Tensor arange(double start, double end, double step = 1.0);
Tensor arange(double start, double end, double step, Options options);
Tensor linspace(double start, double end, std::int64_t steps, Options options = {});
Tensor eye(std::int64_t n, Options options = {});
Tensor eye(std::int64_t n, std::int64_t m, Options options = {});

// ---- elementwise (ops/elementwise.cpp, ops/unary.cpp) ------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
/// GELU: exact x * Phi(x), or with approximate="tanh" 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))).
Tensor gelu(const Tensor& x, std::string_view approximate = "none");
Tensor clamp(const Tensor& x, double min, double max);
Tensor clamp_min(const Tensor& x, double min);
Tensor clamp_max(const Tensor& x, double max);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& x);

// ---- comparisons and logic, producing bool (ops/compare.cpp) -----------------------------
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, double b);
Tensor operator!=(const Tensor& a, double b);
Tensor operator<(const Tensor& a, double b);
Tensor operator<=(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor operator>=(const Tensor& a, double b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& a);
/// cond ? a : b, elementwise with broadcasting; cond must be bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// x with `value` wherever the bool `mask` (broadcast to x) is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
/// True when shapes, dtypes and all values are equal.
bool equal(const Tensor& a, const Tensor& b);
/// |a - b| <= atol + rtol * |b| everywhere (shapes must broadcast).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
/// True when any element is NaN or +-Inf.
bool has_nonfinite(const Tensor& x);

// ---- reductions (ops/reduce.cpp) ------------------------------------------------------
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
/// Variance; unbiased divides by n - 1 (Bessel), as torch.var does by default. No dims = all.
Tensor var(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool unbiased = true, bool keepdim = false);
/// log(sum(exp(x))) computed as m + log(sum(exp(x - m))), m = max: no overflow.
Tensor logsumexp(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
/// (values, indices) along `dim`; the gradient flows to the first index of each max.
std::tuple<Tensor, Tensor> max(const Tensor& x, std::int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, std::int64_t dim, bool keepdim = false);
/// Index of the first maximum of the flattened tensor, or along `dim` (int64).
Tensor argmax(const Tensor& x);
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, std::int64_t dim, bool keepdim = false);

// ---- softmax family (ops/softmax.cpp) ----------------------------------------------------
/// Fused and numerically stable: y = exp(x - max) / sum(exp(x - max)) along `dim`.
Tensor softmax(const Tensor& x, std::int64_t dim);
/// x - max - log(sum(exp(x - max))) along `dim`.
Tensor log_softmax(const Tensor& x, std::int64_t dim);

// ---- matmul (ops/matmul.cpp) -----------------------------------------------------------
/// PyTorch's matmul: 1-D x 1-D is a dot product; 1-D operands are promoted to a matrix
/// and the added dim removed after; N-D operands are batches of matrices whose leading
/// dims broadcast. Computed with BLAS (sgemm/dgemm).
Tensor matmul(const Tensor& a, const Tensor& b);

/// y = x W^T + b with weight [out_features, in_features] (nn.Linear's layout) and x of
/// shape [..., in_features]; b may be undefined. One BLAS call, the transpose folded in.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- attention (ops/attention.cpp) -----------------------------------------------------
/// softmax(q k^T * scale + mask) v over q [N.., L, D], k [N.., S, D], v [N.., S, Dv], with
/// any number of leading dims (they broadcast). Returns (output [N.., L, Dv], weights
/// [N.., L, S]). One fused primitive with its own backward, tiled as FlashAttention-2:
/// backward recomputes the weights from two statistics per query row (the softmax's max
/// and sum), so nothing L x S is saved beyond the weights returned. scale defaults to 1/sqrt(D); is_causal adds Mask::causal(L, S)
/// (combined with `mask` when both are given); dropout_p drops weights (pass 0 in eval).
/// Weights are returned for inspection and plots (not differentiable). A fully masked
/// query row gives zero weights, zero output and zero gradient.
std::tuple<Tensor, Tensor> scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                                        const Mask& mask = Mask(), double dropout_p = 0.0,
                                                        bool is_causal = false, double scale = 0.0);

/// Options of multi_head_attention.
struct AttentionHeadsOptions {
  Mask mask{};                   ///< broadcasts against [N, H, L, S]
  double dropout_p = 0.0;        ///< on the weights (pass 0 in eval)
  double scale = 0.0;            ///< 0 = 1 / sqrt(D)
  bool need_weights = true;      ///< false: the weights come back undefined
  bool average_weights = false;  ///< weights [N, L, S], the mean over the heads
};

/// Multi-head attention on projected inputs, heads kept in place: q [N, L, H D],
/// k [N, S, H D], v [N, S, H Dv]. The same as scaled_dot_product_attention on
/// q.reshape({N, L, H, D}).transpose(1, 2) (likewise k, v) with the output merged back to
/// [N, L, H Dv], but without copying any head: BLAS reads each head where the projection
/// wrote it. Returns (output [N, L, H Dv], weights [N, H, L, S] or, averaged, [N, L, S]).
/// Without a graph to record and without per-head weights to return, no L x S buffer
/// outlives a head. This is what nn::MultiheadAttention runs.
std::tuple<Tensor, Tensor> multi_head_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                                std::int64_t num_heads, const AttentionHeadsOptions& options = {});
/// multi_head_attention with q, k, v packed along the last dim of one tensor
/// [N, L, 3 H D], as one input projection produces them for self-attention.
std::tuple<Tensor, Tensor> multi_head_attention_packed(const Tensor& qkv, std::int64_t num_heads,
                                                       const AttentionHeadsOptions& options = {});

// ---- normalisation (ops/norm.cpp) ----------------------------------------------------
/// Layer normalisation over the trailing dims given by normalized_shape:
/// y = (x - mean) / sqrt(var + eps) * weight + bias, var biased (divides by n), as
/// torch.nn.functional.layer_norm. weight and bias may be undefined.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// ---- shape ops (ops/shape.cpp) ---------------------------------------------------------
/// One size may be -1 (inferred).
Tensor reshape(const Tensor& x, const Shape& shape);
/// Like reshape; always shares memory with x.
Tensor view(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, std::int64_t start_dim = 0, std::int64_t end_dim = -1);
Tensor transpose(const Tensor& x, std::int64_t dim0, std::int64_t dim1);
Tensor permute(const Tensor& x, const std::vector<std::int64_t>& dims);
Tensor unsqueeze(const Tensor& x, std::int64_t dim);
/// Removes all size-1 dims, or only `dim` when it has size 1.
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, std::int64_t dim);
/// Broadcasts to `shape`; -1 keeps a size. The result is a copy (not a strided view).
Tensor expand(const Tensor& x, const Shape& shape);
Tensor broadcast_to(const Tensor& x, const Shape& shape);
/// x[start:end:step] along dim; start/end are clamped as in Python slicing.
Tensor slice(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1);
Tensor narrow(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t length);
/// x[..., index, ...] with `dim` removed.
Tensor select(const Tensor& x, std::int64_t dim, std::int64_t index);
/// Rows of x along dim picked by a 1-D int64 index tensor (repeats allowed).
Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& index);
Tensor cat(const TensorList& tensors, std::int64_t dim = 0);
Tensor stack(const TensorList& tensors, std::int64_t dim = 0);
/// Pieces of `split_size` along dim (the last may be smaller).
TensorList split(const Tensor& x, std::int64_t split_size, std::int64_t dim = 0);
/// Pieces of the given sizes along dim (they must add up to x.size(dim)).
TensorList split(const Tensor& x, const std::vector<std::int64_t>& sizes, std::int64_t dim = 0);
TensorList chunk(const Tensor& x, std::int64_t chunks, std::int64_t dim = 0);

// ---- templates ---------------------------------------------------------------------------

template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& shape) {
  using Stored = std::conditional_t<std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bool>, T,
                                    std::int64_t>;
  static_assert(std::is_arithmetic_v<T>, "tensor(vector, shape): the vector must hold numbers or bools");
  const std::int64_t n = numel_of(shape, "tensor");
  if (n != static_cast<std::int64_t>(values.size())) {
    throw ShapeError(fmt::format("tensor: {} values cannot fill shape {} ({} elements)", values.size(), shape_str(shape), n));
  }
  Tensor t = Tensor::empty(shape, dtype_of_v<Stored>);
  std::copy(values.begin(), values.end(), t.data<Stored>());  // element by element: std::vector<bool> too
  return t;
}

template <class T>
Tensor from_blob(T* data, const Shape& shape, std::function<void(void*)> deleter) {
  return detail::wrap_external(const_cast<std::remove_const_t<T>*>(data), shape, dtype_of_v<std::remove_const_t<T>>,
                               std::move(deleter));
}

}  // namespace microtorch
