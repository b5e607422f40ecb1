// microtorch-lower — lower a saved graph (lower::save: <prefix>.json + <prefix>.npz) to a
// fixed-point C99 firmware folder, from the command line.
//
//   microtorch-lower out/iris --calibration out/iris_calib.npy --bits 8 --out out/fw
//   microtorch-lower out/iris -c calib.npy --bits 16 --weight-bits 8 --check 20 -t cortex-m0 -t cortex-m4
//   microtorch-lower out/tagger -c calib.npy --bits 8 --eval eval.npy --precision encoder.norm=16x8
//   microtorch-lower out/tagger -c calib.npy --eval eval.npy --auto-precision 1%
//
// lower::to_firmware from the command line. Prints the lowering report, the per-tensor
// formats and the memory plan; --eval also the accuracy against the float graph and the
// per-layer error table (and puts them in the report file); --check N verifies the firmware
// on N samples on the host and on QEMU for each --target, with instructions per inference.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <microtorch/error.hpp>
#include <microtorch/io.hpp>
#include <microtorch/lower/firmware.hpp>
#include <microtorch/nearest_name.hpp>
#include <microtorch/ops.hpp>

namespace lower = microtorch::lower;

namespace {

// "encoder.layers.0=16x8", "%12=8", "head=16"
lower::LayerPrecision parse_precision(const std::string& s) {
  const auto eq = s.rfind('=');
  if (eq == std::string::npos || eq == 0) {
    throw microtorch::ValueError(fmt::format("--precision {}: expected MODULE=BITS or %ID=BITS with BITS 8, 16 or 16x8", s));
  }
  const std::string match = s.substr(0, eq), bits = s.substr(eq + 1);
  if (bits == "8") return {match, 8, 8};
  if (bits == "16") return {match, 16, 16};
  if (bits == "16x8") return {match, 16, 8};
  throw microtorch::ValueError(fmt::format("--precision {}: the bits must be 8, 16 or 16x8, got \"{}\"", s, bits));
}

// "1%" or "0.01"
double parse_fraction(const std::string& s, const char* option) {
  try {
    std::size_t used = 0;
    double v = std::stod(s, &used);
    if (used < s.size() && s.substr(used) == "%") v /= 100, used = s.size();
    if (used == s.size() && v > 0 && v <= 1) return v;
  } catch (const std::exception&) {
  }
  throw microtorch::ValueError(fmt::format("{} {}: expected a fraction in (0, 1] or a percentage (\"1%\")", option, s));
}

// "unknown option --bit; did you mean --bits?" for each argument the parser left over.
std::string unknown_arguments(const CLI::App& app, const std::vector<std::string>& extras) {
  std::string msg;
  bool after_option = false;  // a value after an unknown option is its value, not another error
  for (const std::string& arg : extras) {
    if (arg.size() < 2 || arg[0] != '-') {
      if (!after_option) msg += fmt::format("unexpected argument \"{}\" (one model prefix only)\n", arg);
      after_option = false;
      continue;
    }
    after_option = true;
    const std::string given = arg.substr(0, arg.find('='));
    std::vector<std::string> names;
    for (const CLI::Option* o : app.get_options()) {
      for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
    }
    const std::string best = microtorch::nearest_name(given, names);
    msg += best.empty() ? fmt::format("unknown option {} (see --help)\n", given)
                        : fmt::format("unknown option {}; did you mean {}?\n", given, best);
  }
  return msg;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Lower a traced microtorch model to fixed-point C99 firmware (weights in flash, one static arena)."};
  std::string prefix, calibration, out = "firmware", name = "model", attention = "stream";
  std::vector<std::string> targets;
  std::string scheme = "affine", range = "minmax", rounding = "gptq", eval, auto_precision, min_agreement;
  std::string input_formats = "channel";
  std::vector<std::string> precision;
  int bits = 16, weight_bits = 0, input_bits = 0, check = 0, sensitive_bits = 16;
  double percentile = 99.99, margin = 0.25;
  bool print_graph = false, print_program = false, no_count = false, no_int16_compare = false;
  std::string work;
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.allow_extras();                               // unknown options get a did-you-mean below
  // The model and --calibration are required, checked after the unknown options: a
  // mistyped option's did-you-mean comes first.
  app.add_option("model", prefix, "graph saved by lower::save (reads <model>.json and <model>.npz; a .json or .npz "
                                  "ending names the same pair); required");
  app.add_option("-c,--calibration", calibration,
                 "representative inputs (.npy) stacked along dim 0: [N * B, ...] for a graph input [B, ...]; required")
      ->check(CLI::ExistingFile);
  app.add_option("-b,--bits", bits, "activation bits")->check(CLI::IsMember({8, 16}));
  app.add_option("-w,--weight-bits", weight_bits, "weight bits (default: the activation bits)")
      ->check(CLI::IsMember({8, 16}));
  app.add_option("--input-bits", input_bits,
                 "bits of the input when it holds real numbers (default: the activation bits); 16 keeps raw sensor "
                 "readings of unequal range")
      ->check(CLI::IsMember({8, 16}));
  app.add_option("--input-formats", input_formats,
                 "an int8 input that only convolutions read (a conv stem): channel (a scale and zero point per channel, "
                 "<name>_input_scales[] in the header) or tensor (one: <NAME>_INPUT_SCALE)")
      ->check(CLI::IsMember({"channel", "tensor"}));
  app.add_option("-s,--scheme", scheme,
                 "number formats: affine (int8 activations with zero points), symmetric, pow2 (power-of-two scales: "
                 "shifts, no multiplies)")
      ->check(CLI::IsMember({"affine", "symmetric", "pow2"}));
  app.add_option("-p,--precision", precision,
                 "a layer's precision, MODULE=BITS or %ID=BITS with BITS 8, 16 or 16x8 (int16 activations, int8 "
                 "weights); repeat it, the last match wins")
      ->take_all();
  app.add_option("--sensitive-bits", sensitive_bits,
                 "bits of the residual stream, attention and the output in int8 layers (8: everything int8)")
      ->check(CLI::IsMember({8, 16}));
  app.add_option("--range", range, "activation range from the calibration: minmax, percentile or mse")
      ->check(CLI::IsMember({"minmax", "percentile", "mse"}));
  app.add_option("--percentile", percentile, "the central share (%) kept by --range percentile")
      ->check(CLI::Range(50.0, 100.0));
  app.add_option("--margin", margin, "widen each calibrated range by this share of its width at each end")
      ->check(CLI::Range(0.0, 4.0));
  app.add_option("--rounding", rounding, "weight rounding: gptq (error feedback from the calibration) or nearest")
      ->check(CLI::IsMember({"gptq", "nearest"}));
  app.add_option("-e,--eval", eval,
                 "evaluation data (.npy, stacked like the calibration): print the agreement and max error against "
                 "float and the per-layer error table")
      ->check(CLI::ExistingFile);
  app.add_option("--auto-precision", auto_precision,
                 "choose each layer's precision (8, 16x8, 16), the cheapest that keeps the max error on --eval within "
                 "this share of the output range (\"1%\" or 0.01), and the input's (8, 16); replaces --bits, --weight-bits, "
                 "--input-bits and --precision");
  app.add_option("--min-agreement", min_agreement, "with --auto-precision: also keep the argmax agreement >= this");
  app.add_option("-a,--attention", attention, "attention kernel")->check(CLI::IsMember({"stream", "twopass"}));
  app.add_option("-n,--name", name, "C identifier prefix of the firmware (<name>_run, <name>.h)");
  app.add_option("-o,--out", out, "output folder");
  app.add_option("--check", check,
                 "verify the firmware on the first N evaluation samples (else calibration samples): host, UBSan/ASan "
                 "and QEMU for each --target (default cortex-m0, cortex-m4, cortex-m7, cortex-m33), with instruction "
                 "counts; exit 1 unless every build prints the simulator's integers")
      ->check(CLI::NonNegativeNumber);
  app.add_option("-t,--target,--size", targets,
                 "a CPU to report flash/RAM for (arm-none-eabi-size, riscv64-unknown-elf-size) and to verify on with "
                 "--check: cortex-m0, cortex-m0plus, cortex-m3, cortex-m4, cortex-m7, cortex-m33, cortex-m55, rv32imc, "
                 "rv32imac, rv32imafc; repeat it for several")
      ->take_all();
  app.add_option("--work", work, "with --check: the folder for the check program and builds (default <out>.verify)");
  app.add_flag("--no-count", no_count, "with --check: no instruction counts");
  app.add_flag("--no-int16-compare", no_int16_compare,
               "with --check of an int8 model: do not also lower, link and run it at int16 to say whether int8 pays "
               "for itself (halves the check's time)");
  std::vector<std::string> train;
  std::string numeric = "integer", loss = "cross_entropy";
  double lr = 0.01, momentum = 0.0, weight_decay = 0.0;
  std::int64_t batch = 1;
  app.add_option("--train", train,
                 "also emit a training step (<name>_train_step) for these parameters: named_parameters() names, "
                 "patterns with *, @biases, @layer_norms; `--train last` for the last linear layer's weight and bias")
      ->take_all();
  app.add_option("--numeric", numeric, "the training step's arithmetic: integer (every core, the default: the last linear layer's weight and bias, "
                 "cross entropy) or float32 (FPU cores)")
      ->check(CLI::IsMember({"integer", "float32"}));
  app.add_option("--loss", loss, "the training loss")->check(CLI::IsMember({"cross_entropy", "mse"}));
  app.add_option("--lr", lr, "the training step's learning rate")->check(CLI::PositiveNumber);
  app.add_option("--momentum", momentum, "SGD momentum")->check(CLI::Range(0.0, 0.999));
  app.add_option("--weight-decay", weight_decay, "SGD weight decay")->check(CLI::NonNegativeNumber);
  app.add_option("--batch", batch, "samples per training step")->check(CLI::PositiveNumber);
  app.add_flag("--print-graph", print_graph, "print the traced graph");
  app.add_flag("--print-program", print_program, "print the kernel calls");
  CLI11_PARSE(app, argc, argv);
  if (!app.remaining().empty()) {
    fmt::print(stderr, "microtorch-lower: {}", unknown_arguments(app, app.remaining()));
    return 2;
  }
  for (const auto& [given, what] : {std::pair{prefix.empty(), "the model (a graph saved by lower::save)"},
                                    std::pair{calibration.empty(), "--calibration (representative inputs, .npy)"}}) {
    if (given) {
      fmt::print(stderr, "microtorch-lower: {} is required; see --help\n", what);
      return 2;
    }
  }

  try {
    const lower::Graph graph = lower::load(prefix);
    if (print_graph) fmt::print("{}\n", graph.to_string());
    const microtorch::Tensor data = microtorch::load_npy(calibration);
    lower::QuantOptions options;
    options.activation_bits = bits;
    options.weight_bits = weight_bits;
    options.input_bits = input_bits;
    options.input_channel_formats = input_formats == "channel";
    options.scheme = scheme == "affine"      ? lower::Scheme::Affine
                     : scheme == "symmetric" ? lower::Scheme::Symmetric
                                             : lower::Scheme::PowerOfTwo;
    for (const std::string& p : precision) options.precision.push_back(parse_precision(p));
    options.sensitive_bits = sensitive_bits;
    options.range = range == "minmax" ? lower::RangeMethod::MinMax
                    : range == "mse"  ? lower::RangeMethod::Mse
                                      : lower::RangeMethod::Percentile;
    options.percentile = percentile;
    options.margin = margin;
    options.rounding = rounding == "gptq" ? lower::WeightRounding::ErrorFeedback : lower::WeightRounding::Nearest;
    options.attention = attention == "stream" ? lower::AttentionKernel::Streaming : lower::AttentionKernel::TwoPass;
    options.name = name;
    microtorch::Tensor eval_data;
    if (!eval.empty()) eval_data = microtorch::load_npy(eval);
    lower::FirmwareOptions fo;
    fo.quantize = options;
    if (!auto_precision.empty()) {
      if (eval.empty()) throw microtorch::ValueError("--auto-precision needs evaluation data (--eval)");
      lower::PrecisionTarget target;
      target.max_error = parse_fraction(auto_precision, "--auto-precision");
      if (!min_agreement.empty()) target.agreement = parse_fraction(min_agreement, "--min-agreement");
      fo.auto_precision = target;
    } else if (!min_agreement.empty()) {
      throw microtorch::ValueError("--min-agreement is a target for --auto-precision");
    }
    if (!train.empty()) {
      lower::TrainOptions t;
      if (!(train.size() == 1 && train[0] == "last")) t.parameters = train;
      t.numeric = numeric == "float32" ? lower::Numeric::Float32 : lower::Numeric::Integer;
      t.loss = loss == "mse" ? lower::LossKind::Mse : lower::LossKind::CrossEntropy;
      t.lr = lr, t.momentum = momentum, t.weight_decay = weight_decay, t.batch = batch;
      fo.train = t;
    }
    fo.check_inputs = check;
    fo.verify.cpus = targets;
    if (check > 0 && targets.empty()) fo.verify.cpus = lower::VerifyOptions{}.cpus;
    fo.verify.count_instructions = !no_count;
    fo.compare_int16 = !no_int16_compare;
    fo.verify.work = work;
    const lower::Firmware fw = lower::to_firmware(graph, data, eval_data, out, fo);
    for (const std::string& w : fw.program.warnings) fmt::print(stderr, "microtorch-lower: warning: {}\n", w);
    if (print_program) fmt::print("{}\n", fw.program.to_string());
    fmt::print("{}\n{}\n{}\n", lower::report(fw.program), fw.program.format_table(), fw.program.memory_plan());
    if (!fw.program.evaluation.empty()) fmt::print("{}\n", fw.program.evaluation);
    fmt::print("{}", fw.report());
    if (check > 0 && !fw.verification.passed) {
      fmt::print(stderr, "microtorch-lower: the firmware was not verified: {}\n", fw.verification.summary());
      return 1;
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "microtorch-lower: {}\n", e.what());
    return 1;
  }
  return 0;
}
