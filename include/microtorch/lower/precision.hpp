/// \file
/// Automatic mixed precision: the cheapest precision per layer that keeps a lowered model
/// within a target on evaluation data.
///
/// \code
///   lower::PrecisionTarget target{.max_error = 0.01};                 // 1% of the output range
///   lower::PrecisionSearch s = lower::choose_precision(graph, cal, eval_x, options, target);
///   fmt::print("{}", s.report);                 // what it chose for each layer, and why
///   lower::Program p = lower::quantize(graph, cal, s.options);      // s.options.precision set
/// \endcode
///
/// The layers are the modules that own parameters (a node belongs to the module whose
/// parameters it uses, or to the one before it: a GELU to the linear layer it follows), each
/// at one of three precisions, cheapest first: 8 (int8 activations and weights), 16x8 (int16
/// activations, int8 weights), 16 (both int16); an input of real numbers is one more
/// decision, at 8 or 16 bits (QuantOptions::input_bits), searched like a layer. The search
///   1. measures each layer's sensitivity: the error with that layer at 8 and every other at
///      16 (one quantize and one simulation of the evaluation data per layer);
///   2. starts from every layer at 8 (QuantOptions::sensitive_bits still applies) and, while
///      the target is not met, raises a layer one step: the most sensitive of those at the
///      lowest level (every layer reaches 16x8 before any reaches 16);
///   3. then tries each raised layer one step lower again, least sensitive first, and keeps
///      what still meets the target.
///
/// A layer's weights stay int8 unless 16x8 was not enough for it. Each evaluation lowers the
/// graph and simulates every evaluation sample: one per layer for the sensitivities, one for
/// the start, one per step up or down, one for the result (PrecisionSearch::evaluations
/// counts them), so give it evaluation data of a few hundred samples.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "microtorch/lower/accuracy.hpp"
#include "microtorch/lower/quantize.hpp"

namespace microtorch::lower {

/// What choose_precision() must keep on the evaluation data.
struct PrecisionTarget {
  double max_error = 0.01;  ///< largest output error / the float output range
  double agreement = 0.0;   ///< smallest share of argmax agreement (0: not a target)
};

/// What the search chose for one layer.
struct LayerChoice {
  std::string module;      ///< the module path ("encoder.layers.0.linear1")
  ///@{
  /// The chosen precision: 8 and 8, 16 and 8 ("16x8"), or 16 and 16.
  int activation_bits = 8, weight_bits = 8;
  ///@}
  double sensitivity = 0;  ///< relative output error with this layer alone at 8 bits
  std::string why;         ///< "raised at step 3: error 1.42% -> 1.10%", "int8 met the target"
};

/// The result of choose_precision(): options to give quantize(), the choice per layer and
/// the accuracy they reach.
struct PrecisionSearch {
  QuantOptions options;            ///< the input options with `precision` set per layer
  std::vector<LayerChoice> layers;  ///< in graph order
  /// The input's precision (QuantOptions::input_bits; module "input", activation_bits ==
  /// weight_bits, 8 or 16), chosen like a layer's; empty module when the input holds token ids.
  LayerChoice input;
  Accuracy accuracy;               ///< of the chosen options on the evaluation data
  bool met = false;                ///< the target was reached (else every layer ended at 16)
  double int8_weight_share = 0;    ///< share of weight bytes stored as int8
  int evaluations = 0;             ///< programs lowered and simulated
  std::string report;              ///< the choices and the steps, as text
};

/// The search described at the top of this header. `options` gives everything else (scheme,
/// ranges, attention kernel, name); its activation_bits, weight_bits, input_bits and
/// precision are replaced. `eval_data` is a stack of inputs like calibrate()'s (ShapeError otherwise).
/// ValueError unless target.max_error > 0 and target.agreement is in [0, 1]; an unreachable
/// target is not an error: `met` says so.
PrecisionSearch choose_precision(const Graph& graph, const Calibration& calibration, const Tensor& eval_data,
                                 const QuantOptions& options, const PrecisionTarget& target);

/// The modules that own parameters, in graph order: the layers choose_precision() sets.
std::vector<std::string> precision_layers(const Graph& graph);

/// Bytes of the program's fixed-point weight arrays (quantized parameters and constants) that
/// are int8, and of all of them: {int8, total}.
std::pair<std::int64_t, std::int64_t> int8_weight_bytes(const Program& program);

}  // namespace microtorch::lower
