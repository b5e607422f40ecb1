/// \file
/// Rich display of tensors and attention weights in notebooks.
///
/// xeus-cling (the `xcpp17` Jupyter kernel) shows the last expression of a cell through
/// `nl::json mime_bundle_repr(const T&)`, found by argument-dependent lookup in T's
/// namespace. This header provides
///
///     mime_bundle_repr(const Tensor&)             an HTML table (dtype and shape caption,
///                                                 big tensors truncated) plus PyTorch's text
///     mime_bundle_repr(const display::Heatmap&)   the pictures of plot.hpp (heat maps,
///     mime_bundle_repr(const display::LineChart&) line charts) as SVG
///
/// \code
///   auto [out, w] = scaled_dot_product_attention(q, k, v, Mask::causal(4));
///   display::Heatmap{w.select(0, 0), {"the", "cat", "sat", "down"}}   // last line of a cell
///   std::ofstream("weights.svg") << display::Heatmap{w.select(0, 0)}.svg();
/// \endcode
///
/// The HTML builder needs only the standard library and is inline; the pictures are drawn by
/// the library (plot.hpp). The mime_bundle_repr overloads are compiled only when
/// `<nlohmann/json.hpp>` is available (the kernels always have it), so the library itself never
/// depends on a JSON library through this header.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "microtorch/format.hpp"
#include "microtorch/plot.hpp"
#include "microtorch/tensor.hpp"

#if __has_include(<nlohmann/json.hpp>)
#include <nlohmann/json.hpp>
/// Defined when `<nlohmann/json.hpp>` was found, so that the mime_bundle_repr overloads exist.
#define MICROTORCH_DISPLAY_HAS_JSON 1
#endif

/// Pictures and notebook views: HTML tables of tensors (display.hpp), SVG line charts, heat
/// maps and confusion matrices (plot.hpp).
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
