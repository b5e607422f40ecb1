// calibrate — per-value ranges from float runs of the graph.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "microtorch/error.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::lower {

Calibration calibrate(const Graph& graph, const Tensor& data) {
  graph.validate();
  const Shape& in = graph.value(graph.input).shape;
  const std::int64_t batch = in.empty() ? 1 : in[0];
  std::int64_t samples = 0;
  if (data.shape() == in) {
    samples = 1;
  } else if (!in.empty() && data.dim() == static_cast<std::int64_t>(in.size()) &&
             std::equal(in.begin() + 1, in.end(), data.shape().begin() + 1) && data.size(0) % batch == 0 &&
             data.size(0) > 0) {
    samples = data.size(0) / batch;
  } else {
    throw ShapeError(fmt::format("calibrate: data of shape {} does not stack inputs of the graph's shape {}; pass "
                                 "[N * {}{}] (N samples along dim 0)",
                                 shape_str(data.shape()), shape_str(in), batch,
                                 in.size() > 1 ? fmt::format(", {}", fmt::join(in.begin() + 1, in.end(), ", ")) : ""));
  }
  Calibration cal;
  cal.absmax.assign(graph.values.size(), 0.0);
  cal.min.assign(graph.values.size(), 0.0);
  cal.max.assign(graph.values.size(), 0.0);
  cal.samples = samples;
  for (std::int64_t s = 0; s < samples; ++s) {
    const Tensor x = samples == 1 && data.shape() == in ? data : slice(data, 0, s * batch, (s + 1) * batch);
    const std::vector<Tensor> env = evaluate(graph, x);
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
    }
  }
  return cal;
}

}  // namespace microtorch::lower
