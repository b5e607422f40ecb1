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

OpRule view_rule(const char* op, std::vector<AttrSpec> attrs, std::function<Tensor(const Node&, const std::vector<Tensor>&)> f,
                 void (*lower)(Lowering&, const Node&)) {
  OpRule r;
  r.op = op;
  r.summary = op;
  r.attrs = std::move(attrs);
  r.passes_view = true;
  r.evaluate = std::move(f);
  r.lower = lower;
  return r;
}

}  // namespace

std::vector<OpRule> shape_rules() {
  using T = AttrSpec::Type;
  std::vector<OpRule> rules = {
      view_rule("reshape", {{"shape", T::Shape}},
                [](const Node& n, const std::vector<Tensor>& in) { return reshape(in[0], node_attr<Shape>(n, "shape")); },
                lower_reshape),
      view_rule("permute", {{"dims", T::Shape}},
                [](const Node& n, const std::vector<Tensor>& in) { return permute(in[0], node_attr<Shape>(n, "dims")); },
                lower_permute),
      view_rule("slice", {{"dim", T::Int}, {"start", T::Int}, {"end", T::Int}, {"step", T::Int}},
                [](const Node& n, const std::vector<Tensor>& in) {
                  return microtorch::slice(in[0], node_attr<std::int64_t>(n, "dim"), node_attr<std::int64_t>(n, "start"),
                                           node_attr<std::int64_t>(n, "end"), node_attr<std::int64_t>(n, "step"));
                },
                lower_slice),
      view_rule("expand", {{"shape", T::Shape}},
                [](const Node& n, const std::vector<Tensor>& in) {
                  return microtorch::expand(in[0], node_attr<Shape>(n, "shape"));
                },
                lower_expand),
      view_rule("clone", {}, [](const Node&, const std::vector<Tensor>& in) { return in[0].clone(); },
                [](Lowering& L, const Node& n) { L.set(n, L.act(n, n.inputs[0])); }),
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
  rules.push_back(embedding);
  return rules;
}

}  // namespace microtorch::lower
