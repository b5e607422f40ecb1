// The op table (rules.hpp): the rules of every op family (rules/<family>.cpp), in the order
// of the list of lowerable ops. Graph validation, evaluate() and quantize() look ops up here.
#include <algorithm>

#include <fmt/format.h>

#include "rules.hpp"

namespace microtorch::lower {

// One function per op family, defined in rules/<family>.cpp; a new family adds its line here
// and to the table below.
std::vector<OpRule> linear_rules();       // linear, matmul
std::vector<OpRule> elementwise_rules();  // add, sub, mul, div, neg
std::vector<OpRule> activation_rules();   // relu, tanh, sigmoid, gelu (exp evaluates only)
std::vector<OpRule> softmax_rules();      // softmax (log_softmax evaluates only)
std::vector<OpRule> norm_rules();         // layer_norm
std::vector<OpRule> reduce_rules();       // mean, sum, argmax
std::vector<OpRule> attention_rules();    // scaled_dot_product_attention, multi_head_attention
std::vector<OpRule> shape_rules();        // reshape, permute, slice, expand, clone, cat, index_select, embedding
std::vector<OpRule> conv_rules();         // conv1d, conv2d, batch_norm (folded into the layer before it)
std::vector<OpRule> pool_rules();         // max_pool, avg_pool, adaptive_avg_pool (1d, 2d)

std::string_view attr_type_name(AttrSpec::Type t) {
  switch (t) {
    case AttrSpec::Type::Int: return "int";
    case AttrSpec::Type::Float: return "float";
    case AttrSpec::Type::Bool: return "bool";
    case AttrSpec::Type::String: return "string";
    case AttrSpec::Type::Shape: return "shape";
  }
  return "?";
}

const std::vector<OpRule>& op_rules() {
  static const std::vector<OpRule> rules = [] {
    std::vector<OpRule> all;
    for (auto family : {linear_rules, elementwise_rules, activation_rules, softmax_rules, norm_rules, reduce_rules,
                        attention_rules, shape_rules, conv_rules, pool_rules}) {
      for (OpRule& r : family()) all.push_back(std::move(r));
    }
    return all;
  }();
  return rules;
}

const OpRule* find_rule(std::string_view op) {
  const auto& rules = op_rules();
  auto it = std::find_if(rules.begin(), rules.end(), [op](const OpRule& r) { return r.op == op; });
  return it == rules.end() ? nullptr : &*it;
}

std::string lowerable_ops() {
  std::string s;
  for (const OpRule& r : op_rules()) {
    if (r.lower) s += (s.empty() ? "" : ", ") + r.summary;
  }
  return s;
}

}  // namespace microtorch::lower
