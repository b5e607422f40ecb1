// examples/gesture_data.hpp — generated 3-axis accelerometer windows (x, y, z in g, sampled
// at 50 Hz) for the sensor examples, from microtorch's seeded generator.
//
// Classes: idle (gravity + noise), walking (~2 Hz rectified bounce on z, sway on x),
// running (~3 Hz, larger), shaking (~6 Hz on x and y, swinging on z), and two gestures for
// longer windows: flick (one sharp ~60 ms pulse on x at a random moment, 1.5 to 2.5 g) and
// circle (a 0.8 to 1.2 Hz rotation in the x-y plane). Frequency, amplitude and phase (the
// flick's moment) are drawn per window. The examples with four classes draw from the first
// four; drawing the other two draws no more numbers, so their data is the same either way.
// vary() adds per-window gains and offsets.
#pragma once

#include <cmath>
#include <cstdint>

#include <microtorch/microtorch.hpp>

namespace gesture_data {

namespace mt = microtorch;

constexpr std::int64_t kAxes = 3, kClasses = 6;
constexpr double kRate = 50.0;  // Hz
inline const char* const kNames[kClasses] = {"idle", "walking", "running", "shaking", "flick", "circle"};

// One window of class c: [length, kAxes] in g, with Gaussian sensor noise of std `noise`.
// Draws, in order: u (frequency and amplitude), the phase, then the noise.
inline mt::Tensor window(std::int64_t c, std::int64_t length, double noise) {
  const double u = mt::rand({1}).item(), phase = 6.283 * mt::rand({1}).item();
  const double freq[kClasses] = {0.0, 1.6 + 0.8 * u, 2.6 + 0.8 * u, 5.0 + 2.0 * u, 0.0, 0.8 + 0.4 * u};
  const double amp[kClasses] = {0.0, 0.3 + 0.2 * u, 0.8 + 0.4 * u, 0.5 + 0.3 * u, 1.5 + 1.0 * u, 0.5 + 0.3 * u};
  const double at = (0.15 + 0.7 * phase / 6.283) * static_cast<double>(length);  // the flick's centre, in samples
  mt::Tensor w = mt::randn({length, kAxes}) * noise;
  float* p = w.data<float>();
  for (std::int64_t t = 0; t < length; ++t) {
    const double tt = static_cast<double>(t);
    const double s = std::sin(6.283 * freq[c] * tt / kRate + phase), co = std::cos(6.283 * freq[c] * tt / kRate);
    double x = 0, y = 0, z = 0;
    if (c == 1 || c == 2) {  // walking, running: sway on x, rectified bounce on z
      x = 0.3 * amp[c] * s, z = amp[c] * s * s;
    } else if (c == 3) {  // shaking
      x = amp[c] * s, y = amp[c] * co, z = amp[c] * s;
    } else if (c == 4) {  // flick: a Gaussian pulse of std 1.5 samples (30 ms)
      x = amp[c] * std::exp(-0.5 * (tt - at) * (tt - at) / 2.25);
    } else if (c == 5) {  // circle
      x = amp[c] * s, y = amp[c] * std::cos(6.283 * freq[c] * tt / kRate + phase);
    }
    p[t * kAxes + 0] += static_cast<float>(x);
    p[t * kAxes + 1] += static_cast<float>(y);
    p[t * kAxes + 2] += static_cast<float>(1.0 + z);  // gravity on z
  }
  return w;
}

// A window [length, kAxes] as another sensor, held another way, records it: per axis a gain
// in [1 - gain, 1 + gain] and an offset in [-offset, offset] g, drawn in that order.
inline mt::Tensor vary(const mt::Tensor& w, double gain, double offset) {
  const mt::Tensor g = 1.0 + gain * (2.0 * mt::rand({kAxes}) - 1.0), o = offset * (2.0 * mt::rand({kAxes}) - 1.0);
  return w * g + o;
}

}  // namespace gesture_data
