// Lowering step 1: tracing a forward pass into the graph IR, printing, JSON + npz round trip.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "microtorch/lower/graph.hpp"
#include "microtorch/nn.hpp"

namespace lower = mt::lower;
namespace nn = mt::nn;
using mt::Tensor;

namespace {

struct Mlp : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  Mlp()
      : fc1(register_module("fc1", std::make_shared<nn::Linear>(4, 32))),
        fc2(register_module("fc2", std::make_shared<nn::Linear>(32, 3))) {}
  Tensor forward(const Tensor& x) override { return fc2->forward(mt::relu(fc1->forward(x))); }
  std::string type_name() const override { return "Mlp"; }
};

// Causal self-attention block: x + mha(x) * 0.5, batch-first.
struct AttnBlock : nn::Module {
  std::shared_ptr<nn::MultiheadAttention> attn;
  AttnBlock() : attn(register_module("attn", std::make_shared<nn::MultiheadAttention>(8, 2, nn::MultiheadAttentionOptions{true, 0.0, 0, 0, true}))) {}
  Tensor forward(const Tensor& x) override {
    nn::MhaForwardOptions o;
    o.need_weights = false;
    o.is_causal = true;
    return x + std::get<0>(attn->forward(x, x, x, o)) * 0.5;
  }
  std::string type_name() const override { return "AttnBlock"; }
};

struct NormPool : nn::Module {
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> head;
  NormPool()
      : norm(register_module("norm", std::make_shared<nn::LayerNorm>(mt::Shape{6}))),
        head(register_module("head", std::make_shared<nn::Linear>(6, 2))) {}
  Tensor forward(const Tensor& x) override { return head->forward(mt::mean(norm->forward(x), {1})); }
  std::string type_name() const override { return "NormPool"; }
};

std::vector<std::string> ops_of(const lower::Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.op);
  return ops;
}

std::string temp_prefix(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "microtorch-test-lower-trace";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// The same graph: same printout, same kinds and names, identical parameter/constant data.
void check_same_graph(const lower::Graph& a, const lower::Graph& b) {
  CHECK(a.to_string() == b.to_string());
  REQUIRE(a.values.size() == b.values.size());
  CHECK(a.input == b.input);
  CHECK(a.output == b.output);
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    const auto &va = a.values[i], &vb = b.values[i];
    CHECK(va.kind == vb.kind);
    CHECK(va.name == vb.name);
    CHECK(va.shape == vb.shape);
    CHECK(va.dtype == vb.dtype);
    REQUIRE(va.data.defined() == vb.data.defined());
    if (va.data.defined()) CHECK(mt::equal(va.data, vb.data));
  }
  REQUIRE(a.nodes.size() == b.nodes.size());
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    CHECK(a.nodes[i].attrs == b.nodes[i].attrs);
    CHECK(a.nodes[i].inputs == b.nodes[i].inputs);
  }
}

void check_round_trip(const lower::Graph& g, const std::string& name) {
  // In memory.
  check_same_graph(g, lower::Graph::from_json(nlohmann::json::parse(g.to_json().dump()), g.weights()));
  // Through files.
  const auto prefix = temp_prefix(name);
  lower::save(g, prefix);
  check_same_graph(g, lower::load(prefix));
}

// A tiny float interpreter over the graph (the ops these tests trace), built from the
// public ops and the recorded attributes: the graph is enough to recompute the model.
template <class T>
const T& attr(const lower::Node& n, const char* key) {
  for (const auto& [k, v] : n.attrs) {
    if (k == key) return std::get<T>(v);
  }
  FAIL("node ", n.op, " has no attribute ", key);
  throw std::logic_error("unreachable");
}

Tensor run(const lower::Graph& g, const Tensor& input) {
  std::vector<Tensor> env(g.values.size());
  for (const auto& v : g.values) env[v.id] = v.data;
  env[g.input] = input;
  for (const auto& n : g.nodes) {
    std::vector<Tensor> in;
    for (auto i : n.inputs) in.push_back(i >= 0 ? env[i] : Tensor());
    Tensor y;
    if (n.op == "linear") {
      y = mt::linear(in[0], in[1], in.size() > 2 ? in[2] : Tensor());
    } else if (n.op == "relu") {
      y = mt::relu(in[0]);
    } else if (n.op == "tanh") {
      y = mt::tanh(in[0]);
    } else if (n.op == "add") {
      y = in[0] + in[1];
    } else if (n.op == "mul") {
      y = in[0] * in[1];
    } else if (n.op == "reshape") {
      y = mt::reshape(in[0], attr<mt::Shape>(n, "shape"));
    } else if (n.op == "permute") {
      y = mt::permute(in[0], attr<mt::Shape>(n, "dims"));
    } else if (n.op == "slice") {
      y = mt::slice(in[0], attr<std::int64_t>(n, "dim"), attr<std::int64_t>(n, "start"), attr<std::int64_t>(n, "end"),
                    attr<std::int64_t>(n, "step"));
    } else if (n.op == "mean") {
      y = mt::mean(in[0], attr<mt::Shape>(n, "dims"), attr<bool>(n, "keepdim"));
    } else if (n.op == "layer_norm") {
      y = mt::layer_norm(in[0], attr<mt::Shape>(n, "normalized_shape"), in[1], in[2], attr<double>(n, "eps"));
    } else if (n.op == "multi_head_attention") {  // packed q | k | v and a mask
      mt::AttentionHeadsOptions o;
      o.mask = mt::Mask::additive(in[1]);
      o.scale = attr<double>(n, "scale");
      y = std::get<0>(mt::multi_head_attention_packed(in[0], attr<std::int64_t>(n, "num_heads"), o));
    } else if (n.op == "scaled_dot_product_attention") {
      const mt::Mask mask = in.size() > 3 ? mt::Mask::additive(in[3]) : mt::Mask();
      y = std::get<0>(mt::scaled_dot_product_attention(in[0], in[1], in[2], mask, 0.0, attr<bool>(n, "is_causal"),
                                                        attr<double>(n, "scale")));
    } else {
      FAIL("the test interpreter does not know ", n.op);
    }
    REQUIRE(y.shape() == g.value(n.output).shape);
    env[n.output] = y;
  }
  return env[g.output];
}

void check_reexecutes(nn::Module& model, const lower::Graph& g) {
  const Tensor x = mt::randn(g.value(g.input).shape);
  mt::NoGradGuard no_grad;
  CHECK_CLOSE(run(g, x), model.forward(x), 1e-6, 1e-6);
  CHECK_CLOSE(run(lower::load(temp_prefix("reexec") + "-" + model.type_name()), x), model.forward(x), 1e-6, 1e-6);
}

}  // namespace

TEST_CASE("trace: Linear-ReLU-Linear lists linear, relu, linear with parameter names") {
  mt::manual_seed(0);
  Mlp model;
  model.eval();
  const lower::Graph g = lower::trace(model, {2, 4});
  INFO(g.to_string());
  CHECK(ops_of(g) == std::vector<std::string>{"linear", "relu", "linear"});
  const std::string s = g.to_string();
  CHECK(s.find("graph(%0: float32[2, 4])") != std::string::npos);
  CHECK(s.find("= linear(%0, fc1.weight, fc1.bias)  [2, 4] -> [2, 32]") != std::string::npos);
  CHECK(s.find("relu(%3)  [2, 32] -> [2, 32]") != std::string::npos);
  CHECK(s.find("linear(%4, fc2.weight, fc2.bias)  [2, 32] -> [2, 3]") != std::string::npos);
  CHECK(g.value(g.input).kind == lower::ValueKind::Input);
  CHECK(g.value(g.output).shape == mt::Shape{2, 3});
  // Parameter values are copies of the model's.
  for (const auto& v : g.values) {
    if (v.kind == lower::ValueKind::Parameter) CHECK(mt::equal(v.data, model.get(v.name)));
  }
  check_round_trip(g, "mlp");
  lower::save(g, temp_prefix("reexec") + "-Mlp");
  check_reexecutes(model, g);
}

TEST_CASE("trace: works in eval mode under NoGradGuard and with frozen parameters") {
  mt::manual_seed(1);
  Mlp model;
  model.eval();
  for (auto& p : model.parameters()) p.requires_grad_(false);
  lower::Graph g;
  {
    mt::NoGradGuard no_grad;
    g = lower::trace(model, {5, 4});
  }
  CHECK(ops_of(g) == std::vector<std::string>{"linear", "relu", "linear"});
  CHECK(g.to_string().find("linear(%0, fc1.weight, fc1.bias)") != std::string::npos);
}

TEST_CASE("trace: MultiheadAttention (batch_first, causal) is one op, as it runs; the mask and scalar fold into constants") {
  mt::manual_seed(2);
  AttnBlock model;
  model.eval();
  const lower::Graph g = lower::trace(model, {1, 4, 8});
  INFO(g.to_string());
  // The trace records what the module computes outside a trace: the packed projection, the
  // heads read in place by one multi_head_attention, the output projection.
  CHECK(ops_of(g) == std::vector<std::string>{"linear", "multi_head_attention", "linear", "mul", "add"});
  const std::string s = g.to_string();
  CHECK(s.find("linear(%0, attn.in_proj_weight, attn.in_proj_bias)  [1, 4, 8] -> [1, 4, 24]") != std::string::npos);
  CHECK(s.find("{num_heads=2, scale=0.5, dropout_p=0}  [1, 4, 24] -> [1, 4, 8]") != std::string::npos);
  CHECK(s.find("attn.out_proj.weight, attn.out_proj.bias") != std::string::npos);
  CHECK(s.find(", 0.5)") != std::string::npos);
  // The attention node's second input is the additive causal mask [4, 4]: 0 on and below the
  // diagonal, -inf above.
  const auto& mha = g.nodes[1];
  REQUIRE(mha.inputs.size() == 2);
  const auto& mask = g.value(mha.inputs[1]);
  CHECK(mask.kind == lower::ValueKind::Constant);
  REQUIRE(mask.data.numel() == 16);
  const Tensor m = mask.data.reshape({4, 4});
  CHECK(m.at({1, 0}) == 0.0);
  CHECK(m.at({2, 2}) == 0.0);
  CHECK(std::isinf(m.at({0, 1})));
  CHECK(m.at({0, 1}) < 0);
  // Nothing but the graph input, parameters and constants feeds a node before it is defined.
  std::vector<bool> defined(g.values.size());
  for (const auto& v : g.values) defined[v.id] = v.kind != lower::ValueKind::OpOutput;
  for (const auto& n : g.nodes) {
    for (auto i : n.inputs) CHECK((i < 0 || defined[i]));
    defined[n.output] = true;
  }
  check_round_trip(g, "mha");  // -inf in the mask survives the npz; attrs survive the JSON
  lower::save(g, temp_prefix("reexec") + "-AttnBlock");
  check_reexecutes(model, g);  // the folded causal mask still masks
}

TEST_CASE("trace: LayerNorm + mean pooling") {
  mt::manual_seed(3);
  NormPool model;
  model.eval();
  const lower::Graph g = lower::trace(model, {2, 5, 6});
  INFO(g.to_string());
  CHECK(ops_of(g) == std::vector<std::string>{"layer_norm", "mean", "linear"});
  const std::string s = g.to_string();
  CHECK(s.find("layer_norm(%0, norm.weight, norm.bias)") != std::string::npos);
  CHECK(s.find("[2, 5, 6] -> [2, 6]") != std::string::npos);
  check_round_trip(g, "normpool");
  lower::save(g, temp_prefix("reexec") + "-NormPool");
  check_reexecutes(model, g);
}

TEST_CASE("trace: a function with constants; outputs that do not depend on the input are refused") {
  const Tensor w = mt::tensor({1.0, 2.0, 3.0});
  const lower::Graph g = lower::trace([&w](const Tensor& x) { return mt::tanh(x * w + 1.0); }, mt::zeros({2, 3}));
  CHECK(ops_of(g) == std::vector<std::string>{"mul", "add", "tanh"});
  const auto& mul = g.nodes[0];
  CHECK(g.value(mul.inputs[1]).kind == lower::ValueKind::Constant);
  CHECK(mt::equal(g.value(mul.inputs[1]).data, w));
  INFO(g.to_string());
  CHECK(g.to_string().find("%4 = add(%2, 1)  [2, 3] -> [2, 3]") != std::string::npos);
  CHECK_THROWS_AS(lower::trace([&w](const Tensor&) { return w * 2.0; }, mt::zeros({3})), mt::ValueError);
}

TEST_CASE("trace: autograd behaves as before after (and outside) a trace") {
  mt::manual_seed(4);
  Mlp model;
  const Tensor x = mt::randn({3, 4});
  auto grads = [&] {
    model.zero_grad();
    model.forward(x).sum().backward();
    std::vector<Tensor> out;
    for (auto& p : model.parameters()) out.push_back(p.grad().clone());
    return out;
  };
  const auto before = grads();
  model.eval();
  (void)lower::trace(model, {3, 4});
  model.train();
  CHECK_FALSE(mt::autograd::is_tracing());
  const auto after = grads();
  REQUIRE(before.size() == after.size());
  for (std::size_t i = 0; i < before.size(); ++i) CHECK(mt::equal(before[i], after[i]));
  for (auto& p : model.parameters()) CHECK(p.is_leaf());
  // Without a trace, no-grad inputs still record nothing.
  const Tensor a = mt::ones({2});
  CHECK((a * 2.0).is_leaf());
  {
    mt::autograd::TraceGuard guard;
    const Tensor b = a * 2.0;
    CHECK_FALSE(b.is_leaf());          // recorded for the tracer...
    CHECK_FALSE(b.requires_grad());    // ...but it does not ask for gradients
    REQUIRE(b.grad_fn()->inputs.size() == 2);
    CHECK(b.grad_fn()->inputs[1].value != nullptr);  // the constant 2 is kept
  }
  CHECK((a * 2.0).is_leaf());
  CHECK_FALSE(mt::autograd::is_tracing());
}

TEST_CASE("graph load: bad JSON, missing and mismatched weights throw IoError naming the file and key") {
  mt::manual_seed(5);
  Mlp model;
  model.eval();
  const lower::Graph g = lower::trace(model, {1, 4});
  const auto prefix = temp_prefix("bad");
  lower::save(g, prefix);
  {
    std::ofstream f(prefix + ".json", std::ios::trunc);
    f << "{ \"format\": \"microtorch.graph\", \"values\": [ ";
  }
  CHECK_THROWS_MSG(lower::load(prefix), mt::IoError, "bad.json", "not valid JSON");
  {
    std::ofstream f(prefix + ".json", std::ios::trunc);
    f << "{ \"format\": \"microtorch.graph\", \"version\": 1 }";
  }
  CHECK_THROWS_MSG(lower::load(prefix), mt::IoError, "bad.json", "malformed");
  CHECK_THROWS_MSG(lower::load(temp_prefix("does-not-exist")), mt::IoError, "does-not-exist.json");

  lower::save(g, prefix);
  auto weights = g.weights();
  weights.erase(weights.begin());  // fc1.weight
  mt::save_npz(weights, prefix + ".npz");
  CHECK_THROWS_MSG(lower::load(prefix), mt::IoError, "bad.npz", "fc1.weight", "missing");

  weights = g.weights();
  weights[1].second = mt::zeros({7});  // fc1.bias
  mt::save_npz(weights, prefix + ".npz");
  CHECK_THROWS_MSG(lower::load(prefix), mt::IoError, "bad.npz", "fc1.bias", "[7]", "[32]");
}
