// The shape family of the runtime (src/lower/runtime/mt_shape.c): the strided copy against a
// naive index walk on random permute / slice / concat / expand layouts of 1 to 6 dims, and the
// embedding lookup (bits copied; out-of-range ids counted), and the padding of a convolution's
// input with its zero point.
#include <array>

#include "kernel_reference.hpp"

using namespace kernel_ref;

namespace {

// Runs the strided copy of each element type on one layout and compares every element of
// dst with a naive computation of the source and destination offsets from the index.
// dst starts filled with a sentinel: elements outside the copied index set must keep it.
struct StridedCase {
  std::vector<std::int32_t> shape, src_strides, dst_strides;
  std::int32_t src_base = 0, dst_base = 0;  // offset of element (0, .., 0)
  std::size_t src_size = 0, dst_size = 0;
};

template <class T>
void check_strided(const StridedCase& c, void (*fn)(const T*, T*, int, const std::int32_t*, const std::int32_t*,
                                                    const std::int32_t*),
                   std::mt19937& g) {
  const int nd = static_cast<int>(c.shape.size());
  const auto src = random_ints<T>(g, c.src_size, std::numeric_limits<T>::min() + 1, std::numeric_limits<T>::max());
  const T sentinel = std::numeric_limits<T>::min();
  std::vector<T> dst(c.dst_size, sentinel), want(c.dst_size, sentinel);
  fn(src.data() + c.src_base, dst.data() + c.dst_base, nd, c.shape.data(), c.src_strides.data(),
     c.dst_strides.data());
  std::vector<std::int32_t> idx(nd, 0);
  for (bool more = true; more;) {
    std::int64_t so = c.src_base, dof = c.dst_base;
    for (int k = 0; k < nd; ++k) so += static_cast<std::int64_t>(idx[k]) * c.src_strides[k], dof += static_cast<std::int64_t>(idx[k]) * c.dst_strides[k];
    want[dof] = src[so];
    more = false;
    for (int k = nd - 1; k >= 0; --k) {
      if (++idx[k] < c.shape[k]) {
        more = true;
        break;
      }
      idx[k] = 0;
    }
  }
  REQUIRE(dst == want);
}

void check_strided_all(const StridedCase& c, std::mt19937& g) {
  check_strided<std::int16_t>(c, mt_copy_strided_s16, g);
  check_strided<std::int8_t>(c, mt_copy_strided_s8, g);
  check_strided<std::int32_t>(c, mt_copy_strided_s32, g);
}

std::vector<std::int32_t> packed_strides(const std::vector<std::int32_t>& shape) {
  std::vector<std::int32_t> st(shape.size());
  std::int32_t s = 1;
  for (std::size_t k = shape.size(); k-- > 0;) st[k] = s, s *= shape[k];
  return st;
}

std::int32_t numel(const std::vector<std::int32_t>& shape) {
  std::int32_t n = 1;
  for (auto v : shape) n *= v;
  return n;
}

}  // namespace

TEST_CASE("lower kernels: strided copy does permute, slice, concat and expand like the naive index walk") {
  std::mt19937 g(90);
  std::uniform_int_distribution<int> dn(1, MT_MAX_DIMS), dlen(1, 5);
  for (int trial = 0; trial < 400; ++trial) {
    CAPTURE(trial);
    const int nd = dn(g);
    std::vector<std::int32_t> in_shape(nd);
    for (auto& v : in_shape) v = dlen(g);
    const auto in_st = packed_strides(in_shape);
    StridedCase c;
    switch (trial % 4) {
      case 0: {  // permute (transpose when nd == 2): read through permuted strides, dst packed
        std::vector<int> perm(nd);
        for (int k = 0; k < nd; ++k) perm[k] = k;
        std::shuffle(perm.begin(), perm.end(), g);
        for (int k = 0; k < nd; ++k) c.shape.push_back(in_shape[perm[k]]), c.src_strides.push_back(in_st[perm[k]]);
        c.dst_strides = packed_strides(c.shape);
        c.src_size = c.dst_size = static_cast<std::size_t>(numel(in_shape));
        break;
      }
      case 1: {  // slice [start, start + len) with a step on every dim
        c.src_size = static_cast<std::size_t>(numel(in_shape));
        for (int k = 0; k < nd; ++k) {
          const int start = std::uniform_int_distribution<int>(0, in_shape[k] - 1)(g);
          const int step = std::uniform_int_distribution<int>(1, 2)(g);
          const int len = (in_shape[k] - start + step - 1) / step;
          c.src_base += start * in_st[k];
          c.shape.push_back(len), c.src_strides.push_back(step * in_st[k]);
        }
        c.dst_strides = packed_strides(c.shape);
        c.dst_size = static_cast<std::size_t>(numel(c.shape));
        break;
      }
      case 2: {  // concat: this input is the middle part of the output along dim `ax`
        const int ax = std::uniform_int_distribution<int>(0, nd - 1)(g);
        auto out_shape = in_shape;
        const int before = dlen(g) - 1, after = dlen(g) - 1;
        out_shape[ax] += before + after;
        const auto out_st = packed_strides(out_shape);
        c.shape = in_shape, c.src_strides = in_st, c.dst_strides = out_st;
        c.dst_base = before * out_st[ax];
        c.src_size = static_cast<std::size_t>(numel(in_shape));
        c.dst_size = static_cast<std::size_t>(numel(out_shape));
        break;
      }
      default: {  // expand: size-1 dims of the input broadcast with stride 0
        std::vector<std::int32_t> small = in_shape;
        for (int k = 0; k < nd; ++k)
          if (g() % 2) small[k] = 1;
        const auto small_st = packed_strides(small);
        c.shape = in_shape;
        for (int k = 0; k < nd; ++k) c.src_strides.push_back(small[k] == 1 ? 0 : small_st[k]);
        c.dst_strides = packed_strides(in_shape);
        c.src_size = static_cast<std::size_t>(numel(small));
        c.dst_size = static_cast<std::size_t>(numel(in_shape));
        break;
      }
    }
    check_strided_all(c, g);
  }
  // a transpose whose rows are long (the innermost run), a fully contiguous copy (all dims
  // merge into one run), a negative stride (flip) and a single element
  check_strided_all({{3, 1000}, {1, 3}, {1000, 1}, 0, 0, 3000, 3000}, g);
  check_strided_all({{2, 3, 4, 5, 6, 7}, packed_strides({2, 3, 4, 5, 6, 7}), packed_strides({2, 3, 4, 5, 6, 7}), 0, 0, 5040, 5040}, g);
  check_strided_all({{4, 6}, {6, -1}, {6, 1}, 5, 0, 24, 24}, g);
  check_strided_all({{1, 1, 1}, {7, 7, 7}, {0, 0, 0}, 0, 0, 1, 1}, g);

  // ndim outside [1, MT_MAX_DIMS] or an empty dim: nothing is written
  const std::int32_t shape[MT_MAX_DIMS + 1] = {2, 2, 2, 2, 2, 2, 2}, st[MT_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1};
  std::int16_t src[16] = {1, 2, 3}, dst[16] = {};
  mt_copy_strided_s16(src, dst, 0, shape, st, st);
  mt_copy_strided_s16(src, dst, MT_MAX_DIMS + 1, shape, st, st);
  const std::int32_t empty[2] = {3, 0}, neg[2] = {-1, 3};
  mt_copy_strided_s16(src, dst, 2, empty, st, st);
  mt_copy_strided_s16(src, dst, 2, neg, st, st);
  for (auto v : dst) CHECK(v == 0);
}

TEST_CASE("lower kernels: embedding copies table rows; out-of-range ids give zero rows and are counted") {
  std::mt19937 g(91);
  const int num = 50, dim = 7;
  const auto t16 = random_ints<std::int16_t>(g, num * dim);
  const auto t8 = random_ints<std::int8_t>(g, num * dim);
  const std::vector<std::int32_t> ids = {0, 49, 3, -1, 50, 17, INT32_MIN, INT32_MAX, 3, 25};
  const int n = static_cast<int>(ids.size());
  std::vector<std::int16_t> o16(n * dim, 99);
  std::vector<std::int8_t> o8(n * dim, 99);
  CHECK(mt_embedding_s16(ids.data(), n, t16.data(), num, dim, o16.data()) == 4);
  CHECK(mt_embedding_s8(ids.data(), n, t8.data(), num, dim, o8.data()) == 4);
  for (int i = 0; i < n; ++i) {
    const bool ok = ids[i] >= 0 && ids[i] < num;
    for (int j = 0; j < dim; ++j) {
      REQUIRE(o16[i * dim + j] == (ok ? t16[ids[i] * dim + j] : 0));
      REQUIRE(o8[i * dim + j] == (ok ? t8[ids[i] * dim + j] : 0));
    }
  }
  const std::vector<std::int32_t> good = {1, 2, 48};
  CHECK(mt_embedding_s16(good.data(), 3, t16.data(), num, dim, o16.data()) == 0);  // 0 = success
  CHECK(std::equal(o16.begin(), o16.begin() + dim, t16.begin() + dim));
  CHECK(mt_embedding_s16(ids.data(), 0, t16.data(), num, dim, o16.data()) == 0);
  CHECK(mt_embedding_s16(ids.data(), n, t16.data(), num, 0, o16.data()) == 4);  // dim 0: counts only
  CHECK(mt_embedding_s8(ids.data(), n, t8.data(), 0, dim, o8.data()) == n);      // empty table
  for (auto v : o8) CHECK(v == 0);
}

TEST_CASE("lower kernels: padding puts each plane inside a border of the fill value, saturated to int8") {
  std::mt19937 g(92);
  // {planes, h, w, top, left, bottom, right, fill}: conv1d's, conv2d's, one side, none, a fill beyond int8
  const std::vector<std::array<int, 8>> cases = {{16, 1, 20, 0, 1, 0, 1, -128}, {3, 7, 9, 2, 1, 1, 2, 5},
                                                 {2, 5, 5, 0, 0, 3, 0, 127},    {4, 6, 6, 0, 0, 0, 0, -7},
                                                 {2, 4, 4, 1, 1, 1, 1, 300},    {1, 3, 2, 0, 3, 0, 0, -300}};
  for (const auto& c : cases) {
    const int planes = c[0], h = c[1], w = c[2], top = c[3], left = c[4], bottom = c[5], right = c[6];
    const int oh = top + h + bottom, ow = left + w + right;
    const auto x = random_ints<std::int8_t>(g, static_cast<std::size_t>(planes * h * w));
    std::vector<std::int8_t> y(static_cast<std::size_t>(planes * oh * ow + 1), 99);  // one past: not written
    mt_pad_s8(x.data(), y.data(), planes, h, w, top, left, bottom, right, c[7]);
    const auto fill = static_cast<std::int8_t>(std::clamp(c[7], -128, 127));
    for (int p = 0; p < planes; ++p) {
      for (int i = 0; i < oh; ++i) {
        for (int j = 0; j < ow; ++j) {
          const bool inside = i >= top && i < top + h && j >= left && j < left + w;
          REQUIRE(y[static_cast<std::size_t>((p * oh + i) * ow + j)] ==
                  (inside ? x[static_cast<std::size_t>((p * h + i - top) * w + j - left)] : fill));
        }
      }
    }
    CHECK(y.back() == 99);
  }
  std::vector<std::int8_t> x(4, 1), y(16, 99);
  mt_pad_s8(x.data(), y.data(), 0, 2, 2, 1, 1, 1, 1, 0);   // no planes
  mt_pad_s8(x.data(), y.data(), 1, 2, 2, -1, 1, 1, 1, 0);  // a negative border
  for (auto v : y) CHECK(v == 99);
}
