// examples/progress.hpp — a training progress display: one live line on a terminal
// (epoch, batch, loss, accuracy, items/s, ETA, redrawn at most 10 times a second), plain
// lines (one per `every` epochs) when stdout is a file or a pipe.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include <fmt/core.h>
#include <unistd.h>

class Progress {
 public:
  Progress(int epochs, std::int64_t batches_per_epoch, std::int64_t items_per_batch, int every = 10)
      : epochs_(epochs), batches_(batches_per_epoch), items_(items_per_batch), every_(every),
        tty_(isatty(fileno(stdout)) != 0), start_(Clock::now()), last_draw_(start_) {}

  // After every batch: the running loss of this epoch.
  void batch(int epoch, std::int64_t batch, double loss) {
    ++done_;
    loss_sum_ += loss;
    ++loss_count_;
    const auto now = Clock::now();
    if (!tty_ || now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    draw(epoch, batch + 1, loss_sum_ / static_cast<double>(loss_count_), -1.0);
  }

  // After every epoch, with the accuracy measured then.
  void epoch(int epoch, double accuracy) {
    const double loss = loss_count_ ? loss_sum_ / static_cast<double>(loss_count_) : 0.0;
    loss_sum_ = 0, loss_count_ = 0;
    if (tty_) {
      draw(epoch, batches_, loss, accuracy);
      if (epoch + 1 == epochs_) std::fputc('\n', stdout);
    } else if ((epoch + 1) % every_ == 0 || epoch + 1 == epochs_) {
      fmt::print("{}\n", line(epoch, batches_, loss, accuracy));
    }
    std::fflush(stdout);
  }

 private:
  using Clock = std::chrono::steady_clock;
  int epochs_;
  std::int64_t batches_, items_;
  int every_;
  bool tty_;
  Clock::time_point start_, last_draw_;
  std::int64_t done_ = 0, loss_count_ = 0;
  double loss_sum_ = 0;

  std::string line(int epoch, std::int64_t batch, double loss, double accuracy) const {
    const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    const double rate = seconds > 0 ? static_cast<double>(done_ * items_) / seconds : 0.0;
    const std::int64_t total = static_cast<std::int64_t>(epochs_) * batches_;
    const double eta = done_ > 0 ? seconds / static_cast<double>(done_) * static_cast<double>(total - done_) : 0.0;
    std::string acc = accuracy >= 0 ? fmt::format("  acc {:5.1f}%", 100 * accuracy) : std::string(13, ' ');
    return fmt::format("epoch {:>3}/{}  batch {:>2}/{}  loss {:.4f}{}  {:>7.0f} items/s  ETA {:4.1f} s", epoch + 1,
                       epochs_, batch, batches_, loss, acc, rate, eta);
  }
  void draw(int epoch, std::int64_t batch, double loss, double accuracy) const {
    fmt::print("\r{}\x1b[K", line(epoch, batch, loss, accuracy));
    std::fflush(stdout);
  }
};
