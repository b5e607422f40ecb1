// calibrate — per-value ranges from float runs of the graph.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "affine_input.hpp"
#include "microtorch/error.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/ops.hpp"
#include "rules.hpp"

namespace microtorch::lower {

Calibration calibrate(const Graph& graph, const Tensor& data) {
  graph.validate();
  const std::vector<Tensor> inputs = split_inputs(graph, data, "calibrate");
  const auto samples = static_cast<std::int64_t>(inputs.size());
  Calibration cal;
  cal.absmax.assign(graph.values.size(), 0.0);
  cal.min.assign(graph.values.size(), 0.0);
  cal.max.assign(graph.values.size(), 0.0);
  cal.channel_absmax.assign(graph.values.size(), {});
  cal.channel_min.assign(graph.values.size(), {});
  cal.channel_max.assign(graph.values.size(), {});
  cal.dim1_min.assign(graph.values.size(), {});
  cal.dim1_max.assign(graph.values.size(), {});
  cal.samples = samples;
  cal.gram.assign(graph.values.size(), {});
  cal.patch_gram.assign(graph.values.size(), {});
  // the inputs of layers that round their weights with x^T x (OpRule::rounds_with_gram)
  std::vector<bool> linear_input(graph.values.size(), false);
  const std::vector<bool> constant = constant_values(graph);
  for (const Node& n : graph.nodes) {
    const OpRule* rule = find_rule(n.op);
    if (rule && rule->rounds_with_gram && rule->weighted(n, constant)) {
      const auto chain = affine_input(graph, n);  // folded into the layer: it reads the chain's root
      linear_input[static_cast<std::size_t>(chain ? chain->root : n.inputs[0])] = true;
    }
  }
  for (std::int64_t s = 0; s < samples; ++s) {
    const std::vector<Tensor> env = evaluate(graph, inputs[static_cast<std::size_t>(s)]);
    for (std::size_t i = 0; i < env.size(); ++i) {
      const Tensor& t = env[i];
      if (!t.defined() || !t.is_floating_point() || t.numel() == 0) continue;
      const Tensor d = t.to(Dtype::Float64);
      const double* p = d.data<double>();
      const bool activation = graph.values[i].kind == ValueKind::Input || graph.values[i].kind == ValueKind::OpOutput;
      double m = cal.absmax[i], lo = cal.min[i], hi = cal.max[i];
      for (std::int64_t j = 0; j < d.numel(); ++j) {
        if (std::isfinite(p[j])) {
          m = std::max(m, std::abs(p[j]));
          lo = std::min(lo, p[j]), hi = std::max(hi, p[j]);
        } else if (activation) {  // parameters and constants may hold -inf (additive masks)
          throw ValueError(fmt::format("calibrate: value %{} is NaN or infinite on sample {}; calibration data must "
                                       "give finite activations",
                                       i, s));
        }
      }
      cal.absmax[i] = m, cal.min[i] = lo, cal.max[i] = hi;
      if (activation && t.dim() > 0) {
        const std::int64_t width = t.size(-1);
        std::vector<double>&ch = cal.channel_absmax[i], &cmin = cal.channel_min[i], &cmax = cal.channel_max[i];
        ch.resize(static_cast<std::size_t>(width), 0.0);
        cmin.resize(static_cast<std::size_t>(width), 0.0);
        cmax.resize(static_cast<std::size_t>(width), 0.0);
        for (std::int64_t j = 0; j < d.numel(); ++j) {
          if (!std::isfinite(p[j])) continue;
          const auto c = static_cast<std::size_t>(j % width);
          ch[c] = std::max(ch[c], std::abs(p[j]));
          cmin[c] = std::min(cmin[c], p[j]), cmax[c] = std::max(cmax[c], p[j]);
        }
        if (t.dim() >= 3) {  // per index of dim 1: the channels of [N, C, ...]
          const std::int64_t channels = t.size(1), inner = d.numel() / (t.size(0) * channels);
          std::vector<double>&lo1 = cal.dim1_min[i], &hi1 = cal.dim1_max[i];
          lo1.resize(static_cast<std::size_t>(channels), 0.0);
          hi1.resize(static_cast<std::size_t>(channels), 0.0);
          for (std::int64_t j = 0; j < d.numel(); ++j) {
            if (!std::isfinite(p[j])) continue;
            const auto c = static_cast<std::size_t>(j / inner % channels);
            lo1[c] = std::min(lo1[c], p[j]), hi1[c] = std::max(hi1[c], p[j]);
          }
        }
        if (linear_input[i]) {
          std::vector<double>& h = cal.gram[i];
          const auto w = static_cast<std::size_t>(width);
          h.resize(w * w, 0.0);
          for (std::int64_t r = 0; r < d.numel() / width; ++r) {
            const double* x = p + r * width;
            for (std::size_t a = 0; a < w; ++a) {
              for (std::size_t b = 0; b <= a; ++b) h[a * w + b] += x[a] * x[b];
            }
          }
          for (std::size_t a = 0; a < w; ++a) {
            for (std::size_t b = a + 1; b < w; ++b) h[a * w + b] = h[b * w + a];
          }
        }
      }
    }
    // the patches convolutions read (OpRule::patch_gram), for the rounding of their weights
    for (const Node& n : graph.nodes) {
      const OpRule* rule = find_rule(n.op);
      if (rule && rule->patch_gram && rule->weighted(n, constant)) {
        rule->patch_gram(n, env[static_cast<std::size_t>(n.inputs[0])], env[static_cast<std::size_t>(n.inputs[1])],
                         cal.patch_gram[static_cast<std::size_t>(n.output)]);
      }
    }
  }
  // Second pass: each activation's histogram over [min, max], for the percentile and MSE
  // range choices (rangefinder.cpp).
  cal.histogram.assign(graph.values.size(), {});
  for (std::size_t i = 0; i < graph.values.size(); ++i) {
    const ValueKind k = graph.values[i].kind;
    if ((k == ValueKind::Input || k == ValueKind::OpOutput) && cal.max[i] > cal.min[i]) {
      cal.histogram[i].assign(Calibration::kBins, 0.0);
    }
  }
  for (const Tensor& x : inputs) {
    const std::vector<Tensor> env = evaluate(graph, x);
    for (std::size_t i = 0; i < env.size(); ++i) {
      std::vector<double>& h = cal.histogram[i];
      if (h.empty() || !env[i].is_floating_point()) continue;
      const Tensor d = env[i].to(Dtype::Float64);
      const double* p = d.data<double>();
      const double width = (cal.max[i] - cal.min[i]) / Calibration::kBins;
      for (std::int64_t j = 0; j < d.numel(); ++j) {
        const auto b = static_cast<std::int64_t>((p[j] - cal.min[i]) / width);
        h[static_cast<std::size_t>(std::clamp<std::int64_t>(b, 0, Calibration::kBins - 1))] += 1;
      }
    }
  }
  return cal;
}

}  // namespace microtorch::lower
