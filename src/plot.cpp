// The SVG pictures of microtorch/plot.hpp. Layout is computed from estimated text widths
// (DejaVu Sans, the usual sans-serif of a Linux renderer, erring wide), so every title and
// label fits its canvas; tools/check_svg.py renders the demo's figures to prove it.
#include "microtorch/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "microtorch/display.hpp"
#include "microtorch/error.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::display {

namespace {

constexpr double kFont = 11, kTitleFont = 13;
constexpr const char* kPalette[] = {"#08519c", "#e6550d", "#31a354", "#756bb1", "#636363", "#d6616b"};

// Width of a line of text at `font` px, per character class of DejaVu Sans (rounded up).
double text_width(std::string_view s, double font) {
  double em = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) == 0x80) continue;  // a UTF-8 continuation byte: counted with its first byte
    if (c >= 0x80) em += 0.8;
    else if (std::string_view(" .,:;'|!ijlI()[]/").find(static_cast<char>(c)) != std::string_view::npos) em += 0.36;
    else if (c >= '0' && c <= '9') em += 0.66;
    else if (c >= 'A' && c <= 'Z') em += 0.76;
    else if (c == 'm' || c == 'w' || c == 'M' || c == 'W') em += 0.92;
    else em += 0.62;
  }
  return em * font;
}

// A title in lines of at most `width` px: one line at the title size, or at the label
// size, or broken at spaces into several lines at the label size.
struct Title {
  std::vector<std::string> lines;
  double font = kTitleFont;
  double height() const { return lines.empty() ? 0 : static_cast<double>(lines.size()) * (font + 5) + 6; }
};

Title fit_title(const std::string& title, double width) {
  Title t;
  if (title.empty()) return t;
  for (const double f : {kTitleFont, kFont}) {
    if (text_width(title, f) <= width) {
      t.lines = {title};
      t.font = f;
      return t;
    }
  }
  t.font = kFont;
  std::string line;
  std::size_t start = 0;
  while (start <= title.size()) {
    std::size_t end = title.find(' ', start);
    if (end == std::string::npos) end = title.size();
    const std::string word = title.substr(start, end - start);
    const std::string joined = line.empty() ? word : line + " " + word;
    if (!line.empty() && text_width(joined, t.font) > width) {
      t.lines.push_back(line);
      line = word;
    } else {
      line = joined;
    }
    start = end + 1;
  }
  if (!line.empty()) t.lines.push_back(line);
  return t;
}

std::string draw_title(const Title& t, double x, double y) {
  std::string s;
  for (std::size_t i = 0; i < t.lines.size(); ++i) {
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" font-weight=\"bold\">{}</text>", x,
                     y + static_cast<double>(i + 1) * (t.font + 5) - 3, t.font, escape(t.lines[i]));
  }
  return s;
}

std::string svg_open(double width, double height, const char* cls) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"{0}\" width=\"{1:.0f}\" height=\"{2:.0f}\" "
      "viewBox=\"0 0 {1:.0f} {2:.0f}\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"{3}\">"
      "<rect width=\"{1:.0f}\" height=\"{2:.0f}\" fill=\"#ffffff\"/>",
      cls, std::ceil(width), std::ceil(height), kFont);
}

// 4 to 6 round ticks (steps 1, 2, 2.5 or 5 times a power of ten) covering [lo, hi].
struct Ticks {
  std::vector<double> at;
  double step = 1;
  std::string label(double v) const {
    int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
    if (std::fabs(step / std::pow(10.0, -decimals) - std::round(step / std::pow(10.0, -decimals))) > 1e-6) ++decimals;
    if (std::fabs(v) < step * 1e-9) v = 0;
    return fmt::format("{:.{}f}", v, decimals);
  }
};

Ticks nice_ticks(double lo, double hi, bool integers = false) {
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad, hi += pad;
  }
  const double mag = std::pow(10.0, std::floor(std::log10((hi - lo) / 5)));
  Ticks t;
  for (const double base : {0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 2.5, 5.0, 10.0, 20.0, 25.0, 50.0}) {
    const double step = base * mag;
    if (integers && (step < 1 || std::fabs(step - std::round(step)) > 1e-9)) continue;
    const double first = std::floor(lo / step + 1e-9) * step, last = std::ceil(hi / step - 1e-9) * step;
    if (std::llround((last - first) / step) + 1 <= 6) {
      t.step = step;
      for (double v = first; v <= last + step * 1e-6; v += step) t.at.push_back(v);
      return t;
    }
  }
  t.at = {lo, hi};
  t.step = hi - lo;
  return t;
}

// Powers of ten covering [lo, hi] (values, not logarithms), with 2 and 5 between them
// when the range spans fewer than three decades.
Ticks log_ticks(double lo, double hi) {
  Ticks t;
  const int a = static_cast<int>(std::floor(std::log10(lo) + 1e-9)), b = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  for (int k = a; k <= std::max(b, a + 1); ++k) {
    for (const double m : (b - a < 3 ? std::vector<double>{1, 2, 5} : std::vector<double>{1})) {
      const double v = m * std::pow(10.0, k);
      if (v >= std::pow(10.0, a) && v <= std::pow(10.0, std::max(b, a + 1))) t.at.push_back(v);
    }
  }
  t.step = 0;
  return t;
}

std::string log_label(double v) { return fmt::format("{:g}", v); }

// White (0) to dark blue (1), linear in each channel.
std::string shade(double t) {
  const int r = static_cast<int>(std::lround(247 - t * (247 - 8))), g = static_cast<int>(std::lround(251 - t * (251 - 48))),
            b = static_cast<int>(std::lround(255 - t * (255 - 107)));
  return fmt::format("#{:02x}{:02x}{:02x}", r, g, b);
}

}  // namespace

// ---- LineChart --------------------------------------------------------------------------

std::string LineChart::svg() const {
  std::vector<Series> lines;
  if (!values.empty()) lines.push_back({"", values});
  for (const Series& s : series) {
    if (s.values.empty()) throw ValueError(fmt::format("LineChart: the series \"{}\" has no values", s.name));
    lines.push_back(s);
  }
  if (lines.empty()) throw ValueError("LineChart: no values to draw (set values, or series)");
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  std::size_t n = 1;
  for (const Series& s : lines) {
    n = std::max(n, s.values.size());
    for (const double v : s.values) {
      if (log_y && !(v > 0) && !std::isnan(v)) {
        throw ValueError(fmt::format("LineChart: log_y needs positive values, got {} in \"{}\"", v, s.name));
      }
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    }
  }
  if (!std::isfinite(lo)) lo = log_y ? 1 : 0, hi = log_y ? 10 : 1;
  if (!std::isnan(y_min)) lo = y_min;
  if (!std::isnan(y_max)) hi = y_max;
  const Ticks yt = log_y ? log_ticks(lo, hi) : nice_ticks(lo, hi);
  const Ticks xt = nice_ticks(1, static_cast<double>(std::max<std::size_t>(n, 2)), /*integers=*/true);
  const double y0 = yt.at.front(), y1 = yt.at.back(), x0 = xt.at.front(), x1 = xt.at.back();
  auto ylabel = [&](double v) { return log_y ? log_label(v) : yt.label(v); };

  const double plot_w = 400, plot_h = 220;
  double tick_w = 0;
  for (const double v : yt.at) tick_w = std::max(tick_w, text_width(ylabel(v), kFont));
  const double left = 10 + kFont + 8 + tick_w + 6;
  const double right = 10 + text_width(xt.label(x1), kFont) / 2;
  const double width = left + plot_w + right;
  const Title t = fit_title(title, width - 20);
  const double top = 10 + t.height();
  const double bottom = 6 + kFont + 8 + kFont + 8;
  const double height = top + plot_h + bottom;

  auto X = [&](double x) { return left + plot_w * (x - x0) / (x1 - x0); };
  auto Y = [&](double y) {
    const double f = log_y ? (std::log10(y) - std::log10(y0)) / (std::log10(y1) - std::log10(y0)) : (y - y0) / (y1 - y0);
    return top + plot_h * (1 - f);
  };

  std::string s = svg_open(width, height, "microtorch-linechart");
  s += draw_title(t, 10, 8);
  for (const double v : yt.at) {  // gridlines and tick labels
    s += fmt::format("<line x1=\"{0:.1f}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#e0e0e0\"/>", left,
                     left + plot_w, Y(v));
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 6, Y(v) + 4, ylabel(v));
  }
  for (const double v : xt.at) {
    s += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"#e0e0e0\"/>", X(v), top,
                     top + plot_h);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>", X(v), top + plot_h + 6 + kFont,
                     xt.label(v));
  }
  s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888888\"/>", left,
                   top, plot_w, plot_h);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>", left + plot_w / 2, height - 8,
                   escape(x_label));
  s += fmt::format("<text x=\"{0:.1f}\" y=\"{1:.1f}\" transform=\"rotate(-90 {0:.1f} {1:.1f})\" "
                   "text-anchor=\"middle\">{2}{3}</text>",
                   10 + kFont - 2, top + plot_h / 2, escape(y_label), log_y ? " (log scale)" : "");
  for (std::size_t k = 0; k < lines.size(); ++k) {
    const Series& line = lines[k];
    std::string points;
    auto flush = [&] {
      if (!points.empty()) {
        s += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>",
                         kPalette[k % std::size(kPalette)], points);
      }
      points.clear();
    };
    for (std::size_t i = 0; i < line.values.size(); ++i) {
      const double v = line.values[i];
      if (!std::isfinite(v)) {
        flush();
        continue;
      }
      const double cy = std::clamp(Y(std::clamp(v, y0, y1)), top, top + plot_h);
      points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", X(static_cast<double>(i + 1)), cy);
    }
    flush();
  }
  std::vector<std::size_t> named;
  for (std::size_t k = 0; k < lines.size(); ++k) {
    if (!lines[k].name.empty()) named.push_back(k);
  }
  if (!named.empty()) {  // legend, top right inside the plot
    double name_w = 0;
    for (const std::size_t k : named) name_w = std::max(name_w, text_width(lines[k].name, kFont));
    const double box_w = 8 + 22 + 6 + name_w + 8, box_h = 6 + 16 * static_cast<double>(named.size());
    // the corner of the plot where the legend covers the fewest points
    double bx = left + plot_w - box_w - 8, by = top + 8;
    std::size_t least = std::numeric_limits<std::size_t>::max();
    for (const auto& [cx, cy] : {std::pair{left + plot_w - box_w - 8, top + 8}, std::pair{left + plot_w - box_w - 8, top + plot_h - box_h - 8},
                                 std::pair{left + 8, top + 8}, std::pair{left + 8, top + plot_h - box_h - 8}}) {
      std::size_t covered = 0;
      for (const Series& line : lines) {
        for (std::size_t i = 0; i < line.values.size(); ++i) {
          if (!std::isfinite(line.values[i])) continue;
          const double px = X(static_cast<double>(i + 1)), py = Y(std::clamp(line.values[i], y0, y1));
          covered += px >= cx - 4 && px <= cx + box_w + 4 && py >= cy - 4 && py <= cy + box_h + 4;
        }
      }
      if (covered < least) least = covered, bx = cx, by = cy;
    }
    s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#ffffff\" "
                     "fill-opacity=\"0.9\" stroke=\"#bbbbbb\"/>",
                     bx, by, box_w, box_h);
    for (std::size_t i = 0; i < named.size(); ++i) {
      const double ly = by + 13 + 16 * static_cast<double>(i);
      s += fmt::format("<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\"/>",
                       bx + 8, bx + 30, ly - 4, ly - 4, kPalette[named[i] % std::size(kPalette)]);
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", bx + 36, ly, escape(lines[named[i]].name));
    }
  }
  return s + "</svg>";
}

// ---- Heatmap ----------------------------------------------------------------------------

std::string Heatmap::svg() const {
  Tensor w = weights.detach();
  while (w.dim() > 2 && w.size(0) == 1) w = w.squeeze(0);
  if (w.dim() == 1) w = w.unsqueeze(0);
  if (w.dim() != 2) {
    throw ShapeError("Heatmap: weights must be [L, S], got " + shape_str(weights.shape()) +
                     "; pick one sequence and head first, e.g. weights.select(0, n).select(0, h)");
  }
  const std::int64_t L = w.size(0), S = w.size(1);
  auto labels = [](const std::vector<std::string>& given, std::int64_t n, const char* what) {
    if (given.empty()) {
      std::vector<std::string> out;
      for (std::int64_t i = 0; i < n; ++i) out.push_back(std::to_string(i));
      return out;
    }
    if (static_cast<std::int64_t>(given.size()) != n) {
      throw ValueError(fmt::format("Heatmap: {} {} labels for {} {}s; give one per {} or none", given.size(), what, n,
                                   what, what));
    }
    return given;
  };
  const auto rows = labels(row_labels, L, "row"), cols = labels(col_labels, S, "column");
  const std::vector<double> v = w.to_vector<double>();
  double lo = 0, hi = 1;
  for (const double x : v) {
    if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
  }
  if (!std::isnan(vmin)) lo = vmin;
  if (!std::isnan(vmax)) hi = vmax;
  const double span = hi > lo ? hi - lo : 1.0;

  // Cells: 30 px up to 16 x 16, smaller for big maps; labels thinned so they never overlap.
  const double cell = std::max<double>(4, std::min<double>(30, 480.0 / static_cast<double>(std::max(L, S))));
  const std::int64_t every = static_cast<std::int64_t>(std::ceil((kFont + 3) / cell));
  const bool numbers = L <= 16 && S <= 16;
  double row_w = 0, col_w = 0;
  for (std::int64_t i = 0; i < L; i += every) row_w = std::max(row_w, text_width(rows[static_cast<std::size_t>(i)], kFont));
  for (std::int64_t j = 0; j < S; j += every) col_w = std::max(col_w, text_width(cols[static_cast<std::size_t>(j)], kFont));
  const double slant = col_w * std::sqrt(0.5);  // a -45 degree label reaches this far up and right

  const bool counts = std::all_of(v.begin(), v.end(), [](double x) { return !std::isfinite(x) || x == std::round(x); });
  const Ticks ct = nice_ticks(lo, hi, counts && lo == std::round(lo) && hi == std::round(hi));
  double tick_w = 0;
  for (const double t : ct.at) {
    if (t >= lo - 1e-12 && t <= hi + 1e-12) tick_w = std::max(tick_w, text_width(ct.label(t), kFont));
  }
  const double left = 10 + (y_label.empty() ? 0 : kFont + 8) + row_w + 6;
  const double cells_w = cell * static_cast<double>(S), cells_h = cell * static_cast<double>(L);
  const double bar_x = left + cells_w + 18, bar_w = 12;
  const double width = std::max(bar_x + bar_w + 6 + tick_w + 10, left + cells_w - cell / 2 + slant + 12);
  const Title t = fit_title(title, width - 20);
  const double label_top = 10 + t.height() + (x_label.empty() ? 0 : kFont + 8);
  const double top = label_top + slant + 10;
  const double bar_h = std::max(60.0, std::min(cells_h, 200.0));
  const double height = top + std::max(cells_h, bar_h) + 12;

  std::string s = svg_open(width, height, "microtorch-heatmap");
  s += draw_title(t, 10, 8);
  if (!x_label.empty()) {
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-style=\"italic\">{}</text>",
                     left + cells_w / 2, 10 + t.height() + kFont, escape(x_label));
  }
  if (!y_label.empty()) {
    s += fmt::format("<text x=\"{0:.1f}\" y=\"{1:.1f}\" transform=\"rotate(-90 {0:.1f} {1:.1f})\" "
                     "text-anchor=\"middle\" font-style=\"italic\">{2}</text>",
                     10 + kFont - 2, top + cells_h / 2, escape(y_label));
  }
  for (std::int64_t j = 0; j < S; j += every) {  // column labels on top, slanted up and right
    const double x = left + static_cast<double>(j) * cell + cell / 2, y = top - 6;
    s += fmt::format("<text x=\"{0:.1f}\" y=\"{1:.1f}\" transform=\"rotate(-45 {0:.1f} {1:.1f})\">{2}</text>", x, y,
                     escape(cols[static_cast<std::size_t>(j)]));
  }
  for (std::int64_t i = 0; i < L; ++i) {
    const double y = top + static_cast<double>(i) * cell;
    if (i % every == 0) {
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 6, y + cell / 2 + 4,
                       escape(rows[static_cast<std::size_t>(i)]));
    }
    for (std::int64_t j = 0; j < S; ++j) {
      const double x = v[static_cast<std::size_t>(i * S + j)];
      const double f = std::isfinite(x) ? std::clamp((x - lo) / span, 0.0, 1.0) : 0.0;
      const double cx = left + static_cast<double>(j) * cell;
      s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" stroke=\"#ffffff\">"
                       "<title>{} &#8594; {}: {:.4g}</title></rect>",
                       cx, y, cell, cell, shade(f), escape(rows[static_cast<std::size_t>(i)]),
                       escape(cols[static_cast<std::size_t>(j)]), x);
      if (numbers) {
        s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"9\" fill=\"{}\">{}</text>",
                         cx + cell / 2, y + cell / 2 + 3, f > 0.55 ? "#ffffff" : "#000000",
                         fmt::format(fmt::runtime(value_format), x));
      }
    }
  }
  // colour bar: the shade runs linearly from lo (bottom) to hi (top)
  s += fmt::format("<defs><linearGradient id=\"microtorch-shade\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">"
                   "<stop offset=\"0\" stop-color=\"{}\"/><stop offset=\"1\" stop-color=\"{}\"/></linearGradient></defs>",
                   shade(0), shade(1));
  s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"{:.1f}\" fill=\"url(#microtorch-shade)\" "
                   "stroke=\"#888888\"/>",
                   bar_x, top, bar_w, bar_h);
  for (const double tv : ct.at) {
    if (tv < lo - 1e-12 || tv > hi + 1e-12) continue;
    const double y = top + bar_h * (1 - (tv - lo) / span);
    s += fmt::format("<line x1=\"{0:.1f}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#555555\"/>",
                     bar_x + bar_w, bar_x + bar_w + 3, y);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", bar_x + bar_w + 6, y + 4, ct.label(tv));
  }
  return s + "</svg>";
}

// ---- confusion matrix and side by side ---------------------------------------------------

Heatmap confusion_matrix(const Tensor& predicted, const Tensor& target, const std::vector<std::string>& class_names,
                         const std::string& title) {
  if (predicted.dtype() != Dtype::Int64 || target.dtype() != Dtype::Int64 || predicted.shape() != target.shape()) {
    throw ShapeError(fmt::format("confusion_matrix: predicted ({} {}) and target ({} {}) must be int64 of one shape",
                                 dtype_name(predicted.dtype()), shape_str(predicted.shape()), dtype_name(target.dtype()),
                                 shape_str(target.shape())));
  }
  const auto C = static_cast<std::int64_t>(class_names.size());
  if (C == 0) throw ValueError("confusion_matrix: give one name per class");
  Tensor counts = zeros({C, C}, Dtype::Float64);
  const std::int64_t *p = predicted.data<std::int64_t>(), *t = target.data<std::int64_t>();
  for (std::int64_t i = 0; i < predicted.numel(); ++i) {
    if (p[i] < 0 || p[i] >= C || t[i] < 0 || t[i] >= C) {
      throw IndexError(fmt::format("confusion_matrix: sample {} has target {} and prediction {}, outside the {} classes",
                                   i, t[i], p[i], C));
    }
    counts.data<double>()[t[i] * C + p[i]] += 1;
  }
  Heatmap h{counts, class_names, class_names, title};
  h.vmin = 0;
  h.vmax = std::max(1.0, max(counts).item());
  h.x_label = "predicted";
  h.y_label = "true class";
  h.value_format = "{:.0f}";
  return h;
}

std::string side_by_side(const std::vector<std::string>& svgs, double gap) {
  double x = 0, height = 0;
  std::string body;
  for (const std::string& svg : svgs) {
    auto attr = [&svg](const char* name) {
      const std::string key = std::string(" ") + name + "=\"";
      const auto at = svg.find(key);
      if (svg.rfind("<svg", 0) != 0 || at == std::string::npos || at > svg.find('>')) {
        throw ValueError(std::string("side_by_side: each picture must be an <svg> with a ") + name);
      }
      return std::stod(svg.substr(at + key.size()));
    };
    const double w = attr("width"), h = attr("height");
    body += fmt::format("<svg x=\"{:.0f}\" y=\"0\"", x) + svg.substr(4);
    x += w + gap;
    height = std::max(height, h);
  }
  const double width = svgs.empty() ? 0 : x - gap;
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
                     "viewBox=\"0 0 {0:.0f} {1:.0f}\">",
                     width, height) +
         body + "</svg>";
}

}  // namespace microtorch::display
