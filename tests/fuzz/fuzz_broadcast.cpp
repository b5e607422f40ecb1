// libFuzzer target: random shapes through the broadcasting ops, matmul and reductions,
// forward and backward, compared with a plain reference written from the rules:
//
//   broadcast: align shapes on the right; each pair of sizes is equal or one of them is 1;
//              a missing leading dim counts as 1. Anything else must throw ShapeError.
//   matmul:    1-D operands become [1, k] / [k, 1] (the added dim is dropped again); the
//              batch dims broadcast; [.., n, k] @ [.., k, m] -> [.., n, m].
//   backward:  the gradient of a broadcast input is summed over the positions it was
//              stretched to.
//
// Element values are small integers, so float32 sums and products are exact and results
// are compared for equality. The bytes are read as: op, rank and sizes of each operand,
// then (optionally) reduction dims.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "microtorch/microtorch.hpp"

namespace mt = microtorch;
using mt::Shape;
using mt::Tensor;

namespace {

struct Bytes {
  const std::uint8_t* p;
  std::size_t n;
  std::uint8_t next() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
};

[[noreturn]] void fail(const char* what, const Shape& a, const Shape& b) {
  std::fprintf(stderr, "fuzz_broadcast: %s for %s and %s\n", what, mt::shape_str(a).c_str(), mt::shape_str(b).c_str());
  std::abort();
}

Shape read_shape(Bytes& in, int max_rank) {
  Shape s(static_cast<std::size_t>(in.next() % (max_rank + 1)));
  for (auto& d : s) d = in.next() % 4;  // sizes 0..3: empty dims and size-1 dims are common
  return s;
}

// Values -3..3 (as float32), different per tensor.
Tensor filled(const Shape& s, int salt) {
  Tensor t = mt::empty(s);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>((i * 5 + salt * 3) % 7 - 3);
  return t;
}

std::vector<std::int64_t> strides_of(const Shape& s) {
  std::vector<std::int64_t> st(s.size());
  std::int64_t acc = 1;
  for (std::size_t d = s.size(); d-- > 0;) {
    st[d] = acc;
    acc *= s[d];
  }
  return st;
}

// The reference broadcast shape, or false when the shapes are incompatible.
bool ref_broadcast(const Shape& a, const Shape& b, Shape& out) {
  const std::size_t r = std::max(a.size(), b.size());
  out.assign(r, 1);
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const std::int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

// Flat index into a tensor of shape `s` for the output multi-index `idx` (of rank >= s).
std::int64_t source_index(const Shape& s, const std::vector<std::int64_t>& idx) {
  const auto st = strides_of(s);
  const std::size_t lead = idx.size() - s.size();
  std::int64_t f = 0;
  for (std::size_t d = 0; d < s.size(); ++d) f += (s[d] == 1 ? 0 : idx[lead + d]) * st[d];
  return f;
}

std::vector<std::int64_t> unravel(std::int64_t flat, const Shape& s) {
  std::vector<std::int64_t> idx(s.size());
  for (std::size_t d = s.size(); d-- > 0;) {
    idx[d] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

void expect_equal(const Tensor& got, const std::vector<float>& want, const Shape& want_shape, const char* what,
                  const Shape& a, const Shape& b) {
  if (got.shape() != want_shape) fail(what, a, b);
  const Tensor g = got.detach().to(mt::kFloat32);
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (g.data<float>()[i] != want[i]) fail(what, a, b);
  }
}

float apply(int op, float x, float y) {
  switch (op) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    default: return x > y ? x : y;
  }
}

void elementwise(Bytes& in, int op) {
  const Shape sa = read_shape(in, 4), sb = read_shape(in, 4);
  Tensor a = filled(sa, 1).requires_grad_(), b = filled(sb, 2).requires_grad_();
  Shape so;
  const bool ok = ref_broadcast(sa, sb, so);
  Tensor y;
  try {
    y = op == 0 ? a + b : op == 1 ? a - b : op == 2 ? a * b : mt::maximum(a, b);
  } catch (const mt::ShapeError&) {
    if (ok) fail("unexpected ShapeError", sa, sb);
    return;
  }
  if (!ok) fail("incompatible shapes accepted", sa, sb);

  const std::int64_t n = mt::numel_of(so);
  std::vector<float> want(static_cast<std::size_t>(n));
  std::vector<float> ga(static_cast<std::size_t>(a.numel()), 0.f), gb(static_cast<std::size_t>(b.numel()), 0.f);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    const auto idx = unravel(i, so);
    const std::int64_t ia = source_index(sa, idx), ib = source_index(sb, idx);
    const float x = pa[ia], z = pb[ib];
    want[static_cast<std::size_t>(i)] = apply(op, x, z);
    // d/dx and d/dy of sum(y), summed over the broadcast positions.
    float dx = 1.f, dz = op == 1 ? -1.f : 1.f;
    if (op == 2) dx = z, dz = x;
    if (op == 3) dx = x > z ? 1.f : x < z ? 0.f : 0.5f, dz = x > z ? 0.f : x < z ? 1.f : 0.5f;
    ga[static_cast<std::size_t>(ia)] += dx;
    gb[static_cast<std::size_t>(ib)] += dz;
  }
  expect_equal(y, want, so, "forward differs from the reference", sa, sb);
  y.sum().backward();
  if (a.numel() > 0 && n > 0) expect_equal(a.grad(), ga, sa, "gradient of a differs", sa, sb);
  if (b.numel() > 0 && n > 0) expect_equal(b.grad(), gb, sb, "gradient of b differs", sa, sb);
}

void matmul(Bytes& in) {
  const Shape sa = read_shape(in, 4), sb = read_shape(in, 4);
  Tensor a = filled(sa, 3).requires_grad_(), b = filled(sb, 4).requires_grad_();
  // Reference shape rule.
  bool ok = !sa.empty() && !sb.empty();
  Shape A = sa, B = sb, so;
  if (ok) {
    if (A.size() == 1) A.insert(A.begin(), 1);
    if (B.size() == 1) B.push_back(1);
    ok = A[A.size() - 1] == B[B.size() - 2];
    Shape batch;
    ok = ok && ref_broadcast(Shape(A.begin(), A.end() - 2), Shape(B.begin(), B.end() - 2), batch);
    if (ok) {
      so = batch;
      so.push_back(A[A.size() - 2]);
      so.push_back(B[B.size() - 1]);
    }
  }
  Tensor y;
  try {
    y = mt::matmul(a, b);
  } catch (const mt::ShapeError&) {
    if (ok) fail("matmul: unexpected ShapeError", sa, sb);
    return;
  }
  if (!ok) fail("matmul: incompatible shapes accepted", sa, sb);
  const std::int64_t n = A[A.size() - 2], k = A.back(), m = B.back();
  const Shape batch(so.begin(), so.end() - 2);
  const std::int64_t nb = mt::numel_of(batch);
  std::vector<float> want(static_cast<std::size_t>(mt::numel_of(so)));
  const Shape A_batch(A.begin(), A.end() - 2), B_batch(B.begin(), B.end() - 2);
  for (std::int64_t bi = 0; bi < nb; ++bi) {
    const auto idx = unravel(bi, batch);
    const std::int64_t oa = source_index(A_batch, idx) * n * k, ob = source_index(B_batch, idx) * k * m;
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t j = 0; j < m; ++j) {
        float acc = 0.f;
        for (std::int64_t t = 0; t < k; ++t) acc += a.data<float>()[oa + i * k + t] * b.data<float>()[ob + t * m + j];
        want[static_cast<std::size_t>((bi * n + i) * m + j)] = acc;
      }
    }
  }
  // 1-D operands drop the dim they were given.
  Shape final_shape = batch;
  if (sa.size() > 1) final_shape.push_back(n);
  if (sb.size() > 1) final_shape.push_back(m);
  expect_equal(y, want, final_shape, "matmul: forward differs from the reference", sa, sb);
  if (y.numel() > 0) {
    y.sum().backward();  // shapes of the gradients must match the operands
    if (a.grad().defined() && a.grad().shape() != sa) fail("matmul: gradient of a has the wrong shape", sa, sb);
    if (b.grad().defined() && b.grad().shape() != sb) fail("matmul: gradient of b has the wrong shape", sa, sb);
  }
}

void reduce(Bytes& in) {
  const Shape s = read_shape(in, 4);
  const bool keepdim = in.next() & 1;
  std::vector<std::int64_t> dims;
  const int nd = in.next() % 3;
  for (int i = 0; i < nd; ++i) dims.push_back(static_cast<std::int8_t>(in.next()) % 6);  // may be out of range
  Tensor x = filled(s, 5).requires_grad_();
  // Reference: which dims are reduced (all when none are given). Each dim must be in
  // [-rank, rank) (a 0-d tensor takes 0 and -1, as in PyTorch) and appear once.
  const auto r = static_cast<std::int64_t>(s.size());
  const std::int64_t rr = r > 0 ? r : 1;
  std::vector<bool> reduced(s.size(), dims.empty());
  std::vector<std::int64_t> wrapped;
  bool ok = true;
  for (auto d : dims) {
    const std::int64_t w = d < 0 ? d + rr : d;
    if (w < 0 || w >= rr) ok = false;
    wrapped.push_back(w);
  }
  std::sort(wrapped.begin(), wrapped.end());
  if (std::adjacent_find(wrapped.begin(), wrapped.end()) != wrapped.end()) ok = false;
  if (ok && r > 0) {
    for (auto w : wrapped) reduced[static_cast<std::size_t>(w)] = true;
  }
  Tensor y;
  try {
    y = mt::sum(x, dims, keepdim);
  } catch (const mt::IndexError&) {
    if (ok) fail("sum: unexpected IndexError", s, Shape{});
    return;
  }
  if (!ok) fail("sum: bad dims accepted", s, Shape{});
  Shape so;
  for (std::size_t d = 0; d < s.size(); ++d) {
    if (!reduced[d]) so.push_back(s[d]);
    else if (keepdim) so.push_back(1);
  }
  Shape full_keep;
  for (std::size_t d = 0; d < s.size(); ++d) full_keep.push_back(reduced[d] ? 1 : s[d]);
  std::vector<float> want(static_cast<std::size_t>(mt::numel_of(so)), 0.f);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    auto idx = unravel(i, s);
    for (std::size_t d = 0; d < s.size(); ++d) {
      if (reduced[d]) idx[d] = 0;
    }
    std::int64_t f = 0;
    const auto st = strides_of(full_keep);
    for (std::size_t d = 0; d < s.size(); ++d) f += idx[d] * st[d];
    want[static_cast<std::size_t>(f)] += x.data<float>()[i];
  }
  expect_equal(y, want, so, "sum: forward differs from the reference", s, so);
  y.sum().backward();
  if (x.numel() > 0) {
    expect_equal(x.grad(), std::vector<float>(static_cast<std::size_t>(x.numel()), 1.f), s, "sum: gradient is not ones", s,
                 so);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes in{data, size};
  switch (in.next() % 6) {
    case 0: elementwise(in, 0); break;
    case 1: elementwise(in, 1); break;
    case 2: elementwise(in, 2); break;
    case 3: elementwise(in, 3); break;
    case 4: matmul(in); break;
    default: reduce(in); break;
  }
  return 0;
}
