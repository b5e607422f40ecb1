// The state of one quantize() run (lowering.hpp): formats, buffers, weights, tables, views, steps.
#include "lowering.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "affine_input.hpp"
#include "kernels.hpp"
#include "module_path.hpp"
#include "microtorch/error.hpp"
#include "microtorch/ops.hpp"
#include "rules.hpp"
#include "value_uses.hpp"
#include "weight_rounding.hpp"
#include "runtime/mt_kernels.h"

namespace microtorch::lower {

std::string c_name(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

namespace {

Elem elem_of_bits(int bits) { return bits == 8 ? Elem::S8 : Elem::S16; }

}  // namespace

Lowering::Lowering(const Graph& g, const Calibration& cal, const QuantOptions& opt, bool float32)
    : g_(g), cal_(cal), opt_(opt), float32_(float32), steps_(&p_.steps) {
  check_firmware_name(opt.name);
  if (opt.activation_bits != 16 && opt.activation_bits != 8) {
    throw ValueError(fmt::format("quantize: activation_bits must be 16 or 8, got {}", opt.activation_bits));
  }
  if (opt.weight_bits != 0 && opt.weight_bits != 16 && opt.weight_bits != 8) {
    throw ValueError(fmt::format("quantize: weight_bits must be 16 or 8 (or 0: as the activations), got {}",
                                 opt.weight_bits));
  }
  if (opt.input_bits != 0 && opt.input_bits != 16 && opt.input_bits != 8) {
    throw ValueError(fmt::format("quantize: input_bits must be 16 or 8 (or 0: as the activations), got {}",
                                 opt.input_bits));
  }
  if (opt.sensitive_bits != 16 && opt.sensitive_bits != 8) {
    throw ValueError(fmt::format("quantize: sensitive_bits must be 16 or 8, got {}", opt.sensitive_bits));
  }
  for (const LayerPrecision& lp : opt.precision) {
    if ((lp.activation_bits != 8 && lp.activation_bits != 16) ||
        (lp.weight_bits != 0 && lp.weight_bits != 8 && lp.weight_bits != 16)) {
      throw ValueError(fmt::format("quantize: the precision of \"{}\" must be 8 or 16 bits (weights 8, 16, or 0: as the "
                                   "activations), got {}/{}",
                                   lp.match, lp.activation_bits, lp.weight_bits));
    }
    check_match(lp.match, "precision");
  }
  for (const auto& r : opt.ranges) check_match(r.first, "ranges");
  const std::size_t n = g.values.size();
  if (cal.absmax.size() != n || cal.min.size() != n || cal.max.size() != n) {
    throw ValueError(fmt::format("quantize: the calibration has {} values but the graph has {}; calibrate this graph",
                                 cal.absmax.size(), n));
  }
  p_.name = opt.name;
  p_.activation_bits = opt.activation_bits;
  p_.weight_bits = opt.weight_bits == 0 ? opt.activation_bits : opt.weight_bits;
  p_.scheme = std::string(scheme_name(opt.scheme)) +
              (opt.scheme != Scheme::PowerOfTwo && opt.per_channel ? ", per-channel weights" : ", per-tensor weights");

  // A value may carry a zero point when every node that reads it can (through view ops,
  // which pass their input's format on): decided from the last node back.
  affine_ok_.assign(n, true);
  stream_.assign(n, -1);
  constant_values_ = constant_values(g);
  last_use_.assign(n, -1);
  for (std::size_t i = g.nodes.size(); i-- > 0;) {
    const Node& node = g.nodes[i];
    const OpRule* rule = find_rule(node.op);
    for (const auto v : node.inputs) {
      if (v < 0) continue;
      const auto k = static_cast<std::size_t>(v);
      const bool ok = rule && rule->zero_point_in && (!rule->passes_view || affine_ok_[static_cast<std::size_t>(node.output)]);
      affine_ok_[k] = affine_ok_[k] && ok;
      last_use_[k] = std::max(last_use_[k], static_cast<std::int64_t>(i));
    }
  }
  last_use_[static_cast<std::size_t>(g_.output)] = INT64_MAX;
  // Affine chains in front of layers fold into them (OpRule::folds_affine_input,
  // affine_input.hpp): their nodes are not lowered, and the layer reads the chain's root.
  for (std::size_t i = 0; !float32_ && i < g.nodes.size(); ++i) {
    const Node& node = g.nodes[i];
    if (auto chain = lower::affine_input(g, node)) {
      for (const auto k : chain->nodes) absorbed_.insert(k);
      auto& last = last_use_[static_cast<std::size_t>(chain->root)];
      last = std::max(last, static_cast<std::int64_t>(i));
      affine_ok_[static_cast<std::size_t>(chain->root)] = true;  // the linear layer reads it
    }
  }
  // An activation that alone reads a layer's output is fused into the layer (fused_relu():
  // OpRule::fuses_into_layer after OpRule::fuses_activation).
  const ValueUses uses = value_uses(g);
  const std::vector<std::int64_t>&producer = uses.producer, &reads = uses.readers;
  // A batch_norm in eval that alone reads a layer's output folds into the layer's weights and
  // bias (folded_norm(): OpRule::folds_into_weights after OpRule::folds_norm_rank), its
  // statistics and affine parameters constant.
  for (std::size_t i = 0; !float32_ && i < g.nodes.size(); ++i) {
    const Node& bn = g.nodes[i];
    const OpRule* norm = find_rule(bn.op);
    if (!norm || !norm->folds_into_weights || bn.inputs.empty() || bn.inputs[0] < 0) continue;
    if (node_attr<bool>(bn, "training")) continue;
    const auto x = static_cast<std::size_t>(bn.inputs[0]);
    if (bn.inputs[0] == g.output || reads[x] != 1 || producer[x] < 0) continue;
    const bool constant = std::all_of(bn.inputs.begin() + 1, bn.inputs.end(), [&](std::int64_t v) {
      return v < 0 || constant_values_[static_cast<std::size_t>(v)];
    });
    const Node& layer = g.nodes[static_cast<std::size_t>(producer[x])];
    const OpRule* rule = find_rule(layer.op);
    if (!constant || !rule || rule->folds_norm_rank == 0 || !rule->weighted(layer, constant_values_) ||
        static_cast<int>(g.value(layer.output).shape.size()) != rule->folds_norm_rank) {
      continue;
    }
    norms_[layer.output] = static_cast<std::int64_t>(i);
    absorbed_.insert(static_cast<std::int64_t>(i));
  }
  for (std::size_t i = 0; !float32_ && i < g.nodes.size(); ++i) {
    const Node& relu = g.nodes[i];
    const OpRule* act = find_rule(relu.op);
    if (!act || !act->fuses_into_layer || relu.inputs.size() != 1 || relu.inputs[0] < 0) continue;
    const auto x = static_cast<std::size_t>(relu.inputs[0]);
    if (relu.inputs[0] == g.output || reads[x] != 1 || producer[x] < 0) continue;
    std::int64_t at = producer[x];  // the layer, or the batch_norm folded into it
    const Node& before = g.nodes[static_cast<std::size_t>(at)];
    if (absorbed_.count(at) != 0 && find_rule(before.op) && find_rule(before.op)->folds_into_weights) {
      at = producer[static_cast<std::size_t>(before.inputs[0])];
    }
    const Node& layer = g.nodes[static_cast<std::size_t>(at)];
    const OpRule* rule = find_rule(layer.op);
    if (!rule || !rule->fuses_activation || !rule->weighted(layer, constant_values_)) continue;
    fused_[layer.output] = static_cast<std::int64_t>(i);
    absorbed_.insert(static_cast<std::int64_t>(i));
  }

  const Value& in = g_.value(g_.input);
  views_.assign(n, std::nullopt);
  Buffer b;
  b.kind = BufferKind::Input;
  b.size = numel_of(in.shape);
  b.name = "in";
  b.origin = fmt::format("%{} (graph input)", in.id);
  b.graph_value = in.id;
  Format f;
  if (is_floating(in.dtype) && float32_) {
    b.elem = Elem::F32, b.fixed_point = false;
  } else if (is_floating(in.dtype)) {
    b.elem = elem_of_bits(opt.input_bits == 0 ? opt.activation_bits : opt.input_bits);
    const bool affine = opt.scheme == Scheme::Affine && affine_ok_[static_cast<std::size_t>(in.id)];
    f = value_format(in.id, nullptr, b.elem, affine);
    b.scale = f.scale, b.zero_point = f.zero, b.lo = f.lo, b.hi = f.hi;
    for (const Format& c : input_channel_formats(b.elem, affine)) {
      b.channel_scales.push_back(c.scale), b.channel_zero_points.push_back(c.zero);
    }
    if (!b.channel_scales.empty()) {  // the largest scale; no one zero point
      b.scale = *std::max_element(b.channel_scales.begin(), b.channel_scales.end()), b.zero_point = 0;
    }
  } else {
    b.elem = Elem::S32, b.fixed_point = false;  // token ids
  }
  p_.input = p_.add_buffer(std::move(b));
  const View v = input_view();
  views_[static_cast<std::size_t>(in.id)] = v;
  p_.probes.push_back(Probe{in.id, -1, p_.input, 0, v.shape, v.strides, v.scale, v.zero, v.segments, v.segment_zeros,
                            v.segment_dim});
  p_.input_shape = in.shape;
}

// The input as the first layers read it: packed, in its buffer's format, or per channel (dim 1).
View Lowering::input_view() const {
  const Value& in = g_.value(g_.input);
  const Buffer& ib = p_.buffer(p_.input);
  View v{p_.input, 0, in.shape, packed_strides(in.shape), ib.elem, ib.scale, ib.zero_point, {}, {}};
  if (!ib.channel_scales.empty()) {
    v.segments = ib.channel_scales;
    v.segment_zeros = ib.channel_zero_points;
    v.segment_dim = 1;
  }
  return v;
}

// Formats per channel (index of dim 1) for the input, when it may have them: int8 outside
// the power-of-two scheme, rank >= 3 with its channels' calibrated ranges, not the graph
// output, and every reader folds the channels' scales into its weights and their zero points
// into its bias (OpRule::reads_channel_formats, the input as its input 0 only: a conv stem).
// Each channel c gets the format of its own range [lo_c, hi_c] (widened by the margin; with
// a zero point of its own when `affine`: a padded reader pads each channel with its zero
// point, pad_input); a channel never seen non-zero takes the smallest scale. Raw sensor
// windows, whose axes differ in range and offset, then keep all 256 levels on every axis.
std::vector<Format> Lowering::input_channel_formats(Elem elem, bool affine) {
  const auto k = static_cast<std::size_t>(g_.input);
  if (!opt_.input_channel_formats || float32_ || opt_.scheme == Scheme::PowerOfTwo || elem != Elem::S8 ||
      g_.input == g_.output || g_.value(g_.input).shape.size() < 3 || k >= cal_.dim1_min.size() ||
      cal_.dim1_min[k].empty() || !read_by_weights(g_.input, true)) {
    return {};
  }
  const auto [lo, hi] = dim1_range(g_.input);
  std::vector<Format> ch(lo.size());
  double smallest = 0;
  for (std::size_t c = 0; c < ch.size(); ++c) {
    ch[c] = widened_format(lo[c], hi[c], elem, affine, fmt::format("%{} (the input), channel {}", g_.input, c));
    if (!(ch[c].hi > ch[c].lo)) ch[c].scale = 0, ch[c].zero = 0;
    if (ch[c].scale > 0) smallest = smallest > 0 ? std::min(smallest, ch[c].scale) : ch[c].scale;
  }
  if (smallest == 0) return {};
  for (Format& f : ch) f.scale = f.scale > 0 ? f.scale : smallest;
  return ch;
}

void Lowering::check_match(const std::string& match, const char* option) const {
  std::vector<std::string> modules;
  for (const Node& node : g_.nodes) {
    if (match == fmt::format("%{}", node.output) || (!match.empty() && match[0] != '%' && in_module(node, match))) return;
    const ModulePath m = module_path(g_, node);
    if (m.own && std::find(modules.begin(), modules.end(), m.path) == modules.end()) modules.push_back(m.path);
  }
  throw ValueError(fmt::format("quantize: the {} entry \"{}\" names no node of the graph; name a node (\"%12\") or a "
                               "module: {}",
                               option, match, fmt::join(modules, ", ")));
}

std::string Lowering::elem_sfx(Elem e) {
  return e == Elem::S16 ? "s16" : e == Elem::S8 ? "s8" : e == Elem::F32 ? "f32" : "s32";
}

std::string Lowering::kernel(const std::string& op, std::initializer_list<Elem> types) {
  std::string k = "mt_" + op;
  for (const Elem e : types) k += "_" + elem_sfx(e);
  return k;
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

std::string Lowering::module_of(const Node& n) const {
  const ModulePath m = module_path(g_, n);
  if (m.path.empty()) return "";
  return fmt::format(" {} module {}", m.own ? "in" : "after", m.path);
}

// "%5 = linear in module fc" for warnings about a value's format
std::string Lowering::what(std::int64_t value) const {
  for (const Node& n : g_.nodes) {
    if (n.output == value) return fmt::format("%{} = {}{}", value, n.op, module_of(n));
  }
  return fmt::format("%{} ({})", value, kind_name(g_.value(value).kind));
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
  const View& v = *views_[static_cast<std::size_t>(id)];
  const OpRule* rule = find_rule(n.op);
  if (!v.segments.empty() && !(rule && (v.segment_dim < 0 ? rule->reads_parts : rule->reads_channel_formats))) {
    fail(n, fmt::format("input {} has a format per part, which {} cannot read", ref(id), n.op));
  }
  return v;
}

void Lowering::set(const Node& n, View v) {
  const std::string format = v.elem == Elem::F32 ? std::string("float")
                                                 : fmt::format("{} {}", elem_ctype(v.elem),
                                                               format_name(v.elem, v.scale, v.zero));
  for (auto it = steps_->rbegin(); it != steps_->rend() && it->node == node_; ++it) {
    if (it->out_format.empty()) it->out_format = format;
  }
  values_in_[v.buffer].push_back(n.output);
  if (steps_ == &p_.steps) {  // the inference's values, for the per-layer report
    p_.probes.push_back(Probe{n.output, static_cast<std::int64_t>(p_.steps.size()) - 1, v.buffer, v.offset, v.shape,
                              v.strides, v.scale, v.zero, v.segments, v.segment_zeros, v.segment_dim});
  }
  views_[static_cast<std::size_t>(n.output)] = std::move(v);
}

// ---- precision and formats ----

Lowering::Precision Lowering::precision(const Node& n) const {
  Precision p{opt_.activation_bits, opt_.weight_bits == 0 ? opt_.activation_bits : opt_.weight_bits};
  const std::string id = fmt::format("%{}", n.output);
  for (const LayerPrecision& lp : opt_.precision) {
    const bool hit = lp.match == id || (!lp.match.empty() && lp.match[0] != '%' && in_module(n, lp.match));
    if (hit) p = {lp.activation_bits, lp.weight_bits == 0 ? lp.activation_bits : lp.weight_bits};
  }
  return p;
}

// The residual stream (OpRule::residual): the outputs of adds of two activations, the values
// they add, and (back through view ops and adds of a constant, like a position embedding)
// where those come from.
bool Lowering::residual_stream(std::int64_t value) const {
  auto& memo = stream_[static_cast<std::size_t>(value)];
  if (memo >= 0) return memo != 0;
  memo = 0;
  const auto residual = [](const Node& a) {
    const OpRule* rule = find_rule(a.op);
    return rule && rule->residual;
  };
  const auto two_acts = [this, &residual](const Node& a) {
    return residual(a) && a.inputs.size() == 2 && a.inputs[0] >= 0 && a.inputs[1] >= 0 && !is_const(a.inputs[0]) &&
           !is_const(a.inputs[1]);
  };
  bool yes = false;
  for (const Node& n : g_.nodes) {
    if (n.output == value && two_acts(n)) yes = true;
  }
  for (const Node* r : readers(value)) {
    const OpRule* rule = find_rule(r->op);
    if (two_acts(*r) || ((residual(*r) || (rule && rule->passes_view)) && residual_stream(r->output))) yes = true;
  }
  memo = yes ? 1 : 0;
  return yes;
}

bool Lowering::sensitive(const Node& n) const {
  const OpRule* rule = find_rule(n.op);
  return n.output == g_.output || (rule && rule->sensitive_output) || residual_stream(n.output);
}

Elem Lowering::out_elem(const Node& n) const {
  if (float32_) return Elem::F32;
  const Precision p = precision(n);
  if (p.activation_bits == 8 && sensitive(n)) return elem_of_bits(opt_.sensitive_bits);
  return elem_of_bits(p.activation_bits);
}

Elem Lowering::weight_elem(const Node& n) const { return elem_of_bits(precision(n).weight_bits); }

Format Lowering::range_format(double lo, double hi, Elem elem, bool affine, const std::string& what) {
  Format f;
  f.lo = std::min(lo, 0.0), f.hi = std::max(hi, 0.0);
  const double absmax = std::max(-f.lo, f.hi);
  if (opt_.scheme == Scheme::PowerOfTwo) {
    bool clamped = false;
    const int frac = choose_frac(absmax, bits_of(elem), &clamped);
    if (clamped) {
      warn(fmt::format("{}: its range {:.3g} needs a Q format beyond the [-16, 31] fraction bits the kernels support "
                       "at int{}; clamped to {} fraction bits, so its values {}",
                       what, absmax, bits_of(elem), frac,
                       frac > 0 ? "round to 0"
                                : fmt::format("saturate at {:.3g}", std::ldexp(static_cast<double>(qmax(elem)), -frac))));
    }
    f.scale = std::ldexp(1.0, -frac);
    return f;
  }
  if (affine && elem == Elem::S8 && f.hi > f.lo) {
    f.scale = (f.hi - f.lo) / 255.0;
    f.zero = static_cast<std::int32_t>(std::clamp<double>(std::round(-128.0 - f.lo / f.scale), -128, 127));
  } else {
    f.scale = absmax > 0 ? absmax / static_cast<double>(qmax(elem)) : 1.0;
  }
  // Scales so small or large that requantizing them leaves the kernels' shift range show up
  // as warnings in rq(); a scale that does not even fit a double's normal range is clamped.
  if (!(f.scale >= 1e-30 && f.scale <= 1e30)) {
    warn(fmt::format("{}: its range {:.3g} is beyond what int{} scales represent; clamped", what, absmax, bits_of(elem)));
    f.scale = std::clamp(f.scale, 1e-30, 1e30);
  }
  return f;
}

bool Lowering::affine_out(const Node& n) const {
  const OpRule* rule = find_rule(n.op);
  return opt_.scheme == Scheme::Affine && rule && rule->zero_point_out && affine_ok_[static_cast<std::size_t>(n.output)];
}

Format Lowering::out_format(const Node& n, Elem elem) {
  if (float32_) return Format{};
  return value_format(n.output, &n, elem, affine_out(n));
}

Format Lowering::value_format(std::int64_t value, const Node* n, Elem elem, bool affine) {
  RangeMethod method = value == g_.output ? RangeMethod::MinMax : opt_.range;
  const std::string id = fmt::format("%{}", value);
  for (const auto& [match, m] : opt_.ranges) {
    if (match == id || (n && !match.empty() && match[0] != '%' && in_module(*n, match))) method = m;
  }
  auto [lo, hi] = choose_range(cal_, value, method, bits_of(elem), affine && elem == Elem::S8, opt_.percentile);
  return widened_format(lo, hi, elem, affine, what(value));
}

// Formats per feature (last dim, `dim1` false) or per channel (dim 1): n's output is int8
// outside the power-of-two scheme, not the graph output, has its calibrated ranges there, and
// every reader folds the scales into its weights: it reads the value as its input 0 only.
bool Lowering::part_formats(const Node& n, bool dim1) const {
  const auto k = static_cast<std::size_t>(n.output);
  const auto& ranges = dim1 ? cal_.dim1_min : cal_.channel_min;
  if (float32_ || opt_.scheme == Scheme::PowerOfTwo || n.output == g_.output || out_elem(n) != Elem::S8 ||
      k >= ranges.size() || ranges[k].empty()) {
    return false;
  }
  return read_by_weights(n.output, dim1);
}

bool Lowering::read_by_weights(std::int64_t id, bool dim1) const {
  const std::vector<const Node*> rs = readers(id);
  return !rs.empty() && std::all_of(rs.begin(), rs.end(), [&](const Node* r) {
    const OpRule* rule = find_rule(r->op);
    return rule && (dim1 ? rule->reads_channel_formats : rule->reads_feature_formats) &&
           rule->weighted(*r, constant_values_) && r->inputs[0] == id && std::count(r->inputs.begin(), r->inputs.end(), id) == 1;
  });
}

bool Lowering::channel_formats(const Node& n) const { return part_formats(n, false); }

bool Lowering::dim1_formats(const Node& n) const { return part_formats(n, true); }

std::optional<AffineInput> Lowering::affine_input(const Node& linear) const {
  return lower::affine_input(g_, linear, [this](std::int64_t id) { return is_const(id) ? data(id) : Tensor(); });
}

const Node* Lowering::fused_relu(const Node& n) const {
  const auto it = fused_.find(n.output);
  return it == fused_.end() ? nullptr : &g_.nodes[static_cast<std::size_t>(it->second)];
}

const Node* Lowering::folded_norm(const Node& n) const {
  const auto it = norms_.find(n.output);
  return it == norms_.end() ? nullptr : &g_.nodes[static_cast<std::size_t>(it->second)];
}

std::pair<Tensor, Tensor> Lowering::fold_norm(const Node& n, const Tensor& w, const Tensor& b) const {
  const Node* bn = folded_norm(n);
  if (!bn) return {w, b};
  const auto in = [&](std::size_t k) {
    return k < bn->inputs.size() && bn->inputs[k] >= 0 ? data(bn->inputs[k]).to(Dtype::Float64).contiguous() : Tensor();
  };
  const Tensor mean = in(1), var = in(2), gamma = in(3), beta = in(4);
  const double eps = node_attr<double>(*bn, "eps");
  const std::int64_t out = w.size(0), per = w.numel() / std::max<std::int64_t>(out, 1);
  if (mean.numel() != out || var.numel() != out) fail(*bn, fmt::format("its statistics must have {} channels", out));
  Tensor wf = w.to(Dtype::Float64).contiguous().clone(), bf = zeros({out}, Dtype::Float64);
  const Tensor b64 = b.defined() ? b.to(Dtype::Float64).contiguous() : Tensor();
  for (std::int64_t o = 0; o < out; ++o) {
    const double s = (gamma.defined() ? gamma.data<double>()[o] : 1.0) / std::sqrt(var.data<double>()[o] + eps);
    for (std::int64_t k = 0; k < per; ++k) wf.data<double>()[o * per + k] *= s;
    bf.data<double>()[o] = s * ((b64.defined() ? b64.data<double>()[o] : 0.0) - mean.data<double>()[o]) +
                           (beta.defined() ? beta.data<double>()[o] : 0.0);
  }
  return {wf, bf};
}

std::vector<const Node*> Lowering::readers(std::int64_t id) const {
  std::vector<const Node*> out;
  for (const Node& n : g_.nodes) {
    if (std::find(n.inputs.begin(), n.inputs.end(), id) != n.inputs.end()) out.push_back(&n);
  }
  return out;
}

bool Lowering::in_module(const Node& n, const std::string& module) const {
  const std::string path = module_path(g_, n).path;
  return path == module || path.rfind(module + ".", 0) == 0;
}

Format Lowering::const_format(const Tensor& t, Elem elem, const std::string& name) {
  const double m = absmax(t);
  return range_format(-m, m, elem, false, name);
}

Multiplier Lowering::rq(double ratio, const std::string& what) {
  Multiplier r = multiplier(ratio);
  if (ratio != 0 && (r.s < -31 || r.s > 62)) {
    warn(fmt::format("{}: the rescaling by {:.3g} is beyond the shifts the kernels take; clamped", what, ratio));
    r.s = std::clamp(r.s, -31, 62);
  }
  return r;
}

// ---- buffers ----

View Lowering::new_act(const Shape& shape, Elem elem, const Format& f, std::int64_t value, bool fixed_point) {
  Buffer b;
  b.kind = BufferKind::Activation;
  b.elem = elem;
  b.size = numel_of(shape);
  b.fixed_point = fixed_point;
  b.scale = fixed_point ? f.scale : 1.0;
  b.zero_point = fixed_point ? f.zero : 0;
  b.lo = f.lo, b.hi = f.hi;
  b.graph_value = value;
  b.name = value >= 0 ? fmt::format("t{}", value) : fmt::format("c{}", p_.buffers.size());
  b.origin = value >= 0 ? fmt::format("%{} = {}", value, g_.nodes[static_cast<std::size_t>(node_)].op)
                        : fmt::format("a temporary for step {}", steps_->size());
  const auto id = p_.add_buffer(std::move(b));
  return View{id, 0, shape, packed_strides(shape), elem, fixed_point ? f.scale : 1.0, fixed_point ? f.zero : 0, {}, {}};
}

View Lowering::like(const Node& n, const View& x, Elem elem, const Format& f) {
  View y = out_act(n, elem, f);
  y.strides = x.strides;
  return y;
}

std::int64_t Lowering::weight(const Tensor& t, Elem elem, const Format& f, const std::string& name) {
  Buffer b;
  b.kind = BufferKind::Weight;
  b.elem = elem;
  b.size = t.numel();
  b.scale = f.scale, b.zero_point = f.zero;
  const Tensor d = t.to(Dtype::Float64);
  const double* p = d.data<double>();
  b.data.resize(static_cast<std::size_t>(b.size));
  for (std::int64_t i = 0; i < b.size; ++i) b.data[static_cast<std::size_t>(i)] = quantize_to(p[i], f.scale, f.zero, elem);
  b.name = unique_name("w_" + c_name(name));
  b.origin = name;
  return p_.add_buffer(std::move(b));
}

std::int64_t Lowering::weight_rows(const Tensor& w, Elem elem, const std::string& name,
                                   const std::vector<double>& min_scale, const std::vector<double>* gram) {
  const std::int64_t rows = w.dim() == 0 ? 1 : w.size(0), cols = rows ? w.numel() / rows : 0;
  const Tensor d = w.to(Dtype::Float64).reshape({rows, cols});
  const double* p = d.data<double>();
  std::vector<double> scales(static_cast<std::size_t>(rows));
  const double floor_all = min_scale.empty() ? 0.0 : *std::max_element(min_scale.begin(), min_scale.end());
  if (opt_.scheme == Scheme::PowerOfTwo || !opt_.per_channel) {
    Format f = const_format(w, elem, name);
    if (f.scale < floor_all) {
      f.scale = opt_.scheme == Scheme::PowerOfTwo ? std::ldexp(1.0, static_cast<int>(std::ceil(std::log2(floor_all))))
                                                  : floor_all;
    }
    std::fill(scales.begin(), scales.end(), f.scale);
  } else {
    for (std::int64_t r = 0; r < rows; ++r) {
      double m = 0;
      for (std::int64_t c = 0; c < cols; ++c) {
        if (std::isfinite(p[r * cols + c])) m = std::max(m, std::abs(p[r * cols + c]));
      }
      double s = m > 0 ? m / static_cast<double>(qmax(elem)) : 1.0;
      if (!min_scale.empty()) s = std::max(s, min_scale[static_cast<std::size_t>(r)]);
      scales[static_cast<std::size_t>(r)] = s;
    }
  }
  Buffer b;
  b.kind = BufferKind::Weight;
  b.elem = elem;
  b.size = rows * cols;
  b.scale = *std::max_element(scales.begin(), scales.end());
  if (opt_.scheme != Scheme::PowerOfTwo && opt_.per_channel) b.channel_scales = scales;
  b.data.resize(static_cast<std::size_t>(b.size));
  b.data = round_rows(p, rows, cols, scales, elem, opt_.rounding == WeightRounding::ErrorFeedback ? gram : nullptr);
  b.name = unique_name("w_" + c_name(name));
  b.origin = name;
  return p_.add_buffer(std::move(b));
}

double Lowering::absmax(const Tensor& t) {
  const Tensor d = t.to(Dtype::Float64);
  double m = 0;
  for (std::int64_t i = 0; i < d.numel(); ++i) {
    if (std::isfinite(d.data<double>()[i])) m = std::max(m, std::abs(d.data<double>()[i]));
  }
  return m;
}

std::int64_t Lowering::table(Elem elem, std::vector<std::int64_t> values, TableRole role, const std::string& what,
                             std::vector<std::string> fields) {
  const auto key = std::make_pair(elem, values);
  if (auto it = tables_.find(key); it != tables_.end()) return it->second;
  Buffer b;
  b.kind = BufferKind::Weight;
  b.elem = elem;
  b.size = static_cast<std::int64_t>(values.size());
  b.fixed_point = false;
  b.role = role;
  b.data = std::move(values);
  b.fields = std::move(fields);
  b.name = unique_name(what);
  b.origin = what;
  const auto id = p_.add_buffer(std::move(b));
  tables_.emplace(key, id);
  return id;
}

std::int64_t Lowering::parameter_table(Elem elem, std::vector<std::int64_t> values, const std::string& what) {
  Buffer b;
  b.kind = BufferKind::Parameter;
  b.elem = elem;
  b.size = static_cast<std::int64_t>(values.size());
  b.fixed_point = false;
  b.data = std::move(values);
  b.name = unique_name(what);
  b.origin = what + " (trained)";
  return p_.add_buffer(std::move(b));
}

std::string Lowering::unique_name(const std::string& base) {
  std::string name = base;
  for (int k = 2;; ++k) {
    // the firmware's own functions share the file scope of model.c with the weights
    const bool taken = name == p_.name + "_run" || name == p_.name + "_run_float" ||
                       name == p_.name + "_input_scales" || name == p_.name + "_input_zero_points" ||
                       std::any_of(p_.buffers.begin(), p_.buffers.end(), [&](const Buffer& b) { return b.name == name; });
    if (!taken) return name;
    name = fmt::format("{}_{}", base, k);
  }
}

// ---- layouts and types ----

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
        Arg::buf(table(Elem::S32, {shape.begin(), shape.end()}, TableRole::Layout, k + "_shape")),
        Arg::buf(table(Elem::S32, ss, TableRole::Layout, k + "_src_strides")), Arg::buf(table(Elem::S32, ds, TableRole::Layout, k + "_dst_strides"))});
}

View Lowering::packed(const Node& n, const View& v) {
  if (is_packed(v)) return v;
  const Buffer src = buf(v);  // a copy: new_act may reallocate the buffer list
  Format f;
  f.scale = v.scale, f.zero = v.zero, f.lo = src.lo, f.hi = src.hi;
  View out = new_act(v.shape, v.elem, f, -1, src.fixed_point);
  // the same columns: the same parts
  out.segments = v.segments, out.segment_zeros = v.segment_zeros, out.segment_dim = v.segment_dim;
  p_.buffer(out.buffer).origin = fmt::format("packed copy of {} for %{}", src.name, n.output);
  copy_into(&n, v, out.buffer, 0, out.strides);
  return out;
}

std::pair<View, std::int64_t> Lowering::strided_rows(const Node& n, const View& v) {
  if (auto s = row_stride(v)) return {v, *s};
  return {packed(n, v), 0};
}

View Lowering::dense(const Node& n, const View& v) { return is_dense(v) ? v : packed(n, v); }

View Lowering::convert(const Node& n, const View& v, Elem elem, const Format& f) {
  if (v.elem == elem && v.scale == f.scale && v.zero == f.zero && v.segments.empty()) return v;
  if (!v.segments.empty()) fail(n, "a tensor with a format per part (an attention projection) cannot be converted");
  const View x = dense(n, v);
  View y = new_act(x.shape, elem, f, -1);
  y.strides = x.strides;
  p_.buffer(y.buffer).origin = fmt::format("{} in {} {} for %{}", buf(x).name, elem_ctype(elem),
                                           format_name(elem, f.scale, f.zero), n.output);
  const Multiplier m = rq(v.scale / f.scale, fmt::format("the conversion of {} for %{}", buf(x).name, n.output));
  step(kernel("requant", {x.elem, elem}), {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel_of(x.shape)),
                                            Arg::num(x.zero), Arg::num(m.m), Arg::num(m.s), Arg::num(f.zero), Arg::num(0)},
       numel_of(x.shape));
  return y;
}

View Lowering::as_elem(const Node& n, const View& v, Elem elem) {
  if (v.elem == elem) return v;
  Format f;
  const Buffer& b = buf(v);
  f.lo = b.lo, f.hi = b.hi;
  // int8 -> int16: exact (times 2^8, or 2^7 with a zero point); int16 -> int8: the same range
  f.scale = elem == Elem::S16 ? std::ldexp(v.scale, v.zero == 0 ? -8 : -7) : std::ldexp(v.scale, 8);
  return convert(n, v, elem, f);
}

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
  steps_->push_back(std::move(s));
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
      v.scale == b.scale && v.zero == b.zero_point) {
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
  o.scale = v.scale, o.zero_point = v.zero;
  const auto k = static_cast<std::size_t>(g_.output);
  o.lo = cal_.min[k], o.hi = cal_.max[k];
  o.name = "out";
  o.origin = fmt::format("%{} (graph output)", g_.output);
  p_.output = p_.add_buffer(std::move(o));
  copy_into(nullptr, v, p_.output, 0, packed_strides(v.shape));
}

// ---- float32 mode and training ----

std::int64_t float_bits(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  return static_cast<std::int64_t>(u);
}

View Lowering::constant_f32(const Node& n, std::int64_t id) {
  if (!is_const(id)) fail(n, fmt::format("input {} must be a parameter or constant", ref(id)));
  const Shape& shape = g_.value(id).shape;
  if (auto t = trained_.find(id); t != trained_.end()) {
    return View{t->second.first, 0, shape, packed_strides(shape), Elem::F32, 1.0, 0, {}, {}};
  }
  auto it = f32_consts_.find(id);
  if (it == f32_consts_.end()) it = f32_consts_.emplace(id, tensor_f32(data(id), const_name(id)).buffer).first;
  return View{it->second, 0, shape, packed_strides(shape), Elem::F32, 1.0, 0, {}, {}};
}

View Lowering::tensor_f32(const Tensor& t, const std::string& name) {
  const Tensor d = t.to(Dtype::Float32).contiguous();
  Buffer b;
  b.kind = BufferKind::Weight;
  b.elem = Elem::F32;
  b.fixed_point = false;
  b.size = d.numel();
  for (std::int64_t i = 0; i < d.numel(); ++i) b.data.push_back(float_bits(d.data<float>()[i]));
  b.name = unique_name("w_" + c_name(name));
  b.origin = name;
  const std::int64_t id = p_.add_buffer(std::move(b));
  return View{id, 0, d.shape(), packed_strides(d.shape()), Elem::F32, 1.0, 0, {}, {}};
}

void Lowering::reset_views() {
  std::fill(views_.begin(), views_.end(), std::nullopt);
  views_[static_cast<std::size_t>(g_.input)] = input_view();
}

const Lowering::Saved& Lowering::saved(const Node& n) const {
  const auto it = saved_.find(n.output);
  if (it == saved_.end()) fail(n, "its forward kept nothing for its backward");
  return it->second;
}

void Lowering::train(std::int64_t id, std::int64_t buffer, std::int64_t grad) {
  trained_[id] = {buffer, grad};
  needs_grad_.assign(g_.values.size(), -1);
}

bool Lowering::needs_grad(std::int64_t id) const {
  if (id < 0) return false;
  if (needs_grad_.size() != g_.values.size()) needs_grad_.assign(g_.values.size(), -1);
  auto& memo = needs_grad_[static_cast<std::size_t>(id)];
  if (memo >= 0) return memo != 0;
  bool yes = trained_.count(id) != 0;
  for (const Node& n : g_.nodes) {
    if (yes || n.output != id) continue;
    for (const auto v : n.inputs) yes = yes || needs_grad(v);
  }
  memo = yes ? 1 : 0;
  return yes;
}

const View& Lowering::grad(std::int64_t id) const {
  const auto it = grads_.find(id);
  if (it == grads_.end()) throw ValueError(fmt::format("lower: no gradient of %{} was computed", id));
  return it->second;
}

std::optional<Lowering::GradTarget> Lowering::grad_out(std::int64_t id) {
  if (!needs_grad(id)) return std::nullopt;
  if (auto t = trained_.find(id); t != trained_.end()) {
    const Shape& shape = g_.value(id).shape;
    param_grads_.insert(id);
    return GradTarget{View{t->second.second, 0, shape, packed_strides(shape), p_.buffer(t->second.second).elem, 1.0, 0,
                           {}, {}},
                      true};
  }
  if (auto it = grads_.find(id); it != grads_.end()) return GradTarget{it->second, true};
  View v = new_act(g_.value(id).shape, Elem::F32, Format{}, -1, false);
  Buffer& b = p_.buffer(v.buffer);
  b.name = fmt::format("d{}", id);
  b.origin = fmt::format("the gradient of %{}", id);
  grads_.emplace(id, v);
  return GradTarget{v, false};
}

int Lowering::acc_flags(std::vector<std::optional<GradTarget>*> acts, std::vector<std::optional<GradTarget>*> params) {
  auto group = [this](const std::vector<std::optional<GradTarget>*>& ts) {
    bool any_add = false;
    for (const auto* t : ts) any_add = any_add || (t && *t && (*t)->add);
    if (!any_add) return 0;
    for (auto* t : ts) {
      if (t && *t && !(*t)->add) {
        zero((*t)->view);
        (*t)->add = true;
      }
    }
    return 1;
  };
  return group(acts) | (group(params) << 1);
}

void Lowering::zero(const View& v) {
  step("mt_fill_f32", {Arg::buf(v.buffer, v.offset), Arg::num(numel_of(v.shape)), Arg::real(0.0)});
}

}  // namespace microtorch::lower
