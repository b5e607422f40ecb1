// A Conv1d + attention sensor model trained in PyTorch 1.13 (tools/torch_sensor_model.py;
// state dict and held-out gesture windows in tests/fixtures/lower_sensor_cnn*.npz): its C++
// twin (examples/models/sensor_cnn.hpp) loads the state dict strictly and computes PyTorch's
// logits, and it lowers to int8 and int16 on the held-out windows, through the API and through
// microtorch-lower.
//
// The targets: >= 99.5% top-1 agreement with float, max error <= 2% of the logits' range at
// int8 and <= 0.05% at int16. int16 meets them (0.020%), int8 too: 1.80%, 100% agreement. The
// error comes from the int8 activations of the stem: the input, the folded conv + BatchNorm +
// ReLU output and the depthwise output (the weights are not it: at int16 activations with int8
// weights it is 0.54%, the convolutions' weights rounded on their patches' covariance with bias
// correction). All three have a format per channel, which the convolutions reading them fold
// into their weights and biases: the input (raw 3-axis windows whose axes differ in range and
// offset) a scale and a zero point per axis, each axis padded with its own (the caller
// quantizes by axis: <name>_input_scales[], _input_zero_points[]); the ReLU output a scale
// per channel with the zero point -128 they share (the depthwise convolution pads with it);
// the depthwise output a scale and a zero point per channel (the pointwise convolution does
// not pad). With one format for the input the error is 2.81% (3.79% with one format per
// tensor everywhere); with the input alone at int8 (every other value at 16 bits) it is 1.46%
// (1.88% with one format for it). The automatic mode meets 2% with every value int8 and 1% by
// raising the input to 16 bits and the depthwise output to 16x8 (0.87%). Range calibration
// does not close the gap (the quiet windows carry the error; percentile 4.96%, MSE 7.58%
// before: docs/lowering.md). The checks below hold the measured int8 error (<= 1.8%; 2.9% with
// --input-formats tensor), the int16x8 error (<= 0.6%) and the automatic mode's 2%.
#include "../examples/models/sensor_cnn.hpp"
#include "helpers.hpp"
#include "lower_firmware.hpp"
#include "microtorch/io.hpp"
#include "microtorch/lower/accuracy.hpp"
#include "microtorch/lower/emit.hpp"
#include "microtorch/lower/precision.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/lower/simulate.hpp"
#include "microtorch/nn/checkpoint.hpp"

namespace lower = mt::lower;
using mt::Tensor;
using namespace lower_testing;

namespace {

constexpr std::int64_t kClasses = 6;
// the max error's bound, a share of the float logits' range (see the top of this file)
constexpr double kInt8Error = 0.018, kInt16x8Error = 0.006, kInt16Error = 0.0005;
// int8 with one format for the whole input (QuantOptions::input_channel_formats false)
constexpr double kInt8OneInputFormat = 0.029;

Tensor member(const std::string& npz, const std::string& name) {
  for (auto& [k, t] : mt::load_npz(npz)) {
    if (k == name) return t;
  }
  FAIL("no member " << name << " in " << npz);
  return {};
}

struct SensorModel {
  std::string base = std::string(MICROTORCH_FIXTURES_DIR) + "/lower_sensor_cnn";
  sensor_cnn::SensorCNN model{kClasses};
  Tensor calib_x, eval_x, eval_y, eval_logits;  // eval_logits: PyTorch's, for the first 100 of eval_x
  lower::Graph graph;
  lower::Calibration calibration;
  SensorModel() {
    mt::nn::load(model, base + ".npz", /*strict=*/true);
    model.eval();
    calib_x = member(base + "_data.npz", "calib_x");
    eval_x = member(base + "_data.npz", "eval_x");
    eval_y = member(base + "_data.npz", "eval_y");
    eval_logits = member(base + "_data.npz", "eval_logits");
    graph = lower::trace(model, {1, sensor_cnn::kAxes, sensor_cnn::kWindow});
    calibration = lower::calibrate(graph, calib_x);
  }
};

SensorModel& sensor() {
  static SensorModel m;
  return m;
}

lower::QuantOptions bits(int b, const std::string& name) {
  lower::QuantOptions o;
  o.activation_bits = b;
  o.name = name;
  return o;
}

}  // namespace

TEST_CASE("lower: the C++ twin of the PyTorch-trained sensor CNN loads strictly and computes PyTorch's logits") {
  SensorModel& m = sensor();
  // every key of PyTorch's state dict, BatchNorm's num_batches_tracked (int64) included
  const auto state = m.model.state_dict();
  CHECK(state.size() == mt::load_npz(m.base + ".npz").size());
  CHECK(m.model.bn->num_batches_tracked.item<std::int64_t>() > 0);
  mt::NoGradGuard no_grad;
  const Tensor x = m.eval_x.slice(0, 0, m.eval_logits.size(0));
  CHECK_CLOSE(m.model.forward(x), m.eval_logits, 1e-5, 1e-5);
  const double acc = (m.model.forward(m.eval_x).argmax(1) == m.eval_y).to(mt::kFloat32).mean().item();
  MESSAGE("sensor CNN float accuracy on " << m.eval_x.size(0) << " held-out windows: " << 100 * acc << "%");
  CHECK(acc >= 0.9);
}

TEST_CASE("lower: the PyTorch-trained sensor CNN - int8 and int16 >= 99.5% agreement, int16 <= 0.05% error, automatic <= 2%") {
  SensorModel& m = sensor();
  for (const int b : {8, 16}) {
    CAPTURE(b);
    const lower::Program p = lower::quantize(m.graph, m.calibration, bits(b, "sensor"));
    const lower::Accuracy a = lower::measure(m.graph, p, m.eval_x);
    MESSAGE("sensor CNN int" << b << ": max error " << 100 * a.relative_error() << "% of the logits' range, agreement "
                             << 100 * a.agreement << "%");
    CHECK(a.samples == m.eval_x.size(0));
    CHECK(a.relative_error() <= (b == 8 ? kInt8Error : kInt16Error));
    CHECK(a.agreement >= 0.995);
    // the norm and the relus fold into the convolutions: three conv steps, then the pool; at
    // int8 the stem's input (a zero point per axis) and the ReLU's output carry zero points,
    // and the two padded convolutions reading them pad them with them first: the input axis by
    // axis
    std::int64_t convs = 0, pads = 0;
    for (const lower::Step& s : p.steps) convs += s.kernel.rfind("mt_conv_", 0) == 0, pads += s.kernel == "mt_pad_s8";
    CHECK(convs == 3);
    CHECK(pads == (b == 8 ? sensor_cnn::kAxes + 1 : 0));
    CHECK(p.buffer(p.input).channel_scales.size() == (b == 8 ? static_cast<std::size_t>(sensor_cnn::kAxes) : 0));
  }
  // one format for the whole input: what the formats per axis gain
  lower::QuantOptions one = bits(8, "sensor_one");
  one.input_channel_formats = false;
  const lower::Accuracy a1 = lower::measure(m.graph, lower::quantize(m.graph, m.calibration, one), m.eval_x);
  MESSAGE("sensor CNN int8, one format for the input: max error " << 100 * a1.relative_error() << "%");
  CHECK(a1.relative_error() <= kInt8OneInputFormat);
  CHECK(a1.relative_error() > kInt8Error);
  // int16 activations with int8 weights: the weights cost little
  lower::QuantOptions o16x8 = bits(16, "sensor16x8");
  o16x8.weight_bits = 8;
  const lower::Accuracy a16x8 = lower::measure(m.graph, lower::quantize(m.graph, m.calibration, o16x8), m.eval_x);
  MESSAGE("sensor CNN int16x8: max error " << 100 * a16x8.relative_error() << "%");
  CHECK(a16x8.relative_error() <= kInt16x8Error);
  // the automatic mode reaches 2% by raising activations only: every weight byte stays int8
  lower::QuantOptions base = bits(8, "sensor_auto");
  const lower::PrecisionSearch s = lower::choose_precision(m.graph, m.calibration, m.eval_x, base, {.max_error = 0.02});
  INFO(s.report);
  CHECK(s.met);
  CHECK(s.accuracy.relative_error() <= 0.02);
  CHECK(s.accuracy.agreement >= 0.995);
  CHECK(s.int8_weight_share >= 0.99);
}

TEST_CASE("microtorch-lower: the PyTorch-trained sensor CNN from a saved graph, int8 and int16, as through the API") {
  SensorModel& m = sensor();
  const std::string dir = temp_dir("cli_sensor");
  lower::save(m.graph, dir + "/sensor");
  mt::save_npy(m.calib_x, dir + "/calib.npy");
  mt::save_npy(m.eval_x, dir + "/eval.npy");
  for (const int b : {8, 16}) {
    CAPTURE(b);
    const std::string name = fmt::format("sensor{}", b);
    const Run r = run(fmt::format("'{}' {}/sensor -c {}/calib.npy -e {}/eval.npy --bits {} --name {} --out {}/fw{}",
                                  MICROTORCH_LOWER_CLI, dir, dir, dir, b, name, dir, b));
    INFO(r.out);
    REQUIRE(r.status == 0);
    const lower::Program p = lower::quantize(m.graph, m.calibration, bits(b, name));
    const lower::Accuracy a = lower::measure(m.graph, p, m.eval_x);
    CHECK(r.out.find(fmt::format("max error {:.3f}% of the float output range, argmax agreement {:.2f}%",
                                 100 * a.relative_error(), 100 * a.agreement)) != std::string::npos);
    CHECK(a.relative_error() <= (b == 8 ? kInt8Error : kInt16Error));
    CHECK(a.agreement >= 0.995);
    // the same program as through the API: the same C, byte for byte
    lower::emit_c(p, fmt::format("{}/api{}", dir, b));
    CHECK(read_file(fmt::format("{}/fw{}/{}.c", dir, b, name)) == read_file(fmt::format("{}/api{}/{}.c", dir, b, name)));
    // the int8 input's formats per axis in the header; the int16 input's one scale
    const std::string h = read_file(fmt::format("{}/fw{}/{}.h", dir, b, name));
    CHECK((h.find(fmt::format("#define SENSOR{}_INPUT_CHANNELS {}\n", b, sensor_cnn::kAxes)) != std::string::npos) == (b == 8));
    CHECK((h.find(fmt::format("#define SENSOR{}_INPUT_SCALE ", b)) != std::string::npos) == (b == 16));
  }
  // --input-formats tensor: one format for the input, as input_channel_formats = false
  const Run r = run(fmt::format("'{}' {}/sensor -c {}/calib.npy -e {}/eval.npy --bits 8 --input-formats tensor --name "
                                "sensor_one --out {}/fw_one",
                                MICROTORCH_LOWER_CLI, dir, dir, dir, dir));
  INFO(r.out);
  REQUIRE(r.status == 0);
  lower::QuantOptions one = bits(8, "sensor_one");
  one.input_channel_formats = false;
  const lower::Program p1 = lower::quantize(m.graph, m.calibration, one);
  const lower::Accuracy a1 = lower::measure(m.graph, p1, m.eval_x);
  CHECK(r.out.find(fmt::format("max error {:.3f}% of the float output range", 100 * a1.relative_error())) != std::string::npos);
  lower::emit_c(p1, dir + "/api_one");
  CHECK(read_file(dir + "/fw_one/sensor_one.c") == read_file(dir + "/api_one/sensor_one.c"));
  CHECK(read_file(dir + "/fw_one/sensor_one.h").find("#define SENSOR_ONE_INPUT_SCALE ") != std::string::npos);
  // bad input: a value --input-formats does not take
  const Run bad = run(fmt::format("'{}' {}/sensor -c {}/calib.npy --input-formats axis", MICROTORCH_LOWER_CLI, dir, dir));
  CHECK(bad.status != 0);
  CHECK(bad.out.find("--input-formats") != std::string::npos);
}

TEST_CASE("lower: the PyTorch-trained sensor CNN's int8 firmware, a format per input axis, is bit-exact on QEMU") {
  if (!have_tool("arm-none-eabi-gcc") || !have_tool("qemu-system-arm")) {
    MESSAGE("skipped: arm-none-eabi-gcc or qemu-system-arm not installed (tools/install-deps.sh adds them)");
    return;
  }
  SensorModel& m = sensor();
  const lower::Program p = lower::quantize(m.graph, m.calibration, bits(8, "sensor_axes"));
  REQUIRE(p.buffer(p.input).channel_scales.size() == static_cast<std::size_t>(sensor_cnn::kAxes));
  std::vector<std::vector<std::int64_t>> inputs;
  for (std::int64_t i = 0; i < 6; ++i) inputs.push_back(lower::quantize_input(p, m.eval_x.slice(0, i, i + 1)));
  check_firmware(p, inputs);
}

TEST_CASE("lower: a convolution rounds its weights on its patches' covariance and takes the mean's error back in "
          "the bias") {
  // A stem reading windows with a large offset (the raw readings of a sensor at rest, 3 g)
  // and a small signal: with weights rounded to nearest, (W_q - W) E[p] is a constant error
  // per channel as large as the signal's; with the patches' covariance and bias correction
  // the error has no mean and is smaller.
  mt::manual_seed(5);
  mt::nn::Conv1d conv(3, 8, 5, mt::nn::Conv1dOptions{.padding = 2});
  conv.eval();
  const Tensor xs = mt::randn({64, 3, 32}) * 0.1 + 3.0;
  const lower::Graph g = lower::trace(conv, {1, 3, 32});
  const lower::Calibration cal = lower::calibrate(g, xs);
  mt::NoGradGuard no_grad;
  const Tensor f = conv.forward(xs);
  auto errors = [&](lower::WeightRounding rounding) {
    lower::QuantOptions o;
    o.activation_bits = 16, o.weight_bits = 8, o.rounding = rounding, o.name = "stem";
    lower::Simulator sim(lower::quantize(g, cal, o));
    const Tensor e = (sim.forward(xs) - f).to(mt::kFloat64);
    // the largest per-channel mean of the error, and the error's root mean square
    const Tensor mean = e.mean({0, 2});
    double worst = 0;
    for (std::int64_t c = 0; c < mean.numel(); ++c) worst = std::max(worst, std::abs(mean.data<double>()[c]));
    return std::pair{worst, std::sqrt((e * e).mean().item())};
  };
  const auto [bias_nearest, rms_nearest] = errors(lower::WeightRounding::Nearest);
  const auto [bias_fed, rms_fed] = errors(lower::WeightRounding::ErrorFeedback);
  MESSAGE("conv on offset windows, int16x8: nearest: mean error up to " << bias_nearest << ", rms " << rms_nearest
                                                                         << "; error feedback + bias correction: "
                                                                         << bias_fed << ", rms " << rms_fed);
  CHECK(bias_fed < 0.1 * bias_nearest);
  CHECK(rms_fed < 0.5 * rms_nearest);
}
