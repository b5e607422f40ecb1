// The state of one quantize() run, shared by the op rules (rules/*.cpp): the graph and its
// calibration, the Program being built (buffers, weights, integer tables, kernel calls), the
// view of every activation computed so far (with its number format), and the errors and
// labels that name a node.
//
// A rule reads its inputs with act() (and packed(), dense(), strided_rows(), convert() when
// its kernel needs a layout or a type), chooses its output's type and format with
// out_elem() and out_format(), creates the output with out_act() or like(), adds kernel
// calls with step() and publishes the result with set().
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "affine_input.hpp"
#include "microtorch/lower/quantize.hpp"
#include "view.hpp"

namespace microtorch::lower {

/// A number format: real value = scale * (q - zero).
struct Format {
  double scale = 1.0;
  std::int32_t zero = 0;
  double lo = 0, hi = 0;  ///< the calibrated range it was chosen for
};

class Lowering {
 public:
  /// `float32`: every value a float (Elem::F32) and no number formats (TrainOptions::numeric
  /// Float32); the integer-only folds (affine chains into layers, fused relus) are off.
  Lowering(const Graph& g, const Calibration& cal, const QuantOptions& opt, bool float32 = false);

  const Graph& graph() const { return g_; }
  const QuantOptions& options() const { return opt_; }
  Program& program() { return p_; }
  static std::string elem_sfx(Elem e);  ///< "s8", "s16", "s32": the kernels' suffixes

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
  /// Adds a warning about `what` to the program.
  void warn(const std::string& what) { p_.warnings.push_back(what); }

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
  /// Publishes the view of n's output (and labels n's steps with its format).
  void set(const Node& n, View v);
  /// The output shape of n.
  const Shape& out_shape(const Node& n) const { return g_.value(n.output).shape; }
  /// `dim` (possibly negative) must be the last dim of `shape`; returns its size.
  std::int64_t last_dim(const Node& n, std::int64_t dim, const Shape& shape) const;

  // ---- precision and formats ----

  /// The integer type of n's output: its precision (8 or 16 bits), sensitive_bits for the
  /// sensitive values of an int8 layer (sensitive()).
  Elem out_elem(const Node& n) const;
  /// Is n's output one of the values QuantOptions::sensitive_bits keeps wider?
  bool sensitive(const Node& n) const;
  bool residual_stream(std::int64_t value) const;
  /// The type of n's weights.
  Elem weight_elem(const Node& n) const;
  /// n's precision: QuantOptions' defaults or the last per-layer entry that matches it.
  struct Precision {
    int activation_bits, weight_bits;
  };
  Precision precision(const Node& n) const;
  /// The format of n's output in `elem` from its calibrated range: a power of two, a real
  /// scale, or a scale and zero point (affine: int8, when the op can write one and every
  /// consumer can read one).
  Format out_format(const Node& n, Elem elem);
  /// The format for a fixed range [lo, hi] (tables, constants), symmetric unless `affine`.
  Format range_format(double lo, double hi, Elem elem, bool affine, const std::string& what);
  /// The format of a constant tensor quantized alone (symmetric).
  Format const_format(const Tensor& t, Elem elem, const std::string& what);
  /// The multiplier of a real ratio; a warning naming `what` when it is beyond what the
  /// kernels' shifts reach (clamped).
  Multiplier rq(double ratio, const std::string& what);
  /// Is node `index` folded into a linear layer (not lowered itself): part of an affine
  /// chain in front of it, or a relu after it (fused_relu())?
  bool absorbed(std::size_t index) const { return absorbed_.count(static_cast<std::int64_t>(index)) != 0; }
  /// The relu that linear node `n` writes directly, or null: a relu that alone reads a linear
  /// layer's output (not the graph output) is fused into it, as in TFLite and CMSIS-NN. The
  /// layer's accumulators are requantized once, to the relu's output format, and clamped at
  /// its zero point (mt_linear's y_min), instead of to a format for the layer's whole range
  /// (negative values included) and then again by the relu.
  const Node* fused_relu(const Node& n) const;
  /// The batch_norm that a layer `n` folds into its weights and bias, or null: a batch_norm in
  /// eval (OpRule::folds_into_weights) that alone reads the output of a layer with
  /// OpRule::folds_norm_rank. The layer writes the norm's output (or that of the relu after
  /// it, fused_relu()); fold_norm() gives the folded parameters.
  const Node* folded_norm(const Node& n) const;
  /// W and b of a layer with n's folded norm applied (in float64, before quantization; the
  /// model's own tensors are not changed): with s[o] = gamma[o] / sqrt(running_var[o] + eps),
  /// W'[o, ...] = s[o] W[o, ...] and b'[o] = s[o] (b[o] - running_mean[o]) + beta[o]
  /// (b undefined: 0; gamma, beta undefined: 1, 0). W and b as they are when none folds.
  std::pair<Tensor, Tensor> fold_norm(const Node& n, const Tensor& w, const Tensor& b) const;
  /// The affine chain in front of a linear node, with its per-feature scale and shift.
  std::optional<AffineInput> affine_input(const Node& linear) const;
  /// The nodes that read value `id`.
  std::vector<const Node*> readers(std::int64_t id) const;
  /// The calibrated largest |value| of each index of value `id`'s last dim (empty if unknown).
  const std::vector<double>& channel_absmax(std::int64_t id) const {
    return cal_.channel_absmax[static_cast<std::size_t>(id)];
  }
  /// The calibrated range of each index of value `id`'s last dim (empty if unknown).
  std::pair<const std::vector<double>&, const std::vector<double>&> channel_range(std::int64_t id) const {
    return {cal_.channel_min[static_cast<std::size_t>(id)], cal_.channel_max[static_cast<std::size_t>(id)]};
  }
  /// May n's output have a format per channel (View::segments, one per index of the last
  /// dim)? When it is int8 outside the power-of-two scheme, not the graph output, and only
  /// linear layers read it, as their input (they fold the scales into their weights).
  bool channel_formats(const Node& n) const;
  /// The calibrated range of each index of value `id`'s dim 1 (empty if unknown).
  std::pair<const std::vector<double>&, const std::vector<double>&> dim1_range(std::int64_t id) const {
    return {cal_.dim1_min[static_cast<std::size_t>(id)], cal_.dim1_max[static_cast<std::size_t>(id)]};
  }
  /// May n's output have a format per channel of dim 1 (View::segments with segment_dim 1:
  /// the output channels of a convolution's [N, C, ...])? When it is int8 outside the
  /// power-of-two scheme, not the graph output, and only layers with
  /// OpRule::reads_channel_formats read it, as their input 0 (they fold the scales into their
  /// weights).
  bool dim1_formats(const Node& n) const;
  /// May n's output carry a zero point (the affine scheme, n's op writes one, every reader
  /// reads one)?
  bool affine_out(const Node& n) const;
  /// The format for a calibrated range [lo, hi] widened by the margin: each end by
  /// margin * (hi - lo) / 2 (for a symmetric range, margin * hi). An end at 0 stays there:
  /// values never seen on one side of 0 (a relu's, a softmax's) are not widened across it.
  Format widened_format(double lo, double hi, Elem elem, bool affine, const std::string& what) {
    const double w = margin() * (hi - lo) / 2;
    return range_format(std::min(lo < 0 ? lo - w : lo, 0.0), std::max(hi > 0 ? hi + w : hi, 0.0), elem, affine, what);
  }
  /// The format of a part of a value whose calibrated largest magnitude is `absmax`.
  Format part_format(double absmax, Elem elem, const std::string& what) {
    return range_format(-absmax * (1 + margin()), absmax * (1 + margin()), elem, false, what);
  }
  /// The format of a part whose calibrated range is [lo, hi] (symmetric unless `affine`).
  Format part_range_format(double lo, double hi, Elem elem, bool affine, const std::string& what) {
    if (!affine) return part_format(std::max(-lo, hi), elem, what);
    return widened_format(lo, hi, elem, true, what);
  }
  /// May the output of value `id` carry a zero point (every reader accepts one)?
  bool affine_ok(std::int64_t id) const { return affine_ok_[static_cast<std::size_t>(id)]; }

  // ---- buffers ----

  Buffer& buf(const View& v) { return p_.buffer(v.buffer); }
  /// A new arena buffer for `value` (or a temporary when value < 0), viewed packed.
  View new_act(const Shape& shape, Elem elem, const Format& f, std::int64_t value, bool fixed_point = true);
  /// A packed buffer for n's output.
  View out_act(const Node& n, Elem elem, const Format& f) { return new_act(out_shape(n), elem, f, n.output); }
  /// The output of an elementwise kernel run over dense(x): x's layout, in a new buffer.
  View like(const Node& n, const View& x, Elem elem, const Format& f);
  /// Constant data quantized to `elem` in format f (one scale), in flash.
  std::int64_t weight(const Tensor& t, Elem elem, const Format& f, const std::string& name);
  /// A weight matrix [out, in...] quantized symmetric with one scale per output row (or one
  /// for the whole tensor, a power of two in that scheme: then channel_scales stays empty).
  /// `min_scale[c]` (if given) is a lower bound for row c's scale.
  /// `gram` (the inputs' x x^T from calibration, or one block per group of rows: a
  /// convolution's patch grams) turns on rounding with error feedback.
  std::int64_t weight_rows(const Tensor& w, Elem elem, const std::string& name, const std::vector<double>& min_scale = {},
                           const std::vector<double>* gram = nullptr);
  /// The calibrated x x^T of a linear layer's input value (null if none).
  const std::vector<double>* gram(std::int64_t id) const {
    const auto k = static_cast<std::size_t>(id);
    return k < cal_.gram.size() && !cal_.gram[k].empty() ? &cal_.gram[k] : nullptr;
  }
  /// The calibrated patch grams of a convolution's output value (null if none).
  const std::vector<double>* patch_gram(std::int64_t id) const {
    const auto k = static_cast<std::size_t>(id);
    return k < cal_.patch_gram.size() && !cal_.patch_gram[k].empty() ? &cal_.patch_gram[k] : nullptr;
  }
  /// An integer table (shapes, strides, keep bits, multipliers, parameters); identical
  /// tables are stored once. `fields` names the entries of a parameter table.
  std::int64_t table(Elem elem, std::vector<std::int64_t> values, TableRole role, const std::string& what,
                     std::vector<std::string> fields = {});
  /// max |x| over the finite elements
  static double absmax(const Tensor& t);

  // ---- layouts and types ----

  /// The view itself when packed, else a packed copy (one mt_copy_strided_* call).
  View packed(const Node& n, const View& v);
  /// For kernels that read rows at a stride: the view with its row stride (0 = packed), or
  /// a packed copy.
  std::pair<View, std::int64_t> strided_rows(const Node& n, const View& v);
  /// For elementwise kernels: the view when it covers a range exactly once, else packed.
  View dense(const Node& n, const View& v);
  /// The view in `elem` and format f (one mt_requant_* call into a new buffer, the view
  /// itself when it already is).
  View convert(const Node& n, const View& v, Elem elem, const Format& f);
  /// The view in `elem`, covering the same range (int8 -> int16 is exact).
  View as_elem(const Node& n, const View& v, Elem elem);
  /// Copies the view into `dst` (from dst_offset, with dst_strides) with one strided copy.
  void copy_into(const Node* n, const View& v, std::int64_t dst, std::int64_t dst_offset, const Strides& dst_strides);
  /// May the current node overwrite the elements of `target` (its own input)? Only if no
  /// value read after this node shares an element with it, and `also_read` (read by this
  /// node while it writes) does not overlap it.
  bool can_overwrite(const View& target, const std::vector<View>& also_read);

  // ---- kernel calls ----

  void step(std::string kernel, std::vector<Arg> args, std::int64_t macs = 0);
  /// The kernel name for element types: mt_<op>_<s8|s16>_..._<s8|s16>.
  static std::string kernel(const std::string& op, std::initializer_list<Elem> types);

  /// The graph output becomes the Output buffer (a packed copy when its view is not the
  /// whole of a buffer of its own).
  void finish_output();

  // ---- float32 mode and training (train.hpp, train.cpp) ----

  /// Is every value a float (TrainOptions::numeric Float32)?
  bool float32() const { return float32_; }
  /// A constant input of n as a packed float view: a trained parameter's RAM buffer
  /// (BufferKind::Parameter), else a const float array in flash (one per value).
  View constant_f32(const Node& n, std::int64_t id);
  /// A tensor as a const float array in flash (float32 mode), packed.
  View tensor_f32(const Tensor& t, const std::string& name);
  /// From now on, steps go to `steps` (the inference's Program::steps by default, or a list of
  /// the training step); probes are kept for the inference's steps only.
  void emit_into(std::vector<Step>* steps) { steps_ = steps; }
  /// Forgets every activation's view: a second forward (the training step's) starts over.
  void reset_views();
  /// Is the forward being lowered the training step's (its rules keep what backward reads)?
  void set_training(bool on) { training_ = on; }
  /// Does n's forward keep what its backward reads (and compute what only the backward needs,
  /// such as attention's log-sum-exp)? In the training step's forward, when n's backward
  /// runs: an input of n depends on a trained parameter. Frozen layers before the first
  /// trained one keep nothing.
  bool keeps(const Node& n) const {
    return training_ && std::any_of(n.inputs.begin(), n.inputs.end(), [this](std::int64_t v) { return needs_grad(v); });
  }
  /// What a node's forward keeps for its backward: the views it read or wrote, and numbers.
  struct Saved {
    std::vector<View> views;
    std::vector<std::int64_t> ints;
  };
  /// Keeps what n's backward reads.
  void save(const Node& n, std::vector<View> views, std::vector<std::int64_t> ints = {}) {
    saved_[n.output] = Saved{std::move(views), std::move(ints)};
  }
  /// What n's forward kept for its backward.
  const Saved& saved(const Node& n) const;
  /// Marks value `id` (a parameter) as trained: its forward reads `buffer`, its gradient
  /// goes to the State buffer `grad` (summed over a step's samples: every write adds).
  void train(std::int64_t id, std::int64_t buffer, std::int64_t grad);
  /// Does value `id` depend on a trained parameter (does the backward reach it)?
  bool needs_grad(std::int64_t id) const;
  /// Is there a gradient of value `id` (has the backward reached it)?
  bool has_grad(std::int64_t id) const { return grads_.count(id) != 0 || param_grads_.count(id) != 0; }
  /// The gradient of value `id`: a packed float view of its shape.
  const View& grad(std::int64_t id) const;
  /// Where a kernel writes the gradient of value `id`, and whether it adds to what is there
  /// (every write after the first; always for a trained parameter's) or stores. nullopt when
  /// `id` needs no gradient.
  struct GradTarget {
    View view;
    bool add = false;
  };
  std::optional<GradTarget> grad_out(std::int64_t id);
  /// The kernels' acc flags for one call: bit 0 when the activation gradients `acts` add, bit 1
  /// when the parameter gradients `params` do. Within each group one flag holds for all: a
  /// target that would store while another adds is zeroed first (mt_fill_f32), then added to.
  int acc_flags(std::vector<std::optional<GradTarget>*> acts, std::vector<std::optional<GradTarget>*> params = {});
  /// mt_fill_f32(v, 0) for a packed float view.
  void zero(const View& v);

  // ---- integer training (TrainOptions::numeric Integer; train_integer.cpp) ----

  /// A trained linear layer of the integer mode: the RAM weights and bias table its forward
  /// reads (the update re-derives them from the int32 masters), and the formats its backward
  /// and the update read. The first forward (the inference's) makes it, the step's reuses it.
  struct IntLayer {
    std::int64_t weight = -1, bias = -1;  ///< Parameter buffers: W_q [out, in] and the bias table (-1: none)
    std::vector<double> row_scales;       ///< W_q's scale per output row
    double x_scale = 1.0;                 ///< the input's format
    std::int32_t x_zero = 0;
    Elem x_elem = Elem::S8;
    std::int64_t in = 0, out = 0, rows = 0;
    std::int64_t x_stride = 0;  ///< the input's row stride (0: packed)
    std::vector<std::int64_t> bias_q;  ///< round(b / (x_scale row_scale)) per row, before x's zero point is folded in
    double y_lo = 0, y_hi = 0;         ///< the output format's range
  };
  /// The integer mode's room for growth: a trained layer's weights and outputs get formats for
  /// this many times their initial (calibrated) range, so that training can enlarge them
  /// (the price: 3 bits of their resolution).
  static constexpr double kTrainHeadroom = 8.0;
  /// Is n an integer-mode layer reading a trained parameter, or one the backward runs through
  /// (mark_int_layer)?
  bool trains_int(const Node& n) const {
    return !float32_ && (int_marked_.count(n.output) != 0 ||
                         std::any_of(n.inputs.begin(), n.inputs.end(), [this](std::int64_t v) { return trained_.count(v) != 0; }));
  }
  /// Marks the layer computing `output` as one the integer backward runs through.
  void mark_int_layer(std::int64_t output) { int_marked_.insert(output); }
  /// Is value `id` a trained parameter?
  bool trained(std::int64_t id) const { return trained_.count(id) != 0; }
  /// n's IntLayer, or null before its first forward.
  const IntLayer* int_layer(const Node& n) const {
    const auto it = int_layers_.find(n.output);
    return it == int_layers_.end() ? nullptr : &it->second;
  }
  void set_int_layer(const Node& n, IntLayer l) { int_layers_[n.output] = std::move(l); }
  /// A table in RAM (BufferKind::Parameter) of its own (never shared as table() shares).
  std::int64_t parameter_table(Elem elem, std::vector<std::int64_t> values, const std::string& what);
  /// Sets the gradient of value `id` (the loss's, of the output).
  void set_grad(std::int64_t id, const View& v) { grads_[id] = v; }

 private:
  const Graph& g_;
  const Calibration& cal_;
  QuantOptions opt_;
  Program p_;
  std::vector<std::optional<View>> views_;
  std::vector<bool> affine_ok_;
  mutable std::vector<signed char> stream_;
  std::vector<bool> constant_values_;
  std::set<std::int64_t> absorbed_;            // nodes folded into a linear layer (absorbed())
  std::map<std::int64_t, std::int64_t> fused_;  // linear node output -> index of its fused relu
  std::map<std::int64_t, std::int64_t> norms_;  // layer node output -> index of its folded batch_norm
  std::int64_t node_ = -1;
  std::map<std::pair<Elem, std::vector<std::int64_t>>, std::int64_t> tables_;
  std::map<std::int64_t, Tensor> folded_;                        // outputs of nodes computed only from constants
  std::vector<std::int64_t> last_use_;                           // per value: the last node that reads it
  std::map<std::int64_t, std::vector<std::int64_t>> values_in_;  // buffer -> values viewing it
  bool float32_ = false;
  std::vector<Step>* steps_;                                     // where step() appends
  bool training_ = false;
  std::map<std::int64_t, Saved> saved_;                          // node output -> what its backward reads
  std::map<std::int64_t, std::int64_t> f32_consts_;              // value -> its float buffer (constant_f32)
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> trained_;  // parameter value -> (buffer, grad)
  mutable std::vector<signed char> needs_grad_;                  // per value: -1 unknown, 0, 1
  std::map<std::int64_t, View> grads_;                           // value -> its gradient (packed float)
  std::set<std::int64_t> param_grads_;                           // trained parameters a gradient reached
  std::map<std::int64_t, IntLayer> int_layers_;                  // integer training: node output -> its layer
  std::set<std::int64_t> int_marked_;                            // integer training: layers the backward runs through

  std::string module_of(const Node& n) const;
  bool part_formats(const Node& n, bool dim1) const;  ///< channel_formats(), dim1_formats()
  /// Does every reader of value `id` read it as its input 0 only and fold a format per channel
  /// (`dim1`: OpRule::reads_channel_formats) or per feature (reads_feature_formats) into its
  /// weights?
  bool read_by_weights(std::int64_t id, bool dim1) const;
  /// The input's formats per channel (QuantOptions::input_channel_formats), or none.
  std::vector<Format> input_channel_formats(Elem elem, bool affine);
  View input_view() const;  ///< the input's view (its formats per channel, if any)
  /// ValueError unless `match` (a QuantOptions entry) names a node or a module of the graph.
  void check_match(const std::string& match, const char* option) const;
  std::string unique_name(const std::string& base);
  std::string what(std::int64_t value) const;
  /// The format of graph value `value` (computed by `n`, or the input) from its calibration.
  Format value_format(std::int64_t value, const Node* n, Elem elem, bool affine);
  /// Does n belong to `module` (or a module inside it)?
  bool in_module(const Node& n, const std::string& module) const;
  int bits_of(Elem e) const { return elem_bytes(e) * 8; }
  double margin() const { return opt_.scheme == Scheme::PowerOfTwo ? 0.0 : opt_.margin; }
};

/// Lowers every node of L's graph in order (quantize(), train_program()): a node of
/// constants alone folds into a constant, a node absorbed into a layer is skipped, any other
/// goes to its rule (OpRule::lower, or lower_f32 in float32 mode). ValueError naming the node
/// when its op has no rule or its graph value's shape is not what its op computes.
void lower_nodes(Lowering& L);

/// A C identifier made from any text (non-alphanumerics become '_').
std::string c_name(std::string s);
/// The scale of row `r` of a weight buffer (per channel or one for all).
inline double row_scale(const Buffer& b, std::int64_t r) {
  return b.channel_scales.empty() ? b.scale : b.channel_scales[static_cast<std::size_t>(r)];
}
/// A gradient target as a kernel argument: its view, or NULL when there is none.
inline Arg buf_or_null(const std::optional<Lowering::GradTarget>& t) {
  return t ? Arg::buf(t->view.buffer, t->view.offset) : Arg::buf(-1);
}
/// Largest and smallest integer of a type.
inline std::int64_t qmax(Elem e) { return elem_max(e); }
inline std::int64_t qmin(Elem e) { return elem_min(e); }

}  // namespace microtorch::lower
