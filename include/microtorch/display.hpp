/// \file
/// Rich display of tensors and attention weights in notebooks, and SVG pictures anywhere.
///
/// xeus-cling (the `xcpp17` Jupyter kernel) shows the last expression of a cell through
/// `nl::json mime_bundle_repr(const T&)`, found by argument-dependent lookup in T's
/// namespace. This header provides
///
///     mime_bundle_repr(const Tensor&)             an HTML table (dtype and shape caption,
///                                                 big tensors truncated) plus PyTorch's text
///     display::Heatmap{weights, rows, cols}       attention weights [L, S] as an SVG heat map;
///                                                 .svg() gives the picture as a string, to
///                                                 write to a file outside a notebook
///     display::LineChart{values}                  a loss curve as an SVG line chart
///
/// \code
///   auto [out, w] = scaled_dot_product_attention(q, k, v, Mask::causal(4));
///   display::Heatmap{w.select(0, 0), {"the", "cat", "sat", "down"}}   // last line of a cell
///   std::ofstream("weights.svg") << display::Heatmap{w.select(0, 0)}.svg();
/// \endcode
///
/// The HTML and SVG builders need only the standard library. The mime_bundle_repr
/// overloads are compiled only when `<nlohmann/json.hpp>` is available (xeus-cling always has
/// it), so the library itself never depends on a JSON library through this header.
/// Everything is inline: the header works the same compiled or interpreted by cling.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "microtorch/format.hpp"
#include "microtorch/tensor.hpp"

#if __has_include(<nlohmann/json.hpp>)
#include <nlohmann/json.hpp>
/// Defined when `<nlohmann/json.hpp>` was found, so that the mime_bundle_repr overloads exist.
#define MICROTORCH_DISPLAY_HAS_JSON 1
#endif

/// HTML tables and SVG pictures of tensors, for notebooks and files.
namespace microtorch::display {

/// `&`, `<`, `>`, `"` and `'` as entities: safe inside HTML/SVG text and attribute values.
inline std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace detail {

// Element i of t (any dtype) as text: floats with `precision` significant digits.
inline std::string element_text(const Tensor& t, std::int64_t i, int precision) {
  switch (t.dtype()) {
    case Dtype::Float32: return fmt::format("{:.{}g}", static_cast<double>(t.data<float>()[i]), precision);
    case Dtype::Float64: return fmt::format("{:.{}g}", t.data<double>()[i], precision);
    case Dtype::Int64: return fmt::format("{}", t.data<std::int64_t>()[i]);
    case Dtype::Bool: return t.data<bool>()[i] ? "true" : "false";
  }
  return "?";
}

// Which of n indices to show when at most `max` fit: all, or the first and last halves
// with -1 marking the elision.
inline std::vector<std::int64_t> shown(std::int64_t n, std::int64_t max) {
  std::vector<std::int64_t> idx;
  if (n <= max) {
    for (std::int64_t i = 0; i < n; ++i) idx.push_back(i);
    return idx;
  }
  const std::int64_t head = (max + 1) / 2, tail = max / 2;
  for (std::int64_t i = 0; i < head; ++i) idx.push_back(i);
  idx.push_back(-1);
  for (std::int64_t i = n - tail; i < n; ++i) idx.push_back(i);
  return idx;
}

// The index of row r of t seen as [rows, last]: "[1, 2, :]" for a 3-d tensor.
inline std::string row_index(const Shape& shape, std::int64_t r) {
  std::vector<std::int64_t> idx(shape.size() - 1);
  for (std::size_t d = idx.size(); d-- > 0;) {
    idx[d] = r % shape[d];
    r /= shape[d];
  }
  std::string s = "[";
  for (const auto i : idx) s += fmt::format("{}, ", i);
  return s + ":]";
}

}  // namespace detail

/// How html() lays out a tensor.
struct HtmlOptions {
  std::int64_t max_rows = 16;  ///< more rows are elided in the middle (a "⋮" row)
  std::int64_t max_cols = 12;  ///< more columns likewise ("…")
  int precision = 4;           ///< significant digits of floating values
};

/// A tensor as an HTML table: caption `Tensor float32 [2, 3]` (and `requires_grad`),
/// one row per index of the leading dims (labelled `[i, j, :]` for 3-d and up), one
/// column per element of the last dim. A 0-d tensor is a single cell.
inline std::string html(const Tensor& t, const HtmlOptions& o = {}) {
  if (!t.defined()) return "<table class=\"microtorch-tensor\"><caption>undefined Tensor</caption></table>";
  const Tensor c = t.detach();
  std::string caption = fmt::format("Tensor {} {}", dtype_name(c.dtype()), shape_str(c.shape()));
  if (t.requires_grad()) caption += " requires_grad";
  std::string s = "<table class=\"microtorch-tensor\" style=\"font-family:monospace;text-align:right\">";
  s += "<caption>" + escape(caption) + "</caption>";
  if (c.numel() == 0) return s + "<tr><td>(empty)</td></tr></table>";
  const std::int64_t cols = c.dim() == 0 ? 1 : c.size(-1);
  const std::int64_t rows = c.numel() / cols;
  const auto shown_rows = detail::shown(rows, o.max_rows), shown_cols = detail::shown(cols, o.max_cols);
  const bool labelled = c.dim() >= 2;
  if (c.dim() >= 1) {  // header: column indices
    s += "<thead><tr>";
    if (labelled) s += "<th></th>";
    for (const auto j : shown_cols) s += j < 0 ? std::string("<th>&hellip;</th>") : fmt::format("<th>{}</th>", j);
    s += "</tr></thead>";
  }
  s += "<tbody>";
  for (const auto i : shown_rows) {
    s += "<tr>";
    if (i < 0) {
      if (labelled) s += "<th>&vellip;</th>";
      for (std::size_t k = 0; k < shown_cols.size(); ++k) s += "<td>&vellip;</td>";
    } else {
      if (labelled) s += "<th>" + detail::row_index(c.shape(), i) + "</th>";
      for (const auto j : shown_cols) {
        s += j < 0 ? std::string("<td>&hellip;</td>") : "<td>" + detail::element_text(c, i * cols + j, o.precision) + "</td>";
      }
    }
    s += "</tr>";
  }
  return s + "</tbody></table>";
}

/// Attention weights [L, S] (or any 2-d tensor) as a heat map: row i is query i, column j
/// is key j, darker is larger. Labels default to the indices. Values between vmin and
/// vmax are coloured (the default range is [min(0, smallest), max(1, largest)], which
/// suits probabilities); each cell shows its value when the map is at most 16 x 16, and
/// its row, column and value as a tooltip always.
struct Heatmap {
  Tensor weights;  ///< [L, S], or with leading size-1 dims, or 1-D (one row); any dtype
  std::vector<std::string> row_labels = {};  ///< L labels (queries), or empty for 0..L-1
  std::vector<std::string> col_labels = {};  ///< S labels (keys), or empty for 0..S-1
  std::string title = {};  ///< drawn above the map when not empty
  ///@{
  /// The colour range; NaN takes it from the data (see above).
  double vmin = NAN, vmax = NAN;
  ///@}

  /// The heat map as a standalone SVG document. Weights that are not 2-D after dropping
  /// leading size-1 dims throw ShapeError; label lists of the wrong length ValueError.
  std::string svg() const {
    Tensor w = weights.detach();
    while (w.dim() > 2 && w.size(0) == 1) w = w.squeeze(0);
    if (w.dim() == 1) w = w.unsqueeze(0);
    if (w.dim() != 2) {
      throw ShapeError("Heatmap: weights must be [L, S], got " + shape_str(weights.shape()) +
                       "; pick one sequence and head first, e.g. weights.select(0, n).select(0, h)");
    }
    if (!w.is_floating_point()) w = w.to(kFloat64);
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
    const auto v = w.to_xarray<double>();
    double lo = 0, hi = 1;
    for (const double x : v) {
      if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
    }
    if (!std::isnan(vmin)) lo = vmin;
    if (!std::isnan(vmax)) hi = vmax;
    const double span = hi > lo ? hi - lo : 1.0;

    std::size_t longest_row = 1, longest_col = 1;
    for (const auto& r : rows) longest_row = std::max(longest_row, r.size());
    for (const auto& c : cols) longest_col = std::max(longest_col, c.size());
    const int cell = 30, char_w = 7;
    const int left = 10 + static_cast<int>(longest_row) * char_w;
    const int top = (title.empty() ? 10 : 30) + static_cast<int>(longest_col) * char_w * 3 / 4 + 8;
    // slanted key labels reach up and to the right of their column: room on both sides
    const int width = left + static_cast<int>(S) * cell + 10 + static_cast<int>(longest_col) * char_w * 3 / 4;
    const int height = top + static_cast<int>(L) * cell + 10;
    const bool numbers = L <= 16 && S <= 16;

    std::string s = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"microtorch-heatmap\" width=\"{0}\" height=\"{1}\" "
        "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"11\">",
        width, height);
    if (!title.empty()) s += fmt::format("<text x=\"{}\" y=\"18\" font-size=\"13\">{}</text>", left, escape(title));
    for (std::int64_t j = 0; j < S; ++j) {  // key labels on top, slanted
      const int x = left + static_cast<int>(j) * cell + cell / 2, y = top - 6;
      s += fmt::format("<text x=\"{0}\" y=\"{1}\" transform=\"rotate(-45 {0} {1})\">{2}</text>", x, y, escape(cols[j]));
    }
    for (std::int64_t i = 0; i < L; ++i) {
      const int y = top + static_cast<int>(i) * cell;
      s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", left - 4, y + cell / 2 + 4, escape(rows[i]));
      for (std::int64_t j = 0; j < S; ++j) {
        const double x = v(i, j);
        // white (0) to dark blue (1), linear in each channel
        const double t = std::isfinite(x) ? std::clamp((x - lo) / span, 0.0, 1.0) : 0.0;
        const int r = static_cast<int>(std::lround(247 - t * (247 - 8))), g = static_cast<int>(std::lround(251 - t * (251 - 48))),
                  b = static_cast<int>(std::lround(255 - t * (255 - 107)));
        const int cx = left + static_cast<int>(j) * cell;
        s += fmt::format(
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#{:02x}{:02x}{:02x}\" stroke=\"#ffffff\">"
            "<title>{} &#8594; {}: {:.4g}</title></rect>",
            cx, y, cell, cell, r, g, b, escape(rows[i]), escape(cols[j]), x);
        if (numbers) {
          s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"9\" fill=\"{}\">{:.2f}</text>",
                           cx + cell / 2, y + cell / 2 + 3, t > 0.55 ? "#ffffff" : "#000000", x);
        }
      }
    }
    return s + "</svg>";
  }
};

/// A line chart of one series (a loss curve): x = 1, 2, ..., n, y = values, with the
/// first and last values and the y range written on the axes.
struct LineChart {
  std::vector<double> values;     ///< the y values, one per step
  std::string title = {};         ///< drawn above the chart when not empty
  std::string x_label = "epoch";  ///< the x axis's label
  std::string y_label = "loss";   ///< the y axis's label
  bool log_y = false;  ///< logarithmic y axis (values must be positive)

  /// The chart as a standalone SVG document; no values, or a non-positive value with log_y,
  /// throw ValueError.
  std::string svg() const {
    if (values.empty()) throw ValueError("LineChart: no values to draw");
    auto y_of = [this](double v) {
      if (!log_y) return v;
      if (!(v > 0)) throw ValueError(fmt::format("LineChart: log_y needs positive values, got {}", v));
      return std::log10(v);
    };
    double lo = y_of(values.front()), hi = lo;
    for (const double v : values) lo = std::min(lo, y_of(v)), hi = std::max(hi, y_of(v));
    const double span = hi > lo ? hi - lo : 1.0;
    const int width = 480, height = 240, left = 60, right = 16, top = title.empty() ? 14 : 32, bottom = 40;
    const double pw = width - left - right, ph = height - top - bottom;
    const auto n = static_cast<double>(values.size());
    std::string points;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double x = left + (n > 1 ? pw * static_cast<double>(i) / (n - 1) : pw / 2);
      const double y = top + ph * (1.0 - (y_of(values[i]) - lo) / span);
      points += fmt::format("{}{:.1f},{:.1f}", i ? " " : "", x, y);
    }
    auto shown = [this](double v) { return fmt::format("{:.4g}", log_y ? std::pow(10.0, v) : v); };
    std::string s = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"microtorch-linechart\" width=\"{0}\" height=\"{1}\" "
        "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"11\">",
        width, height);
    if (!title.empty()) s += fmt::format("<text x=\"{}\" y=\"18\" font-size=\"13\">{}</text>", left, escape(title));
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999999\"/>", left, top,
                     pw, ph);
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", left - 4, top + 4, shown(hi));
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", left - 4, top + ph, shown(lo));
    s += fmt::format("<text x=\"{}\" y=\"{}\">1</text>", left, top + ph + 14);
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", left + pw, top + ph + 14, values.size());
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>", left + pw / 2, height - 8,
                     escape(x_label));
    s += fmt::format("<text x=\"14\" y=\"{0}\" transform=\"rotate(-90 14 {0})\" text-anchor=\"middle\">{1}{2}</text>",
                     top + ph / 2, escape(y_label), log_y ? " (log)" : "");
    s += fmt::format("<polyline fill=\"none\" stroke=\"#08306b\" stroke-width=\"2\" points=\"{}\"/>", points);
    return s + "</svg>";
  }
};

}  // namespace microtorch::display

#ifdef MICROTORCH_DISPLAY_HAS_JSON
namespace nl = nlohmann;  // xeus-cling's spelling; redeclaring the same alias is allowed

namespace microtorch {

/// The notebook view of a tensor: HTML table and PyTorch-style text.
inline nl::json mime_bundle_repr(const Tensor& t) {
  auto bundle = nl::json::object();
  bundle["text/html"] = display::html(t);
  bundle["text/plain"] = t.defined() ? fmt::format("{}", t) : std::string("Tensor(undefined)");
  return bundle;
}

namespace display {

/// The notebook view of a heat map: the SVG picture.
inline nl::json mime_bundle_repr(const Heatmap& h) {
  auto bundle = nl::json::object();
  bundle["image/svg+xml"] = h.svg();
  bundle["text/plain"] = fmt::format("Heatmap {}", shape_str(h.weights.shape()));
  return bundle;
}

/// The notebook view of a line chart: the SVG picture.
inline nl::json mime_bundle_repr(const LineChart& c) {
  auto bundle = nl::json::object();
  bundle["image/svg+xml"] = c.svg();
  bundle["text/plain"] = fmt::format("LineChart of {} values", c.values.size());
  return bundle;
}

}  // namespace display
}  // namespace microtorch
#endif
