/// \file
/// How far a lowered Program is from the float model it came from, measured on evaluation
/// data: the outputs (largest error against the float outputs' range, argmax agreement) and
/// every layer on the way (largest error and signal-to-noise ratio of each graph value), to
/// find the layer that loses accuracy.
///
/// \code
///   lower::Accuracy a = lower::measure(graph, program, eval_x);   // [N * B, ...] like calibrate()
///   fmt::print("{:.2f}% max error, {:.1f}% agreement\n", 100 * a.relative_error(), 100 * a.agreement);
///   fmt::print("{}", lower::layer_report(a));
/// \endcode
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "microtorch/lower/graph.hpp"
#include "microtorch/lower/program.hpp"

namespace microtorch::lower {

/// One fixed-point graph value computed by the program, against the float graph on every
/// sample.
struct LayerError {
  std::int64_t value = -1;  ///< the graph value's id
  std::string label;        ///< "%12 = linear(%9, attn.in_proj_weight, ...)" (or "%0 (input)")
  std::string module;       ///< the module it belongs to, as far as the graph tells
  std::string format;       ///< "int8_t s=0.0123, z=-7"
  double max_abs_error = 0;  ///< largest |float - dequantized| over its elements and the samples
  double range = 0;         ///< max |float value|
  double snr_db = 0;        ///< 10 log10(sum f^2 / sum (f - q)^2); inf when exact
};

/// The program against the float graph on evaluation data: measure() fills every field,
/// measure_outputs() all but `layers`.
struct Accuracy {
  std::int64_t samples = 0;  ///< how many inputs were compared
  double max_abs_error = 0;  ///< over every output element
  double output_range = 0;   ///< max - min of the float outputs
  double agreement = 0;      ///< share of output rows (argmax over the last dim) that agree; integer outputs: share of equal elements
  std::vector<LayerError> layers;  ///< in graph order
  /// max_abs_error / output_range: the error as a share of the float outputs' range
  /// (max_abs_error itself when the range is 0).
  double relative_error() const { return output_range > 0 ? max_abs_error / output_range : max_abs_error; }
};

/// Runs the graph in float and the program in the simulator on every sample of `data`
/// (stacked like calibrate()'s) and compares them. ShapeError for data that does not stack
/// inputs of the graph's shape.
Accuracy measure(const Graph& graph, const Program& program, const Tensor& data);

/// The outputs only, against float outputs computed before (one per input), for searches
/// that lower many programs (no per-layer table). ValueError when the two lists differ in
/// length; the Simulator's errors for inputs it cannot take.
Accuracy measure_outputs(const Program& program, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& float_outputs);

/// The per-layer table: one line per value with its format, max error, range, SNR and
/// module, then the outputs' max error, its share of the output range and the agreement.
std::string layer_report(const Accuracy& a);

}  // namespace microtorch::lower
