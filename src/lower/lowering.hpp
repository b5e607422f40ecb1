// The state of one quantize() run, shared by the op rules (rules/*.cpp): the graph and its
// calibration, the Program being built (buffers, weights, integer tables, kernel calls), the
// view of every activation computed so far, and the errors and labels that name a node.
//
// A rule reads its inputs with act() (and packed(), dense(), strided_rows() when its kernel
// needs a layout), creates its output with out_act() or like(), adds kernel calls with
// step() and publishes the result with set().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "microtorch/lower/quantize.hpp"
#include "view.hpp"

namespace microtorch::lower {

class Lowering {
 public:
  Lowering(const Graph& g, const Calibration& cal, const QuantOptions& opt);

  const Graph& graph() const { return g_; }
  const QuantOptions& options() const { return opt_; }
  Program& program() { return p_; }
  int bits() const { return bits_; }          ///< activation bits
  int weight_bits() const { return wbits_; }
  Elem act_elem() const { return act_; }      ///< S16 or S8
  const std::string& sfx() const { return sfx_; }  ///< "s16" or "s8": the kernels' suffix
  static std::string elem_sfx(Elem e);

  /// Index of the node being lowered (-1 outside a node).
  std::int64_t node_index() const { return node_; }
  void begin_node(std::int64_t index) { node_ = index; }

  // ---- errors and labels ----

  /// `%5 = linear(%0, fc.weight)  [2, 4] -> [2, 3]`
  std::string line(const Node& n) const;
  /// `fc.weight` for a parameter, `%7` otherwise.
  std::string ref(std::int64_t id) const;
  /// Throws ValueError "lower: cannot lower <line> in module m: why".
  [[noreturn]] void fail(const Node& n, const std::string& why) const;

  // ---- values ----

  /// Parameters, constants and outputs of nodes computed from them alone.
  bool is_const(std::int64_t id) const;
  bool scalar_const(std::int64_t id) const { return is_const(id) && data(id).numel() == 1; }
  const Tensor& data(std::int64_t id) const;
  void fold(std::int64_t value, Tensor t) { folded_[value] = std::move(t); }
  /// "fc1.weight" for parameters, "const7" otherwise.
  std::string const_name(std::int64_t value) const;
  /// The view of an activation input of `n`; fails naming the node when `id` is not one.
  const View& act(const Node& n, std::int64_t id) const;
  bool has_view(std::int64_t id) const { return id >= 0 && views_[static_cast<std::size_t>(id)].has_value(); }
  /// Publishes the view of n's output.
  void set(const Node& n, View v);
  /// The Q format of a calibrated value at the activation bits.
  int frac_of(std::int64_t value);
  /// choose_frac(absmax, bits), with a warning naming `what` when the range needs a format
  /// outside what the kernels support (clamped: the values round to 0 or saturate).
  int format(double absmax, int bits, const std::string& what);
  /// The output shape of n.
  const Shape& out_shape(const Node& n) const { return g_.value(n.output).shape; }

  /// `dim` (possibly negative) must be the last dim of `shape`; returns its size.
  std::int64_t last_dim(const Node& n, std::int64_t dim, const Shape& shape) const;

  // ---- buffers ----

  Buffer& buf(const View& v) { return p_.buffer(v.buffer); }
  /// A new arena buffer for `value` (or a temporary when value < 0), viewed packed.
  View new_act(const Shape& shape, int frac, std::int64_t value, Elem elem, bool fixed_point = true);
  /// A packed buffer for n's output at the activation type.
  View out_act(const Node& n, int frac) { return new_act(out_shape(n), frac, n.output, act_); }
  /// The output of an elementwise kernel run over dense(x): x's layout, in a new buffer.
  View like(const Node& n, const View& x, int frac);
  /// Constant data quantized to `elem` at Q(frac), in flash.
  std::int64_t weight(const Tensor& t, Elem elem, int frac, const std::string& name, const std::string& origin);
  /// A parameter or constant at `bits` with its own format.
  std::int64_t weight(std::int64_t value, int bits);
  /// An integer table (shapes, strides, keep bits); identical tables are stored once.
  std::int64_t table(Elem elem, std::vector<std::int64_t> values, const std::string& what);
  /// max |x| over the finite elements
  static double absmax(const Tensor& t);

  // ---- layouts ----

  /// The view itself when packed, else a packed copy (one mt_copy_strided_* call).
  View packed(const Node& n, const View& v);
  /// For kernels that read rows at a stride: the view with its row stride (0 = packed), or
  /// a packed copy.
  std::pair<View, std::int64_t> strided_rows(const Node& n, const View& v);
  /// For elementwise kernels: the view when it covers a range exactly once, else packed.
  View dense(const Node& n, const View& v);
  /// Copies the view into `dst` (from dst_offset, with dst_strides) with one strided copy.
  void copy_into(const Node* n, const View& v, std::int64_t dst, std::int64_t dst_offset, const Strides& dst_strides);
  /// May the current node overwrite the elements of `target` (its own input)? Only if no
  /// value read after this node shares an element with it, and `also_read` (read by this
  /// node while it writes) does not overlap it.
  bool can_overwrite(const View& target, const std::vector<View>& also_read);

  // ---- kernel calls ----

  void step(std::string kernel, std::vector<Arg> args, std::int64_t macs = 0);

  /// The graph output becomes the Output buffer (a packed copy when its view is not the
  /// whole of a buffer of its own).
  void finish_output();
  /// Marks reads: value -> the last node index that reads it.
  void set_last_uses();

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
  std::map<std::int64_t, Tensor> folded_;                        // outputs of nodes computed only from constants
  std::vector<std::int64_t> last_use_;                           // per value: the last node that reads it
  std::map<std::int64_t, std::vector<std::int64_t>> values_in_;  // buffer -> values viewing it

  std::string module_of(const Node& n) const;
  std::string unique_name(const std::string& base);
};

/// A C identifier made from any text (non-alphanumerics become '_').
std::string c_name(std::string s);

}  // namespace microtorch::lower
