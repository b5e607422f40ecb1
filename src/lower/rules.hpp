// The op table of the lowering: every op that lowers is declared once, as an OpRule — its
// name, the inputs and attributes it takes, how it is evaluated in floating point (the
// reference that calibration and the accuracy checks measure against) and how it lowers to
// integer kernel calls. Graph validation, evaluate(), quantize() and the list of lowerable
// ops in error messages all read this one table (op_table.cpp); the rules live with their
// op family in rules/*.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "microtorch/error.hpp"
#include "microtorch/lower/graph.hpp"

namespace microtorch::lower {

class Lowering;

/// An attribute an op reads, with the type it must have.
struct AttrSpec {
  enum class Type { Int, Float, Bool, String, Shape };
  const char* name;
  Type type;
};
std::string_view attr_type_name(AttrSpec::Type t);

struct OpRule {
  std::string op;                 ///< the autograd record's op name ("linear")
  std::string summary;            ///< for the list of lowerable ops: "linear (constant weight)"
  int min_inputs = 1, max_inputs = 1;
  std::vector<AttrSpec> attrs;    ///< required attributes
  std::vector<std::string> kernels;  ///< the runtime kernel families it emits ("mt_linear")
  /// Zero points (affine int8 tensors): can its kernels read them on its activation inputs,
  /// and write one on its output? A view op (reshape, slice, ...) passes its input's format
  /// through: its input may carry one when its output may.
  bool zero_point_in = true, zero_point_out = true, passes_view = false;
  bool reads_parts = false;  ///< reads activations with a format per part (View::segments)
  /// The float reference: the library's op applied to the input values and the attributes.
  std::function<Tensor(const Node&, const std::vector<Tensor>&)> evaluate;
  /// The integer rule: reads the inputs' views from the Lowering, adds kernel calls and
  /// buffers, publishes the output's view. Empty for ops that only evaluate (calibration
  /// runs them; quantize() names them as not lowerable).
  std::function<void(Lowering&, const Node&)> lower;
};

/// Every op that lowers, in the order of the list printed in errors.
const std::vector<OpRule>& op_rules();
/// The rule of `op`, or nullptr.
const OpRule* find_rule(std::string_view op);
/// The ops that lower: "linear (constant weight and bias), matmul ..." for error messages.
std::string lowerable_ops();

/// An attribute of a node (the node was validated against its rule: present, right type).
template <class T>
const T& node_attr(const Node& n, const char* key) {
  for (const auto& [k, v] : n.attrs) {
    if (k == key) {
      if (const T* p = std::get_if<T>(&v)) return *p;
    }
  }
  throw ValueError(std::string("node ") + n.op + " has no attribute " + key + " of the expected type");
}

// One function per op family (rules/<family>.cpp).
std::vector<OpRule> linear_rules();      // linear, matmul
std::vector<OpRule> elementwise_rules();  // add, sub, mul, div, neg
std::vector<OpRule> activation_rules();   // relu, tanh, sigmoid, gelu
std::vector<OpRule> normalize_rules();    // softmax, layer_norm
std::vector<OpRule> reduce_rules();       // mean, sum, argmax
std::vector<OpRule> layout_rules();       // reshape, permute, slice, expand, clone, cat, index_select
std::vector<OpRule> attention_rules();    // scaled_dot_product_attention

}  // namespace microtorch::lower
