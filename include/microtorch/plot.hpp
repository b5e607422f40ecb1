/// \file
/// Pictures of training and attention as SVG: line charts, heat maps, confusion matrices.
///
/// Each picture is a small struct whose svg() returns a standalone SVG document: write it to
/// a file, or leave the struct as the last line of a notebook cell (display.hpp shows it).
/// The pictures are meant to be read: axes with 4 to 6 round ticks and gridlines, axis
/// labels, a legend for several lines, a colour bar and row and column labels on heat maps,
/// and a canvas sized so that every title and label lies inside it (`make test` renders the
/// demo's figures with rsvg-convert and checks exactly that: tools/check_svg.py).
///
/// \code
///   display::LineChart loss{.title = "Iris transformer", .y_label = "cross-entropy"};
///   loss.series = {{"training", train_loss}, {"validation", val_loss}};
///   display::Heatmap attention{weights.select(0, 0), tokens, tokens, "head 0"};
///   std::ofstream("training.svg") << display::side_by_side({loss.svg(), accuracy.svg()});
/// \endcode
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "microtorch/tensor.hpp"

namespace microtorch::display {

/// One line of a LineChart: y values at x = 1, 2, ..., n.
struct Series {
  std::string name;            ///< shown in the legend
  std::vector<double> values;  ///< NaN leaves a gap
};

/// Lines over epochs (or steps): a loss curve, or training and validation side by side.
/// Both axes get 4 to 6 round ticks with gridlines; several series get a legend.
struct LineChart {
  std::vector<double> values = {}; ///< a single series (or leave empty and fill `series`)
  std::string title = {};          ///< drawn above the chart when not empty
  std::string x_label = "epoch";   ///< the x axis's label
  std::string y_label = "loss";    ///< the y axis's label
  bool log_y = false;              ///< logarithmic y axis (values must be positive)
  std::vector<Series> series = {}; ///< several series, drawn after `values`, with a legend
  ///@{
  /// y axis range; NaN = from the data (rounded out to the ticks).
  double y_min = NAN, y_max = NAN;
  ///@}

  /// The chart as an SVG document. Throws ValueError when there is nothing to draw, a series
  /// is empty, or log_y meets a value that is not positive.
  std::string svg() const;
};

/// A matrix as a heat map: attention weights [L, S] (row i is query i, column j key j), or
/// a confusion matrix. Darker is larger; a colour bar on the right gives the scale. Labels
/// default to the indices; each cell shows its value (with value_format) when the map is at
/// most 16 x 16, and its row, column and value as a tooltip always.
struct Heatmap {
  Tensor weights;                            ///< [L, S] (leading size-1 dims are dropped)
  std::vector<std::string> row_labels = {};  ///< L labels (queries), or empty for 0..L-1
  std::vector<std::string> col_labels = {};  ///< S labels (keys), or empty for 0..S-1
  std::string title = {};                    ///< drawn above the map when not empty
  ///@{
  /// The colour range; NaN = [min(0, smallest), max(1, largest)], which suits probabilities.
  double vmin = NAN, vmax = NAN;
  ///@}
  std::string x_label = "key";               ///< what the columns are
  std::string y_label = "query";             ///< what the rows are
  std::string value_format = "{:.2f}";       ///< fmt format of the numbers in the cells

  /// The heat map as an SVG document. Throws ShapeError unless weights has (after dropping
  /// leading size-1 dims) 1 or 2 dims, ValueError for labels that do not match its size.
  std::string svg() const;
};

/// The confusion matrix of class predictions as a Heatmap of counts: row t, column p counts
/// the samples of class t predicted as p. predicted and target are int64 of one shape with
/// values in [0, classes); class_names (one per class) label both axes. Other dtypes or
/// shapes throw ShapeError, no class names ValueError, a value out of range IndexError.
Heatmap confusion_matrix(const Tensor& predicted, const Tensor& target, const std::vector<std::string>& class_names,
                         const std::string& title = "confusion matrix");

/// Several SVG pictures placed left to right, `gap` pixels apart, top-aligned, as one SVG;
/// each must be an `<svg>` element with width and height attributes (ValueError otherwise).
std::string side_by_side(const std::vector<std::string>& svgs, double gap = 24);

}  // namespace microtorch::display
