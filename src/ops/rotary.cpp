// rotary_embedding: RoPE (Su et al., "RoFormer", 2021) as one fused primitive. Every row of D
// features is D/2 pairs (a, b), each turned by its own angle theta:
//   a' = a cos(theta) - b sin(theta),   b' = b cos(theta) + a sin(theta)
// The pairs are (i, i + D/2) in the half-split layout (Llama and Qwen2 in Hugging Face
// transformers, "rotate_half") and (2i, 2i + 1) interleaved (RoFormer, Meta's Llama, llama2.c).
// The backward turns dy back by -theta (the transpose of a rotation):
//   da = da' cos + db' sin,   db = db' cos - da' sin
// and, should the tables require grad, dcos = da' a + db' b and dsin = db' a - da' b.
#include "gemm.hpp"

namespace microtorch {

namespace {

struct RotaryLayout {
  std::int64_t rows = 0, half = 0;
  std::vector<std::int64_t> table_rows;  // the offset of row r's angles in cos and sin
  bool interleaved = false;
  // the position of pair i's two features in a row
  std::int64_t first(std::int64_t i) const { return interleaved ? 2 * i : i; }
  std::int64_t second(std::int64_t i) const { return interleaved ? 2 * i + 1 : i + half; }
};

template <class T>
void rotate_rows(const RotaryLayout& lay, const T* x, const T* cos, const T* sin, T* y) {
  const std::int64_t D = 2 * lay.half;
  for (std::int64_t r = 0; r < lay.rows; ++r) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    const T* c = cos + lay.table_rows[static_cast<std::size_t>(r)];
    const T* s = sin + lay.table_rows[static_cast<std::size_t>(r)];
    for (std::int64_t i = 0; i < lay.half; ++i) {
      const T a = xr[lay.first(i)], b = xr[lay.second(i)];
      yr[lay.first(i)] = a * c[i] - b * s[i];
      yr[lay.second(i)] = b * c[i] + a * s[i];
    }
  }
}

// dx (when wanted) and the per-row table gradients dcos, dsin ([rows, D/2], when wanted).
template <class T>
void rotate_rows_backward(const RotaryLayout& lay, const T* x, const T* cos, const T* sin, const T* g, T* dx, T* dcos,
                          T* dsin) {
  const std::int64_t D = 2 * lay.half;
  for (std::int64_t r = 0; r < lay.rows; ++r) {
    const T* gr = g + r * D;
    const T* c = cos + lay.table_rows[static_cast<std::size_t>(r)];
    const T* s = sin + lay.table_rows[static_cast<std::size_t>(r)];
    for (std::int64_t i = 0; i < lay.half; ++i) {
      const T ga = gr[lay.first(i)], gb = gr[lay.second(i)];
      if (dx) {
        dx[r * D + lay.first(i)] = ga * c[i] + gb * s[i];
        dx[r * D + lay.second(i)] = gb * c[i] - ga * s[i];
      }
      if (dcos) {
        const T a = x[r * D + lay.first(i)], b = x[r * D + lay.second(i)];
        dcos[r * lay.half + i] = ga * a + gb * b;
        dsin[r * lay.half + i] = gb * a - ga * b;
      }
    }
  }
}

}  // namespace

Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved) {
  const char* op = "rotary_embedding";
  if (x.dim() == 0 || x.size(-1) % 2 != 0) {
    throw ShapeError(fmt::format("{}: the last dim of x {} must be even: its features turn in pairs", op,
                                 shape_str(x.shape())));
  }
  if (!x.is_floating_point() || cos.dtype() != x.dtype() || sin.dtype() != x.dtype()) {
    throw DtypeError(fmt::format("{}: x, cos and sin must share one floating dtype, got {}, {}, {}", op,
                                 dtype_name(x.dtype()), dtype_name(cos.dtype()), dtype_name(sin.dtype())));
  }
  const std::int64_t half = x.size(-1) / 2;
  Shape lead(x.shape().begin(), x.shape().end() - 1);
  Shape angles = lead;  // the shape cos and sin must broadcast to
  angles.push_back(half);
  const bool fits = cos.shape() == sin.shape() && cos.dim() >= 1 && cos.dim() <= x.dim() && cos.size(-1) == half &&
                    [&] {
                      for (std::int64_t d = 1; d < cos.dim(); ++d) {
                        const std::int64_t have = cos.size(-1 - d), want = x.size(-1 - d);
                        if (have != want && have != 1) return false;
                      }
                      return true;
                    }();
  if (!fits) {
    throw ShapeError(fmt::format("{}: cos {} and sin {} must have one shape that broadcasts to {} (x {} without its "
                                 "last dim, then D/2 = {} angles): e.g. [L, 1, {}] for x [N, L, H, {}]",
                                 op, shape_str(cos.shape()), shape_str(sin.shape()), shape_str(angles),
                                 shape_str(x.shape()), half, half, 2 * half));
  }
  auto lay = std::make_shared<RotaryLayout>();
  lay->rows = numel_of(lead);
  lay->half = half;
  lay->interleaved = interleaved;
  lay->table_rows = detail::batch_offsets(Shape(cos.shape().begin(), cos.shape().end() - 1), lead, half);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  detail::visit_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    rotate_rows(*lay, x.data<T>(), cos.data<T>(), sin.data<T>(), y.data<T>());
    return 0;
  });
  const bool tables_grad = cos.requires_grad() || sin.requires_grad();
  return autograd::record(
      y, op, {x, cos, sin}, autograd::Saved{tables_grad ? x : Tensor(), cos, sin},
      [lay, angles](const Tensor& g, const autograd::NeedsGrad& needs, const TensorList& s) {
        const Tensor &x = s[0], &cos = s[1], &sin = s[2];
        Tensor dx = needs[0] ? Tensor::empty(g.shape(), g.dtype()) : Tensor();
        const bool tables = needs[1] || needs[2];
        Tensor dcos = tables ? Tensor::empty(angles, g.dtype()) : Tensor();  // summed to cos's shape by the engine
        Tensor dsin = tables ? Tensor::empty(angles, g.dtype()) : Tensor();
        detail::visit_floating(g.dtype(), "rotary_embedding", [&](auto tag) {
          using T = typename decltype(tag)::type;
          auto out = [](Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
          rotate_rows_backward(*lay, tables ? x.data<T>() : nullptr, cos.data<T>(), sin.data<T>(), g.data<T>(),
                               out(dx), out(dcos), out(dsin));
          return 0;
        });
        return TensorList{dx, needs[1] ? dcos : Tensor(), needs[2] ? dsin : Tensor()};
      },
      {{"interleaved", interleaved}});
}

}  // namespace microtorch
