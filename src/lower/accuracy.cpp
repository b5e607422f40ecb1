// measure / layer_report (accuracy.hpp): the float graph and the simulated program side by
// side on evaluation data, output by output and value by value.
#include "microtorch/lower/accuracy.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "microtorch/error.hpp"
#include "microtorch/lower/simulate.hpp"
#include "microtorch/ops.hpp"
#include "module_path.hpp"

namespace microtorch::lower {

namespace {

std::string node_label(const Graph& g, const Node& n) {
  std::string args;
  for (const auto i : n.inputs) {
    if (!args.empty()) args += ", ";
    if (i < 0) {
      args += "_";
    } else {
      const Value& v = g.value(i);
      args += v.kind == ValueKind::Parameter ? v.name : fmt::format("%{}", i);
    }
  }
  return fmt::format("%{} = {}({})", n.output, n.op, args);
}

// The outputs' side of Accuracy, sample by sample.
struct OutputTally {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  std::int64_t agree = 0, rows = 0;
  void add(Accuracy& a, const Tensor& yf, const Tensor& yq) {
    if (yf.is_floating_point()) {
      const Tensor d = yf.to(Dtype::Float64).contiguous(), q = yq.to(Dtype::Float64).contiguous();
      for (std::int64_t i = 0; i < d.numel(); ++i) {
        a.max_abs_error = std::max(a.max_abs_error, std::abs(d.data<double>()[i] - q.data<double>()[i]));
        lo = std::min(lo, d.data<double>()[i]), hi = std::max(hi, d.data<double>()[i]);
      }
      if (yf.dim() > 0 && yf.numel() > 0) {
        const Tensor same = eq(argmax(yf, -1), argmax(yq, -1));
        agree += static_cast<std::int64_t>(sum(same).item<double>());
        rows += same.numel();
      }
    } else {  // integer outputs (argmax): agreement is equality
      const Tensor same = eq(yf, yq);
      agree += static_cast<std::int64_t>(sum(same).item<double>());
      rows += same.numel();
    }
  }
  void finish(Accuracy& a) const {
    a.output_range = hi > lo ? hi - lo : 0.0;
    a.agreement = rows ? static_cast<double>(agree) / static_cast<double>(rows) : 1.0;
  }
};

}  // namespace

Accuracy measure_outputs(const Program& program, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& float_outputs) {
  if (inputs.size() != float_outputs.size()) {
    throw ValueError(fmt::format("lower::measure_outputs: {} inputs but {} float outputs", inputs.size(),
                                 float_outputs.size()));
  }
  Simulator sim(program);
  Accuracy a;
  a.samples = static_cast<std::int64_t>(inputs.size());
  OutputTally t;
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < inputs.size(); ++i) t.add(a, float_outputs[i], sim.forward(inputs[i]));
  t.finish(a);
  return a;
}

Accuracy measure(const Graph& graph, const Program& program, const Tensor& data) {
  const std::vector<Tensor> inputs = split_inputs(graph, data, "lower::measure");
  Simulator sim(program);
  sim.record_values(true);
  Accuracy a;
  a.samples = static_cast<std::int64_t>(inputs.size());
  // per probed value: sums for the SNR, the largest error and magnitude
  struct Sums {
    double signal = 0, noise = 0, max_err = 0, range = 0;
  };
  std::vector<Sums> sums(graph.values.size());
  OutputTally tally;
  NoGradGuard no_grad;
  for (const Tensor& x : inputs) {
    const std::vector<Tensor> env = evaluate(graph, x);
    tally.add(a, env[static_cast<std::size_t>(graph.output)], sim.forward(x));
    for (const Probe& pr : program.probes) {
      const Tensor q = sim.value(pr.value);
      const Tensor& f = env[static_cast<std::size_t>(pr.value)];
      if (!q.defined() || !f.defined() || !f.is_floating_point() || q.shape() != f.shape()) continue;
      const Tensor fd = f.to(Dtype::Float64).contiguous(), qd = q.to(Dtype::Float64);
      Sums& s = sums[static_cast<std::size_t>(pr.value)];
      for (std::int64_t i = 0; i < fd.numel(); ++i) {
        const double fv = fd.data<double>()[i], e = fv - qd.data<double>()[i];
        s.signal += fv * fv, s.noise += e * e;
        s.max_err = std::max(s.max_err, std::abs(e)), s.range = std::max(s.range, std::abs(fv));
      }
    }
  }
  tally.finish(a);
  auto layer = [&](std::int64_t value, std::string label, std::string module) {
    for (const Probe& pr : program.probes) {
      if (pr.value != value) continue;
      const Sums& s = sums[static_cast<std::size_t>(value)];
      const Buffer& b = program.buffer(pr.buffer);
      if (!b.fixed_point) return;
      LayerError e;
      e.value = value, e.label = std::move(label), e.module = std::move(module);
      e.format = pr.segments.empty()
                     ? fmt::format("{} {}", elem_ctype(b.elem), format_name(b.elem, pr.scale, pr.zero_point))
                     : fmt::format("{} {} parts, s<={:.4g}", elem_ctype(b.elem), pr.segments.size(), pr.scale);
      e.max_abs_error = s.max_err, e.range = s.range;
      e.snr_db = s.noise > 0 ? 10.0 * std::log10(s.signal / s.noise) : std::numeric_limits<double>::infinity();
      a.layers.push_back(std::move(e));
      return;
    }
  };
  layer(graph.input, fmt::format("%{} (input)", graph.input), "");
  for (const Node& n : graph.nodes) layer(n.output, node_label(graph, n), module_path(graph, n).path);
  return a;
}

std::string layer_report(const Accuracy& a) {
  std::string out = fmt::format(
      "per-layer error against the float model over {} samples (SNR = 10 log10(sum f^2 / sum (f - q)^2))\n", a.samples);
  out += fmt::format("  {:<48} {:<28} {:>11} {:>11} {:>8}  {}\n", "value", "format", "max error", "max |f|", "SNR dB",
                     "module");
  for (const LayerError& e : a.layers) {
    const std::string label = e.label.size() > 48 ? e.label.substr(0, 45) + "..." : e.label;
    out += fmt::format("  {:<48} {:<28} {:>11.4g} {:>11.4g} {:>8.1f}  {}\n", label, e.format, e.max_abs_error, e.range,
                       e.snr_db, e.module);
  }
  out += fmt::format("outputs: max error {:.4g} = {:.3f}% of the float output range {:.4g}; argmax agreement {:.2f}%\n",
                     a.max_abs_error, 100 * a.relative_error(), a.output_range, 100 * a.agreement);
  return out;
}

}  // namespace microtorch::lower
