// examples/models/iris_figures.hpp — the pictures of a trained Iris transformer, shared by
// the demo (make demo writes them) and the test that renders them (tools/check_svg.py).
//
//   training.svg    loss per epoch (training batches, and the 30 held-out flowers) beside
//                   accuracy per epoch (training and held-out)
//   attention.svg   the mean attention of the held-out flowers, heads 0 and 1 side by side
//   confusion.svg   the held-out flowers' confusion matrix
#pragma once

#include <string>
#include <vector>

#include <microtorch/plot.hpp>

#include "iris_transformer.hpp"

namespace iris_transformer {

/// Per epoch: the mean training loss over the batches, and the loss and accuracy of the
/// training and held-out flowers measured at the end of the epoch.
struct History {
  std::vector<double> train_loss, test_loss, train_accuracy, test_accuracy;
};

/// train() that records a History (on top of any on_batch / on_epoch of the caller);
/// `on_epoch(epoch, history)` sees the History so far, this epoch's entries included.
template <class OnBatch, class OnEpoch>
History train_with_history(IrisTransformer& model, const Split& data, const Options& o, OnBatch&& on_batch,
                           OnEpoch&& on_epoch) {
  History h;
  double loss_sum = 0;
  std::int64_t loss_n = 0;
  train(
      model, data, o,
      [&](int epoch, std::int64_t b, double loss) {
        loss_sum += loss, ++loss_n;
        on_batch(epoch, b, loss);
      },
      [&](int epoch) {
        h.train_loss.push_back(loss_sum / static_cast<double>(loss_n));
        loss_sum = 0, loss_n = 0;
        {
          mt::NoGradGuard no_grad;
          model.eval();
          h.test_loss.push_back(nn::functional::cross_entropy(model.forward(data.x_test), data.y_test).item());
          h.train_accuracy.push_back(100 * accuracy(model, data.x_train, data.y_train));
          h.test_accuracy.push_back(100 * accuracy(model, data.x_test, data.y_test));
          model.train();
        }
        on_epoch(epoch, static_cast<const History&>(h));
      });
  return h;
}

inline const std::vector<std::string>& class_names() {
  static const std::vector<std::string> names = {"setosa", "versicolor", "virginica"};
  return names;
}

/// Loss and accuracy per epoch, side by side.
inline std::string training_figure(const History& h) {
  namespace display = microtorch::display;
  display::LineChart loss{.title = "Iris transformer: cross-entropy loss", .y_label = "loss"};
  loss.series = {{"training (batch mean)", h.train_loss}, {"held-out (30 flowers)", h.test_loss}};
  display::LineChart acc{.title = "accuracy", .y_label = "accuracy (%)", .y_min = 0, .y_max = 100};
  acc.series = {{"training", h.train_accuracy}, {"held-out", h.test_accuracy}};
  return display::side_by_side({loss.svg(), acc.svg()});
}

/// The mean attention of the held-out flowers, one heat map per head.
inline std::string attention_figure(IrisTransformer& model, const Split& data) {
  namespace display = microtorch::display;
  mt::NoGradGuard no_grad;
  const mt::Tensor w = model.attention_weights(data.x_test).mean({0});  // [2 heads, 4, 4]
  const std::vector<std::string> tokens = {"token 0", "token 1", "token 2", "token 3"};
  std::vector<std::string> heads;
  for (std::int64_t h = 0; h < w.size(0); ++h) {
    heads.push_back(display::Heatmap{w.select(0, h), tokens, tokens,
                                     "head " + std::to_string(h) + ": mean attention of the 30 held-out flowers"}
                        .svg());
  }
  return display::side_by_side(heads);
}

/// The held-out flowers' confusion matrix.
inline std::string confusion_figure(IrisTransformer& model, const Split& data) {
  mt::NoGradGuard no_grad;
  return microtorch::display::confusion_matrix(model.forward(data.x_test).argmax(1), data.y_test, class_names(),
                                               "Iris transformer: the 30 held-out flowers")
      .svg();
}

}  // namespace iris_transformer
