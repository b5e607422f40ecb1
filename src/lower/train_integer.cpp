// train_program in integer mode (train.hpp, Numeric::Integer): training steps with no float
// arithmetic, for cores without an FPU. The forward is the integer inference itself; the
// trained parameters are the weight and bias of the linear layer that computes the output
// and the biases of the linear layers below it, down a chain of linear layers and the relus
// fused into them.
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
// - below the output layer, each input gradient dx = g W (through the relu's mask) has a scale
//   from a bound (see the backward below), the biases' gradients are its column sums;
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
  auto producer = [&graph](std::int64_t value) -> std::int64_t {
    for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
      if (graph.nodes[i].output == value) return static_cast<std::int64_t>(i);
    }
    return -1;
  };
  const std::int64_t last_index = producer(graph.output);
  if (last_index < 0) throw ValueError("train: the graph output is not computed by a node");
  // The chain the backward runs down: the linear layer computing the output, then each linear
  // layer whose output reaches the previous one's input directly or through a relu fused into it.
  std::vector<std::int64_t> chain;  // node indices, from the output down
  std::int64_t stop = last_index;   // the first node the chain cannot pass
  if (graph.nodes[static_cast<std::size_t>(last_index)].op == "linear") {
    chain.push_back(last_index);
    for (;;) {
      const Node& n = graph.nodes[static_cast<std::size_t>(chain.back())];
      const std::int64_t q = producer(n.inputs[0]);
      if (q < 0) {
        stop = -1;
        break;
      }
      const Node& qn = graph.nodes[static_cast<std::size_t>(q)];
      std::int64_t below = -1;
      if (qn.op == "linear") {
        below = q;
      } else if (qn.op == "relu") {
        const std::int64_t r = producer(qn.inputs[0]);
        if (r >= 0 && L.fused_relu(graph.nodes[static_cast<std::size_t>(r)]) == &qn) below = r;
      }
      if (below < 0 || !L.is_const(graph.nodes[static_cast<std::size_t>(below)].inputs[1]) ||
          L.affine_input(graph.nodes[static_cast<std::size_t>(below)])) {
        stop = q;
        break;
      }
      chain.push_back(below);
    }
  }
  auto chain_at = [&](std::int64_t id, bool& is_w) -> std::int64_t {  // the chain index of the layer reading id
    for (std::size_t k = 0; k < chain.size(); ++k) {
      const Node& n = graph.nodes[static_cast<std::size_t>(chain[k])];
      if (n.inputs.size() > 1 && n.inputs[1] == id) return is_w = true, static_cast<std::int64_t>(k);
      if (n.inputs.size() > 2 && n.inputs[2] == id) return is_w = false, static_cast<std::int64_t>(k);
    }
    return -1;
  };
  Training t;
  t.numeric = std::string(numeric_name(Numeric::Integer));
  t.loss = "cross_entropy";
  t.lr = o.lr, t.momentum = o.momentum, t.weight_decay = 0, t.batch = o.batch;
  std::int64_t depth = 0;  // the layers of the chain the backward reaches
  for (const std::string& name : names) {
    const std::int64_t id = parameter_value(graph, name);
    const Value& v = graph.value(id);
    if (!is_floating(v.dtype)) throw ValueError(fmt::format("train: parameter {} is not floating point", name));
    bool is_w = false;
    const std::int64_t k = chain_at(id, is_w);
    if (k < 0) {
      const std::string through = stop >= 0 ? L.line(graph.nodes[static_cast<std::size_t>(stop)]) : "the graph input";
      std::string reader;  // the op that reads the parameter (a conv1d's weight: "conv1d")
      for (const Node& n : graph.nodes) {
        if (reader.empty() && std::find(n.inputs.begin(), n.inputs.end(), id) != n.inputs.end()) reader = n.op;
      }
      throw ValueError(fmt::format(
          "train: {} cannot train in Numeric::Integer: its gradient would flow back through {}, and the integer "
          "backward runs only through linear layers (with constant weights) and the relus fused into them; "
          "Numeric::Float32 trains this parameter of a {}",
          name, through, reader));
    }
    if (is_w && k > 0) {
      throw ValueError(fmt::format(
          "train: {} cannot train in Numeric::Integer: it is the weight of {}, below the output layer; the integer mode "
          "trains the output layer's weight and the biases (Numeric::Float32 trains it)",
          name, L.line(graph.nodes[static_cast<std::size_t>(chain[static_cast<std::size_t>(k)])])));
    }
    depth = std::max(depth, k + 1);
    TrainedParameter tp;
    tp.name = name;
    tp.shape = v.shape;
    tp.grad = state_buffer(p, "g_" + c_name(name), "the gradient of " + name + " (int32)", numel_of(v.shape), Elem::S32);
    if (o.momentum > 0) {
      tp.momentum = state_buffer(p, "m_" + c_name(name), "the momentum of " + name + " (in its master's units)",
                                  numel_of(v.shape), Elem::S32);
    }
    L.train(id, -1, tp.grad);
    t.parameters.push_back(tp);
  }
  chain.resize(static_cast<std::size_t>(depth));
  for (const std::int64_t k : chain) L.mark_int_layer(graph.nodes[static_cast<std::size_t>(k)].output);
  t.loss_value = state_buffer(p, "loss", "the step's mean loss (Q16)", 1, Elem::S32);

  // inference: the forward alone (the trained layers' weights and bias tables in RAM)
  lower_nodes(L);
  L.finish_output();
  std::vector<Lowering::IntLayer> layers;
  for (const std::int64_t k : chain) {
    const Node& n = graph.nodes[static_cast<std::size_t>(k)];
    const Lowering::IntLayer* layer = L.int_layer(n);
    if (!layer) throw ValueError(fmt::format("train: the integer forward of {} made no trained layer", L.line(n)));
    if (p.buffer(layer->weight).rows_in_pair_order) L.fail(n, "integer training through weights in pair order");
    layers.push_back(*layer);
  }
  const Node& last = graph.nodes[static_cast<std::size_t>(last_index)];
  const Lowering::IntLayer& l = layers[0];
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

  // the training step, per sample: the forward keeping the layers' inputs, the loss, the backward
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
  L.step("mt_cross_entropy_" + Lowering::elem_sfx(y.elem),
         {Arg::buf(y.buffer, y.offset), Arg::buf(t.target), Arg::buf(t.loss_value), Arg::buf(g.buffer), Arg::num(rows),
          Arg::num(classes), Arg::num(m_exp.m), Arg::num(m_exp.s), Arg::num(m_loss.m), Arg::num(m_loss.s), Arg::num(gb)},
         rows * classes);
  // Down the chain: each layer's gradients (dW += g^T (x - z_x), db += column sums of g), then
  // its input's gradient for the layer below. Scales from bounds: the loss gradient's rows sum
  // to at most 2 in magnitude; |dx_i| <= (sum_o |g_o|) max |W| (W's format bounds it, growth
  // included), and sum_i |dx_i| <= in max |dx_i| for the next layer down; each dx in int32 with
  // the bits that keep a batch's bias sums below 2^30.
  std::vector<double> gscale;  // the real value of one unit of each layer's output gradient
  double row_sum = 2.0;        // a bound on sum_o |g_o| of the current layer's output gradient
  double scale = std::ldexp(1.0, -gb);
  auto grad_of = [&](std::int64_t id) {
    for (const TrainedParameter& tp : t.parameters) {
      if (parameter_value(graph, tp.name) == id) return tp.grad;
    }
    return std::int64_t{-1};
  };
  for (std::size_t k = 0; k < chain.size(); ++k) {
    const Node& n = graph.nodes[static_cast<std::size_t>(chain[k])];
    const Lowering::IntLayer& lk = layers[k];
    L.begin_node(chain[k]);
    gscale.push_back(scale);
    const Lowering::Saved& saved = L.saved(n);
    const View& x = saved.views[0];
    const std::int64_t gw = grad_of(n.inputs[1]), gbias = n.inputs.size() > 2 ? grad_of(n.inputs[2]) : -1;
    if (gw >= 0 || gbias >= 0) {
      L.step("mt_linear_grad_" + Lowering::elem_sfx(lk.x_elem),
             {Arg::buf(x.buffer, x.offset), Arg::buf(g.buffer), Arg::buf(gw), Arg::buf(gbias), Arg::num(lk.rows),
              Arg::num(lk.in), Arg::num(lk.out), Arg::num(saved.ints[0]), Arg::num(lk.x_zero)},
             lk.rows * lk.out * (gw >= 0 ? lk.in : 1));
    }
    if (k + 1 == chain.size()) break;
    // the input's gradient, through the relu fused into the layer below (if any)
    const Elem wk = p.buffer(lk.weight).elem;
    const double sw_max = *std::max_element(lk.row_scales.begin(), lk.row_scales.end());
    const double bound = row_sum * static_cast<double>(qmax(wk)) * sw_max;  // max |dx_i|
    const int gbits = std::min(15, 30 - bit_length(static_cast<std::uint64_t>(o.batch * lk.rows)));
    const double dx_scale = bound * std::ldexp(1.0, -gbits);
    std::vector<std::int64_t> pre;
    for (const double sw : lk.row_scales) {
      const Multiplier m = multiplier(sw / sw_max);
      pre.push_back(m.m), pre.push_back(m.s);
    }
    const std::int64_t preb = data_s32(p, BufferKind::Weight, "dx_pre_" + c_name(L.const_name(n.inputs[1])),
                                       "the row scales of " + L.const_name(n.inputs[1]) + " over the largest", std::move(pre));
    const Multiplier m = L.rq(scale * sw_max / dx_scale, fmt::format("the input gradient of %{}", n.output));
    View dx = L.new_act({lk.rows, lk.in}, Elem::S32, Format{}, -1, false);
    p.buffer(dx.buffer).name = fmt::format("dx{}", n.output);
    p.buffer(dx.buffer).origin = fmt::format("the gradient of the input of %{} (int32, {:.3g} per unit)", n.output, dx_scale);
    const Node& below = graph.nodes[static_cast<std::size_t>(chain[k + 1])];
    const bool relu = L.fused_relu(below) != nullptr;
    L.step("mt_linear_dx_" + Lowering::elem_sfx(wk),
           {Arg::buf(g.buffer), Arg::buf(lk.weight), Arg::buf(dx.buffer), Arg::num(lk.rows), Arg::num(lk.in),
            Arg::num(lk.out), Arg::buf(preb), Arg::num(m.m), Arg::num(m.s), relu ? Arg::buf(x.buffer, x.offset) : Arg::buf(-1),
            Arg::num(saved.ints[0]), Arg::num(lk.x_zero)},
           lk.rows * lk.in * lk.out);
    g = dx, scale = dx_scale, row_sum = bound * static_cast<double>(lk.in);
  }

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
  const int F = 31 - wbits;
  // each layer's bias master shift: twice the larger of the bias and the output's range, below 2^30
  std::vector<int> Fb;
  for (const Lowering::IntLayer& lk : layers) {
    const Elem wk = p.buffer(lk.weight).elem;
    double bias_bound = 1.0;
    const std::int64_t zsum_bound = std::abs(static_cast<std::int64_t>(lk.x_zero)) * lk.in * qmax(wk);
    for (std::int64_t c = 0; c < lk.out; ++c) {
      const double acc = lk.x_scale * lk.row_scales[static_cast<std::size_t>(c)];
      bias_bound = std::max({bias_bound, 2.0 * std::abs(static_cast<double>(lk.bias_q[static_cast<std::size_t>(c)])),
                             2.0 * (lk.y_hi - lk.y_lo) / acc});
    }
    if (lk.x_elem == Elem::S8) {  // an int32 bias table: the bias and its zero-point term within int32
      bias_bound = std::min(bias_bound, (2147483647.0 - static_cast<double>(zsum_bound)) / 2);
    }
    Fb.push_back(30 - bit_length(static_cast<std::uint64_t>(std::ceil(bias_bound))));
  }
  std::vector<std::int64_t> master_w(chain.size(), -1), master_b(chain.size(), -1);
  for (TrainedParameter& tp : t.parameters) {
    bool is_w = false;
    const auto k = static_cast<std::size_t>(chain_at(parameter_value(graph, tp.name), is_w));
    const Lowering::IntLayer& lk = layers[k];
    const Elem wk = p.buffer(lk.weight).elem;
    const double step_scale = o.lr * gscale[k] / static_cast<double>(o.batch);
    const std::int64_t n = p.buffer(tp.grad).size;
    std::vector<std::int64_t> data, rq;
    std::int64_t lo = 0, hi = 0;
    if (is_w) {
      for (const auto q : p.buffer(lk.weight).data) data.push_back(q * (std::int64_t{1} << F));
      lo = qmin(wk) * (std::int64_t{1} << F), hi = qmax(wk) * (std::int64_t{1} << F);
    } else {
      lo = -(std::int64_t{1} << 30), hi = std::int64_t{1} << 30;
      for (const auto q : lk.bias_q) data.push_back(std::clamp(shifted(q, -Fb[k]), lo, hi));
    }
    for (std::int64_t c = 0; c < lk.out; ++c) {
      const double sw = lk.row_scales[static_cast<std::size_t>(c)];
      const double ratio = is_w ? step_scale * lk.x_scale * std::ldexp(1.0, F) / sw
                                : step_scale * std::ldexp(1.0, Fb[k]) / (lk.x_scale * sw);
      const Multiplier m = L.rq(ratio, fmt::format("the SGD step of {}", tp.name));
      rq.push_back(m.m), rq.push_back(m.s);
      tp.scales.push_back(is_w ? sw * std::ldexp(1.0, -F) : lk.x_scale * sw * std::ldexp(1.0, -Fb[k]));
    }
    tp.master = data_s32(p, BufferKind::Parameter, "master_" + c_name(tp.name),
                         fmt::format("the int32 master of {} (its real value: master times the row's scale)", tp.name),
                         std::move(data));
    tp.buffer = is_w ? lk.weight : lk.bias;
    (is_w ? master_w : master_b)[k] = tp.master;
    const std::int64_t rqb = data_s32(p, BufferKind::Weight, "sgd_" + c_name(tp.name),
                                      "the SGD step's multiplier per row of " + tp.name, std::move(rq));
    L.step("mt_sgd_s32", {Arg::buf(tp.master), Arg::buf(tp.grad), Arg::buf(tp.momentum), Arg::num(n), Arg::num(n / lk.out),
                          Arg::buf(rqb), Arg::num(mu.m), Arg::num(mu.s), Arg::num(lo), Arg::num(hi)},
           n);
  }
  // the forward's integers from the masters (and the bias tables' initial values as the kernel computes them)
  L.emit_into(&t.derive);
  for (std::size_t k = 0; k < chain.size(); ++k) {
    const Node& n = graph.nodes[static_cast<std::size_t>(chain[k])];
    const Lowering::IntLayer& lk = layers[k];
    const std::string esfx = Lowering::elem_sfx(p.buffer(lk.weight).elem);
    const bool trains_b = master_b[k] >= 0;
    if (master_w[k] >= 0) {
      L.step("mt_master_" + esfx, {Arg::buf(master_w[k]), Arg::buf(lk.weight), Arg::num(p.buffer(lk.weight).size), Arg::num(F)});
    }
    if (lk.bias < 0 || (master_w[k] < 0 && !trains_b)) continue;
    const bool has_bias = n.inputs.size() > 2 && n.inputs[2] >= 0;
    int shift = Fb[k];
    std::int64_t src = master_b[k];
    if (!trains_b && has_bias) {  // a fixed bias: its values in the accumulator's scale, in flash
      src = data_s32(p, BufferKind::Weight, "b0_" + c_name(graph.value(n.inputs[2]).name),
                     "the fixed bias in the accumulator's scale", lk.bias_q);
      shift = 0;
    }
    const std::vector<std::int64_t> from = src >= 0 ? p.buffer(src).data : std::vector<std::int64_t>{};
    const std::vector<std::int64_t> weights = p.buffer(lk.weight).data;
    std::vector<std::int64_t>& table = p.buffer(lk.bias).data;
    for (std::int64_t c = 0; c < lk.out; ++c) {
      std::int64_t zsum = 0;
      for (std::int64_t j = 0; j < lk.in; ++j) zsum += weights[static_cast<std::size_t>(c * lk.in + j)];
      table[static_cast<std::size_t>(c)] = (src >= 0 ? shifted(from[static_cast<std::size_t>(c)], shift) : 0) - zsum * lk.x_zero;
    }
    L.step("mt_linear_bias_" + esfx, {Arg::buf(src), Arg::buf(lk.weight), Arg::buf(lk.bias), Arg::num(lk.in),
                                      Arg::num(lk.out), Arg::num(shift), Arg::num(lk.x_zero)});
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
