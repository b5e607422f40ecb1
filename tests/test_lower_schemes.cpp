// The lowering schemes on two transformers trained in PyTorch 1.13
// (tools/torch_lowering_models.py; state dicts and held-out data in tests/fixtures): the C++
// twins reproduce PyTorch's logits, every scheme meets its accuracy target on held-out data
// and is bit-exact between the simulator, the host, UBSan and Cortex-M4/M0, and the
// automatic mixed precision keeps the cheapest precision per layer that meets a target.
#include "../examples/models/sequence_classifier.hpp"
#include "../examples/models/token_tagger.hpp"
#include "helpers.hpp"
#include "lower_firmware.hpp"
#include "microtorch/io.hpp"
#include "microtorch/lower/accuracy.hpp"
#include "microtorch/lower/precision.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/nn/checkpoint.hpp"

namespace lower = mt::lower;
using mt::Tensor;
using namespace lower_testing;

namespace {

constexpr std::int64_t kEval = 300;  // held-out sequences measured per model (of 1000)

Tensor member(const std::string& npz, const std::string& name) {
  for (auto& [k, t] : mt::load_npz(npz)) {
    if (k == name) return t;
  }
  FAIL("no member " << name << " in " << npz);
  return {};
}

struct PytorchModel {
  std::shared_ptr<mt::nn::Module> module;
  Tensor eval_x, eval_logits;  // eval_logits: PyTorch's, for the first 100 of eval_x
  lower::Graph graph;
  lower::Calibration calibration;
};

template <class M>
PytorchModel load(const std::string& id, std::int64_t length) {
  const std::string base = std::string(MICROTORCH_FIXTURES_DIR) + "/lower_" + id;
  PytorchModel m;
  auto model = std::make_shared<M>();
  mt::nn::load(*model, base + ".npz");
  model->eval();
  m.module = model;
  m.eval_x = member(base + "_data.npz", "eval_x").slice(0, 0, kEval);
  m.eval_logits = member(base + "_data.npz", "eval_logits");
  m.graph = lower::trace(*model, mt::zeros({1, length}, mt::kInt64));
  m.calibration = lower::calibrate(m.graph, member(base + "_data.npz", "calib_x"));
  return m;
}

PytorchModel& classifier() {
  static PytorchModel m = load<sequence_classifier::SequenceClassifier>("sequence_classifier", sequence_classifier::kLength);
  return m;
}
PytorchModel& tagger() {
  static PytorchModel m = load<token_tagger::TokenTagger>("token_tagger", token_tagger::kLength);
  return m;
}

lower::QuantOptions scheme(const std::string& s, const std::string& name) {
  lower::QuantOptions o;
  o.name = name;
  if (s == "pow2") {
    o.scheme = lower::Scheme::PowerOfTwo;
    o.activation_bits = 8, o.sensitive_bits = 8, o.rounding = lower::WeightRounding::Nearest;
  } else if (s == "int8") {
    o.activation_bits = 8;
  } else if (s == "int16x8") {
    o.activation_bits = 16, o.weight_bits = 8;
  } else {
    o.activation_bits = 16;
  }
  return o;
}

// The sum of the chosen levels (8 = 0, 16x8 = 1, 16 = 2): how much was raised.
int raised(const lower::PrecisionSearch& s) {
  int n = 0;
  for (const lower::LayerChoice& c : s.layers) n += (c.activation_bits == 16) + (c.weight_bits == 16);
  return n;
}

}  // namespace

TEST_CASE("lower: the C++ twins of the PyTorch-trained transformers compute PyTorch's logits") {
  for (PytorchModel* m : {&classifier(), &tagger()}) {
    mt::NoGradGuard no_grad;
    const Tensor x = m->eval_x.slice(0, 0, m->eval_logits.size(0));
    CHECK_CLOSE(m->module->forward(x), m->eval_logits, 1e-4, 1e-4);
  }
}

TEST_CASE("lower: PyTorch-trained transformers - int8 >= 99.5% agreement and <= 2% error, int16 <= 0.05%") {
  for (PytorchModel* m : {&classifier(), &tagger()}) {
    for (const std::string s : {"int8", "int16"}) {
      const lower::Program p = lower::quantize(m->graph, m->calibration, scheme(s, "m"));
      const lower::Accuracy a = lower::measure(m->graph, p, m->eval_x);
      MESSAGE(m->module->type_name() << " " << s << ": max error " << 100 * a.relative_error() << "%, agreement "
                                     << 100 * a.agreement << "%");
      CHECK(a.relative_error() <= (s == "int8" ? 0.02 : 0.0005));
      CHECK(a.agreement >= 0.995);
      CHECK(a.samples == kEval);
      // the per-layer table covers the values the program computes, the output last
      REQUIRE(!a.layers.empty());
      CHECK(a.layers.back().value == m->graph.output);
      CHECK(a.layers.back().max_abs_error == doctest::Approx(a.max_abs_error));
    }
  }
}

TEST_CASE("lower: automatic precision meets its target, is cheaper than int16 and follows the target") {
  PytorchModel& m = classifier();
  const lower::QuantOptions base = scheme("int8", "classifier_auto");
  const double target = 0.006;
  const lower::PrecisionSearch s = lower::choose_precision(m.graph, m.calibration, m.eval_x, base, {.max_error = target});
  INFO(s.report);
  REQUIRE(s.met);
  // The chosen options, lowered and measured independently, meet the target.
  const lower::Program p = lower::quantize(m.graph, m.calibration, s.options);
  const lower::Accuracy a = lower::measure(m.graph, p, m.eval_x);
  CHECK(a.relative_error() <= target);
  CHECK(a.relative_error() == doctest::Approx(s.accuracy.relative_error()));
  // Cheaper than all-int16 (weights and arena), and mostly int8 weights.
  const lower::Program p16 = lower::quantize(m.graph, m.calibration, scheme("int16", "classifier16"));
  CHECK(p.weight_bytes() < p16.weight_bytes());
  CHECK(p.arena_bytes <= p16.arena_bytes);
  CHECK(s.int8_weight_share >= 0.8);
  // Plain int8 misses the target here, so something was raised, and the report says what and why.
  const lower::Accuracy a8 = lower::measure(m.graph, lower::quantize(m.graph, m.calibration, base), m.eval_x);
  CHECK(a8.relative_error() > target);
  CHECK(raised(s) > 0);
  CHECK(s.layers.size() == lower::precision_layers(m.graph).size());
  for (const lower::LayerChoice& c : s.layers) {
    CHECK(!c.why.empty());
    if (c.activation_bits == 16) CHECK(s.report.find(c.module) != std::string::npos);
  }
  CHECK(s.report.find("raised to 16x8") != std::string::npos);
  // A tighter target raises more; a loose one keeps every layer at 8.
  const lower::PrecisionSearch tight =
      lower::choose_precision(m.graph, m.calibration, m.eval_x, base, {.max_error = 0.004});
  CHECK(tight.met);
  CHECK(tight.accuracy.relative_error() <= 0.004);
  CHECK(raised(tight) > raised(s));
  const lower::PrecisionSearch loose =
      lower::choose_precision(m.graph, m.calibration, m.eval_x, base, {.max_error = 0.05});
  CHECK(raised(loose) == 0);
  CHECK(loose.accuracy.relative_error() == doctest::Approx(a8.relative_error()));
  // An agreement target alone: 100% agreement is met at int8 already on this model.
  const lower::PrecisionSearch agree =
      lower::choose_precision(m.graph, m.calibration, m.eval_x, base, {.max_error = 1.0, .agreement = 1.0});
  CHECK(agree.met);
  CHECK(agree.accuracy.agreement == 1.0);
  // Out of reach: not met, said so, everything at 16.
  const lower::PrecisionSearch never =
      lower::choose_precision(m.graph, m.calibration, m.eval_x, base, {.max_error = 1e-9});
  CHECK(!never.met);
  CHECK(never.report.find("NOT met") != std::string::npos);
  CHECK(raised(never) == 2 * static_cast<int>(never.layers.size()));
  CHECK_THROWS_MSG(lower::choose_precision(m.graph, m.calibration, m.eval_x, base, {.max_error = 0}), mt::ValueError,
                   "max error > 0");
  CHECK_THROWS_MSG(lower::choose_precision(m.graph, m.calibration, mt::zeros({3, 5}, mt::kInt64), base, {}),
                   mt::ShapeError, "choose_precision");
}

TEST_CASE("lower: the firmware of every scheme of a PyTorch-trained transformer is bit-exact on host, UBSan, M4 and M0") {
  if (!have_tool("arm-none-eabi-gcc") || !have_tool("qemu-system-arm")) {
    MESSAGE("skipped: arm-none-eabi-gcc or qemu-system-arm not installed (tools/install-deps.sh adds them)");
    return;
  }
  PytorchModel& m = classifier();
  std::vector<lower::QuantOptions> all;
  for (const std::string s : {"pow2", "int8", "int16x8", "int16"}) all.push_back(scheme(s, "classifier_" + s));
  lower::QuantOptions mixed = scheme("int8", "classifier_mixed");  // two layers at 16x8
  mixed.precision = {{"norm1", 16, 8}, {"ff1", 16, 8}};
  all.push_back(mixed);
  for (const lower::QuantOptions& o : all) {
    const lower::Program p = lower::quantize(m.graph, m.calibration, o);
    std::vector<std::vector<std::int64_t>> inputs;
    for (std::int64_t i = 0; i < 6; ++i) inputs.push_back(lower::quantize_input(p, m.eval_x.slice(0, i, i + 1)));
    check_firmware(p, inputs);
  }
}

TEST_CASE("microtorch-lower: evaluation data, per-layer precision and the automatic mode from the command line") {
  PytorchModel& m = classifier();
  const std::string dir = temp_dir("cli_schemes");
  lower::save(m.graph, dir + "/clf.json");  // the extension is optional: clf.json + clf.npz
  CHECK(std::filesystem::exists(dir + "/clf.json"));
  CHECK(!std::filesystem::exists(dir + "/clf.json.json"));
  const std::string base = std::string(MICROTORCH_FIXTURES_DIR) + "/lower_sequence_classifier_data.npz";
  mt::save_npy(member(base, "calib_x"), dir + "/calib.npy");
  mt::save_npy(m.eval_x, dir + "/eval.npy");
  const std::string cli = fmt::format("'{}' {}/clf.json -c {}/calib.npy -e {}/eval.npy", MICROTORCH_LOWER_CLI, dir, dir, dir);

  // --eval: the accuracy against float and the per-layer table, printed and in the report file;
  // the same numbers as lower::measure.
  Run r = run(fmt::format("{} --bits 8 --name clf8 --out {}/fw8", cli, dir));
  INFO(r.out);
  REQUIRE(r.status == 0);
  const lower::Accuracy a8 =
      lower::measure(m.graph, lower::quantize(m.graph, m.calibration, scheme("int8", "clf8")), m.eval_x);
  CHECK(r.out.find(fmt::format("max error {:.3f}% of the float output range, argmax agreement {:.2f}%",
                               100 * a8.relative_error(), 100 * a8.agreement)) != std::string::npos);
  CHECK(r.out.find("per-layer error against the float model over 300 samples") != std::string::npos);
  CHECK(r.out.find("SNR dB") != std::string::npos);
  CHECK(read_file(dir + "/fw8/clf8_report.txt").find("per-layer error against the float model") != std::string::npos);

  // --precision: the named layers at 16x8, visible in the kernels; a module that does not exist
  // is an error listing the modules.
  r = run(fmt::format("{} --bits 8 -p ff1=16x8 -p norm1=16x8 --name clfmix --out {}/fwmix", cli, dir));
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("mt_linear_s16_s8_s16") != std::string::npos);
  r = run(fmt::format("{} --bits 8 -p ffn1=16 --out {}/fwbad", cli, dir));
  CHECK(r.status != 0);
  CHECK(r.out.find("\"ffn1\" names no node of the graph") != std::string::npos);
  CHECK(r.out.find("ff1") != std::string::npos);

  // --auto-precision: the search's report, a result within the target, the same choice as the API
  r = run(fmt::format("{} --auto-precision 1% --name clfauto --out {}/fwauto", cli, dir));
  INFO(r.out);
  REQUIRE(r.status == 0);
  const lower::PrecisionSearch s =
      lower::choose_precision(m.graph, m.calibration, m.eval_x, scheme("int8", "clfauto"), {.max_error = 0.01});
  CHECK(r.out.find("automatic precision for max error <= 1.000%") != std::string::npos);
  CHECK(r.out.find(fmt::format("max error {:.3f}% of the float output range", 100 * s.accuracy.relative_error())) !=
        std::string::npos);
  CHECK(s.accuracy.relative_error() <= 0.01);
  CHECK(read_file(dir + "/fwauto/clfauto_report.txt").find("sensitivity") != std::string::npos);
  r = run(fmt::format("{} --auto-precision 2 --out {}/fwx", cli, dir));
  CHECK(r.status != 0);
  CHECK(r.out.find("--auto-precision 2: expected a fraction") != std::string::npos);
  r = run(fmt::format("'{}' {}/clf -c {}/calib.npy --auto-precision 1%", MICROTORCH_LOWER_CLI, dir, dir));
  CHECK(r.status != 0);
  CHECK(r.out.find("--auto-precision needs evaluation data (--eval)") != std::string::npos);

  // a mistyped option gets the nearest name; --help shows the defaults
  r = run(fmt::format("{} --bit 8 --sensitve-bits 8 --out {}/fwy", cli, dir));
  CHECK(r.status != 0);
  CHECK(r.out.find("unknown option --bit; did you mean --bits?") != std::string::npos);
  CHECK(r.out.find("unknown option --sensitve-bits; did you mean --sensitive-bits?") != std::string::npos);
  // the hint comes first even when a required argument is missing too
  r = run(fmt::format("'{}' {}/clf --bit 8", MICROTORCH_LOWER_CLI, dir));
  CHECK(r.status != 0);
  CHECK(r.out.find("unknown option --bit; did you mean --bits?") != std::string::npos);
  r = run(fmt::format("'{}' {}/clf --bits 8", MICROTORCH_LOWER_CLI, dir));
  CHECK(r.status != 0);
  CHECK(r.out.find("--calibration (representative inputs, .npy) is required") != std::string::npos);
  r = run(fmt::format("'{}' -c {}/calib.npy", MICROTORCH_LOWER_CLI, dir));
  CHECK(r.status != 0);
  CHECK(r.out.find("the model (a graph saved by lower::save) is required") != std::string::npos);
  r = run(fmt::format("'{}' --help", MICROTORCH_LOWER_CLI));
  CHECK(r.status == 0);
  CHECK(r.out.find("=16") != std::string::npos);      // --bits
  CHECK(r.out.find("=firmware") != std::string::npos);  // --out
}
