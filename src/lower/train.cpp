// train_program (train.hpp): a Program with a training step. The forward of the step is the
// rules' forward in a training mode that keeps what each backward reads; the loss writes the
// output's gradient; the backward walks the nodes in reverse, pruned to those a trained
// parameter reaches, and each rule's backward adds its inputs' gradients; the update is
// torch.optim.SGD on each trained parameter.
#include "microtorch/lower/train.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lowering.hpp"
#include "microtorch/error.hpp"
#include "microtorch/nearest_name.hpp"
#include "rules.hpp"
#include "train_integer.hpp"

namespace microtorch::lower {

std::string_view numeric_name(Numeric n) { return n == Numeric::Float32 ? "float32" : "integer"; }

namespace {

// `text` matched by `pattern`, where `*` stands for any run of characters.
bool glob_match(const std::string& pattern, const std::string& text) {
  std::size_t p = 0, t = 0, star = std::string::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == text[t])) {
      ++p, ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++, mark = t;
    } else if (star != std::string::npos) {
      p = star + 1, t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// " (did you mean x?)" for the name of `all` nearest `entry`.
std::string did_you_mean(const std::string& entry, const std::vector<std::string>& all) {
  const std::string best = nearest_name(entry, all);
  return best.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", best);
}

// The parameter read as input `k` of `n`, or "".
std::string parameter_input(const Graph& g, const Node& n, std::size_t k) {
  if (k >= n.inputs.size() || n.inputs[k] < 0) return "";
  const Value& v = g.value(n.inputs[k]);
  return v.kind == ValueKind::Parameter ? v.name : "";
}


// Is parameter `name` the running mean or variance of a batch_norm (inputs 1, 2)?
bool running_statistic(const Graph& g, const std::string& name) {
  return std::any_of(g.nodes.begin(), g.nodes.end(), [&](const Node& n) {
    return n.op == "batch_norm" && (parameter_input(g, n, 1) == name || parameter_input(g, n, 2) == name);
  });
}

}  // namespace

std::int64_t parameter_value(const Graph& g, const std::string& name) {
  for (const Value& v : g.values) {
    if (v.kind == ValueKind::Parameter && v.name == name) return v.id;
  }
  return -1;
}

std::int64_t state_buffer(Program& p, const std::string& name, const std::string& origin, std::int64_t size, Elem elem) {
  Buffer b;
  b.kind = BufferKind::State;
  b.elem = elem;
  b.fixed_point = false;
  b.size = size;
  b.name = name;
  b.origin = origin;
  return p.add_buffer(std::move(b));
}

std::vector<std::string> trained_parameters(const Graph& graph, const TrainOptions& options) {
  std::vector<std::string> all;
  for (const Value& v : graph.values) {
    if (v.kind == ValueKind::Parameter) all.push_back(v.name);
  }
  std::vector<std::string> picked;
  auto pick = [&picked](const std::string& name) {
    if (!name.empty() && std::find(picked.begin(), picked.end(), name) == picked.end()) picked.push_back(name);
  };
  if (options.parameters.empty()) {  // the last linear layer's weight and bias
    for (auto it = graph.nodes.rbegin(); it != graph.nodes.rend() && picked.empty(); ++it) {
      const OpRule* rule = find_rule(it->op);
      if (rule && rule->weight_input >= 0 && !parameter_input(graph, *it, static_cast<std::size_t>(rule->weight_input)).empty()) {
        pick(parameter_input(graph, *it, static_cast<std::size_t>(rule->weight_input)));
        pick(parameter_input(graph, *it, 2));
      }
    }
    if (picked.empty()) throw ValueError("train: the graph has no linear layer with a parameter weight to train by default; "
                                         "name the parameters (TrainOptions::parameters)");
  }
  for (const std::string& entry : options.parameters) {
    const std::size_t before = picked.size();
    if (entry == "@biases") {
      for (const std::string& name : all) {
        if (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0) pick(name);
      }
    } else if (entry == "@layer_norms") {
      for (const Node& n : graph.nodes) {
        if (n.op == "layer_norm") pick(parameter_input(graph, n, 1)), pick(parameter_input(graph, n, 2));
      }
    } else {
      // a pattern leaves out the running statistics of a batch_norm (frozen on the device)
      const bool pattern = entry.find('*') != std::string::npos;
      for (const std::string& name : all) {
        if (glob_match(entry, name) && !(pattern && running_statistic(graph, name))) pick(name);
      }
    }
    if (picked.size() == before && std::none_of(all.begin(), all.end(), [&](const std::string& n) {
          return glob_match(entry, n);
        })) {
      throw ValueError(fmt::format("train: \"{}\" selects no parameter of the graph{}; its parameters are: {} (or use "
                                   "\"@biases\", \"@layer_norms\", or a pattern with *)",
                                   entry, did_you_mean(entry, all), fmt::join(all, ", ")));
    }
  }
  // in the graph's order, which is the blob's
  std::vector<std::string> ordered;
  for (const std::string& name : all) {
    if (std::find(picked.begin(), picked.end(), name) != picked.end()) ordered.push_back(name);
  }
  return ordered;
}

namespace {

std::int64_t float_bits_of(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  return static_cast<std::int64_t>(u);
}


// Where the loss writes the output's gradient.
Lowering::GradTarget output_grad(Lowering& L) {
  auto dy = L.grad_out(L.graph().output);
  if (!dy) throw ValueError("train: the output does not depend on any trained parameter");
  return *dy;
}

// The loss of the output and its gradient (the backward's start), per sample.
void lower_loss(Lowering& L, Training& t, const TrainOptions& o) {
  const Graph& g = L.graph();
  const Value& out = g.value(g.output);
  if (!L.has_view(g.output) || g.output == g.input) throw ValueError("train: the graph output does not depend on the input");
  const Node* last = nullptr;
  for (const Node& n : g.nodes) {
    if (n.output == g.output) last = &n;
  }
  const View y = L.packed(*last, L.act(*last, g.output));
  Program& p = L.program();
  Buffer tb;
  tb.kind = BufferKind::Target;
  tb.fixed_point = false;
  tb.name = "target";
  View loss = L.new_act({1}, Elem::F32, Format{}, -1, false);
  p.buffer(loss.buffer).origin = "the loss of one sample";
  const std::int64_t count = numel_of(out.shape);
  if (o.loss == LossKind::CrossEntropy) {
    if (out.shape.empty() || out.shape.back() < 1) {
      throw ValueError(fmt::format("train: cross entropy needs logits [.., C] as the output; the output is {}",
                                   shape_str(out.shape)));
    }
    const std::int64_t classes = out.shape.back(), rows = count / classes;
    tb.elem = Elem::S32, tb.size = rows;
    tb.origin = fmt::format("the class index of each of the {} rows of the output", rows);
    t.target = p.add_buffer(std::move(tb));
    auto dy = output_grad(L);
    L.step("mt_cross_entropy_f32", {Arg::buf(y.buffer, y.offset), Arg::buf(t.target), Arg::buf(loss.buffer),
                                    Arg::buf(dy.view.buffer, dy.view.offset), Arg::num(rows), Arg::num(classes)},
           count);
  } else {
    tb.elem = Elem::F32, tb.size = count;
    tb.origin = fmt::format("the target values, the output's shape {}", shape_str(out.shape));
    t.target = p.add_buffer(std::move(tb));
    auto dy = output_grad(L);
    L.step("mt_mse_f32", {Arg::buf(y.buffer, y.offset), Arg::buf(t.target), Arg::buf(loss.buffer),
                          Arg::buf(dy.view.buffer, dy.view.offset), Arg::num(count)},
           count);
  }
  // the step's loss: the sum of its samples' (averaged in the update)
  L.step("mt_add_f32", {Arg::buf(t.loss_value), Arg::buf(loss.buffer), Arg::buf(t.loss_value), Arg::num(1), Arg::num(1),
                        Arg::real(1.0), Arg::real(1.0)});
}

}  // namespace

Program train_program(const Graph& graph, const Calibration& calibration, const QuantOptions& quantize,
                      const TrainOptions& options) {
  graph.validate();
  if (options.batch < 1) throw ValueError(fmt::format("train: the batch must be 1 or more samples, got {}", options.batch));
  if (!(options.lr > 0)) throw ValueError(fmt::format("train: the learning rate must be positive, got {}", options.lr));
  if (!(options.momentum >= 0 && options.momentum < 1)) {
    throw ValueError(fmt::format("train: the momentum must be in [0, 1), got {}", options.momentum));
  }
  if (!(options.weight_decay >= 0)) {
    throw ValueError(fmt::format("train: the weight decay must be 0 or more, got {}", options.weight_decay));
  }
  const std::vector<std::string> names = trained_parameters(graph, options);
  if (options.numeric == Numeric::Integer) return train_program_integer(graph, calibration, quantize, options, names);
  Lowering L(graph, calibration, quantize, /*float32=*/true);
  Program& p = L.program();
  Training t;
  t.numeric = std::string(numeric_name(options.numeric));
  t.loss = options.loss == LossKind::CrossEntropy ? "cross_entropy" : "mse";
  t.lr = options.lr, t.momentum = options.momentum, t.weight_decay = options.weight_decay, t.batch = options.batch;
  // the trained parameters: RAM copies, gradients, momentum
  for (const std::string& name : names) {
    const std::int64_t id = parameter_value(graph, name);
    const Value& v = graph.value(id);
    if (!is_floating(v.dtype)) throw ValueError(fmt::format("train: parameter {} is not floating point", name));
    TrainedParameter tp;
    tp.name = name;
    tp.shape = v.shape;
    const Tensor d = v.data.to(Dtype::Float32).contiguous();
    Buffer b;
    b.kind = BufferKind::Parameter;
    b.elem = Elem::F32;
    b.fixed_point = false;
    b.size = d.numel();
    for (std::int64_t i = 0; i < d.numel(); ++i) b.data.push_back(float_bits_of(d.data<float>()[i]));
    b.name = "p_" + c_name(name);
    b.origin = name + " (trained)";
    tp.buffer = p.add_buffer(std::move(b));
    tp.grad = state_buffer(p, "g_" + c_name(name), "the gradient of " + name, d.numel(), Elem::F32);
    if (options.momentum > 0) tp.momentum = state_buffer(p, "m_" + c_name(name), "the momentum of " + name, d.numel(), Elem::F32);
    L.train(id, tp.buffer, tp.grad);
    t.parameters.push_back(tp);
  }
  t.loss_value = state_buffer(p, "loss", "the step's mean loss", 1, Elem::F32);

  // inference: the forward alone
  lower_nodes(L);
  L.finish_output();

  // the training step, per sample: the forward keeping what the backward reads, the loss, the backward
  L.reset_views();
  L.set_training(true);
  L.emit_into(&t.sample);
  lower_nodes(L);
  L.begin_node(-1);
  lower_loss(L, t, options);
  for (std::size_t i = graph.nodes.size(); i-- > 0;) {
    const Node& n = graph.nodes[i];
    if (!L.has_grad(n.output) || L.absorbed(i)) continue;
    if (std::none_of(n.inputs.begin(), n.inputs.end(), [&L](std::int64_t v) { return L.needs_grad(v); })) continue;
    L.begin_node(static_cast<std::int64_t>(i));
    const OpRule* rule = find_rule(n.op);
    if (!rule || !rule->backward_f32) L.fail(n, fmt::format("the gradient of {} is not lowered, so the parameters before it cannot train; "
                                                               "train only parameters after it (TrainOptions::parameters)",
                                                               n.op));
    rule->backward_f32(L, n);
  }
  for (const TrainedParameter& tp : t.parameters) {
    if (!L.has_grad(parameter_value(graph, tp.name))) {
      throw ValueError(fmt::format("train: the output does not depend on parameter {}, so it cannot train", tp.name));
    }
  }
  // once per step: zero the gradients and the loss; then average and update
  L.begin_node(-1);
  L.emit_into(&t.zero);
  for (const TrainedParameter& tp : t.parameters) {
    L.step("mt_fill_f32", {Arg::buf(tp.grad), Arg::num(p.buffer(tp.grad).size), Arg::real(0.0)});
  }
  L.step("mt_fill_f32", {Arg::buf(t.loss_value), Arg::num(1), Arg::real(0.0)});
  L.emit_into(&t.update);
  const double inv = 1.0 / static_cast<double>(options.batch);
  if (options.batch > 1) {
    L.step("mt_add_f32", {Arg::buf(t.loss_value), Arg::buf(-1), Arg::buf(t.loss_value), Arg::num(1), Arg::num(1),
                          Arg::real(inv), Arg::real(0.0)});
  }
  for (const TrainedParameter& tp : t.parameters) {
    const std::int64_t size = p.buffer(tp.buffer).size;
    if (options.batch > 1) {
      L.step("mt_add_f32", {Arg::buf(tp.grad), Arg::buf(-1), Arg::buf(tp.grad), Arg::num(size), Arg::num(size),
                            Arg::real(inv), Arg::real(0.0)});
    }
    L.step("mt_sgd_f32", {Arg::buf(tp.buffer), Arg::buf(tp.grad), Arg::buf(tp.momentum), Arg::num(size),
                          Arg::real(options.lr), Arg::real(options.momentum), Arg::real(options.weight_decay)},
           size);
  }
  for (const TrainedParameter& tp : t.parameters) {
    t.state_bytes += p.buffer(tp.buffer).bytes() + p.buffer(tp.grad).bytes() +
                     (tp.momentum >= 0 ? p.buffer(tp.momentum).bytes() : 0);
  }
  Program out = std::move(p);
  out.training = std::move(t);
  plan_memory(out);
  return out;
}

}  // namespace microtorch::lower
