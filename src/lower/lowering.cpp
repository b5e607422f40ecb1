// The state of one quantize() run (lowering.hpp): buffers, weights, tables, views, steps.
#include "lowering.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels.hpp"
#include "microtorch/error.hpp"
#include "runtime/mt_kernels.h"

namespace microtorch::lower {

std::string c_name(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

Lowering::Lowering(const Graph& g, const Calibration& cal, const QuantOptions& opt) : g_(g), cal_(cal), opt_(opt) {
  check_firmware_name(opt.name);
  if (opt.activation_bits != 16 && opt.activation_bits != 8) {
    throw ValueError(fmt::format("quantize: activation_bits must be 16 or 8, got {}", opt.activation_bits));
  }
  bits_ = opt.activation_bits;
  wbits_ = opt.weight_bits == 0 ? bits_ : opt.weight_bits;
  if ((wbits_ != 16 && wbits_ != 8) || (bits_ == 8 && wbits_ != 8)) {
    throw ValueError(fmt::format("quantize: weight_bits must be 16 or 8 (8 with 8-bit activations), got {}",
                                 opt.weight_bits));
  }
  if (cal.absmax.size() != g.values.size()) {
    throw ValueError(fmt::format("quantize: the calibration has {} values but the graph has {}; calibrate this graph",
                                 cal.absmax.size(), g.values.size()));
  }
  act_ = bits_ == 16 ? Elem::S16 : Elem::S8;
  sfx_ = elem_sfx(act_);
  p_.name = opt.name;
  p_.activation_bits = bits_;
  p_.weight_bits = wbits_;

  const Value& in = g_.value(g_.input);
  views_.assign(g_.values.size(), std::nullopt);
  Buffer b;
  b.kind = BufferKind::Input;
  b.size = numel_of(in.shape);
  b.name = "in";
  b.origin = fmt::format("%{} (graph input)", in.id);
  b.graph_value = in.id;
  if (is_floating(in.dtype)) {
    b.elem = act_;
    b.frac = frac_of(in.id);
    b.absmax = cal_.absmax[static_cast<std::size_t>(in.id)];
  } else {
    b.elem = Elem::S32, b.fixed_point = false;  // token ids
  }
  p_.input = p_.add_buffer(std::move(b));
  views_[static_cast<std::size_t>(in.id)] = View{p_.input, 0, in.shape, packed_strides(in.shape), p_.buffer(p_.input).frac};
  p_.input_shape = in.shape;
}

std::string Lowering::elem_sfx(Elem e) { return e == Elem::S16 ? "s16" : e == Elem::S8 ? "s8" : "s32"; }

void Lowering::set_last_uses() {
  last_use_.assign(g_.values.size(), -1);
  for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
    for (auto v : g_.nodes[i].inputs) {
      if (v >= 0) last_use_[static_cast<std::size_t>(v)] = static_cast<std::int64_t>(i);
    }
  }
  last_use_[static_cast<std::size_t>(g_.output)] = INT64_MAX;
}

// ---- errors and labels ----

std::string Lowering::ref(std::int64_t id) const {
  if (id < 0) return "_";
  const Value& v = g_.value(id);
  return v.kind == ValueKind::Parameter ? v.name : fmt::format("%{}", id);
}

std::string Lowering::line(const Node& n) const {
  std::vector<std::string> args;
  for (auto i : n.inputs) args.push_back(ref(i));
  std::vector<std::string> shapes;
  for (auto i : n.inputs) {
    if (i >= 0) shapes.push_back(shape_str(g_.value(i).shape));
  }
  return fmt::format("%{} = {}({})  {} -> {}", n.output, n.op, fmt::join(args, ", "), fmt::join(shapes, ", "),
                     shape_str(g_.value(n.output).shape));
}

void Lowering::fail(const Node& n, const std::string& why) const {
  throw ValueError(fmt::format("lower: cannot lower {}{}: {}", line(n), module_of(n), why));
}

// The module a node belongs to, as far as the graph knows: the dotted prefix of the
// parameters it uses, or of the nearest op before it that uses parameters.
std::string Lowering::module_of(const Node& n) const {
  std::vector<const Node*> frontier{&n};
  for (std::size_t hops = 0; hops < 64 && !frontier.empty(); ++hops) {
    std::vector<const Node*> next;
    for (const Node* m : frontier) {
      for (auto i : m->inputs) {
        if (i < 0) continue;
        const Value& v = g_.value(i);
        if (v.kind == ValueKind::Parameter) {
          const auto dot = v.name.rfind('.');
          const std::string module = dot == std::string::npos ? "<root>" : v.name.substr(0, dot);
          return m == &n ? fmt::format(" in module {}", module) : fmt::format(" after module {}", module);
        }
        if (v.kind == ValueKind::OpOutput) {
          for (const Node& p : g_.nodes) {
            if (p.output == i) next.push_back(&p);
          }
        }
      }
    }
    frontier = std::move(next);
  }
  return "";
}

std::int64_t Lowering::last_dim(const Node& n, std::int64_t dim, const Shape& shape) const {
  const auto nd = static_cast<std::int64_t>(shape.size());
  if (dim < 0) dim += nd;
  if (dim != nd - 1) fail(n, fmt::format("only the last dim ({}) is supported, got dim {}", nd - 1, dim));
  return shape.empty() ? 1 : shape.back();
}

// ---- values ----

bool Lowering::is_const(std::int64_t id) const {
  const ValueKind k = g_.value(id).kind;
  return k == ValueKind::Parameter || k == ValueKind::Constant || folded_.count(id) != 0;
}

const Tensor& Lowering::data(std::int64_t id) const {
  auto it = folded_.find(id);
  return it != folded_.end() ? it->second : g_.value(id).data;
}

std::string Lowering::const_name(std::int64_t value) const {
  const Value& v = g_.value(value);
  return v.kind == ValueKind::Parameter ? v.name : fmt::format("const{}", value);
}

const View& Lowering::act(const Node& n, std::int64_t id) const {
  if (!has_view(id)) fail(n, fmt::format("input {} is not an activation computed from the input here", ref(id)));
  return *views_[static_cast<std::size_t>(id)];
}

void Lowering::set(const Node& n, View v) {
  values_in_[v.buffer].push_back(n.output);
  views_[static_cast<std::size_t>(n.output)] = std::move(v);
}

int Lowering::frac_of(std::int64_t value) {
  std::string what = fmt::format("%{} ({})", value, kind_name(g_.value(value).kind));
  for (const Node& n : g_.nodes) {
    if (n.output == value) what = fmt::format("%{} = {}{}", value, n.op, module_of(n));
  }
  return format(cal_.absmax[static_cast<std::size_t>(value)], bits_, what);
}

int Lowering::format(double absmax, int bits, const std::string& what) {
  bool clamped = false;
  const int f = choose_frac(absmax, bits, &clamped);
  if (clamped) {
    p_.warnings.push_back(fmt::format(
        "{}: its range {:.3g} needs a Q format beyond the [-16, 31] fraction bits the kernels support at int{}; "
        "clamped to {} fraction bits, so its values {}",
        what, absmax, bits, f, f > 0 ? "round to 0" : "saturate at " + fmt::format("{:.3g}", std::ldexp(std::ldexp(1.0, bits - 1) - 1, -f))));
  }
  return f;
}

// ---- buffers ----

View Lowering::new_act(const Shape& shape, int frac, std::int64_t value, Elem elem, bool fixed_point) {
  Buffer b;
  b.kind = BufferKind::Activation;
  b.elem = elem;
  b.size = numel_of(shape);
  b.fixed_point = fixed_point;
  b.frac = fixed_point ? frac : 0;
  b.graph_value = value;
  b.absmax = value >= 0 ? cal_.absmax[static_cast<std::size_t>(value)] : 0.0;
  b.name = value >= 0 ? fmt::format("t{}", value) : fmt::format("c{}", p_.buffers.size());
  b.origin = value >= 0 ? fmt::format("%{} = {}", value, g_.nodes[static_cast<std::size_t>(node_)].op)
                        : fmt::format("packed copy for step {}", p_.steps.size());
  const auto id = p_.add_buffer(std::move(b));
  return View{id, 0, shape, packed_strides(shape), fixed_point ? frac : 0};
}

View Lowering::like(const Node& n, const View& x, int frac) {
  View y = out_act(n, frac);
  y.strides = x.strides;
  return y;
}

std::int64_t Lowering::weight(const Tensor& t, Elem elem, int frac, const std::string& name, const std::string& origin) {
  Buffer b;
  b.kind = BufferKind::Weight;
  b.elem = elem;
  b.size = t.numel();
  b.frac = frac;
  const Tensor d = t.to(Dtype::Float64);
  const double* p = d.data<double>();
  b.data.resize(static_cast<std::size_t>(b.size));
  for (std::int64_t i = 0; i < b.size; ++i) {
    b.absmax = std::max(b.absmax, std::abs(p[i]));
    b.data[static_cast<std::size_t>(i)] = quantize_value(p[i], frac, elem_bytes(elem) * 8);
  }
  b.name = unique_name("w_" + c_name(name));
  b.origin = origin;
  return p_.add_buffer(std::move(b));
}

std::int64_t Lowering::weight(std::int64_t value, int bits) {
  const Tensor& t = data(value);
  const std::string name = const_name(value);
  return weight(t, bits == 16 ? Elem::S16 : Elem::S8, format(absmax(t), bits, name), name, name);
}

double Lowering::absmax(const Tensor& t) {
  const Tensor d = t.to(Dtype::Float64);
  double m = 0;
  for (std::int64_t i = 0; i < d.numel(); ++i) {
    if (std::isfinite(d.data<double>()[i])) m = std::max(m, std::abs(d.data<double>()[i]));
  }
  return m;
}

std::int64_t Lowering::table(Elem elem, std::vector<std::int64_t> values, const std::string& what) {
  const auto key = std::make_pair(elem, values);
  if (auto it = tables_.find(key); it != tables_.end()) return it->second;
  Buffer b;
  b.kind = BufferKind::Weight;
  b.elem = elem;
  b.size = static_cast<std::int64_t>(values.size());
  b.fixed_point = false;
  b.data = std::move(values);
  b.name = unique_name(what);
  b.origin = what;
  const auto id = p_.add_buffer(std::move(b));
  tables_.emplace(key, id);
  return id;
}

std::string Lowering::unique_name(const std::string& base) {
  std::string name = base;
  for (int k = 2;; ++k) {
    // the firmware's own functions share the file scope of model.c with the weights
    const bool taken = name == p_.name + "_run" || name == p_.name + "_run_float" ||
                       std::any_of(p_.buffers.begin(), p_.buffers.end(), [&](const Buffer& b) { return b.name == name; });
    if (!taken) return name;
    name = fmt::format("{}_{}", base, k);
  }
}

// ---- layouts ----

void Lowering::copy_into(const Node* n, const View& v, std::int64_t dst, std::int64_t dst_offset,
                         const Strides& dst_strides) {
  // Drop size-1 dims and merge dims that are contiguous in both source and destination.
  Shape shape;
  Strides ss, ds;
  for (std::size_t i = 0; i < v.shape.size(); ++i) {
    if (v.shape[i] == 1) continue;
    if (!shape.empty() && ss.back() == v.strides[i] * v.shape[i] && ds.back() == dst_strides[i] * v.shape[i]) {
      shape.back() *= v.shape[i], ss.back() = v.strides[i], ds.back() = dst_strides[i];
    } else {
      shape.push_back(v.shape[i]), ss.push_back(v.strides[i]), ds.push_back(dst_strides[i]);
    }
  }
  if (shape.empty()) shape = {1}, ss = {0}, ds = {0};
  if (shape.size() > MT_MAX_DIMS) {
    const std::string why = fmt::format("a layout copy needs {} dims after merging; the runtime copies at most {}",
                                        shape.size(), MT_MAX_DIMS);
    if (n) fail(*n, why);
    throw ValueError("lower: " + why);
  }
  const std::string k = fmt::format("copy{}", shape.size());
  step("mt_copy_strided_" + elem_sfx(buf(v).elem),
       {Arg::buf(v.buffer, v.offset), Arg::buf(dst, dst_offset), Arg::num(static_cast<std::int64_t>(shape.size())),
        Arg::buf(table(Elem::S32, {shape.begin(), shape.end()}, k + "_shape")),
        Arg::buf(table(Elem::S32, ss, k + "_src_strides")), Arg::buf(table(Elem::S32, ds, k + "_dst_strides"))});
}

View Lowering::packed(const Node& n, const View& v) {
  if (is_packed(v)) return v;
  const Buffer src = buf(v);  // a copy: new_act may reallocate the buffer list
  View out = new_act(v.shape, v.frac, -1, src.elem, src.fixed_point);
  p_.buffer(out.buffer).origin = fmt::format("packed copy of {} for %{}", src.name, n.output);
  p_.buffer(out.buffer).absmax = v.frac == src.frac ? src.absmax : 0.0;  // 0: another value shares src
  copy_into(&n, v, out.buffer, 0, out.strides);
  return out;
}

std::pair<View, std::int64_t> Lowering::strided_rows(const Node& n, const View& v) {
  if (auto s = row_stride(v)) return {v, *s};
  return {packed(n, v), 0};
}

View Lowering::dense(const Node& n, const View& v) { return is_dense(v) ? v : packed(n, v); }

bool Lowering::can_overwrite(const View& target, const std::vector<View>& also_read) {
  if (buf(target).kind != BufferKind::Activation) return false;
  const std::int64_t size = buf(target).size;
  for (const View& w : also_read) {
    if (overlaps(target, w, size)) return false;
  }
  for (auto v : values_in_[target.buffer]) {
    if (last_use_[static_cast<std::size_t>(v)] > node_ && overlaps(target, *views_[static_cast<std::size_t>(v)], size)) {
      return false;
    }
  }
  return true;
}

// ---- kernel calls ----

void Lowering::step(std::string kernel, std::vector<Arg> args, std::int64_t macs) {
  Step s;
  s.kernel = std::move(kernel);
  s.args = std::move(args);
  s.node = node_;
  s.label = node_ >= 0 ? line(g_.nodes[static_cast<std::size_t>(node_)]) : "output";
  s.macs = macs;
  check_call(p_, s);
  s.returns_status = find_kernel(s.kernel)->returns_status;
  p_.steps.push_back(std::move(s));
}

void Lowering::finish_output() {
  if (!has_view(g_.output)) {
    throw ValueError(fmt::format("lower: the graph output %{} does not depend on the input; there is nothing to "
                                 "compute on the device",
                                 g_.output));
  }
  const View& v = *views_[static_cast<std::size_t>(g_.output)];
  Buffer& b = buf(v);
  p_.output_shape = v.shape;
  if (b.kind == BufferKind::Activation && is_packed(v) && v.offset == 0 && numel_of(v.shape) == b.size &&
      v.frac == b.frac) {
    b.kind = BufferKind::Output;
    b.name = "out";
    p_.output = v.buffer;
    return;
  }
  node_ = -1;
  Buffer o;
  o.kind = BufferKind::Output;
  o.elem = b.elem;
  o.size = numel_of(v.shape);
  o.fixed_point = b.fixed_point;
  o.frac = v.frac;
  o.absmax = cal_.absmax[static_cast<std::size_t>(g_.output)];
  o.name = "out";
  o.origin = fmt::format("%{} (graph output)", g_.output);
  p_.output = p_.add_buffer(std::move(o));
  copy_into(nullptr, v, p_.output, 0, packed_strides(v.shape));
}

}  // namespace microtorch::lower
