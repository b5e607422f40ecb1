// PyTorch-style printing: one number format for the whole tensor, right-aligned columns,
// nested brackets, "..." summaries past 1000 elements, then a trailer naming the shape,
// a non-default dtype and the autograd state.
#include "microtorch/format.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "microtorch/autograd.hpp"

namespace microtorch {

namespace {

constexpr std::int64_t kSummarizeAbove = 1000;
constexpr std::int64_t kEdgeItems = 3;

enum class Style { Bool, Integer, IntegralFloat, Fixed, Scientific };

Style choose_style(const Tensor& t, const std::vector<double>& shown) {
  if (t.dtype() == Dtype::Bool) return Style::Bool;
  if (t.dtype() == Dtype::Int64) return Style::Integer;
  double max_abs = 0, min_abs = std::numeric_limits<double>::infinity();
  bool integral = true;
  for (double v : shown) {
    if (!std::isfinite(v)) continue;
    const double a = std::fabs(v);
    max_abs = std::max(max_abs, a);
    if (a > 0) min_abs = std::min(min_abs, a);
    integral = integral && std::nearbyint(v) == v;
  }
  if (integral && max_abs < 1e8) return Style::IntegralFloat;
  if (max_abs >= 1e8 || min_abs < 1e-4 || (std::isfinite(min_abs) && max_abs / min_abs > 1e3)) return Style::Scientific;
  return Style::Fixed;
}

std::string format_value(double v, Style style) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  switch (style) {
    case Style::Bool: return v != 0 ? "True" : "False";
    case Style::Integer: return fmt::format("{}", static_cast<std::int64_t>(v));
    case Style::IntegralFloat: return fmt::format("{:.0f}.", v);
    case Style::Fixed: return fmt::format("{:.4f}", v);
    case Style::Scientific: return fmt::format("{:.4e}", v);
  }
  return "";
}

class Printer {
 public:
  Printer(const Tensor& t, bool summarize) : t_(t), summarize_(summarize), strides_(contiguous_strides(t.shape())) {}

  // Indices printed along a dim: all of them, or the first and last kEdgeItems (-1 = "...").
  std::vector<std::int64_t> shown(std::int64_t size) const {
    std::vector<std::int64_t> idx;
    if (summarize_ && size > 2 * kEdgeItems) {
      for (std::int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
      idx.push_back(-1);
      for (std::int64_t i = size - kEdgeItems; i < size; ++i) idx.push_back(i);
    } else {
      for (std::int64_t i = 0; i < size; ++i) idx.push_back(i);
    }
    return idx;
  }

  void collect(std::size_t dim, std::int64_t offset, std::vector<double>& out) const {
    if (dim == t_.shape().size()) {
      out.push_back(t_.at<double>(unflatten(offset)));
      return;
    }
    for (auto i : shown(t_.shape()[dim])) {
      if (i >= 0) collect(dim + 1, offset + i * strides_[dim], out);
    }
  }

  void render(std::size_t dim, std::int64_t offset, std::size_t indent, Style style, std::size_t width,
              std::string& out) const {
    if (dim == t_.shape().size()) {
      const std::string s = format_value(t_.at<double>(unflatten(offset)), style);
      out += std::string(width - std::min(width, s.size()), ' ') + s;
      return;
    }
    out += '[';
    const auto idx = shown(t_.shape()[dim]);
    const bool innermost = dim + 1 == t_.shape().size();
    for (std::size_t k = 0; k < idx.size(); ++k) {
      if (k > 0) {
        out += ',';
        if (innermost) {
          out += ' ';
        } else {
          out += std::string(t_.shape().size() - dim - 1, '\n');
          out += std::string(indent + 1, ' ');
        }
      }
      if (idx[k] < 0) {
        out += "...";
      } else {
        render(dim + 1, offset + idx[k] * strides_[dim], indent + 1, style, width, out);
      }
    }
    out += ']';
  }

 private:
  std::vector<std::int64_t> unflatten(std::int64_t offset) const {
    std::vector<std::int64_t> idx(t_.shape().size());
    for (std::size_t d = 0; d < idx.size(); ++d) {
      idx[d] = offset / strides_[d];
      offset %= strides_[d];
    }
    return idx;
  }

  const Tensor& t_;
  bool summarize_;
  Shape strides_;
};

}  // namespace

std::string to_string(const Tensor& t) {
  if (!t.defined()) return "tensor(undefined)";
  const bool summarize = t.numel() > kSummarizeAbove;
  Printer p(t, summarize);
  std::vector<double> values;
  p.collect(0, 0, values);
  const Style style = choose_style(t, values);
  std::size_t width = 0;
  for (double v : values) width = std::max(width, format_value(v, style).size());

  std::string out = "tensor(";
  if (t.numel() == 0) {
    out += "[]";
  } else {
    p.render(0, 0, std::string("tensor(").size(), style, width, out);
  }
  if (t.dim() >= 2 || summarize || t.numel() == 0) out += fmt::format(", shape={}", shape_str(t.shape()));
  // As PyTorch: the dtype is shown when the values do not already tell it.
  if (t.dtype() == Dtype::Float64 || (t.dtype() == Dtype::Int64 && t.numel() == 0)) {
    out += fmt::format(", dtype={}", dtype_name(t.dtype()));
  }
  if (t.grad_fn()) {
    out += fmt::format(", grad_fn=<{}>", t.grad_fn()->name());
  } else if (t.requires_grad()) {
    out += ", requires_grad=True";
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << to_string(t); }

std::string detail::format_text(std::string_view text, std::string_view spec) {
  return fmt::format(fmt::runtime("{:" + std::string(spec) + "}"), text);
}

}  // namespace microtorch
