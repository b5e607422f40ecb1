// Rules: reshape, permute, slice, expand and clone as strided views (no kernel; a consumer
// that needs packed data gets one mt_copy_strided_* call), cat (mt_requant_* where a format
// differs, then mt_copy_strided_*) and index_select of a constant table (mt_embedding_*).
#include <fmt/format.h>

#include "../lowering.hpp"
#include "../rules.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::lower {

namespace {

void lower_reshape(Lowering& L, const Node& n) {
  const View& v = L.act(n, n.inputs[0]);
  const Shape& shape = L.out_shape(n);
  View out = v;
  if (auto st = reshaped_strides(v, shape)) {
    out.strides = *st;
  } else {
    out = L.packed(n, v);
    out.strides = packed_strides(shape);
  }
  out.shape = shape;
  L.set(n, out);
}

void lower_permute(Lowering& L, const Node& n) {
  const View& v = L.act(n, n.inputs[0]);
  View out = v;
  out.shape.clear(), out.strides.clear();
  for (auto d : node_attr<Shape>(n, "dims")) {
    const auto k = static_cast<std::size_t>(d < 0 ? d + static_cast<std::int64_t>(v.shape.size()) : d);
    out.shape.push_back(v.shape[k]);
    out.strides.push_back(v.strides[k]);
  }
  L.set(n, out);
}

void lower_slice(Lowering& L, const Node& n) {
  View v = L.act(n, n.inputs[0]);
  auto dim = node_attr<std::int64_t>(n, "dim");
  if (dim < 0) dim += static_cast<std::int64_t>(v.shape.size());
  const auto d = static_cast<std::size_t>(dim);
  const std::int64_t start = node_attr<std::int64_t>(n, "start"), step = node_attr<std::int64_t>(n, "step");
  v.offset += start * v.strides[d];
  v.strides[d] *= step;
  v.shape = L.out_shape(n);
  L.set(n, v);
}

void lower_expand(Lowering& L, const Node& n) {
  const View& v = L.act(n, n.inputs[0]);
  const Shape& shape = L.out_shape(n);
  View out = v;
  out.shape = shape, out.strides = Strides(shape.size(), 0);
  const std::size_t lead = shape.size() - v.shape.size();
  for (std::size_t i = 0; i < v.shape.size(); ++i) out.strides[lead + i] = v.shape[i] == shape[lead + i] ? v.strides[i] : 0;
  L.set(n, out);
}

// cat: each input copied (converted first when its type or format differs) into its block
// of y.
void lower_cat(Lowering& L, const Node& n) {
  const Shape& out = L.out_shape(n);
  auto dim = node_attr<std::int64_t>(n, "dim");
  if (dim < 0) dim += static_cast<std::int64_t>(out.size());
  const Elem ye = L.out_elem(n);
  const Format f = L.out_format(n, ye);
  const View y = L.out_act(n, ye, f);
  std::int64_t at = 0;
  for (const auto id : n.inputs) {
    View v;
    if (L.is_const(id)) {
      const Tensor& c = L.data(id);
      const std::int64_t wb = L.weight(c, ye, f, L.const_name(id));
      v = View{wb, 0, c.shape(), packed_strides(c.shape()), ye, f.scale, f.zero, {}, {}};
    } else {
      v = L.convert(n, L.act(n, id), ye, f);
    }
    L.copy_into(&n, v, y.buffer, at * y.strides[static_cast<std::size_t>(dim)], y.strides);
    at += v.shape[static_cast<std::size_t>(dim)];
  }
  L.set(n, y);
}

// index_select(table, 0, ids) with a constant table: an embedding lookup.
void lower_embedding(Lowering& L, const Node& n) {
  if (!L.is_const(n.inputs[0]) || node_attr<std::int64_t>(n, "dim") != 0) {
    L.fail(n, "only index_select(weight, 0, ids) with a constant weight lowers (an embedding lookup)");
  }
  const Tensor& tab = L.data(n.inputs[0]);
  const View ids = L.packed(n, L.act(n, n.inputs[1]));
  const Elem ye = L.out_elem(n);
  // a lookup copies rows: the output has the table's format (its own range; a zero point
  // when the readers take one)
  const double lo = microtorch::min(tab).item<double>(), hi = microtorch::max(tab).item<double>();
  const Format f = L.range_format(lo, hi, ye, L.options().scheme == Scheme::Affine && L.affine_ok(n.output),
                                  L.const_name(n.inputs[0]));
  const std::int64_t tb = L.weight(tab, ye, f, L.const_name(n.inputs[0]));
  const View y = L.out_act(n, ye, f);
  L.step(Lowering::kernel("embedding", {ye}), {Arg::buf(ids.buffer, ids.offset), Arg::num(numel_of(ids.shape)), Arg::buf(tb),
                                     Arg::num(tab.size(0)), Arg::num(numel_of(tab.shape()) / tab.size(0)),
                                     Arg::buf(y.buffer)});
  L.set(n, y);
}

// ---- float32 ----

// The backward of a view: the output's gradient (packed) goes back to the input's (packed)
// through `walk`, the output's shape with the input gradient's strides for each of its dims
// from `offset`: copied when it is the first write to a gradient the walk covers once,
// else added (the gradient first zeroed when the walk does not cover it all or sums into it).
void view_backward_f32(Lowering& L, const Node& n, std::int64_t id, std::int64_t offset, const Strides& dst,
                       bool covers_once) {
  auto dx = L.grad_out(id);
  if (!dx) return;
  const View& dy = L.grad(n.output);
  if (!dx->add && !covers_once) L.zero(dx->view), dx->add = true;
  const std::string what = fmt::format("grad{}", n.output);  // a C name: the tables are arrays of the firmware
  Strides src = packed_strides(dy.shape);
  std::vector<std::int64_t> shape(dy.shape.begin(), dy.shape.end()), ss(src.begin(), src.end()), ds(dst.begin(), dst.end());
  if (shape.empty()) shape = {1}, ss = {1}, ds = {1};
  L.step(dx->add ? "mt_add_strided_f32" : "mt_copy_strided_f32",
         {Arg::buf(dy.buffer, dy.offset), Arg::buf(dx->view.buffer, dx->view.offset + offset),
          Arg::num(static_cast<std::int64_t>(shape.size())),
          Arg::buf(L.table(Elem::S32, shape, TableRole::Layout, what + "_shape")),
          Arg::buf(L.table(Elem::S32, ss, TableRole::Layout, what + "_src_strides")),
          Arg::buf(L.table(Elem::S32, ds, TableRole::Layout, what + "_dst_strides"))},
         numel_of(dy.shape));
}

// reshape, clone: the same elements in the same order
void backward_reshape_f32(Lowering& L, const Node& n) {
  view_backward_f32(L, n, n.inputs[0], 0, packed_strides(L.out_shape(n)), true);
}

void backward_permute_f32(Lowering& L, const Node& n) {
  const Strides in = packed_strides(L.graph().value(n.inputs[0]).shape);
  Strides dst;
  for (auto d : node_attr<Shape>(n, "dims")) {
    dst.push_back(in[static_cast<std::size_t>(d < 0 ? d + static_cast<std::int64_t>(in.size()) : d)]);
  }
  view_backward_f32(L, n, n.inputs[0], 0, dst, true);
}

void backward_slice_f32(Lowering& L, const Node& n) {
  Strides dst = packed_strides(L.graph().value(n.inputs[0]).shape);
  auto dim = node_attr<std::int64_t>(n, "dim");
  if (dim < 0) dim += static_cast<std::int64_t>(dst.size());
  const auto d = static_cast<std::size_t>(dim);
  const std::int64_t offset = node_attr<std::int64_t>(n, "start") * dst[d];
  dst[d] *= node_attr<std::int64_t>(n, "step");
  view_backward_f32(L, n, n.inputs[0], offset, dst, L.graph().value(n.inputs[0]).shape == L.out_shape(n));
}

void backward_expand_f32(Lowering& L, const Node& n) {
  const Shape& in = L.graph().value(n.inputs[0]).shape;
  const Shape& shape = L.out_shape(n);
  const Strides ps = packed_strides(in);
  Strides dst(shape.size(), 0);
  const std::size_t lead = shape.size() - in.size();
  for (std::size_t i = 0; i < in.size(); ++i) dst[lead + i] = in[i] == shape[lead + i] ? ps[i] : 0;
  view_backward_f32(L, n, n.inputs[0], 0, dst, in == shape);
}

// cat in float: each input (a constant as a float array) copied into its block of y.
void lower_cat_f32(Lowering& L, const Node& n) {
  const Shape& out = L.out_shape(n);
  auto dim = node_attr<std::int64_t>(n, "dim");
  if (dim < 0) dim += static_cast<std::int64_t>(out.size());
  const View y = L.out_act(n, Elem::F32, Format{});
  std::int64_t at = 0;
  for (const auto id : n.inputs) {
    const View v = L.is_const(id) ? L.constant_f32(n, id) : L.act(n, id);
    L.copy_into(&n, v, y.buffer, at * y.strides[static_cast<std::size_t>(dim)], y.strides);
    at += v.shape[static_cast<std::size_t>(dim)];
  }
  L.set(n, y);
}

// Each input's block of the output's gradient goes back to it.
void backward_cat_f32(Lowering& L, const Node& n) {
  const Shape& out = L.out_shape(n);
  auto dim = node_attr<std::int64_t>(n, "dim");
  if (dim < 0) dim += static_cast<std::int64_t>(out.size());
  const auto d = static_cast<std::size_t>(dim);
  const View& dy = L.grad(n.output);
  const Strides ps = packed_strides(out);
  std::int64_t at = 0;
  for (const auto id : n.inputs) {
    const Shape& in = L.graph().value(id).shape;
    if (auto dx = L.grad_out(id)) {
      const std::string what = fmt::format("d%{}_{}", n.output, id);
      std::vector<std::int64_t> shape(in.begin(), in.end()), ss(ps.begin(), ps.end());
      const Strides dps = packed_strides(in);
      std::vector<std::int64_t> ds(dps.begin(), dps.end());
      L.step(dx->add ? "mt_add_strided_f32" : "mt_copy_strided_f32",
             {Arg::buf(dy.buffer, dy.offset + at * ps[d]), Arg::buf(dx->view.buffer, dx->view.offset),
              Arg::num(static_cast<std::int64_t>(shape.size())),
              Arg::buf(L.table(Elem::S32, shape, TableRole::Layout, what + "_shape")),
              Arg::buf(L.table(Elem::S32, ss, TableRole::Layout, what + "_src_strides")),
              Arg::buf(L.table(Elem::S32, ds, TableRole::Layout, what + "_dst_strides"))},
             numel_of(in));
    }
    at += in[d];
  }
}

// An embedding lookup of a float table (its gradient is not lowered: the table is frozen).
void lower_embedding_f32(Lowering& L, const Node& n) {
  if (!L.is_const(n.inputs[0]) || node_attr<std::int64_t>(n, "dim") != 0) {
    L.fail(n, "only index_select(weight, 0, ids) with a constant weight lowers (an embedding lookup)");
  }
  const View tab = L.constant_f32(n, n.inputs[0]);
  const View ids = L.packed(n, L.act(n, n.inputs[1]));
  const View y = L.out_act(n, Elem::F32, Format{});
  L.step("mt_embedding_f32", {Arg::buf(ids.buffer, ids.offset), Arg::num(numel_of(ids.shape)), Arg::buf(tab.buffer),
                              Arg::num(tab.shape[0]), Arg::num(numel_of(tab.shape) / tab.shape[0]),
                              Arg::buf(y.buffer)});
  L.set(n, y);
}

OpRule view_rule(const char* op, std::vector<AttrSpec> attrs, std::function<Tensor(const Node&, const std::vector<Tensor>&)> f,
                 void (*lower)(Lowering&, const Node&), void (*backward)(Lowering&, const Node&)) {
  OpRule r;
  r.op = op;
  r.summary = op;
  r.attrs = std::move(attrs);
  r.passes_view = true;
  r.evaluate = std::move(f);
  r.lower = lower;
  r.lower_f32 = lower;  // a view moves no data: the same in float
  r.backward_f32 = backward;
  return r;
}

}  // namespace

std::vector<OpRule> shape_rules() {
  using T = AttrSpec::Type;
  std::vector<OpRule> rules = {
      view_rule("reshape", {{"shape", T::Shape}},
                [](const Node& n, const std::vector<Tensor>& in) { return reshape(in[0], node_attr<Shape>(n, "shape")); },
                lower_reshape, backward_reshape_f32),
      view_rule("permute", {{"dims", T::Shape}},
                [](const Node& n, const std::vector<Tensor>& in) { return permute(in[0], node_attr<Shape>(n, "dims")); },
                lower_permute, backward_permute_f32),
      view_rule("slice", {{"dim", T::Int}, {"start", T::Int}, {"end", T::Int}, {"step", T::Int}},
                [](const Node& n, const std::vector<Tensor>& in) {
                  return microtorch::slice(in[0], node_attr<std::int64_t>(n, "dim"), node_attr<std::int64_t>(n, "start"),
                                           node_attr<std::int64_t>(n, "end"), node_attr<std::int64_t>(n, "step"));
                },
                lower_slice, backward_slice_f32),
      view_rule("expand", {{"shape", T::Shape}},
                [](const Node& n, const std::vector<Tensor>& in) {
                  return microtorch::expand(in[0], node_attr<Shape>(n, "shape"));
                },
                lower_expand, backward_expand_f32),
      view_rule("clone", {}, [](const Node&, const std::vector<Tensor>& in) { return in[0].clone(); },
                [](Lowering& L, const Node& n) { L.set(n, L.act(n, n.inputs[0])); }, backward_reshape_f32),
  };
  OpRule cat;
  cat.op = "cat";
  cat.summary = "cat";
  cat.min_inputs = 1, cat.max_inputs = 1 << 20;
  cat.attrs = {{"dim", T::Int}};
  cat.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    return microtorch::cat(in, node_attr<std::int64_t>(n, "dim"));
  };
  cat.lower = lower_cat;
  cat.lower_f32 = lower_cat_f32;
  cat.backward_f32 = backward_cat_f32;
  rules.push_back(cat);

  OpRule embedding;
  embedding.op = "index_select";
  embedding.summary = "embedding (index_select of a constant table, dim 0)";
  embedding.min_inputs = embedding.max_inputs = 2;
  embedding.attrs = {{"dim", T::Int}};
  embedding.evaluate = [](const Node& n, const std::vector<Tensor>& in) {
    return index_select(in[0], node_attr<std::int64_t>(n, "dim"), in[1]);
  };
  embedding.lower = lower_embedding;
  embedding.lower_f32 = lower_embedding_f32;
  rules.push_back(embedding);
  return rules;
}

}  // namespace microtorch::lower
