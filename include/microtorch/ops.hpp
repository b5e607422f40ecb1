/// \file
/// The differentiable operations, with PyTorch's names and semantics.
///
/// Dims may be negative (-1 is the last). Elementwise binary ops broadcast NumPy-style and
/// promote dtypes bool < int64 < float32 < float64 (a C++ number adopts the tensor's dtype
/// unless it is a fraction meeting an integer tensor, which gives float32).
/// Shape ops return new tensors; reshape/view/flatten/squeeze/unsqueeze share memory with
/// their input when no copy is needed, the others copy into fresh contiguous storage.
/// Every op records itself on the autograd tape when an input requires grad (see
/// autograd.hpp); int64 and bool results are not differentiable. Most ops are also
/// methods of Tensor (`x.sum()`, `x.reshape({2, -1})`).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "microtorch/mask.hpp"
#include "microtorch/tensor.hpp"

namespace microtorch {

// ---- creation (ops/creation.cpp) --------------------------------------------------------
/// \name Creation
/// Options give the dtype (float32 unless said otherwise) and whether the result is a leaf
/// that requires grad: `zeros({2, 3}, kFloat64)`, `ones({3}, Options().requires_grad(true))`.
///@{

/// Nested braces of numbers, as torch::tensor takes them: {{1, 2}, {3, 4}} is [2, 2],
/// {{1}, {2}} is [2, 1], a bare number is 0-d. Ragged nesting is refused.
class NestedList {
 public:
  /// A single number (any arithmetic type, kept as a double): a 0-d entry.
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  NestedList(T value) : value_(static_cast<double>(value)) {}  // NOLINT: implicit on purpose
  /// A braced list of entries, one dim deeper than its items.
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

/// A tensor from nested braces, as torch::tensor: `tensor({{1, 2}, {3, 4}})` is [2, 2];
/// float32 unless options say otherwise. Ragged nesting throws ValueError.
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
/// A 0-d tensor holding value.
Tensor scalar_tensor(double value, Options options = {});
/// A tensor of the given shape with uninitialised values (torch.empty). A negative size
/// or more than kMaxNumel elements throw ShapeError.
Tensor empty(const Shape& shape, Options options = {});
/// A tensor of the given shape filled with 0.
Tensor zeros(const Shape& shape, Options options = {});
/// A tensor of the given shape filled with 1.
Tensor ones(const Shape& shape, Options options = {});
/// A tensor of the given shape filled with value (converted to the dtype).
Tensor full(const Shape& shape, double value, Options options = {});
/// empty() with the shape and dtype of t (never requiring grad).
Tensor empty_like(const Tensor& t);
/// zeros() with the shape and dtype of t (never requiring grad).
Tensor zeros_like(const Tensor& t);
/// ones() with the shape and dtype of t (never requiring grad).
Tensor ones_like(const Tensor& t);
/// full() with the shape and dtype of t (never requiring grad).
Tensor full_like(const Tensor& t, double value);
/// 0, 1, ..., up to but excluding end: int64 when end is integral, float32 otherwise.
Tensor arange(double end);
/// [start, end) in steps of `step`: ceil((end - start) / step) values, int64 when all three
/// are integral, float32 otherwise. A zero or non-finite step, or one pointing away from
/// end, throws ValueError.
Tensor arange(double start, double end, double step = 1.0);
/// arange(start, end, step) with the dtype (and requires_grad) from options.
Tensor arange(double start, double end, double step, Options options);
/// `steps` evenly spaced values from start to end, both included (torch.linspace); steps < 0
/// throws ValueError.
Tensor linspace(double start, double end, std::int64_t steps, Options options = {});
/// The n x n identity matrix.
Tensor eye(std::int64_t n, Options options = {});
/// The n x m matrix with ones on the main diagonal; negative sizes throw ValueError.
Tensor eye(std::int64_t n, std::int64_t m, Options options = {});
///@}

// ---- elementwise (ops/elementwise.cpp, ops/unary.cpp) ------------------------------------
/// \name Elementwise arithmetic and math
/// Binary ops broadcast and promote (see the top of this file); arithmetic on two bool
/// tensors throws DtypeError. Unary math on int64 or bool computes in float32, as torch.exp does.
///@{

/// a + b elementwise.
Tensor add(const Tensor& a, const Tensor& b);
/// a - b elementwise.
Tensor sub(const Tensor& a, const Tensor& b);
/// a * b elementwise.
Tensor mul(const Tensor& a, const Tensor& b);
/// a / b elementwise, true division: integer operands give float32.
Tensor div(const Tensor& a, const Tensor& b);
/// a ^ exponent elementwise (floating result; integer operands give float32).
Tensor pow(const Tensor& a, const Tensor& exponent);
/// a ^ exponent for a number exponent.
Tensor pow(const Tensor& a, double exponent);
/// The larger of a and b elementwise; NaN wins; on ties the gradient is split evenly.
Tensor maximum(const Tensor& a, const Tensor& b);
/// The smaller of a and b elementwise; NaN wins; on ties the gradient is split evenly.
Tensor minimum(const Tensor& a, const Tensor& b);

/// -x; bool tensors throw DtypeError (use logical_not).
Tensor neg(const Tensor& x);
/// e^x.
Tensor exp(const Tensor& x);
/// The natural logarithm (NaN below 0, -inf at 0, as in PyTorch).
Tensor log(const Tensor& x);
/// The square root (NaN below 0).
Tensor sqrt(const Tensor& x);
/// 1 / sqrt(x).
Tensor rsqrt(const Tensor& x);
/// |x|; the gradient is sign(x) (0 at 0).
Tensor abs(const Tensor& x);
/// The hyperbolic tangent.
Tensor tanh(const Tensor& x);
/// 1 / (1 + e^-x).
Tensor sigmoid(const Tensor& x);
/// max(x, 0); the gradient is 0 at x = 0.
Tensor relu(const Tensor& x);
/// GELU: exact x * Phi(x), or with approximate="tanh" 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))).
/// Any other `approximate` throws ValueError.
Tensor gelu(const Tensor& x, std::string_view approximate = "none");
/// SiLU (swish): x * sigmoid(x), as torch.nn.functional.silu; the gate of SwiGLU
/// feed-forward blocks. The gradient is s (1 + x (1 - s)), s = sigmoid(x).
Tensor silu(const Tensor& x);
/// silu(gate) * up in one pass (and one pass backward), the gate of a SwiGLU feed-forward
/// block (Shazeer, "GLU Variants Improve Transformer", 2020): the same values and gradients as
/// the composition, without its intermediate silu(gate). gate and up must have one shape
/// (ShapeError: no broadcasting) and one floating dtype (DtypeError). Recorded as
/// "silu_and_mul" (vLLM's and FlashInfer's name for it).
Tensor silu_and_mul(const Tensor& gate, const Tensor& up);
/// min(max(x, min), max); min > max (or a NaN bound) throws ValueError. The gradient
/// passes where min <= x <= max.
Tensor clamp(const Tensor& x, double min, double max);
/// max(x, min): clamp with no upper bound.
Tensor clamp_min(const Tensor& x, double min);
/// min(x, max): clamp with no lower bound.
Tensor clamp_max(const Tensor& x, double max);
///@}

///@{

/// `a + b`, `a - b`, `a * b`, `a / b` are add, sub, mul and div, and `-x` is neg. A C++ number
/// on either side becomes a 0-d tensor of the tensor's dtype (a fraction meeting an integer
/// tensor gives float32), so `x * 2` stays float32 and `ids + 1` stays int64.
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
///@}

// ---- comparisons and logic, producing bool (ops/compare.cpp) -----------------------------
/// \name Comparisons
/// The results are bool tensors (never differentiable); operands broadcast. Comparisons
/// run in the promoted dtype (bool compares as 0 < 1).
///@{

/// a == b elementwise.
Tensor eq(const Tensor& a, const Tensor& b);
/// a != b elementwise.
Tensor ne(const Tensor& a, const Tensor& b);
/// a < b elementwise.
Tensor lt(const Tensor& a, const Tensor& b);
/// a <= b elementwise.
Tensor le(const Tensor& a, const Tensor& b);
/// a > b elementwise.
Tensor gt(const Tensor& a, const Tensor& b);
/// a >= b elementwise.
Tensor ge(const Tensor& a, const Tensor& b);
///@}

///@{

/// `==`, `!=`, `<`, `<=`, `>`, `>=` are eq, ne, lt, le, gt and ge; a C++ number on the right
/// becomes a 0-d tensor of the tensor's dtype (`x > 0` is a bool mask).
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
///@}

/// \name Logic
///@{

/// a AND b elementwise; any dtype, non-zero counting as true (torch.logical_and).
Tensor logical_and(const Tensor& a, const Tensor& b);
/// a OR b elementwise; non-zero counts as true.
Tensor logical_or(const Tensor& a, const Tensor& b);
/// a XOR b elementwise; non-zero counts as true.
Tensor logical_xor(const Tensor& a, const Tensor& b);
/// NOT a elementwise; non-zero counts as true.
Tensor logical_not(const Tensor& a);
///@}

///@{

/// `a & b`, `a | b`, `a ^ b` and `~a` are logical_and, logical_or, logical_xor and
/// logical_not on bool tensors; other dtypes throw DtypeError (PyTorch's bitwise ops on
/// integers are not offered).
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& a);
///@}

/// \name Selection and tests
///@{

/// cond ? a : b, elementwise with broadcasting, in the promoted dtype of a and b; cond must
/// be bool (DtypeError). The gradient reaches a where cond holds and b elsewhere.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// x with `value` wherever the bool `mask` (broadcast to x; ShapeError otherwise) is true;
/// no gradient flows to the filled elements.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
/// True when shapes, dtypes and all values are equal.
bool equal(const Tensor& a, const Tensor& b);
/// |a - b| <= atol + rtol * |b| everywhere, compared in float64 (shapes must broadcast; a
/// NaN anywhere gives false).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
/// True when any element is NaN or +-Inf.
bool has_nonfinite(const Tensor& x);
///@}

// ---- reductions (ops/reduce.cpp) ------------------------------------------------------
/// \name Reductions
/// Over all elements (a 0-d result), or over `dims` (empty: all), which are removed unless
/// keepdim keeps them with size 1. A dim given twice throws IndexError.
///@{

/// The sum of all elements (int64 for int64 and bool tensors).
Tensor sum(const Tensor& x);
/// The sum over dims.
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
/// The mean of all elements; an empty tensor throws ValueError.
Tensor mean(const Tensor& x);
/// The mean over dims; no elements to average throws ValueError.
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
/// Variance; unbiased divides by n - 1 (Bessel), as torch.var does by default. No dims = all.
/// Too few elements (n - 1 or n is 0) throw ValueError.
Tensor var(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool unbiased = true, bool keepdim = false);
/// log(sum(exp(x))) computed as m + log(sum(exp(x - m))), m = max: no overflow; rows of
/// -inf give -inf. Floating tensors only.
Tensor logsumexp(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim = false);
/// The largest element (0-d); NaN propagates; ties share the gradient evenly. An empty
/// tensor throws ValueError.
Tensor max(const Tensor& x);
/// The smallest element (0-d), like max().
Tensor min(const Tensor& x);
/// (values, indices) along `dim` (indices int64); the gradient flows to the first index of
/// each max. An empty tensor throws ValueError.
std::tuple<Tensor, Tensor> max(const Tensor& x, std::int64_t dim, bool keepdim = false);
/// (values, indices) of the minimum along `dim`, like max(x, dim).
std::tuple<Tensor, Tensor> min(const Tensor& x, std::int64_t dim, bool keepdim = false);
/// Index of the first maximum of the flattened tensor (int64, 0-d; not differentiable).
Tensor argmax(const Tensor& x);
/// Index of the first maximum along `dim` (int64; not differentiable).
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim = false);
/// Index of the first minimum along `dim` (int64; not differentiable).
Tensor argmin(const Tensor& x, std::int64_t dim, bool keepdim = false);
///@}

// ---- softmax family (ops/softmax.cpp) ----------------------------------------------------
/// \name Softmax
///@{

/// Fused and numerically stable: y = exp(x - max) / sum(exp(x - max)) along `dim`
/// (integer inputs are computed in float32).
Tensor softmax(const Tensor& x, std::int64_t dim);
/// x - max - log(sum(exp(x - max))) along `dim`.
Tensor log_softmax(const Tensor& x, std::int64_t dim);
///@}

// ---- matmul (ops/matmul.cpp) -----------------------------------------------------------
/// \name Matrix products
///@{

/// PyTorch's matmul: 1-D x 1-D is a dot product; 1-D operands are promoted to a matrix
/// and the added dim removed after; N-D operands are batches of matrices whose leading
/// dims broadcast. Computed with BLAS (sgemm/dgemm). Operands must be floating (DtypeError;
/// mixed float32/float64 promote); mismatched inner dims throw ShapeError naming both shapes.
Tensor matmul(const Tensor& a, const Tensor& b);

/// y = x W^T + b with weight [out_features, in_features] (nn.Linear's layout) and x of
/// shape [..., in_features]; b may be undefined. One BLAS call, the transpose folded in.
/// Shapes that do not fit throw ShapeError; integer or mismatched dtypes DtypeError.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
///@}

// ---- attention (ops/attention.cpp) -----------------------------------------------------
/// \name Attention
///@{

/// softmax(q k^T * scale + mask) v over q [N.., L, D], k [N.., S, D], v [N.., S, Dv], with
/// any number of leading dims (they broadcast). Returns (output [N.., L, Dv], weights
/// [N.., L, S]). One fused primitive with its own backward, tiled as FlashAttention-2:
/// backward recomputes the weights from two statistics per query row (the softmax's max
/// and sum), so nothing L x S is saved beyond the weights returned. scale defaults to
/// 1/sqrt(D); is_causal adds Mask::causal(L, S) (combined with `mask` when both are
/// given); dropout_p drops weights (pass 0 in eval).
/// Weights are returned for inspection and plots (not differentiable). A fully masked
/// query row gives zero weights, zero output and zero gradient. q, k, v must share one
/// floating dtype (DtypeError); shapes that do not fit throw ShapeError; dropout_p outside
/// [0, 1) throws ValueError.
/// enable_gqa (PyTorch 2.5's name) is grouped-query attention: q [N.., H, L, D] with
/// k, v [N.., Hkv, S, D] of fewer heads, Hkv dividing H (ShapeError otherwise); query head h
/// reads key/value head h / (H / Hkv). The key and value heads are broadcast over their
/// groups, never copied (q is seen as [N.., Hkv, H / Hkv, L, D], k as [N.., Hkv, 1, S, D]), and
/// their gradients are summed over each group. The mask broadcasts against [N.., H, L, S].
std::tuple<Tensor, Tensor> scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                                        const Mask& mask = Mask(), double dropout_p = 0.0,
                                                        bool is_causal = false, double scale = 0.0,
                                                        bool enable_gqa = false);

/// Options of multi_head_attention.
struct AttentionHeadsOptions {
  Mask mask{};                   ///< broadcasts against [N, H, L, S]
  double dropout_p = 0.0;        ///< on the weights (pass 0 in eval)
  double scale = 0.0;            ///< 0 = 1 / sqrt(D)
  bool need_weights = true;      ///< false: the weights come back undefined
  bool average_weights = false;  ///< weights [N, L, S], the mean over the heads
  /// Grouped-query attention: k and v hold this many heads (0 = num_heads), each shared by
  /// num_heads / num_kv_heads query heads in turn (as in Llama 2 70B, Qwen2 and llama2.c).
  std::int64_t num_kv_heads = 0;
};

/// Multi-head attention on projected inputs, heads kept in place: q [N, L, H D],
/// k [N, S, H D], v [N, S, H Dv]. The same as scaled_dot_product_attention on
/// q.reshape({N, L, H, D}).transpose(1, 2) (likewise k, v) with the output merged back to
/// [N, L, H Dv], but without copying any head: BLAS reads each head where the projection
/// wrote it. Returns (output [N, L, H Dv], weights [N, H, L, S] or, averaged, [N, L, S]).
/// Without a graph to record and without per-head weights to return, no L x S buffer
/// outlives a head; with averaged weights and a graph, each head's weights (up to 64 MiB in
/// all) are kept for backward, which reads them instead of recomputing them (PyTorch keeps
/// them too). This is what nn::MultiheadAttention runs. E and Ev must split into
/// num_heads equal heads (ShapeError otherwise).
/// With options.num_kv_heads = Hkv < H (grouped-query attention), k is [N, S, Hkv D] and v
/// [N, S, Hkv Dv]: query head h reads key/value head h / (H / Hkv) in place, and backward sums
/// the gradients of a shared head over its group. Hkv must divide H (ShapeError). Recorded as
/// "grouped_query_attention" (attributes num_heads, num_kv_heads, scale, dropout_p) rather than
/// "multi_head_attention", whose graphs keep their meaning.
std::tuple<Tensor, Tensor> multi_head_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                                std::int64_t num_heads, const AttentionHeadsOptions& options = {});
/// multi_head_attention with q, k, v packed along the last dim of one tensor
/// [N, L, 3 H D], as one input projection produces them for self-attention.
std::tuple<Tensor, Tensor> multi_head_attention_packed(const Tensor& qkv, std::int64_t num_heads,
                                                       const AttentionHeadsOptions& options = {});
/// multi_head_attention of new positions against a key/value cache (incremental decoding):
/// writes k [N, L, Hkv D] and v [N, L, Hkv Dv], the projections of the L new positions, into
/// rows [position, position + L) of k_cache [N, C, Hkv D] and v_cache [N, C, Hkv Dv] (in
/// place: their version moves), then attends q [N, L, H D] to rows [0, position + L) of the
/// caches with the causal mask aligned bottom-right (new query i sees keys j <= position + i),
/// combined with options.mask (broadcast against [N, H, L, position + L]). The caches are read
/// in place, never copied. Returns (output [N, L, H Dv], weights as multi_head_attention's).
/// Hkv = options.num_kv_heads (0 = num_heads). Gradients reach q, k and v (not the cached
/// rows, which are constants); writing the caches again before backward makes it refuse.
/// position + L beyond the capacity C throws ValueError; shapes that do not fit ShapeError.
/// Recorded as "kv_cache_attention" with inputs q, k, v, k_cache, v_cache (and the additive
/// mask when there is one: options.mask, or the causal mask of more than one new position)
/// and attributes num_heads, num_kv_heads, position, scale and dropout_p.
std::tuple<Tensor, Tensor> multi_head_attention_cached(const Tensor& q, const Tensor& k, const Tensor& v,
                                                       const Tensor& k_cache, const Tensor& v_cache,
                                                       std::int64_t position, std::int64_t num_heads,
                                                       const AttentionHeadsOptions& options = {});
///@}

// ---- rotary position embedding (ops/rotary.cpp) ----------------------------------------
/// \name Rotary position embedding
///@{

/// RoPE (Su et al., RoFormer): the D features of every row of x [..., D] turn in D/2 pairs
/// (a, b) -> (a cos - b sin, b cos + a sin), pair i by the angle whose cosine and sine are
/// cos[..., i] and sin[..., i]. cos and sin share one shape that broadcasts to x's shape with
/// the last dim D/2 (for x [N, L, H, D], tables [L, 1, D/2] turn every head of position l
/// alike); nn::RotaryEmbedding makes them, angle = position * base^(-2i/D). The pairs are
/// (i, i + D/2), the half-split layout of Hugging Face's Llama and Qwen2 ("rotate_half"), or
/// with interleaved (2i, 2i + 1), RoFormer's, Meta's Llama's and llama2.c's. One fused
/// primitive: the backward turns dy back (and gives cos and sin gradients should they require
/// grad). An odd D, or tables that do not fit, throw ShapeError; dtypes must match
/// (DtypeError). Recorded as "rotary_embedding" (inputs x, cos, sin; attribute interleaved).
Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved = false);
///@}

// ---- normalisation (ops/norm.cpp) ----------------------------------------------------
/// \name Normalisation
///@{

/// Layer normalisation over the trailing dims given by normalized_shape:
/// y = (x - mean) / sqrt(var + eps) * weight + bias, var biased (divides by n), as
/// torch.nn.functional.layer_norm. weight and bias may be undefined; when given they have
/// normalized_shape and x's dtype. eps must be positive (ValueError).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
/// Root-mean-square normalisation (Zhang and Sennrich, 2019) over the trailing dims given by
/// normalized_shape: y = x / sqrt(mean(x^2) + eps) * weight, as torch.nn.functional.rms_norm
/// (PyTorch 2.4): no centring, no bias. weight may be undefined; when given it has
/// normalized_shape and x's dtype. eps defaults, as in PyTorch, to the machine epsilon of x's
/// dtype; a negative eps throws ValueError. One fused primitive with its own backward.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);

/// Batch normalisation over channel dim 1 of x [N, C] or [N, C, *], as
/// torch.nn.functional.batch_norm: per channel, y = (x - mean) / sqrt(var + eps) * weight + bias.
/// In training (or without running statistics) mean and var are the batch's, var biased
/// (divides by n = N * the spatial size); running_mean and running_var, when given, are then
/// updated in place as r = (1 - momentum) r + momentum s, with the unbiased variance
/// (n / (n - 1)) for running_var. Out of training the running statistics are used (the
/// batch's when there are none). running_mean, running_var, weight and bias are [C] of x's
/// dtype, or undefined (the running ones together). Errors: a rank below 2 or a [C] tensor of
/// another size throw ShapeError; batch statistics of one value per channel (n = 1) and a
/// non-positive eps throw ValueError.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool training = false,
                  double momentum = 0.1, double eps = 1e-5);
///@}

// ---- convolution and pooling (ops/conv.cpp, ops/pool.cpp) ------------------------------
/// \name Convolution and pooling
/// Inputs are channel-first, [N, C, L] (1-D) or [N, C, H, W] (2-D), or unbatched [C, L] /
/// [C, H, W] (the result is then unbatched too), as in PyTorch. Floating dtypes only. Sizes
/// of the 2-D ops are one number for both dims or {h, w}. Each op names itself, the shapes
/// and the fix in its ShapeError (wrong rank, channels that do not match, a kernel larger
/// than the padded input) or ValueError (a size that is not positive, too much padding).
///@{

/// Sizes per spatial dim of a 2-D op (kernel, stride, padding, dilation, output size): one
/// number for both, `2`, or one per dim, `{2, 1}` (PyTorch's ExpandingArray).
struct Sizes2d {
  std::int64_t h = 0;  ///< the size along H
  std::int64_t w = 0;  ///< the size along W
  /// The same size along H and W.
  Sizes2d(std::int64_t both) : h(both), w(both) {}  // NOLINT: implicit on purpose
  /// {h, w}.
  Sizes2d(std::int64_t h_, std::int64_t w_) : h(h_), w(w_) {}
};

/// The padding of a convolution: sizes (zeros added before and after along each spatial
/// dim; one number for all dims, or {h, w} for conv2d), or "valid" (none) or "same" (the
/// output as long as the input: stride 1 only, PyTorch's rule; an odd total
/// dilation * (kernel - 1) puts the extra zero after).
struct ConvPadding {
  std::string mode;    ///< "", "same" or "valid"
  Shape sizes;         ///< one or two sizes when mode is ""
  /// The same padding along every spatial dim (a template, so that a literal 0 is a size and
  /// not a null `const char*`).
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  ConvPadding(I p) : sizes{static_cast<std::int64_t>(p)} {}  // NOLINT: implicit on purpose
  /// {h, w} (conv2d only).
  ConvPadding(std::int64_t h, std::int64_t w) : sizes{h, w} {}
  /// "same" or "valid"; any other word throws ValueError when the convolution runs.
  ConvPadding(const char* mode_) : mode(mode_) {}  // NOLINT: implicit on purpose
  /// The std::string form of ConvPadding(const char*).
  ConvPadding(std::string mode_) : mode(std::move(mode_)) {}  // NOLINT: implicit on purpose
};

/// 1-D convolution (cross-correlation, as torch.nn.functional.conv1d): x [N, C_in, L],
/// weight [C_out, C_in / groups, K], bias [C_out] or undefined -> [N, C_out, L_out] with
/// L_out = (L + 2 padding - dilation (K - 1) - 1) / stride + 1. groups splits the channels
/// into independent groups (C_in and C_out must divide by it): groups == C_in is a
/// depthwise convolution. Computed by im2col and one BLAS GEMM per group, or directly for
/// depthwise kernels.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), std::int64_t stride = 1,
              const ConvPadding& padding = 0, std::int64_t dilation = 1, std::int64_t groups = 1);
/// 2-D convolution (torch.nn.functional.conv2d): x [N, C_in, H, W], weight
/// [C_out, C_in / groups, KH, KW], bias [C_out] or undefined -> [N, C_out, H_out, W_out], each
/// output size as conv1d's L_out.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), Sizes2d stride = 1,
              const ConvPadding& padding = 0, Sizes2d dilation = 1, std::int64_t groups = 1);

/// The maximum over each window of `kernel_size` along L (torch.nn.functional.max_pool1d,
/// ceil_mode false): x [N, C, L] -> [N, C, (L + 2 padding - kernel_size) / stride + 1]. stride
/// 0 means kernel_size; padding (ignored by the maximum) is at most kernel_size / 2. NaN wins;
/// the gradient goes to the first maximum of each window.
Tensor max_pool1d(const Tensor& x, std::int64_t kernel_size, std::int64_t stride = 0, std::int64_t padding = 0);
/// max_pool1d over windows of H x W (torch.nn.functional.max_pool2d); stride {0, 0} means kernel_size.
Tensor max_pool2d(const Tensor& x, Sizes2d kernel_size, Sizes2d stride = 0, Sizes2d padding = 0);
/// The mean over each window (torch.nn.functional.avg_pool1d, ceil_mode false): padding adds
/// zeros that count in the mean when count_include_pad (PyTorch's default), else the mean is
/// over the window's elements inside the input. stride 0 means kernel_size.
Tensor avg_pool1d(const Tensor& x, std::int64_t kernel_size, std::int64_t stride = 0, std::int64_t padding = 0,
                  bool count_include_pad = true);
/// avg_pool1d over windows of H x W (torch.nn.functional.avg_pool2d).
Tensor avg_pool2d(const Tensor& x, Sizes2d kernel_size, Sizes2d stride = 0, Sizes2d padding = 0,
                  bool count_include_pad = true);
/// The mean over output_size windows covering L (torch.nn.functional.adaptive_avg_pool1d):
/// window i spans [floor(i L / out), ceil((i + 1) L / out)). output_size must be positive.
Tensor adaptive_avg_pool1d(const Tensor& x, std::int64_t output_size);
/// adaptive_avg_pool1d along H and W (torch.nn.functional.adaptive_avg_pool2d): [N, C, H, W]
/// -> [N, C, output_size.h, output_size.w].
Tensor adaptive_avg_pool2d(const Tensor& x, Sizes2d output_size);
///@}

// ---- shape ops (ops/shape.cpp) ---------------------------------------------------------
/// \name Shape ops
/// Dims may be negative; a dim out of range throws IndexError.
///@{

/// The same elements in another shape with as many elements (ShapeError otherwise),
/// sharing memory with x; one size may be -1 (inferred).
Tensor reshape(const Tensor& x, const Shape& shape);
/// Like reshape; always shares memory with x.
Tensor view(const Tensor& x, const Shape& shape);
/// Merges dims start_dim..end_dim (inclusive) into one: [2, 3, 4] flattens to [24], or
/// to [2, 12] with start_dim = 1. Shares memory.
Tensor flatten(const Tensor& x, std::int64_t start_dim = 0, std::int64_t end_dim = -1);
/// x with dims dim0 and dim1 swapped (a contiguous copy).
Tensor transpose(const Tensor& x, std::int64_t dim0, std::int64_t dim1);
/// x with its dims reordered: output dim i is input dim dims[i] (a contiguous copy). Every
/// dim must appear once (ShapeError or IndexError otherwise).
Tensor permute(const Tensor& x, const std::vector<std::int64_t>& dims);
/// x with a size-1 dim inserted at `dim` (in [-dim()-1, dim()]); shares memory.
Tensor unsqueeze(const Tensor& x, std::int64_t dim);
/// Removes all size-1 dims, or only `dim` when it has size 1.
Tensor squeeze(const Tensor& x);
/// Removes `dim` when it has size 1; otherwise returns x unchanged (as PyTorch).
Tensor squeeze(const Tensor& x, std::int64_t dim);
/// Broadcasts to `shape`; -1 keeps a size. The result is a copy (not a strided view).
/// Only size-1 dims expand (ShapeError otherwise).
Tensor expand(const Tensor& x, const Shape& shape);
/// expand() under NumPy's and PyTorch's other name.
Tensor broadcast_to(const Tensor& x, const Shape& shape);
/// x[start:end:step] along dim; start/end are clamped as in Python slicing. step must be
/// positive (ValueError).
Tensor slice(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1);
/// `length` entries of dim from `start` (negative start counts from the end); a range that
/// does not fit throws IndexError.
Tensor narrow(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t length);
/// x[..., index, ...] with `dim` removed; negative index counts from the end (IndexError
/// when out of range).
Tensor select(const Tensor& x, std::int64_t dim, std::int64_t index);
/// Rows of x along dim picked by a 1-D int64 index tensor (repeats allowed; DtypeError for
/// another index dtype or shape, IndexError for an index out of range).
Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& index);
/// Concatenates along an existing dim; all sizes but dim must match (ShapeError), the
/// list must be non-empty (ValueError) and dtypes promote.
Tensor cat(const TensorList& tensors, std::int64_t dim = 0);
/// Joins tensors of one shape along a new dim inserted at `dim`; an empty list throws
/// ValueError, differing shapes ShapeError.
Tensor stack(const TensorList& tensors, std::int64_t dim = 0);
/// Pieces of `split_size` along dim (the last may be smaller); split_size <= 0 throws ValueError.
TensorList split(const Tensor& x, std::int64_t split_size, std::int64_t dim = 0);
/// Pieces of the given sizes along dim (they must add up to x.size(dim); ShapeError otherwise).
TensorList split(const Tensor& x, const std::vector<std::int64_t>& sizes, std::int64_t dim = 0);
/// At most `chunks` pieces of ceil(size / chunks) along dim, as torch.chunk (the last may be
/// smaller, and there may be fewer); chunks <= 0 throws ValueError.
TensorList chunk(const Tensor& x, std::int64_t chunks, std::int64_t dim = 0);
///@}

// ---- sorting, gathering, scans and triangles (ops/sort.cpp, index.cpp, scan.cpp, -------
// ---- triangular.cpp): what sampling from a language model needs ------------------------
/// \name Sorting, gathering, scans and triangles
/// Dims may be negative. Indices are int64 and never differentiable; values carry gradients.
///@{

/// (values, indices) of x sorted along dim, ascending unless descending (torch.sort). The sort
/// is stable: equal values keep their order. NaN counts as larger than every number, as in
/// PyTorch. values = gather(x, dim, indices), so the gradient flows back to where each value
/// came from.
std::tuple<Tensor, Tensor> sort(const Tensor& x, std::int64_t dim = -1, bool descending = false);
/// (values, indices) of the k largest (or, with largest = false, smallest) elements along dim,
/// best first, ties going to the lower index (torch.topk; `sorted` is accepted for PyTorch's
/// signature, the result is always in order). k outside [0, x.size(dim)] throws ValueError.
/// The gradient flows back to the chosen elements.
std::tuple<Tensor, Tensor> topk(const Tensor& x, std::int64_t k, std::int64_t dim = -1, bool largest = true,
                                bool sorted = true);
/// out[i][j][k] = x[index[i][j][k]][j][k] for dim = 0, likewise for the other dims
/// (torch.gather): index (int64; DtypeError otherwise) has as many dims as x and is no larger
/// than x in any dim but dim (ShapeError otherwise); the result has index's shape. An index
/// outside [0, x.size(dim)) throws IndexError. The gradient adds dy back at the gathered
/// positions (repeats accumulate).
Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index);
/// Prefix sums along dim: out[j] = x[0] + ... + x[j] (torch.cumsum); int64 and bool inputs
/// give int64. The gradient is the prefix sums of dy taken from the end.
Tensor cumsum(const Tensor& x, std::int64_t dim);
/// The lower triangle of the last two dims (torch.tril): elements (i, j) with j - i <=
/// diagonal are kept, the others set to 0 (false for bool). Fewer than 2 dims throws
/// ShapeError. The gradient is the same triangle of dy.
Tensor tril(const Tensor& x, std::int64_t diagonal = 0);
/// The upper triangle of the last two dims (torch.triu): elements with j - i >= diagonal are
/// kept, as tril.
Tensor triu(const Tensor& x, std::int64_t diagonal = 0);
///@}

// ---- templates ---------------------------------------------------------------------------

namespace detail {
/// Throws ShapeError unless `count` values fill `shape` exactly (tensor(vector, shape)).
void check_fill(std::size_t count, const Shape& shape);
}  // namespace detail

template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& shape) {
  using Stored = std::conditional_t<std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bool>, T,
                                    std::int64_t>;
  static_assert(std::is_arithmetic_v<T>, "tensor(vector, shape): the vector must hold numbers or bools");
  detail::check_fill(values.size(), shape);
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
