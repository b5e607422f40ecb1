// libFuzzer target: arbitrary bytes as a graph file (the JSON half of lower::save) through
// Graph::from_json, and every graph it accepts through calibrate -> quantize (int16 and int8)
// -> simulate -> report. The weights the JSON refers to are made up from its own
// declarations (zeros of the declared shape and dtype, for shapes up to 4096 elements), so
// the fuzzer reaches validation and the lowering rather than stopping at a missing weight.
// The dictionary graph.dict steers it to the JSON keys, the op names and the sizes near
// overflow (2^31, 2^63, -1).
//
// A finding is anything but a microtorch::Error: a crash, a sanitizer report, a leak, another
// exception (uncaught: libFuzzer reports it), or an output outside its type's range.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "microtorch/error.hpp"
#include "microtorch/lower/emit.hpp"
#include "microtorch/lower/graph.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/lower/simulate.hpp"
#include "microtorch/microtorch.hpp"

namespace mt = microtorch;
namespace lower = microtorch::lower;
using json = nlohmann::json;

namespace {

constexpr std::int64_t kMaxWeight = 4096;  // elements of a made-up weight
constexpr std::int64_t kMaxRun = 1 << 16;  // elements of all values, to run the pipeline

// A small valid shape from the JSON, or false.
bool small_shape(const json& j, mt::Shape& shape, std::int64_t limit) {
  if (!j.is_array() || j.size() > 6) return false;
  std::int64_t n = 1;
  for (const json& d : j) {
    if (!d.is_number_integer() || d.get<std::int64_t>() < 0 || d.get<std::int64_t>() > limit) return false;
    shape.push_back(d.get<std::int64_t>());
    n *= shape.back();
    if (n > limit) return false;
  }
  return true;
}

std::vector<std::pair<std::string, mt::Tensor>> made_up_weights(const json& j) {
  std::vector<std::pair<std::string, mt::Tensor>> w;
  if (!j.is_object() || !j.contains("values") || !j["values"].is_array()) return w;
  for (const json& v : j["values"]) {
    if (!v.is_object() || !v.contains("data") || !v["data"].is_string() || !v.contains("shape") ||
        !v.contains("dtype") || !v["dtype"].is_string()) {
      continue;
    }
    mt::Shape shape;
    if (!small_shape(v["shape"], shape, kMaxWeight)) continue;
    const std::string dt = v["dtype"].get<std::string>();
    for (const mt::Dtype d : {mt::Dtype::Float32, mt::Dtype::Float64, mt::Dtype::Int64, mt::Dtype::Bool}) {
      if (mt::dtype_name(d) == dt) w.emplace_back(v["data"].get<std::string>(), mt::zeros(shape, d));
    }
  }
  return w;
}

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz_graph: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const json j = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  lower::Graph g;
  try {
    g = lower::Graph::from_json(j, made_up_weights(j), "fuzz.json");
  } catch (const mt::IoError&) {
    return 0;  // refused with a message: what should happen
  }
  std::int64_t total = 0;
  for (const auto& v : g.values) total += mt::numel_of(v.shape);
  if (total > kMaxRun) return 0;
  const auto& in = g.value(g.input);
  mt::manual_seed(size);
  const mt::Tensor x = in.dtype == mt::Dtype::Int64 ? mt::zeros(in.shape, in.dtype) : mt::randn(in.shape).to(in.dtype);
  for (const int bits : {16, 8}) {
    try {
      const lower::Calibration cal = lower::calibrate(g, x);
      lower::QuantOptions o;
      o.activation_bits = bits;
      const lower::Program p = lower::quantize(g, cal, o);
      lower::Simulator sim(p);
      const auto y = sim.run(lower::quantize_input(p, x));
      const auto& out = p.buffer(p.output);
      for (const auto v : y) {
        if (v < lower::elem_min(out.elem) || v > lower::elem_max(out.elem)) finding("an output outside its type");
      }
      (void)lower::report(p);
    } catch (const mt::Error&) {
      // refused with a message (an op that does not lower, calibration data with NaN, ...)
    }
  }
  return 0;
}
