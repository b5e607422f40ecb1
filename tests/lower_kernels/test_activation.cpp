// The activation family of the runtime (src/lower/runtime/mt_activation.c): tanh, sigmoid and
// gelu of int16 inputs, every input, against double at real-valued scales (the measured worst
// errors: MICROTORCH_KERNEL_REPORT=1).
#include "kernel_reference.hpp"

using namespace kernel_ref;

namespace {

using TableFn16 = void (*)(const std::int16_t*, std::int16_t*, int, std::int32_t, int, std::int32_t, int, std::int32_t);
using TableFn8 = void (*)(const std::int16_t*, std::int8_t*, int, std::int32_t, int, std::int32_t, int, std::int32_t);

double phi(double x) { return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); }

}  // namespace

TEST_CASE("lower kernels: tanh, sigmoid and gelu of int16 inputs, every input, against double") {
  std::vector<std::int16_t> x(65536), y(65536);
  std::vector<std::int8_t> y8(65536);
  for (int i = 0; i < 65536; ++i) x[i] = static_cast<std::int16_t>(i - 32768);
  struct Case {
    const char* name;
    TableFn16 f16;
    TableFn8 f8;
    double (*ref)(double);
    double out_unit_log2;  // the kernel's result unit: 2^-20 (tanh), 2^-21 (sigmoid), x 2^-16 (gelu)
    bool times_x;
    double bound16, bound8;
  };
  const Case cases[] = {
      {"tanh", mt_tanh_s16_s16, mt_tanh_s16_s8, [](double v) { return std::tanh(v); }, -20, false, 0.9, 0.51},
      {"sigmoid", mt_sigmoid_s16_s16, mt_sigmoid_s16_s8, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, -21, false, 0.75, 0.51},
      {"gelu", mt_gelu_s16_s16, mt_gelu_s16_s8, [](double v) { return v * phi(v); }, -16, true, 1.05, 0.51},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    // scales: Q3.12, a wide range, |x| < 1, and two real-valued ones
    for (const double sx : {std::ldexp(1.0, -12), std::ldexp(1.0, -8), std::ldexp(1.0, -15), 1.7e-4, 6.1e-4}) {
      double ymax = 0;
      for (int i = 0; i < 65536; i += 7) ymax = std::max(ymax, std::abs(c.ref(sx * x[i])));
      const double sy = ymax / 32767.0, sy8 = ymax / 127.0;
      const auto in = mult(std::ldexp(sx, 20));
      const double unit = c.times_x ? sx * std::exp2(c.out_unit_log2) : std::exp2(c.out_unit_log2);
      const auto out = mult(unit / sy), out8 = mult(unit / sy8);
      c.f16(x.data(), y.data(), 65536, in.first, in.second, out.first, out.second, 0);
      c.f8(x.data(), y8.data(), 65536, in.first, in.second, out8.first, out8.second, 0);
      MaxErr e, e8;
      for (int i = 0; i < 65536; ++i) {
        const double v = c.ref(sx * x[i]);
        e.add(y[i], std::min(32767.0, std::max(-32768.0, v / sy)), "x=" + std::to_string(x[i]));
        e8.add(y8[i], std::min(127.0, std::max(-128.0, v / sy8)), "x=" + std::to_string(x[i]));
      }
      report((std::string(c.name) + " s16 -> s16, scale_x " + std::to_string(sx)).c_str(), e);
      report((std::string(c.name) + " s16 -> s8").c_str(), e8);
      CHECK_ERR(e, c.bound16);
      CHECK_ERR(e8, c.bound8);
    }
  }
}
