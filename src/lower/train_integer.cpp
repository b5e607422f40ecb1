// train_program in integer mode (train.hpp, Numeric::Integer): training steps with no float
// arithmetic, for cores without an FPU. The forward is the integer inference itself; the
// trained parameters are the weight and bias of the linear layer that computes the output.
//
// Every scale is fixed here, from the formats the forward already has:
// - the loss gradient g = (softmax(y) - onehot(t)) / rows is in [-1, 1], so it is held in
//   Q gb (int32), gb = min(15, 30 - bits(x - z_x) - bits(batch)): the weight gradient's int32
//   sums of g (x - z_x) over the batch then stay below 2^30 (an int32 accumulator cannot
//   overflow); fewer than 6 bits left is the named overflow error;
// - the masters: W's int32 copy in W_q's scale times 2^-F, F = 31 - bits(W_q) (|master| <=
//   2^30; W_q = round(master 2^-F) after each step: 23 fraction bits under an int8 weight's
//   LSB, 15 under an int16's); the bias's int32 copy in the accumulator's scale
//   (scale_x scale_w[c]) times 2^-Fb, Fb fixed so that twice the larger of the bias and the
//   output's range fits below 2^30;
// - the SGD step in the master's units: W -= round(lr g_sum 2^-gb scale_x 2^F / (batch
//   scale_w[c])) per row (one multiplier per row, rounded to nearest), the bias's alike; with
//   momentum v = momentum v + that (torch.optim.SGD's m scaled by lr: the same step).
#include "train_integer.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "lowering.hpp"
#include "microtorch/error.hpp"
#include "rules.hpp"

namespace microtorch::lower {

namespace {

int bit_length(std::uint64_t v) {
  int b = 0;
  while (v) ++b, v >>= 1;
  return b;
}

std::int64_t value_of(const Graph& g, const std::string& name) {
  for (const Value& v : g.values) {
    if (v.kind == ValueKind::Parameter && v.name == name) return v.id;
  }
  return -1;
}

// A zeroed int32 RAM buffer of the training state.
std::int64_t state_s32(Program& p, const std::string& name, const std::string& origin, std::int64_t size) {
  Buffer b;
  b.kind = BufferKind::State;
  b.elem = Elem::S32;
  b.fixed_point = false;
  b.size = size;
  b.name = name;
  b.origin = origin;
  return p.add_buffer(std::move(b));
}

// An int32 buffer with data: a RAM master (Parameter) or a flash table (Weight).
std::int64_t data_s32(Program& p, BufferKind kind, const std::string& name, const std::string& origin,
                      std::vector<std::int64_t> data) {
  Buffer b;
  b.kind = kind;
  b.elem = Elem::S32;
  b.fixed_point = false;
  b.size = static_cast<std::int64_t>(data.size());
  b.data = std::move(data);
  b.name = name;
  b.origin = origin;
  return p.add_buffer(std::move(b));
}

// round(v 2^-shift) as mt_master_value computes it (ties away from zero; shift < 0 exact).
std::int64_t shifted(std::int64_t v, int shift) {
  if (shift <= 0) return v * (std::int64_t{1} << -shift);
  return static_cast<std::int64_t>(std::llround(std::ldexp(static_cast<double>(v), -shift)));
}

}  // namespace

Program train_program_integer(const Graph& graph, const Calibration& calibration, const QuantOptions& quantize,
                              const TrainOptions& o, const std::vector<std::string>& names) {
  if (o.weight_decay != 0) {
    throw ValueError("train: Numeric::Integer has no weight decay (set it to 0); Numeric::Float32 has it");
  }
  if (o.loss != LossKind::CrossEntropy) {
    throw ValueError("train: Numeric::Integer trains with the cross entropy loss (LossKind::CrossEntropy); the MSE loss "
                     "trains in Numeric::Float32");
  }
  Lowering L(graph, calibration, quantize, /*float32=*/false);
  Program& p = L.program();
  // the layer that computes the output
  std::int64_t last_index = -1;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    if (graph.nodes[i].output == graph.output) last_index = static_cast<std::int64_t>(i);
  }
  if (last_index < 0) throw ValueError("train: the graph output is not computed by a node");
  const Node& last = graph.nodes[static_cast<std::size_t>(last_index)];
  const bool linear_last = last.op == "linear";
  Training t;
  t.numeric = std::string(numeric_name(Numeric::Integer));
  t.loss = "cross_entropy";
  t.lr = o.lr, t.momentum = o.momentum, t.weight_decay = 0, t.batch = o.batch;
  bool trains_w = false, trains_b = false;
  for (const std::string& name : names) {
    const std::int64_t id = value_of(graph, name);
    const Value& v = graph.value(id);
    if (!is_floating(v.dtype)) throw ValueError(fmt::format("train: parameter {} is not floating point", name));
    const bool is_w = linear_last && last.inputs.size() > 1 && last.inputs[1] == id;
    const bool is_b = linear_last && last.inputs.size() > 2 && last.inputs[2] == id;
    if (!is_w && !is_b) {
      throw ValueError(fmt::format(
          "train: {} cannot train in Numeric::Integer: its gradient would flow back through {} (the node computing the "
          "output), and the integer backward reaches only the weight and bias of a linear layer that computes the "
          "output; Numeric::Float32 trains it",
          name, L.line(last)));
    }
    trains_w = trains_w || is_w, trains_b = trains_b || is_b;
    TrainedParameter tp;
    tp.name = name;
    tp.shape = v.shape;
    tp.grad = state_s32(p, "g_" + c_name(name), "the gradient of " + name + " (int32, Q gb times the input's scale)",
                        numel_of(v.shape));
    if (o.momentum > 0) {
      tp.momentum = state_s32(p, "m_" + c_name(name), "the momentum of " + name + " (in its master's units)",
                              numel_of(v.shape));
    }
    L.train(id, -1, tp.grad);
    t.parameters.push_back(tp);
  }
  t.loss_value = state_s32(p, "loss", "the step's mean loss (Q16)", 1);

  // inference: the forward alone (the trained layer's weights and bias table in RAM)
  lower_nodes(L);
  L.finish_output();
  const Lowering::IntLayer* layer = L.int_layer(last);
  if (!layer) throw ValueError(fmt::format("train: the integer forward of {} made no trained layer", L.line(last)));
  const Lowering::IntLayer l = *layer;
  const Elem we = p.buffer(l.weight).elem;
  const int wbits = elem_bytes(we) * 8, xbits = elem_bytes(l.x_elem) * 8;
  const std::int64_t classes = l.out;
  if (classes >= 2048) L.fail(last, fmt::format("integer cross entropy takes fewer than 2048 classes, got {}", classes));
  // the gradient's fraction bits: batch x 2^gb x 2^xbits below 2^30
  const int gb = std::min(15, 30 - xbits - bit_length(static_cast<std::uint64_t>(o.batch)));
  if (gb < 6) {
    throw ValueError(fmt::format(
        "train: an integer training step would overflow: the weight gradient of {} sums {} samples of the loss "
        "gradient times the {}-bit input in int32, which leaves the gradient {} fraction bits (6 needed); use a "
        "smaller batch, 8-bit activations, or Numeric::Float32",
        L.line(last), o.batch, xbits, gb));
  }

  // the training step, per sample: the forward keeping the layer's input, the loss, the backward
  L.reset_views();
  L.set_training(true);
  L.emit_into(&t.sample);
  lower_nodes(L);
  L.begin_node(-1);
  const View y = L.packed(last, L.act(last, graph.output));
  const std::int64_t rows = numel_of(y.shape) / classes;
  {
    Buffer tb;
    tb.kind = BufferKind::Target;
    tb.fixed_point = false;
    tb.name = "target";
    tb.elem = Elem::S32, tb.size = rows;
    tb.origin = fmt::format("the class index of each of the {} rows of the output", rows);
    t.target = p.add_buffer(std::move(tb));
  }
  View g = L.new_act(y.shape, Elem::S32, Format{}, -1, false);
  p.buffer(g.buffer).name = "dy";
  p.buffer(g.buffer).origin = fmt::format("the gradient of the logits (int32, Q{})", gb);
  const Multiplier m_exp = L.rq(y.scale * 1.4426950408889634 * 65536.0, "the cross entropy's exponent");
  const Multiplier m_loss = L.rq(y.scale * 65536.0, "the cross entropy's loss");
  const std::string sfx = Lowering::elem_sfx(y.elem);
  L.step("mt_cross_entropy_" + sfx,
         {Arg::buf(y.buffer, y.offset), Arg::buf(t.target), Arg::buf(t.loss_value), Arg::buf(g.buffer), Arg::num(rows),
          Arg::num(classes), Arg::num(m_exp.m), Arg::num(m_exp.s), Arg::num(m_loss.m), Arg::num(m_loss.s), Arg::num(gb)},
         rows * classes);
  L.set_grad(graph.output, g);
  // the backward of the layer: dW += g^T (x - z_x), db += column sums of g
  L.begin_node(last_index);
  const Lowering::Saved& saved = L.saved(last);
  const View& x = saved.views[0];
  std::int64_t gw = -1, gbias = -1;
  for (const TrainedParameter& tp : t.parameters) {
    (last.inputs[1] == value_of(graph, tp.name) ? gw : gbias) = tp.grad;
  }
  L.step("mt_linear_grad_" + Lowering::elem_sfx(l.x_elem),
         {Arg::buf(x.buffer, x.offset), Arg::buf(g.buffer), Arg::buf(gw), Arg::buf(gbias), Arg::num(l.rows), Arg::num(l.in),
          Arg::num(l.out), Arg::num(saved.ints[0]), Arg::num(l.x_zero)},
         l.rows * l.in * l.out);

  // once per step: zero the gradients and the loss; then average the loss, update, re-derive
  L.begin_node(-1);
  L.emit_into(&t.zero);
  for (const TrainedParameter& tp : t.parameters) {
    L.step("mt_fill_s32", {Arg::buf(tp.grad), Arg::num(p.buffer(tp.grad).size), Arg::num(0)});
  }
  L.step("mt_fill_s32", {Arg::buf(t.loss_value), Arg::num(1), Arg::num(0)});
  L.emit_into(&t.update);
  if (o.batch > 1) {
    const Multiplier avg = multiplier(1.0 / static_cast<double>(o.batch));
    L.step("mt_scale_s32", {Arg::buf(t.loss_value), Arg::num(1), Arg::num(avg.m), Arg::num(avg.s)});
  }
  const Multiplier mu = multiplier(o.momentum);
  const double step_scale = o.lr * std::ldexp(1.0, -gb) / static_cast<double>(o.batch);
  const int F = 31 - wbits;
  // the bias master's shift: twice the larger of the bias and the output's range, below 2^30
  double bias_bound = 1.0;
  const std::int64_t zsum_bound = std::abs(static_cast<std::int64_t>(l.x_zero)) * l.in * qmax(we);
  for (std::int64_t c = 0; c < l.out; ++c) {
    const double acc = l.x_scale * l.row_scales[static_cast<std::size_t>(c)];
    bias_bound = std::max({bias_bound, 2.0 * std::abs(static_cast<double>(l.bias_q[static_cast<std::size_t>(c)])),
                           2.0 * (l.y_hi - l.y_lo) / acc});
  }
  if (l.x_elem == Elem::S8) {  // an int32 bias table: the bias and its zero-point term within int32
    bias_bound = std::min(bias_bound, (2147483647.0 - static_cast<double>(zsum_bound)) / 2);
  }
  const int Fb = 30 - bit_length(static_cast<std::uint64_t>(std::ceil(bias_bound)));
  std::int64_t master_w = -1, master_b = -1;
  for (TrainedParameter& tp : t.parameters) {
    const bool is_w = last.inputs[1] == value_of(graph, tp.name);
    const std::int64_t n = p.buffer(tp.grad).size;
    std::vector<std::int64_t> data, rq;
    std::int64_t lo = 0, hi = 0;
    if (is_w) {
      const Buffer& wq = p.buffer(l.weight);
      for (const auto q : wq.data) data.push_back(q * (std::int64_t{1} << F));
      lo = qmin(we) * (std::int64_t{1} << F), hi = qmax(we) * (std::int64_t{1} << F);
    } else {
      for (const auto q : l.bias_q) data.push_back(shifted(q, -Fb));
      lo = -(std::int64_t{1} << 30), hi = std::int64_t{1} << 30;
      for (auto& d : data) d = std::clamp(d, lo, hi);
    }
    for (std::int64_t c = 0; c < l.out; ++c) {
      const double sw = l.row_scales[static_cast<std::size_t>(c)];
      const double ratio = is_w ? step_scale * l.x_scale * std::ldexp(1.0, F) / sw
                                : step_scale * std::ldexp(1.0, Fb) / (l.x_scale * sw);
      const Multiplier m = L.rq(ratio, fmt::format("the SGD step of {}", tp.name));
      rq.push_back(m.m), rq.push_back(m.s);
      tp.scales.push_back(is_w ? sw * std::ldexp(1.0, -F) : l.x_scale * sw * std::ldexp(1.0, -Fb));
    }
    tp.master = data_s32(p, BufferKind::Parameter, "master_" + c_name(tp.name),
                         fmt::format("the int32 master of {} (its real value: master times the row's scale)", tp.name),
                         std::move(data));
    tp.buffer = is_w ? l.weight : l.bias;
    (is_w ? master_w : master_b) = tp.master;
    const std::int64_t rqb =
        data_s32(p, BufferKind::Weight, "sgd_" + c_name(tp.name), "the SGD step's multiplier per row of " + tp.name, std::move(rq));
    L.step("mt_sgd_s32", {Arg::buf(tp.master), Arg::buf(tp.grad), Arg::buf(tp.momentum), Arg::num(n), Arg::num(n / l.out),
                          Arg::buf(rqb), Arg::num(mu.m), Arg::num(mu.s), Arg::num(lo), Arg::num(hi)},
           n);
  }
  // the forward's integers from the masters (and the bias table's initial values as the kernel computes them)
  const std::string esfx = Lowering::elem_sfx(we);
  const auto weights = p.buffer(l.weight).data;
  L.emit_into(&t.derive);
  if (trains_w) {
    L.step("mt_master_" + esfx, {Arg::buf(master_w), Arg::buf(l.weight), Arg::num(p.buffer(l.weight).size), Arg::num(F)});
  }
  if (l.bias >= 0) {
    const bool has_bias = last.inputs.size() > 2 && last.inputs[2] >= 0;
    int shift = Fb;
    std::int64_t src = master_b;
    std::vector<std::int64_t> from;  // the bias master's values
    if (!trains_b && has_bias) {  // a fixed bias: its values in the accumulator's scale, in flash
      src = data_s32(p, BufferKind::Weight, "b0_" + c_name(graph.value(last.inputs[2]).name),
                     "the fixed bias in the accumulator's scale", l.bias_q);
      shift = 0;
    }
    if (src >= 0) from = p.buffer(src).data;
    std::vector<std::int64_t>& table = p.buffer(l.bias).data;
    for (std::int64_t c = 0; c < l.out; ++c) {
      std::int64_t zsum = 0;
      for (std::int64_t j = 0; j < l.in; ++j) zsum += weights[static_cast<std::size_t>(c * l.in + j)];
      table[static_cast<std::size_t>(c)] = (src >= 0 ? shifted(from[static_cast<std::size_t>(c)], shift) : 0) - zsum * l.x_zero;
    }
    if (trains_w || trains_b) {
      L.step("mt_linear_bias_" + esfx, {Arg::buf(src), Arg::buf(l.weight), Arg::buf(l.bias), Arg::num(l.in), Arg::num(l.out),
                                        Arg::num(shift), Arg::num(l.x_zero)});
    }
  }
  t.update.insert(t.update.end(), t.derive.begin(), t.derive.end());
  for (const TrainedParameter& tp : t.parameters) {
    t.state_bytes += p.buffer(tp.master).bytes() + p.buffer(tp.buffer).bytes() + p.buffer(tp.grad).bytes() +
                     (tp.momentum >= 0 ? p.buffer(tp.momentum).bytes() : 0);
  }
  Program out = std::move(p);
  out.training = std::move(t);
  plan_memory(out);
  return out;
}

}  // namespace microtorch::lower
