// Models whose inputs are raw real numbers, trained in PyTorch 1.13
// (tools/torch_lowering_raw_inputs.py; state dicts and held-out data in tests/fixtures): a
// post-LN sensor encoder on raw 3-axis windows (offsets, bumps, axes of unequal range) and a
// pre-LN GELU classifier on scikit-learn's digits. The C++ twins reproduce PyTorch's logits;
// the input has a precision of its own (QuantOptions::input_bits), which the automatic mode
// chooses like a layer's; each model meets <= 2% max error at int8 or <= 1% in the automatic
// mode with >= 80% of its weight bytes int8; an int16 input is bit-exact on QEMU.
#include "../examples/models/digits_classifier.hpp"
#include "../examples/models/sensor_encoder.hpp"
#include "helpers.hpp"
#include "lower_firmware.hpp"
#include "microtorch/io.hpp"
#include "microtorch/lower/accuracy.hpp"
#include "microtorch/lower/precision.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/lower/simulate.hpp"
#include "microtorch/nn/checkpoint.hpp"

namespace lower = mt::lower;
using mt::Tensor;
using namespace lower_testing;

namespace {

Tensor member(const std::string& npz, const std::string& name) {
  for (auto& [k, t] : mt::load_npz(npz)) {
    if (k == name) return t;
  }
  FAIL("no member " << name << " in " << npz);
  return {};
}

struct RawModel {
  std::shared_ptr<mt::nn::Module> module;
  Tensor eval_x, eval_logits;  // eval_logits: PyTorch's, for the first 100 of eval_x
  lower::Graph graph;
  lower::Calibration calibration;
};

template <class M>
RawModel load(const std::string& id, const mt::Shape& sample) {
  const std::string base = std::string(MICROTORCH_FIXTURES_DIR) + "/lower_" + id;
  RawModel m;
  auto model = std::make_shared<M>();
  mt::nn::load(*model, base + ".npz");
  model->eval();
  m.module = model;
  m.eval_x = member(base + "_data.npz", "eval_x");
  m.eval_logits = member(base + "_data.npz", "eval_logits");
  m.graph = lower::trace(*model, mt::zeros(sample));
  m.calibration = lower::calibrate(m.graph, member(base + "_data.npz", "calib_x"));
  return m;
}

RawModel& sensor() {
  static RawModel m = load<sensor_encoder::SensorEncoder>(
      "sensor_encoder", {1, sensor_encoder::kWindow, sensor_encoder::kAxes});
  return m;
}
RawModel& digits() {
  static RawModel m = load<digits_classifier::DigitsClassifier>("digits_classifier", {1, 8, 8});
  return m;
}

lower::QuantOptions int8(int input_bits, const std::string& name) {
  lower::QuantOptions o;
  o.activation_bits = 8, o.input_bits = input_bits, o.name = name;
  return o;
}

// The input's row of the per-layer table.
const lower::LayerError& input_row(const lower::Accuracy& a, const lower::Graph& g) {
  REQUIRE(!a.layers.empty());
  REQUIRE(a.layers.front().value == g.input);
  return a.layers.front();
}

// How many layers the search raised above 8 bits.
int raised_layers(const lower::PrecisionSearch& s) {
  int n = 0;
  for (const lower::LayerChoice& c : s.layers) n += c.activation_bits == 16;
  return n;
}

}  // namespace

TEST_CASE("lower: the C++ twins of the PyTorch-trained raw-input models compute PyTorch's logits") {
  for (RawModel* m : {&sensor(), &digits()}) {
    mt::NoGradGuard no_grad;
    const Tensor x = m->eval_x.slice(0, 0, m->eval_logits.size(0));
    CHECK_CLOSE(m->module->forward(x), m->eval_logits, 1e-4, 1e-4);
  }
}

TEST_CASE("lower: an int16 input keeps raw readings; the per-layer table shows the input's error") {
  for (RawModel* m : {&sensor(), &digits()}) {
    const lower::Program p8 = lower::quantize(m->graph, m->calibration, int8(0, "in8"));
    const lower::Program p16 = lower::quantize(m->graph, m->calibration, int8(16, "in16"));
    CHECK(p8.buffer(p8.input).elem == lower::Elem::S8);
    REQUIRE(p16.buffer(p16.input).elem == lower::Elem::S16);
    // the layers keep their precision: the same int8 weights (the first layer's bias becomes
    // int64, the accumulator of int16 x int8)
    CHECK(lower::int8_weight_bytes(p16).first == lower::int8_weight_bytes(p8).first);
    const lower::Accuracy a8 = lower::measure(m->graph, p8, m->eval_x), a16 = lower::measure(m->graph, p16, m->eval_x);
    const lower::LayerError &i8 = input_row(a8, m->graph), &i16 = input_row(a16, m->graph);
    MESSAGE(m->module->type_name() << ": input int8 max error " << i8.max_abs_error << " (" << i8.snr_db
                                   << " dB), output " << 100 * a8.relative_error() << "%; input int16 "
                                   << i16.max_abs_error << " (" << i16.snr_db << " dB), output "
                                   << 100 * a16.relative_error() << "%");
    CHECK(i8.format.rfind("int8_t", 0) == 0);
    CHECK(i16.format.rfind("int16_t", 0) == 0);
    CHECK(i16.max_abs_error < i8.max_abs_error / 50);
    CHECK(lower::layer_report(a16).find("%0 (input)") != std::string::npos);
  }
  // On the raw sensor windows the int8 input is what costs the most: int16 removes it.
  RawModel& m = sensor();
  const lower::Accuracy a8 = lower::measure(m.graph, lower::quantize(m.graph, m.calibration, int8(0, "s8")), m.eval_x);
  const lower::Accuracy a16 = lower::measure(m.graph, lower::quantize(m.graph, m.calibration, int8(16, "s16")), m.eval_x);
  CHECK(a16.relative_error() < a8.relative_error());
  CHECK_THROWS_MSG(lower::quantize(sensor().graph, sensor().calibration, int8(12, "bad")), mt::ValueError,
                   "input_bits must be 16 or 8");
}

TEST_CASE("lower: raw-input models meet <= 2% at int8, or <= 1% automatically with >= 80% int8 weight bytes") {
  lower::PrecisionSearch sensor_search;
  for (RawModel* m : {&sensor(), &digits()}) {
    const lower::Accuracy a8 =
        lower::measure(m->graph, lower::quantize(m->graph, m->calibration, int8(0, "m8")), m->eval_x);
    const lower::PrecisionSearch s =
        lower::choose_precision(m->graph, m->calibration, m->eval_x, int8(0, "auto"), {.max_error = 0.01});
    INFO(s.report);
    MESSAGE(m->module->type_name() << ": int8 max error " << 100 * a8.relative_error() << "%, agreement "
                                   << 100 * a8.agreement << "%; auto 1%: " << 100 * s.accuracy.relative_error()
                                   << "% with " << 100 * s.int8_weight_share << "% of weight bytes int8, input at "
                                   << s.input.activation_bits << " bits");
    CHECK((a8.relative_error() <= 0.02 || (s.met && s.int8_weight_share >= 0.8)));
    CHECK(a8.agreement >= 0.98);
    // the input is one of the search's decisions, with a row of its own in the report
    CHECK(s.input.module == "input");
    CHECK(!s.input.why.empty());
    CHECK(s.report.find("(input)") != std::string::npos);
    CHECK(s.options.input_bits == s.input.activation_bits);
    // the chosen options, lowered and measured independently, meet the target
    const lower::Accuracy a = lower::measure(m->graph, lower::quantize(m->graph, m->calibration, s.options), m->eval_x);
    CHECK(a.relative_error() == doctest::Approx(s.accuracy.relative_error()));
    if (m == &sensor()) sensor_search = s;
  }
  // On the sensor encoder's raw windows the input is the most sensitive decision: for a
  // target int8 misses, the search raises the input first, and that alone meets it.
  CHECK(sensor_search.input.sensitivity > 0);
  for (const lower::LayerChoice& c : sensor_search.layers) CHECK(c.sensitivity < sensor_search.input.sensitivity);
  const lower::PrecisionSearch s = lower::choose_precision(sensor().graph, sensor().calibration, sensor().eval_x,
                                                           int8(0, "auto"), {.max_error = 0.005});
  INFO(s.report);
  CHECK(raised_layers(s) == 0);
  CHECK(s.met);
  CHECK(s.int8_weight_share >= 0.8);
  CHECK(s.input.activation_bits == 16);
  CHECK(s.input.why.find("raised to 16") != std::string::npos);
}

TEST_CASE("lower: an int16 input in an int8 firmware is bit-exact on host, UBSan, M0, M4, M7 and M33") {
  if (!have_tool("arm-none-eabi-gcc") || !have_tool("qemu-system-arm")) {
    MESSAGE("skipped: arm-none-eabi-gcc or qemu-system-arm not installed (tools/install-deps.sh adds them)");
    return;
  }
  RawModel& m = sensor();
  const lower::Program p = lower::quantize(m.graph, m.calibration, int8(16, "sensor_in16"));
  std::vector<std::vector<std::int64_t>> inputs;
  for (std::int64_t i = 0; i < 4; ++i) inputs.push_back(lower::quantize_input(p, m.eval_x.slice(0, i, i + 1)));
  check_firmware(p, inputs);
  const std::string dir = temp_dir("sensor_in16_header");
  lower::emit_c(p, dir);
  const std::string header = read_file(dir + "/sensor_in16.h");
  INFO(header);
  CHECK(header.find("int sensor_in16_run(const int16_t *in,") != std::string::npos);
}

TEST_CASE("microtorch-lower: --input-bits 16 gives an int8 firmware an int16 input") {
  RawModel& m = sensor();
  const std::string dir = temp_dir("cli_input_bits");
  lower::save(m.graph, dir + "/sensor");
  mt::save_npy(member(std::string(MICROTORCH_FIXTURES_DIR) + "/lower_sensor_encoder_data.npz", "calib_x"),
               dir + "/calib.npy");
  const std::string cli = fmt::format("'{}' {}/sensor -c {}/calib.npy --bits 8", MICROTORCH_LOWER_CLI, dir, dir);
  Run r = run(fmt::format("{} --input-bits 16 --name sensor16 --out {}/fw16", cli, dir));
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(read_file(dir + "/fw16/sensor16.h").find("int sensor16_run(const int16_t *in,") != std::string::npos);
  r = run(fmt::format("{} --name sensor8 --out {}/fw8", cli, dir));
  REQUIRE(r.status == 0);
  CHECK(read_file(dir + "/fw8/sensor8.h").find("int sensor8_run(const int8_t *in,") != std::string::npos);
  r = run(fmt::format("{} --input-bits 12 --out {}/fwbad", cli, dir));
  CHECK(r.status != 0);
  CHECK(r.out.find("--input-bits") != std::string::npos);
}
