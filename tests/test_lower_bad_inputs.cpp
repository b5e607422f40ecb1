// Bad inputs to the lowering (docs/bad-inputs.md, "Lowering"): models traced in training
// mode, hostile or broken graph files (through the API and microtorch-lower), firmware names
// that are not C identifiers or collide with the runtime, and calibrated ranges outside
// the formats the kernels support. Each gets a clear error or a warning naming the module,
// value, node or tensor; never a crash.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "lower_firmware.hpp"
#include "microtorch/lower/accuracy.hpp"
#include "microtorch/lower/emit.hpp"
#include "microtorch/lower/graph.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/nn.hpp"

namespace lower = mt::lower;
namespace nn = mt::nn;
using json = nlohmann::json;
using mt::Tensor;

namespace {

struct Net : nn::Module {
  std::shared_ptr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 3));
  std::shared_ptr<nn::Dropout> drop = register_module("drop", std::make_shared<nn::Dropout>(0.5));
  Tensor forward(const Tensor& x) override { return fc->forward(drop->forward(x)); }
  std::string type_name() const override { return "Net"; }
};

std::string temp_dir() {
  const auto dir = std::filesystem::temp_directory_path() / ("microtorch-lower-bad-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

// A valid graph (one linear layer) as JSON and weights.
struct SavedGraph {
  lower::Graph graph;
  json j;
  SavedGraph() {
    mt::manual_seed(3);
    Net net;
    net.eval();
    graph = lower::trace(net, {2, 4});
    j = graph.to_json();
  }
  lower::Graph load(const json& edited) const { return lower::Graph::from_json(edited, graph.weights(), "g.json"); }
};

using lower_testing::Run;
using lower_testing::run;

// A calibration of every value to [-1, 1] (a hand-made one: quantize must not trust the graph).
lower::Calibration ones_calibration(const lower::Graph& g) {
  const std::vector<double> one(g.values.size(), 1.0), minus(g.values.size(), -1.0);
  lower::Calibration c;
  c.absmax = one, c.min = minus, c.max = one, c.samples = 1;
  return c;
}

}  // namespace

TEST_CASE("bad input: tracing a model (or one of its modules) in training mode") {
  Net net;  // a new module is in training mode, as in PyTorch
  CHECK_THROWS_MSG(lower::trace(net, {2, 4}), mt::ValueError, "the model (Net) is in training mode", "model.eval()");
  net.eval();
  net.drop->train();  // the root in eval mode, one child not: its dropout mask would be baked in
  CHECK_THROWS_MSG(lower::trace(net, {2, 4}), mt::ValueError, "module drop (Dropout) is in training mode",
                   "model.eval()");
  net.eval();
  const lower::Graph g = lower::trace(net, {2, 4});
  CHECK(g.nodes.size() == 1);  // dropout in eval mode is the identity: only fc is left
}

TEST_CASE("bad input: a graph file with an output out of range, a cycle, bad dims, dtypes or attributes") {
  const SavedGraph s;
  auto refused = [&](const std::function<void(json&)>& edit, std::vector<const char*> words) {
    json j = s.j;
    edit(j);
    std::string msg;
    try {
      (void)s.load(j);
    } catch (const mt::IoError& e) {
      msg = e.what();
    }
    INFO(j.dump());
    INFO(msg);
    REQUIRE_FALSE(msg.empty());
    CHECK(msg.find("g.json") != std::string::npos);
    for (const char* w : words) CHECK(msg.find(w) != std::string::npos);
  };
  refused([](json& j) { j["output"] = -1; }, {"\"output\" is %-1"});
  refused([](json& j) { j["output"] = 1000; }, {"\"output\" is %1000"});
  refused([](json& j) { j["input"] = 1; }, {"\"input\" is %1"});
  // a cycle: the node reads its own output
  refused([](json& j) { j["nodes"][0]["inputs"][0] = j["nodes"][0]["output"]; },
          {"node 0 (linear", "is not defined before this node", "cycle"});
  refused([](json& j) { j["nodes"][0]["inputs"][0] = 99; }, {"node 0 (linear", "input %99 is not one of"});
  refused([](json& j) { j["nodes"][0]["output"] = 0; }, {"node 0 (linear", "is a input, not an op output"});
  refused([](json& j) { j["values"][3]["shape"] = {-1, 4}; }, {"value %3", "negative dim", "[-1, 4]"});
  refused([](json& j) { j["values"][3]["shape"] = {65536, 65536}; }, {"value %3", "[65536, 65536]", "2^31 - 1"});
  refused([](json& j) { j["values"][3]["shape"] = {INT64_MAX, 2}; }, {"value %3", "2^31 - 1"});
  refused([](json& j) { j["values"][3]["shape"] = {1.5e30, 2}; }, {"shape of value %3", "must be an integer"});
  refused([](json& j) { j["values"][3]["shape"] = {18446744073709551615ULL}; }, {"must be an integer that fits int64"});
  refused([](json& j) { j["values"][0]["dtype"] = "float16"; }, {"unknown dtype \"float16\""});
  refused([](json& j) { j["values"][0]["id"] = 7; }, {"value ids must be 0, 1, 2"});
  refused([](json& j) { j["nodes"][0]["attrs"] = json::array(); j["nodes"][0]["op"] = "softmax"; j["nodes"][0]["inputs"] = {0}; },
          {"node 0 (softmax", "attribute dim is missing"});
  refused(
      [](json& j) {
        j["nodes"][0] = {{"op", "softmax"}, {"inputs", {0}}, {"output", j["nodes"][0]["output"]},
                         {"attrs", {{{"name", "dim"}, {"type", "float"}, {"value", 1.5}}}}};
      },
      {"attribute dim must be of type int"});
  refused(
      [](json& j) {
        j["nodes"][0]["attrs"] = {{{"name", "dim"}, {"type", "int"}, {"value", "seven"}}};
      },
      {"attribute dim", "must be an integer"});
  refused([](json& j) { j["nodes"][0]["attrs"] = {{{"name", "x"}, {"type", "tensor"}, {"value", 1}}}; },
          {"unknown type \"tensor\""});
  refused([](json& j) { j["nodes"][0]["inputs"] = {0}; }, {"node 0 (linear", "takes 2 to 3 inputs, the node has 1"});
  refused([](json& j) { j["nodes"][0]["inputs"][1] = -1; }, {"node 0 (linear", "input 1 is missing"});
  refused([](json& j) { j["nodes"].push_back(j["nodes"][0]); }, {"is already the output of an earlier node"});
  refused([](json& j) { j["version"] = 1.0; }, {"\"version\" must be an integer"});
  // In memory too: quantize and evaluate validate the graph before using it.
  lower::Graph g = s.graph;
  g.output = -1;
  CHECK_THROWS_MSG(lower::calibrate(g, mt::zeros({2, 4})), mt::ValueError, "\"output\" is %-1");
  CHECK_THROWS_MSG(lower::quantize(g, ones_calibration(g)),
                   mt::ValueError, "\"output\" is %-1");
  // A node whose declared shape disagrees with its op: named by quantize before any kernel
  // relies on it.
  g = s.graph;
  g.values[static_cast<std::size_t>(g.nodes[0].output)].shape = {2, 5};
  CHECK_THROWS_MSG(lower::quantize(g, ones_calibration(g)),
                   mt::ValueError, "cannot lower %", "linear", "declares float32[2, 5]", "gives float32[2, 3]");
}

TEST_CASE("bad input: microtorch-lower given a hostile graph file reports the node and exits 1") {
  const SavedGraph s;
  const std::string dir = temp_dir();
  lower::save(s.graph, dir + "/g");
  mt::save_npy(mt::randn({8, 4}), dir + "/calib.npy");
  const std::string cli = fmt::format("'{}'", MICROTORCH_LOWER_CLI);
  for (const auto& [edit, words] : std::vector<std::pair<std::function<void(json&)>, std::vector<const char*>>>{
           {[](json& j) { j["output"] = -1; }, {"\"output\" is %-1"}},
           {[](json& j) { j["nodes"][0]["inputs"][0] = j["nodes"][0]["output"]; }, {"node 0 (linear", "cycle"}},
           {[](json& j) { j["values"][0]["shape"] = {-1, 4}; }, {"value %0", "[-1, 4]"}},
       }) {
    json j = s.j;
    edit(j);
    std::ofstream(dir + "/g.json") << j.dump();
    const Run r = run(fmt::format("{} {}/g -c {}/calib.npy -o {}/fw", cli, dir, dir, dir));
    INFO(r.out);
    CHECK(WEXITSTATUS(r.status) == 1);
    CHECK(r.out.find("microtorch-lower: ") != std::string::npos);
    CHECK(r.out.find("g.json") != std::string::npos);
    for (const char* w : words) CHECK(r.out.find(w) != std::string::npos);
  }
  std::ofstream(dir + "/g.json") << s.j.dump();
  const Run bad_name = run(fmt::format("{} {}/g -c {}/calib.npy -o {}/fw --name 9lives", cli, dir, dir, dir));
  CHECK(WEXITSTATUS(bad_name.status) == 1);
  CHECK(bad_name.out.find("\"9lives\" starts with a digit") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("bad input: firmware names that are not C identifiers or collide with the runtime's symbols") {
  const SavedGraph s;
  const lower::Calibration cal = lower::calibrate(s.graph, mt::randn({8, 4}));
  for (const auto& [name, why] : std::vector<std::pair<std::string, const char*>>{
           {"", "is empty"},
           {"9lives", "starts with a digit"},
           {"mt_kernels", "runtime's namespace"},
           {"MT_model", "runtime's namespace"},
           {"mt", "runtime's namespace"},
           {"my-model", "contains '-'"},
           {"my model", "contains ' '"},
           {"_model", "starts with '_'"},
           {std::string(41, 'a'), "longer than 40"},
       }) {
    lower::QuantOptions o;
    o.name = name;
    CHECK_THROWS_MSG(lower::quantize(s.graph, cal, o), mt::ValueError, "firmware name", why, "C identifier");
  }
  lower::QuantOptions o;
  o.name = "mtx_model";  // only the runtime's own prefix is taken
  lower::Program p = lower::quantize(s.graph, cal, o);
  p.name = "mt_kernels";  // emit_c checks too (a Program edited by hand)
  CHECK_THROWS_MSG(lower::emit_c(p, temp_dir() + "/fw"), mt::ValueError, "runtime's namespace");
}

TEST_CASE("bad input: a calibrated range outside the formats the kernels support is a warning naming the tensor") {
  // Power-of-two scheme: activations of 1e-14 need about 59 fraction bits at int16 (the
  // kernels shift by at most 31); 1e12 would need -25. Both are clamped, and the program
  // says so, naming the tensor. Real-valued scales represent both (no warning, accurate).
  const Tensor w = mt::tensor({{1.0, -1.0}, {0.5, 2.0}});
  for (const double scale : {1e-14, 1e12}) {
    const lower::Graph g =
        lower::trace([&](const Tensor& x) { return mt::linear(mt::relu(x * scale), w); }, mt::zeros({1, 2}));
    const Tensor calib = mt::randn({8, 2});
    lower::QuantOptions o;
    o.scheme = lower::Scheme::PowerOfTwo;
    const lower::Program p = lower::quantize(g, lower::calibrate(g, calib), o);
    INFO(lower::report(p));
    REQUIRE(p.warnings.size() >= 1);
    CHECK(p.warnings[0].find("= mul") != std::string::npos);
    CHECK(p.warnings[0].find(scale < 1 ? "round to 0" : "saturate at") != std::string::npos);
    CHECK(lower::report(p).find("warning: %") != std::string::npos);
    const lower::Program real = lower::quantize(g, lower::calibrate(g, calib));
    CHECK(real.warnings.empty());
    CHECK(lower::measure(g, real, calib).relative_error() < 0.01);
  }
}

TEST_CASE("bad input: convolution, pooling and BatchNorm the lowering cannot express name the node and the fix") {
  mt::manual_seed(5);
  // a BatchNorm recorded in training mode (batch statistics), and one after a pool (no layer
  // right before it to fold into)
  nn::Conv1d conv(2, 4, 3);
  nn::MaxPool1d pool(2);
  nn::BatchNorm1d bn(4);
  auto after_conv = [&](const Tensor& x) { return bn.forward(conv.forward(x)); };
  const lower::Graph gt = lower::trace(after_conv, mt::zeros({2, 2, 12}));
  CHECK_THROWS_MSG(lower::quantize(gt, lower::calibrate(gt, mt::randn({8, 2, 12}))), mt::ValueError,
                   "batch_norm was recorded in training mode", "call model.eval() before tracing");
  bn.eval();
  auto after_pool = [&](const Tensor& x) { return bn.forward(pool.forward(conv.forward(x))); };
  const lower::Graph gp = lower::trace(after_pool, mt::zeros({1, 2, 12}));
  CHECK_THROWS_MSG(lower::quantize(gp, lower::calibrate(gp, mt::randn({8, 2, 12}))), mt::ValueError,
                   "batch_norm lowers only folded into the conv1d, conv2d or linear layer right before it",
                   "put the norm right after such a layer");

  // int8 convolutions of more than 131071 taps per output (1024 channels x kernel 129) would
  // overflow the int32 accumulator; int16 weights lower
  nn::Conv1d wide(1024, 1, 129);
  const lower::Graph gw = lower::trace([&](const Tensor& x) { return wide.forward(x); }, mt::zeros({1, 1024, 129}));
  const lower::Calibration cw = lower::calibrate(gw, mt::randn({2, 1024, 129}));
  lower::QuantOptions o8;
  o8.activation_bits = 8;
  CHECK_THROWS_MSG(lower::quantize(gw, cw, o8), mt::ValueError, "132096 taps per output are too many",
                   "use int16 weights for this layer");
  o8.weight_bits = 16;
  CHECK_NOTHROW((void)lower::quantize(gw, cw, o8));

  // an average over more than 65535 elements per window
  const lower::Graph ga =
      lower::trace([](const Tensor& x) { return mt::avg_pool2d(x, mt::Sizes2d(256, 256)); }, mt::zeros({1, 1, 256, 256}));
  CHECK_THROWS_MSG(lower::quantize(ga, lower::calibrate(ga, mt::randn({1, 1, 256, 256}))), mt::ValueError,
                   "windows of up to 65536 elements are more than the kernel's 65535", "pool in two steps");

  // graph files written elsewhere: a pool with ceil_mode, a conv1d with 2-D strides
  const lower::Graph gm = lower::trace([&](const Tensor& x) { return pool.forward(conv.forward(x)); }, mt::zeros({1, 2, 12}));
  const lower::Calibration cm = lower::calibrate(gm, mt::randn({8, 2, 12}));
  auto edited = [&](const std::string& op, const std::string& attr, const json& value) {
    json j = gm.to_json();
    for (json& node : j["nodes"]) {
      if (node["op"] != op) continue;
      for (json& a : node["attrs"]) {
        if (a["name"] == attr) a["value"] = value;
      }
    }
    return lower::Graph::from_json(j, gm.weights(), "g.json");
  };
  CHECK_THROWS_MSG(lower::quantize(edited("max_pool1d", "ceil_mode", true), cm), mt::ValueError,
                   "ceil_mode does not lower; use ceil_mode false");
  CHECK_THROWS_MSG(lower::quantize(edited("conv1d", "stride", json::array({1, 1})), cm), mt::ValueError,
                   "conv1d: stride must have 1 sizes");
}
