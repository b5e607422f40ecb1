// quantize — a traced Graph to a Program of integer kernel calls (see quantize.hpp).
//
// Every activation lives in a buffer and is seen through a strided View, so reshape,
// permute/transpose, slice, expand and squeeze cost nothing: they are index arithmetic on
// the view. A kernel that needs a packed operand gets it for free when the view is already
// contiguous, and through one mt_copy_strided_* call otherwise. Attention reads its
// per-head q, k, v rows in place through row strides.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "microtorch/error.hpp"
#include "microtorch/lower/quantize.hpp"
#include "microtorch/ops.hpp"
#include "runtime/mt_kernels.h"

namespace microtorch::lower {

namespace {

using Strides = std::vector<std::int64_t>;

Strides packed_strides(const Shape& shape) {
  Strides s(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

std::int64_t numel(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>());
}

// An activation: element (i0, i1, ...) is buffer[offset + sum_k i_k * strides[k]], in
// Q(frac). The format belongs to the view: attention may write its output, in another
// format, over the bytes of its query.
struct View {
  std::int64_t buffer = -1;
  std::int64_t offset = 0;
  Shape shape;
  Strides strides;
  int frac = 0;
};

// Marks the elements of the buffer a view covers.
void mark(const View& v, std::vector<char>& marks) {
  Shape idx(v.shape.size(), 0);
  const std::int64_t n = numel(v.shape);
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t at = v.offset;
    for (std::size_t d = 0; d < idx.size(); ++d) at += idx[d] * v.strides[d];
    marks[static_cast<std::size_t>(at)] = 1;
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < v.shape[d]) break;
      idx[d] = 0;
    }
  }
}

bool is_packed(const View& v) {
  const Strides want = packed_strides(v.shape);
  for (std::size_t i = 0; i < v.shape.size(); ++i) {
    if (v.shape[i] != 1 && v.strides[i] != want[i]) return false;
  }
  return true;
}

// Strides for viewing `v` as `shape` without moving data, if they exist: each group of old
// dims that merges into a group of new dims must be contiguous within itself.
std::optional<Strides> reshaped_strides(const View& v, const Shape& shape) {
  Shape os;
  Strides ost;
  for (std::size_t i = 0; i < v.shape.size(); ++i) {
    if (v.shape[i] != 1) os.push_back(v.shape[i]), ost.push_back(v.strides[i]);
  }
  Strides out(shape.size(), 0);
  std::size_t o = 0, n = 0;
  while (n < shape.size()) {
    if (shape[n] == 1) {
      out[n] = 1, ++n;
      continue;
    }
    if (o == os.size()) return std::nullopt;
    // One group: old dims [o, o2) and new dims [n, n2) with equal element counts.
    std::size_t o2 = o + 1, n2 = n + 1;
    std::int64_t old_count = os[o], new_count = shape[n];
    while (old_count != new_count) {
      if (old_count < new_count) {
        if (o2 == os.size()) return std::nullopt;
        if (ost[o2 - 1] != ost[o2] * os[o2]) return std::nullopt;  // not contiguous: needs a copy
        old_count *= os[o2++];
      } else {
        if (n2 == shape.size()) return std::nullopt;
        new_count *= shape[n2++];
      }
    }
    std::int64_t stride = ost[o2 - 1];
    for (std::size_t k = n2; k-- > n;) {
      out[k] = stride;
      stride *= shape[k];
    }
    o = o2, n = n2;
  }
  if (o != os.size()) return std::nullopt;
  return out;
}

std::string c_name(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

class Lowering {
 public:
  Lowering(const Graph& g, const Calibration& cal, const QuantOptions& opt) : g_(g), cal_(cal), opt_(opt) {
    if (opt.activation_bits != 16 && opt.activation_bits != 8) {
      throw ValueError(fmt::format("quantize: activation_bits must be 16 or 8, got {}", opt.activation_bits));
    }
    bits_ = opt.activation_bits;
    wbits_ = opt.weight_bits == 0 ? bits_ : opt.weight_bits;
    if ((wbits_ != 16 && wbits_ != 8) || (bits_ == 8 && wbits_ != 8)) {
      throw ValueError(fmt::format("quantize: weight_bits must be 16 or 8 (8 with 8-bit activations), got {}",
                                   opt.weight_bits));
    }
    if (cal.absmax.size() != g.values.size()) {
      throw ValueError(fmt::format("quantize: the calibration has {} values but the graph has {}; calibrate this graph",
                                   cal.absmax.size(), g.values.size()));
    }
    act_ = bits_ == 16 ? Elem::S16 : Elem::S8;
    sfx_ = bits_ == 16 ? "s16" : "s8";
    p_.name = c_name(opt.name);
    p_.activation_bits = bits_;
    p_.weight_bits = wbits_;
  }

  Program run() {
    const Value& in = g_.value(g_.input);
    views_.assign(g_.values.size(), std::nullopt);
    {
      Buffer b;
      b.kind = BufferKind::Input;
      b.size = numel(in.shape);
      b.name = "in";
      b.origin = fmt::format("%{} (graph input)", in.id);
      b.graph_value = in.id;
      if (is_floating(in.dtype)) {
        b.elem = act_;
        b.frac = frac_of(in.id);
        b.absmax = cal_.absmax[static_cast<std::size_t>(in.id)];
      } else {
        b.elem = Elem::S32, b.fixed_point = false;  // token ids
      }
      p_.input = p_.add_buffer(std::move(b));
      views_[static_cast<std::size_t>(in.id)] = View{p_.input, 0, in.shape, packed_strides(in.shape), p_.buffer(p_.input).frac};
    }
    p_.input_shape = in.shape;
    last_use_.assign(g_.values.size(), -1);
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      for (auto v : g_.nodes[i].inputs) {
        if (v >= 0) last_use_[static_cast<std::size_t>(v)] = static_cast<std::int64_t>(i);
      }
    }
    last_use_[static_cast<std::size_t>(g_.output)] = INT64_MAX;
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      node_ = static_cast<std::int64_t>(i);
      lower_node(g_.nodes[i]);
    }
    finish_output();
    plan_memory(p_);
    return std::move(p_);
  }

 private:
  const Graph& g_;
  const Calibration& cal_;
  QuantOptions opt_;
  Program p_;
  std::vector<std::optional<View>> views_;
  std::int64_t node_ = -1;
  int bits_ = 16, wbits_ = 16;
  Elem act_ = Elem::S16;
  std::string sfx_;
  std::map<std::pair<Elem, std::vector<std::int64_t>>, std::int64_t> tables_;
  std::map<std::int64_t, Tensor> folded_;  // outputs of nodes computed only from constants
  std::vector<std::int64_t> last_use_;      // per value: the last node that reads it
  std::map<std::int64_t, std::vector<std::int64_t>> values_in_;  // buffer -> values viewing it

  // ---- errors and labels ----

  std::string ref(std::int64_t id) const {
    if (id < 0) return "_";
    const Value& v = g_.value(id);
    return v.kind == ValueKind::Parameter ? v.name : fmt::format("%{}", id);
  }
  std::string line(const Node& n) const {
    std::vector<std::string> args;
    for (auto i : n.inputs) args.push_back(ref(i));
    std::vector<std::string> shapes;
    for (auto i : n.inputs) {
      if (i >= 0) shapes.push_back(shape_str(g_.value(i).shape));
    }
    return fmt::format("%{} = {}({})  {} -> {}", n.output, n.op, fmt::join(args, ", "), fmt::join(shapes, ", "),
                       shape_str(g_.value(n.output).shape));
  }
  [[noreturn]] void fail(const Node& n, const std::string& why) const {
    throw ValueError(fmt::format("lower: cannot lower {}{}: {}", line(n), module_of(n), why));
  }
  // The module a node belongs to, as far as the graph knows: the dotted prefix of the
  // parameters it uses, or of the nearest op before it that uses parameters.
  std::string module_of(const Node& n) const {
    std::vector<const Node*> frontier{&n};
    for (std::size_t hops = 0; hops < 64 && !frontier.empty(); ++hops) {
      std::vector<const Node*> next;
      for (const Node* m : frontier) {
        for (auto i : m->inputs) {
          if (i < 0) continue;
          const Value& v = g_.value(i);
          if (v.kind == ValueKind::Parameter) {
            const auto dot = v.name.rfind('.');
            const std::string module = dot == std::string::npos ? "<root>" : v.name.substr(0, dot);
            return m == &n ? fmt::format(" in module {}", module) : fmt::format(" after module {}", module);
          }
          if (v.kind == ValueKind::OpOutput) {
            for (const Node& p : g_.nodes) {
              if (p.output == i) next.push_back(&p);
            }
          }
        }
      }
      frontier = std::move(next);
    }
    return "";
  }

  // ---- values ----

  bool is_const(std::int64_t id) const {
    const ValueKind k = g_.value(id).kind;
    return k == ValueKind::Parameter || k == ValueKind::Constant || folded_.count(id) != 0;
  }
  const Tensor& data(std::int64_t id) const {
    auto it = folded_.find(id);
    return it != folded_.end() ? it->second : g_.value(id).data;
  }
  const View& act(const Node& n, std::int64_t id) const {
    if (id < 0 || !views_[static_cast<std::size_t>(id)]) {
      fail(n, fmt::format("input {} is not an activation computed from the input here", ref(id)));
    }
    return *views_[static_cast<std::size_t>(id)];
  }
  int frac_of(std::int64_t value) const { return choose_frac(cal_.absmax[static_cast<std::size_t>(value)], bits_); }
  Buffer& buf(const View& v) { return p_.buffer(v.buffer); }
  static int frac(const View& v) { return v.frac; }

  // ---- buffers ----

  View new_act(const Shape& shape, int frac, std::int64_t value, Elem elem, bool fixed_point = true) {
    Buffer b;
    b.kind = BufferKind::Activation;
    b.elem = elem;
    b.size = numel(shape);
    b.fixed_point = fixed_point;
    b.frac = fixed_point ? frac : 0;
    b.graph_value = value;
    b.absmax = value >= 0 ? cal_.absmax[static_cast<std::size_t>(value)] : 0.0;
    b.name = value >= 0 ? fmt::format("t{}", value) : fmt::format("c{}", p_.buffers.size());
    b.origin = value >= 0 ? fmt::format("%{} = {}", value, g_.nodes[static_cast<std::size_t>(node_)].op)
                          : fmt::format("packed copy for step {}", p_.steps.size());
    const auto id = p_.add_buffer(std::move(b));
    return View{id, 0, shape, packed_strides(shape), fixed_point ? frac : 0};
  }
  View out_act(const Node& n, int frac) { return new_act(g_.value(n.output).shape, frac, n.output, act_); }

  std::int64_t weight(const Tensor& t, Elem elem, int frac, const std::string& name, const std::string& origin) {
    Buffer b;
    b.kind = BufferKind::Weight;
    b.elem = elem;
    b.size = t.numel();
    b.frac = frac;
    const Tensor d = t.to(Dtype::Float64);
    const double* p = d.data<double>();
    b.data.resize(static_cast<std::size_t>(b.size));
    for (std::int64_t i = 0; i < b.size; ++i) {
      b.absmax = std::max(b.absmax, std::abs(p[i]));
      b.data[static_cast<std::size_t>(i)] = quantize_value(p[i], frac, elem_bytes(elem) * 8);
    }
    b.name = unique_name("w_" + c_name(name));
    b.origin = origin;
    return p_.add_buffer(std::move(b));
  }
  // A parameter or constant at `bits` with its own format.
  std::int64_t weight(std::int64_t value, int bits) {
    const Tensor& t = data(value);
    const std::string name = const_name(value);
    return weight(t, bits == 16 ? Elem::S16 : Elem::S8, choose_frac(absmax(t), bits), name, name);
  }
  std::string const_name(std::int64_t value) const {
    const Value& v = g_.value(value);
    return v.kind == ValueKind::Parameter ? v.name : fmt::format("const{}", value);
  }
  // max |x| over the finite elements
  static double absmax(const Tensor& t) {
    const Tensor d = t.to(Dtype::Float64);
    double m = 0;
    for (std::int64_t i = 0; i < d.numel(); ++i) {
      if (std::isfinite(d.data<double>()[i])) m = std::max(m, std::abs(d.data<double>()[i]));
    }
    return m;
  }

  // An integer table (shapes, strides, keep bits); identical tables are stored once.
  std::int64_t table(Elem elem, std::vector<std::int64_t> values, const std::string& what) {
    const auto key = std::make_pair(elem, values);
    if (auto it = tables_.find(key); it != tables_.end()) return it->second;
    Buffer b;
    b.kind = BufferKind::Weight;
    b.elem = elem;
    b.size = static_cast<std::int64_t>(values.size());
    b.fixed_point = false;
    b.data = std::move(values);
    b.name = unique_name(what);
    b.origin = what;
    const auto id = p_.add_buffer(std::move(b));
    tables_.emplace(key, id);
    return id;
  }
  std::string unique_name(const std::string& base) {
    std::string name = base;
    for (int k = 2;; ++k) {
      const bool taken = std::any_of(p_.buffers.begin(), p_.buffers.end(), [&](const Buffer& b) { return b.name == name; });
      if (!taken) return name;
      name = fmt::format("{}_{}", base, k);
    }
  }

  void step(std::string kernel, std::vector<Arg> args, std::int64_t macs = 0, bool status = false) {
    Step s;
    s.kernel = std::move(kernel);
    s.args = std::move(args);
    s.node = node_;
    s.label = node_ >= 0 ? line(g_.nodes[static_cast<std::size_t>(node_)]) : "output";
    s.macs = macs;
    s.returns_status = status;
    p_.steps.push_back(std::move(s));
  }

  std::string elem_sfx(Elem e) const { return e == Elem::S16 ? "s16" : e == Elem::S8 ? "s8" : "s32"; }

  // Copies the view into `dst` (packed from dst_offset) with one strided copy.
  void copy_into(const Node* n, const View& v, std::int64_t dst, std::int64_t dst_offset, const Strides& dst_strides) {
    // Drop size-1 dims and merge dims that are contiguous in both source and destination.
    Shape shape;
    Strides ss, ds;
    for (std::size_t i = 0; i < v.shape.size(); ++i) {
      if (v.shape[i] == 1) continue;
      if (!shape.empty() && ss.back() == v.strides[i] * v.shape[i] && ds.back() == dst_strides[i] * v.shape[i]) {
        shape.back() *= v.shape[i], ss.back() = v.strides[i], ds.back() = dst_strides[i];
      } else {
        shape.push_back(v.shape[i]), ss.push_back(v.strides[i]), ds.push_back(dst_strides[i]);
      }
    }
    if (shape.empty()) shape = {1}, ss = {0}, ds = {0};
    if (shape.size() > MT_MAX_DIMS) {
      const std::string why = fmt::format("a layout copy needs {} dims after merging; the runtime copies at most {}",
                                          shape.size(), MT_MAX_DIMS);
      if (n) fail(*n, why);
      throw ValueError("lower: " + why);
    }
    const std::string k = fmt::format("copy{}", shape.size());
    step("mt_copy_strided_" + elem_sfx(buf(v).elem),
         {Arg::buf(v.buffer, v.offset), Arg::buf(dst, dst_offset), Arg::num(static_cast<std::int64_t>(shape.size())),
          Arg::buf(table(Elem::S32, {shape.begin(), shape.end()}, k + "_shape")),
          Arg::buf(table(Elem::S32, ss, k + "_src_strides")), Arg::buf(table(Elem::S32, ds, k + "_dst_strides"))});
  }

  // A packed copy of the view when it is not packed already.
  View packed(const Node& n, const View& v) {
    if (is_packed(v)) return v;
    const Buffer src = buf(v);  // a copy: new_act may reallocate the buffer list
    View out = new_act(v.shape, v.frac, -1, src.elem, src.fixed_point);
    p_.buffer(out.buffer).origin = fmt::format("packed copy of {} for %{}", src.name, n.output);
    p_.buffer(out.buffer).absmax = v.frac == src.frac ? src.absmax : 0.0;  // 0: another value shares src
    copy_into(&n, v, out.buffer, 0, out.strides);
    return out;
  }

  // For kernels that read rows at a stride (linear): the view as evenly spaced rows of its
  // last dim when it is one, with that row stride (0 = packed); otherwise a packed copy.
  std::pair<View, std::int64_t> strided_rows(const Node& n, const View& v) {
    if (is_packed(v)) return {v, 0};
    const std::size_t r = v.shape.size();
    if (r >= 2 && (v.strides[r - 1] == 1 || v.shape[r - 1] == 1)) {
      std::vector<std::pair<std::int64_t, std::int64_t>> lead;  // (size, stride), outermost first
      for (std::size_t i = 0; i + 1 < r; ++i) {
        if (v.shape[i] == 1) continue;
        if (!lead.empty() && lead.back().second == v.strides[i] * v.shape[i]) {
          lead.back() = {lead.back().first * v.shape[i], v.strides[i]};
        } else {
          lead.emplace_back(v.shape[i], v.strides[i]);
        }
      }
      if (lead.size() == 1 && lead[0].second >= v.shape[r - 1]) return {v, lead[0].second};
    }
    return {packed(n, v), 0};
  }

  // For elementwise kernels: a view that covers a contiguous range exactly once, in any
  // order (a permuted packed tensor), is used as that range; anything else is packed.
  View dense(const Node& n, const View& v) {
    std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (stride, size)
    for (std::size_t i = 0; i < v.shape.size(); ++i) {
      if (v.shape[i] != 1) dims.emplace_back(v.strides[i], v.shape[i]);
    }
    std::sort(dims.begin(), dims.end());
    std::int64_t expect = 1;
    for (const auto& [stride, size] : dims) {
      if (stride != expect) return packed(n, v);
      expect *= size;
    }
    return v;
  }
  // The output of an elementwise kernel run over dense(x): same layout, in a new buffer.
  View like(const Node& n, const View& x, int frac) {
    View y = out_act(n, frac);
    y.strides = x.strides;
    return y;
  }

  void set(const Node& n, View v) {
    values_in_[v.buffer].push_back(n.output);
    views_[static_cast<std::size_t>(n.output)] = std::move(v);
  }

  // May the current node overwrite the elements of `target` (its own input)? Only if no
  // value read after this node shares an element with it, and `also_read` (read by this node
  // while it writes) does not overlap it.
  bool can_overwrite(const View& target, const std::vector<View>& also_read) {
    if (buf(target).kind != BufferKind::Activation) return false;
    std::vector<char> t(static_cast<std::size_t>(buf(target).size), 0);
    mark(target, t);
    auto overlaps = [&](const View& w) {
      if (w.buffer != target.buffer) return false;
      std::vector<char> m(t.size(), 0);
      mark(w, m);
      for (std::size_t i = 0; i < t.size(); ++i) {
        if (t[i] && m[i]) return true;
      }
      return false;
    };
    for (const View& w : also_read) {
      if (overlaps(w)) return false;
    }
    for (auto v : values_in_[target.buffer]) {
      if (last_use_[static_cast<std::size_t>(v)] > node_ && overlaps(*views_[static_cast<std::size_t>(v)])) return false;
    }
    return true;
  }

  // ---- ops ----

  void lower_node(const Node& n) {
    const std::string& op = n.op;
    // A node of parameters and constants only (a positional table sliced to the sequence
    // length) is computed now, in float, and becomes a constant.
    if (std::all_of(n.inputs.begin(), n.inputs.end(), [this](std::int64_t i) { return i < 0 || is_const(i); })) {
      std::vector<Tensor> in;
      for (auto i : n.inputs) in.push_back(i >= 0 ? data(i) : Tensor());
      folded_[n.output] = evaluate_node(n, in);
      return;
    }
    if (op == "reshape") return set(n, reshape(n, act(n, n.inputs[0]), g_.value(n.output).shape));
    if (op == "permute") return permute(n);
    if (op == "slice") return slice(n);
    if (op == "expand") return expand(n);
    if (op == "clone") return set(n, act(n, n.inputs[0]));
    if (op == "linear") return linear(n, n.inputs[0], data(n.inputs[1]), n.inputs.size() > 2 ? n.inputs[2] : -1);
    if (op == "matmul") return matmul(n);
    if (op == "add" || op == "sub") return add(n, op == "sub");
    if (op == "mul") return mul(n);
    if (op == "div") return div(n);
    if (op == "neg") return scale(n, act(n, n.inputs[0]), -1.0);
    if (op == "relu") return relu(n);
    if (op == "tanh" || op == "sigmoid") return table_activation(n, bits_ - 1);
    if (op == "gelu") return table_activation(n, frac_of(n.output));
    if (op == "softmax") return softmax(n);
    if (op == "layer_norm") return layer_norm(n);
    if (op == "mean" || op == "sum") return reduce(n, op == "mean");
    if (op == "scaled_dot_product_attention") return attention(n);
    if (op == "index_select") return embedding(n);
    if (op == "cat") return cat(n);
    if (op == "argmax") return argmax(n);
    fail(n, fmt::format("the fixed-point runtime has no kernel for {}. Lowerable ops: linear, matmul, add, sub and mul "
                        "(activations or constants), div (by a constant or a per-row activation), neg, relu, gelu, "
                        "tanh, sigmoid, softmax (last dim), layer_norm, mean, sum, scaled_dot_product_attention, "
                        "embedding (index_select), argmax, reshape, permute, slice, expand, cat",
                        op));
  }

  template <class T>
  const T& attr(const Node& n, const char* key) const {
    for (const auto& [k, v] : n.attrs) {
      if (k == key) {
        if (const T* p = std::get_if<T>(&v)) return *p;
      }
    }
    fail(n, fmt::format("attribute {} is missing", key));
  }

  std::int64_t last_dim(const Node& n, std::int64_t dim, const Shape& shape) const {
    const auto nd = static_cast<std::int64_t>(shape.size());
    if (dim < 0) dim += nd;
    if (dim != nd - 1) fail(n, fmt::format("only the last dim ({}) is supported, got dim {}", nd - 1, dim));
    return shape.empty() ? 1 : shape.back();
  }

  View reshape(const Node& n, const View& v, const Shape& shape) {
    if (auto st = reshaped_strides(v, shape)) return View{v.buffer, v.offset, shape, *st, v.frac};
    const View p = packed(n, v);
    return View{p.buffer, p.offset, shape, packed_strides(shape), p.frac};
  }

  void permute(const Node& n) {
    const View& v = act(n, n.inputs[0]);
    const Shape& dims = attr<Shape>(n, "dims");
    View out{v.buffer, v.offset, {}, {}, v.frac};
    for (auto d : dims) {
      const auto k = static_cast<std::size_t>(d < 0 ? d + static_cast<std::int64_t>(v.shape.size()) : d);
      out.shape.push_back(v.shape[k]);
      out.strides.push_back(v.strides[k]);
    }
    set(n, out);
  }

  void slice(const Node& n) {
    View v = act(n, n.inputs[0]);
    const auto dim = static_cast<std::size_t>(attr<std::int64_t>(n, "dim"));
    const std::int64_t start = attr<std::int64_t>(n, "start"), step = attr<std::int64_t>(n, "step");
    v.offset += start * v.strides[dim];
    v.strides[dim] *= step;
    v.shape = g_.value(n.output).shape;
    set(n, v);
  }

  void expand(const Node& n) {
    const View& v = act(n, n.inputs[0]);
    const Shape& shape = g_.value(n.output).shape;
    View out{v.buffer, v.offset, shape, Strides(shape.size(), 0), v.frac};
    const std::size_t lead = shape.size() - v.shape.size();
    for (std::size_t i = 0; i < v.shape.size(); ++i) out.strides[lead + i] = v.shape[i] == shape[lead + i] ? v.strides[i] : 0;
    set(n, out);
  }

  // y = x W^T + b: mt_linear_*; W [out, in] is a constant.
  void linear(const Node& n, std::int64_t x_id, const Tensor& w, std::int64_t b_id) {
    if (w.dim() != 2) fail(n, "the weight must be 2-D [out, in]");
    const auto [x, x_stride] = strided_rows(n, act(n, x_id));
    const std::int64_t in = w.size(1), out = w.size(0), rows = numel(x.shape) / in;
    const int fx = frac(x);
    int fw = choose_frac(absmax(w), wbits_);
    // The bias is an int32 in the accumulator's format Q(fx + fw): when x is very finely
    // scaled (tiny activations) that format may not hold the bias; then the weights give up
    // fraction bits until it does, instead of the bias saturating.
    if (b_id >= 0 && is_const(b_id)) fw = std::min(fw, choose_frac(absmax(data(b_id)), 32) - fx);
    const std::string wname = const_name(n.inputs[1]);
    const auto wb = weight(w, wbits_ == 16 ? Elem::S16 : Elem::S8, fw, wname, wname);
    std::int64_t bb = -1;
    if (b_id >= 0) {
      if (!is_const(b_id)) fail(n, "the bias must be a parameter or constant");
      bb = weight(data(b_id), Elem::S32, fx + fw, const_name(b_id), const_name(b_id));
    }
    const int fy = frac_of(n.output);
    const View y = out_act(n, fy);
    const std::string kernel = bits_ == 8 ? "mt_linear_s8_w8" : wbits_ == 16 ? "mt_linear_s16_w16" : "mt_linear_s16_w8";
    step(kernel, {Arg::buf(x.buffer, x.offset), Arg::buf(wb), Arg::buf(bb), Arg::buf(y.buffer), Arg::num(rows),
                  Arg::num(in), Arg::num(out), Arg::num(fx + fw - fy), Arg::num(x_stride)},
         rows * in * out);
    set(n, y);
  }

  void matmul(const Node& n) {
    const std::int64_t a_id = n.inputs[0], b_id = n.inputs[1];
    if (is_const(b_id)) {  // x @ W is linear with the weight W^T
      const Tensor& w = data(b_id);
      if (w.dim() != 2) fail(n, "a constant right operand must be 2-D");
      return linear(n, a_id, transpose(w, 0, 1).contiguous(), -1);
    }
    const View& a = act(n, a_id);
    const View& b = act(n, b_id);
    if (a.shape.size() < 2 || a.shape.size() != b.shape.size() ||
        !std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin())) {
      fail(n, "both operands must be [batch.., M, K] @ [batch.., K, N] with equal batch dims (no broadcasting)");
    }
    const std::size_t r = a.shape.size();
    const std::int64_t M = a.shape[r - 2], K = a.shape[r - 1], N = b.shape[r - 1];
    const std::int64_t batch = numel(Shape(a.shape.begin(), a.shape.end() - 2));
    const View pa = packed(n, a);
    // b read as the transpose of a packed [.., N, K] when that is how it is laid out.
    View bt = b;
    std::swap(bt.shape[r - 1], bt.shape[r - 2]);
    std::swap(bt.strides[r - 1], bt.strides[r - 2]);
    const bool transposed = !is_packed(b) && is_packed(bt);
    const View pb = transposed ? bt : packed(n, b);
    const int fy = frac_of(n.output);
    const View y = out_act(n, fy);
    step("mt_matmul_" + sfx_, {Arg::buf(pa.buffer, pa.offset), Arg::buf(pb.buffer, pb.offset), Arg::buf(y.buffer),
                              Arg::num(batch), Arg::num(M), Arg::num(K), Arg::num(N), Arg::num(transposed ? 1 : 0),
                              Arg::num(frac(pa) + frac(pb) - fy)},
         batch * M * K * N);
    set(n, y);
  }

  // Number of elements b repeats over when it broadcasts to `out` as a trailing block (its
  // shape without leading 1s is a suffix of out); -1 when it does not.
  static std::int64_t suffix_block(const Shape& b, const Shape& out) {
    std::size_t lead = 0;
    while (lead < b.size() && b[lead] == 1) ++lead;
    const std::size_t k = b.size() - lead;
    if (k > out.size() || !std::equal(b.begin() + static_cast<std::ptrdiff_t>(lead), b.end(), out.end() - static_cast<std::ptrdiff_t>(k))) return -1;
    return numel(Shape(b.begin() + static_cast<std::ptrdiff_t>(lead), b.end()));
  }

  // The second operand of a broadcasting binary op: a packed buffer and the block it repeats.
  struct Operand {
    std::int64_t buffer, offset, block;
    int frac;
  };
  Operand operand(const Node& n, std::int64_t id, const Shape& out, bool negate = false) {
    if (is_const(id)) {
      Tensor c = data(id);
      if (negate) c = neg(c);
      std::int64_t block = suffix_block(c.shape(), out);
      if (block < 0) {
        c = microtorch::expand(c, out).clone();
        block = numel(out);
      }
      const int fc = choose_frac(absmax(c), bits_);
      return {weight(c.reshape({-1}), act_, fc, const_name(id), const_name(id)), 0, block, fc};
    }
    if (negate) fail(n, "subtracting an activation is not supported; add a negated (scaled by -1) tensor instead");
    const View& v = act(n, id);
    std::int64_t block = suffix_block(v.shape, out);
    if (block < 0) fail(n, fmt::format("operand {} of shape {} does not broadcast as a trailing block of {}", ref(id),
                                       shape_str(v.shape), shape_str(out)));
    const View p = packed(n, v);
    return {p.buffer, p.offset, block, frac(p)};
  }

  // The full-size operand of a binary op (the one with the output's shape).
  std::int64_t full_operand(const Node& n) const {
    const Shape& out = g_.value(n.output).shape;
    for (std::size_t i = 0; i < 2; ++i) {
      const auto id = n.inputs[i];
      if (!is_const(id) && views_[static_cast<std::size_t>(id)] && views_[static_cast<std::size_t>(id)]->shape == out) {
        return static_cast<std::int64_t>(i);
      }
    }
    fail(n, "neither operand is an activation of the output's shape (broadcasting both sides is not supported)");
  }

  void add(const Node& n, bool subtract) {
    const Shape& out = g_.value(n.output).shape;
    const std::int64_t i = full_operand(n);
    if (subtract && i == 1) fail(n, "constant - activation is not supported; write -(x - c) or scale by -1");
    const View a = packed(n, act(n, n.inputs[static_cast<std::size_t>(i)]));
    const Operand b = operand(n, n.inputs[static_cast<std::size_t>(1 - i)], out, subtract);
    const int fy = frac_of(n.output);
    const View y = out_act(n, fy);
    const std::int64_t count = numel(out);
    if (b.block == count) {
      step("mt_add_" + sfx_, {Arg::buf(a.buffer, a.offset), Arg::num(frac(a)), Arg::buf(b.buffer, b.offset),
                             Arg::num(b.frac), Arg::buf(y.buffer), Arg::num(fy), Arg::num(count)});
    } else {
      step("mt_add_bcast_" + sfx_, {Arg::buf(a.buffer, a.offset), Arg::num(frac(a)), Arg::buf(b.buffer, b.offset),
                                   Arg::num(b.frac), Arg::num(b.block), Arg::buf(y.buffer), Arg::num(fy),
                                   Arg::num(count)});
    }
    set(n, y);
  }

  // y = x * c for a scalar constant c: mt_scale_* with c as a 16-bit Q constant.
  void scale(const Node& n, const View& xv, double c) {
    const View x = dense(n, xv);
    const int fm = choose_frac(std::abs(c), 16);
    const int fy = frac_of(n.output);
    const View y = like(n, x, fy);
    step("mt_scale_" + sfx_, {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel(x.shape)),
                             Arg::num(quantize_value(c, fm, 16)), Arg::num(frac(x) + fm - fy)},
         numel(x.shape));
    set(n, y);
  }

  bool scalar_const(std::int64_t id) const { return is_const(id) && data(id).numel() == 1; }

  void mul(const Node& n) {
    for (std::size_t i = 0; i < 2; ++i) {
      if (scalar_const(n.inputs[1 - i]) && !is_const(n.inputs[i])) {
        return scale(n, act(n, n.inputs[i]), data(n.inputs[1 - i]).item<double>());
      }
    }
    const Shape& out = g_.value(n.output).shape;
    const std::int64_t i = full_operand(n);
    const View a = packed(n, act(n, n.inputs[static_cast<std::size_t>(i)]));
    const Operand b = operand(n, n.inputs[static_cast<std::size_t>(1 - i)], out);
    const int fy = frac_of(n.output);
    const View y = out_act(n, fy);
    step("mt_mul_" + sfx_, {Arg::buf(a.buffer, a.offset), Arg::buf(b.buffer, b.offset), Arg::num(b.block),
                           Arg::buf(y.buffer), Arg::num(numel(out)), Arg::num(frac(a) + b.frac - fy)},
         numel(out));
    set(n, y);
  }

  void div(const Node& n) {
    const std::int64_t a_id = n.inputs[0], d_id = n.inputs[1];
    if (scalar_const(d_id)) {
      const double d = data(d_id).item<double>();
      if (d == 0) fail(n, "division by the constant 0");
      return scale(n, act(n, a_id), 1.0 / d);
    }
    const View& a = act(n, a_id);
    const Shape& out = g_.value(n.output).shape;
    const View& d = act(n, d_id);
    Shape rows_shape = out;
    if (!rows_shape.empty()) rows_shape.back() = 1;
    if (a.shape != out || d.shape != rows_shape) {
      fail(n, "division lowers for x [.., n] / d [.., 1] (one divisor per row) or by a scalar constant");
    }
    const View pa = packed(n, a), pd = packed(n, d);
    const int fy = frac_of(n.output);
    const View y = out_act(n, fy);
    const std::int64_t cols = out.empty() ? 1 : out.back();
    step("mt_div_rows_" + sfx_, {Arg::buf(pa.buffer, pa.offset), Arg::num(frac(pa)), Arg::buf(pd.buffer, pd.offset),
                                Arg::num(frac(pd)), Arg::buf(y.buffer), Arg::num(fy), Arg::num(numel(out) / cols),
                                Arg::num(cols)});
    set(n, y);
  }

  void relu(const Node& n) {
    const View x = dense(n, act(n, n.inputs[0]));
    const View y = like(n, x, frac(x));  // relu keeps the format
    step("mt_relu_" + sfx_, {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel(x.shape))});
    set(n, y);
  }

  void table_activation(const Node& n, int fy) {
    const View x = dense(n, act(n, n.inputs[0]));
    const View y = like(n, x, fy);
    step(fmt::format("mt_{}_{}", n.op, sfx_), {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer),
                                               Arg::num(numel(x.shape)), Arg::num(frac(x)), Arg::num(fy)});
    set(n, y);
  }

  void softmax(const Node& n) {
    const View x = packed(n, act(n, n.inputs[0]));
    const std::int64_t cols = last_dim(n, attr<std::int64_t>(n, "dim"), x.shape);
    if (cols > 65535) fail(n, "softmax rows are limited to 65535 elements");
    const View y = out_act(n, bits_ - 1);  // probabilities in Q0.15 / Q0.7
    step("mt_softmax_" + sfx_, {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel(x.shape) / cols),
                               Arg::num(cols), Arg::num(frac(x))});
    set(n, y);
  }

  void layer_norm(const Node& n) {
    const View x = packed(n, act(n, n.inputs[0]));
    const std::int64_t cols = numel(attr<Shape>(n, "normalized_shape"));
    const double eps = attr<double>(n, "eps");
    std::int64_t gamma = -1, beta = -1;
    int fg = 0, fb = 0;
    if (n.inputs.size() > 1 && n.inputs[1] >= 0) gamma = weight(n.inputs[1], bits_), fg = p_.buffer(gamma).frac;
    if (n.inputs.size() > 2 && n.inputs[2] >= 0) beta = weight(n.inputs[2], bits_), fb = p_.buffer(beta).frac;
    // eps = eps_q * 2^-eps_frac with eps_q holding about 24 significant bits
    const int eps_frac = eps > 0 ? std::clamp(24 - static_cast<int>(std::ceil(std::log2(eps))), 0, 62) : 0;
    const auto eps_q = static_cast<std::int64_t>(std::llround(std::ldexp(eps, eps_frac)));
    const int fy = frac_of(n.output);
    const View y = out_act(n, fy);
    step("mt_layernorm_" + sfx_, {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel(x.shape) / cols),
                                 Arg::num(cols), Arg::num(frac(x)), Arg::buf(gamma), Arg::num(fg), Arg::buf(beta),
                                 Arg::num(fb), Arg::num(eps_q), Arg::num(eps_frac), Arg::num(fy)},
         numel(x.shape) * 2);
    set(n, y);
  }

  // mean / sum over consecutive dims: [outer, n, inner] -> [outer, inner]
  void reduce(const Node& n, bool mean) {
    const View x = packed(n, act(n, n.inputs[0]));
    std::vector<std::int64_t> dims;
    for (auto d : attr<Shape>(n, "dims")) dims.push_back(d < 0 ? d + static_cast<std::int64_t>(x.shape.size()) : d);
    std::sort(dims.begin(), dims.end());
    for (std::size_t i = 1; i < dims.size(); ++i) {
      if (dims[i] != dims[i - 1] + 1) fail(n, "only a run of consecutive dims can be reduced");
    }
    if (dims.empty()) fail(n, "no dims to reduce");
    const auto lo = static_cast<std::ptrdiff_t>(dims.front()), hi = static_cast<std::ptrdiff_t>(dims.back()) + 1;
    const std::int64_t outer = numel(Shape(x.shape.begin(), x.shape.begin() + lo));
    const std::int64_t count = numel(Shape(x.shape.begin() + lo, x.shape.begin() + hi));
    const std::int64_t inner = numel(Shape(x.shape.begin() + hi, x.shape.end()));
    const int fy = frac_of(n.output);
    const View y = out_act(n, fy);
    step(fmt::format("mt_{}_{}", mean ? "meanpool" : "sum", sfx_),
         {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(outer), Arg::num(count), Arg::num(inner),
          Arg::num(frac(x) - fy)},
         outer * count * inner);
    set(n, y);
  }

  void argmax(const Node& n) {
    const View x = packed(n, act(n, n.inputs[0]));
    const std::int64_t cols = last_dim(n, attr<std::int64_t>(n, "dim"), x.shape);
    const View y = new_act(g_.value(n.output).shape, 0, n.output, Elem::S32, false);
    step("mt_argmax_" + sfx_, {Arg::buf(x.buffer, x.offset), Arg::buf(y.buffer), Arg::num(numel(x.shape) / cols),
                              Arg::num(cols)});
    set(n, y);
  }

  // index_select(table, 0, ids) with a constant table: an embedding lookup.
  void embedding(const Node& n) {
    if (n.inputs.size() < 2 || !is_const(n.inputs[0]) || attr<std::int64_t>(n, "dim") != 0) {
      fail(n, "only index_select(weight, 0, ids) with a constant weight lowers (an embedding lookup)");
    }
    const Tensor& tab = data(n.inputs[0]);
    const View ids = packed(n, act(n, n.inputs[1]));
    const std::int64_t tb = weight(n.inputs[0], bits_);
    const int f = p_.buffer(tb).frac;
    const View y = out_act(n, f);  // a lookup copies rows: the table's format
    step("mt_embedding_" + sfx_, {Arg::buf(ids.buffer, ids.offset), Arg::num(numel(ids.shape)), Arg::buf(tb),
                                 Arg::num(tab.size(0)), Arg::num(numel(tab.shape()) / tab.size(0)), Arg::buf(y.buffer)},
         0, /*status=*/true);
    set(n, y);
  }

  // cat: each input copied (rescaled first when its format differs) into its block of y.
  void cat(const Node& n) {
    const Shape& out = g_.value(n.output).shape;
    auto dim = attr<std::int64_t>(n, "dim");
    if (dim < 0) dim += static_cast<std::int64_t>(out.size());
    const int fy = frac_of(n.output);
    const View y = out_act(n, fy);
    std::int64_t at = 0;
    for (const auto id : n.inputs) {
      View v;
      if (is_const(id)) {
        const Tensor& c = data(id);
        const std::int64_t wb = weight(c, act_, fy, const_name(id), const_name(id));
        v = View{wb, 0, c.shape(), packed_strides(c.shape()), fy};
      } else {
        v = act(n, id);
      }
      if (v.frac != fy) {  // y = x * 1 * 2^-(fx - fy)
        const View p = packed(n, v);
        v = new_act(v.shape, fy, -1, act_);
        p_.buffer(v.buffer).origin = fmt::format("{} rescaled for %{}", ref(id), n.output);
        step("mt_scale_" + sfx_, {Arg::buf(p.buffer, p.offset), Arg::buf(v.buffer), Arg::num(numel(v.shape)),
                                 Arg::num(1), Arg::num(p.frac - fy)});
      }
      copy_into(&n, v, y.buffer, at * y.strides[static_cast<std::size_t>(dim)], y.strides);
      at += v.shape[static_cast<std::size_t>(dim)];
    }
    set(n, y);
  }

  void attention(const Node& n);

  void finish_output() {
    const View& v = *views_[static_cast<std::size_t>(g_.output)];
    Buffer& b = buf(v);
    p_.output_shape = v.shape;
    if (b.kind == BufferKind::Activation && is_packed(v) && v.offset == 0 && numel(v.shape) == b.size &&
        v.frac == b.frac) {
      b.kind = BufferKind::Output;
      b.name = "out";
      p_.output = v.buffer;
      return;
    }
    node_ = -1;
    Buffer o;
    o.kind = BufferKind::Output;
    o.elem = b.elem;
    o.size = numel(v.shape);
    o.fixed_point = b.fixed_point;
    o.frac = v.frac;
    o.absmax = cal_.absmax[static_cast<std::size_t>(g_.output)];
    o.name = "out";
    o.origin = fmt::format("%{} (graph output)", g_.output);
    p_.output = p_.add_buffer(std::move(o));
    copy_into(nullptr, v, p_.output, 0, packed_strides(v.shape));
  }
};

void Lowering::attention(const Node& n) {
  if (attr<double>(n, "dropout_p") != 0.0) fail(n, "dropout must be 0 (call model.eval() before tracing)");
  View q = act(n, n.inputs[0]), k = act(n, n.inputs[1]), v = act(n, n.inputs[2]);
  const std::size_t r = q.shape.size();
  if (r < 2 || k.shape.size() != r || v.shape.size() != r || !std::equal(q.shape.begin(), q.shape.end() - 2, k.shape.begin()) ||
      !std::equal(q.shape.begin(), q.shape.end() - 2, v.shape.begin())) {
    fail(n, "q, k and v must share their leading (batch, head) dims; broadcasting them is not supported");
  }
  const std::int64_t L = q.shape[r - 2], D = q.shape[r - 1], S = k.shape[r - 2], Dv = v.shape[r - 1];
  if (S > 32767 || D > 65535) fail(n, "attention is limited to S <= 32767 keys and D <= 65535");
  // Rows are read in place through a row stride when each row is contiguous.
  auto rows_in_place = [&](View& t) {
    if (t.strides[r - 1] != 1 && t.shape[r - 1] != 1) t = packed(n, t);
    if (t.shape[r - 2] == 1) t.strides[r - 2] = t.shape[r - 1];
  };
  rows_in_place(q), rows_in_place(k), rows_in_place(v);
  const Shape lead(q.shape.begin(), q.shape.end() - 2);
  const std::int64_t heads = numel(lead);

  // A constant additive mask (0 = attend, -inf = blocked) becomes keep bits per head.
  Tensor keep;  // bool [lead.., L, S]
  if (n.inputs.size() > 3 && n.inputs[3] >= 0) {
    if (!is_const(n.inputs[3])) fail(n, "the attention mask depends on the input; only fixed masks are baked in");
    const Tensor m = data(n.inputs[3]).to(Dtype::Float64);
    const double* pm = m.data<double>();
    for (std::int64_t i = 0; i < m.numel(); ++i) {
      if (pm[i] != 0.0 && !(std::isinf(pm[i]) && pm[i] < 0)) {
        fail(n, fmt::format("the additive mask holds {}; only 0 (attend) and -inf (blocked) can be baked in as keep bits",
                            pm[i]));
      }
    }
    Shape full = lead;
    full.push_back(L), full.push_back(S);
    keep = microtorch::expand(eq(m, zeros_like(m)), full).clone();
  }

  AttentionParams base;
  base.L = static_cast<int>(L), base.S = static_cast<int>(S), base.D = static_cast<int>(D), base.Dv = static_cast<int>(Dv);
  base.q_stride = static_cast<int>(q.strides[r - 2]);
  base.k_stride = static_cast<int>(k.strides[r - 2]);
  base.v_stride = static_cast<int>(v.strides[r - 2]);
  base.out_stride = static_cast<int>(Dv);
  base.q_frac = frac(q), base.k_frac = frac(k), base.v_frac = frac(v);
  base.out_frac = frac_of(n.output);
  const double scale = attr<double>(n, "scale");
  if (!(scale > 0)) fail(n, fmt::format("the scale must be positive, got {}", scale));
  base.scale_frac = std::clamp(static_cast<int>(std::floor(std::log2(65535.0 / scale))), 0, 62);
  base.scale_q = static_cast<std::uint32_t>(std::min<std::int64_t>(quantize_value(scale, base.scale_frac, 32), 65535));
  base.flags = attr<bool>(n, "is_causal") ? MT_ATTN_CAUSAL : 0u;

  const bool stream = opt_.attention == AttentionKernel::Streaming;
  // The streaming kernel may write each output row over its query row (mt_kernels.h): then
  // the output needs no bytes of its own.
  const bool in_place = stream && Dv <= D && can_overwrite(q, {k, v});
  const View y = in_place ? View{q.buffer, q.offset, g_.value(n.output).shape, q.strides, base.out_frac}
                          : out_act(n, base.out_frac);
  if (in_place) {
    base.out_stride = base.q_stride;
    Buffer& qb = p_.buffer(q.buffer);
    qb.origin += fmt::format(", then %{} = attention (Q{}.{}) over its query rows", n.output, bits_ - 1 - base.out_frac,
                             base.out_frac);
  }
  const Elem acc = stream && bits_ == 16 ? Elem::S64 : Elem::S32;
  const View scratch = new_act({stream ? Dv : L * S}, 0, -1, acc, false);
  p_.buffer(scratch.buffer).origin = fmt::format("attention scratch for %{} ({})", n.output, stream ? "streaming" : "two-pass scores");
  p_.buffer(scratch.buffer).name = fmt::format("scratch{}", n.output);
  p_.buffer(scratch.buffer).kind = BufferKind::Scratch;

  std::map<std::int64_t, std::int64_t> params_for_keep;  // keep table -> params index
  Shape idx(lead.size(), 0);
  for (std::int64_t h = 0; h < heads; ++h) {
    std::int64_t qo = q.offset, ko = k.offset, vo = v.offset;
    for (std::size_t d = 0; d < lead.size(); ++d) {
      qo += idx[d] * q.strides[d], ko += idx[d] * k.strides[d], vo += idx[d] * v.strides[d];
    }
    std::int64_t keep_id = -1;
    if (keep.defined()) {
      const Tensor km = keep.reshape({heads, L * S});
      const Tensor row = microtorch::slice(km, 0, h, h + 1).reshape({L * S});
      std::vector<std::int64_t> bits(static_cast<std::size_t>((L * S + 7) / 8), 0);
      const bool* pk = row.data<bool>();
      for (std::int64_t i = 0; i < L * S; ++i) {
        if (pk[i]) bits[static_cast<std::size_t>(i >> 3)] |= std::int64_t{1} << (i & 7);
      }
      keep_id = table(Elem::U8, std::move(bits), fmt::format("keep{}", n.output));
    }
    auto it = params_for_keep.find(keep_id);
    if (it == params_for_keep.end()) {
      AttentionParams ap = base;
      ap.keep = keep_id;
      p_.attention.push_back(ap);
      it = params_for_keep.emplace(keep_id, static_cast<std::int64_t>(p_.attention.size()) - 1).first;
    }
    step(fmt::format("mt_attention_{}_{}", stream ? "stream" : "twopass", sfx_),
         {Arg::attn(it->second), Arg::buf(q.buffer, qo), Arg::buf(k.buffer, ko), Arg::buf(v.buffer, vo),
          Arg::buf(y.buffer, in_place ? qo : h * L * Dv), Arg::buf(scratch.buffer)},
         L * S * (D + Dv));
    for (std::size_t d = lead.size(); d-- > 0;) {  // next (batch, head) index
      if (++idx[d] < lead[d]) break;
      idx[d] = 0;
    }
  }
  set(n, y);
}

}  // namespace

Program quantize(const Graph& graph, const Calibration& calibration, const QuantOptions& options) {
  return Lowering(graph, calibration, options).run();
}

}  // namespace microtorch::lower
