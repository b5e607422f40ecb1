// examples/notebooks/check.hpp — how the notebooks check their own results.
//
//   CHECK(cond)                  stops the notebook when cond is false
//   CHECK_CLOSE(a, b, tol)       |a - b| <= tol for two numbers
//   CHECK_THROWS(expr, Error)    expr throws Error (or a subclass)
//
// A failure throws notebook::CheckFailure naming the expression and where it is: in
// Jupyter the cell stops with that message; under tools/run_notebooks.py (`make test`)
// the program exits non-zero and names the notebook cell.
#pragma once

#include <cmath>
#include <stdexcept>
#include <string>

namespace notebook {

struct CheckFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void check_failed(const char* what, const char* file, int line, const std::string& detail = "") {
  throw CheckFailure(std::string("CHECK failed: ") + what + (detail.empty() ? "" : " (" + detail + ")") + " at " + file +
                     ":" + std::to_string(line));
}

}  // namespace notebook

#define CHECK(...) ((__VA_ARGS__) ? (void)0 : ::notebook::check_failed(#__VA_ARGS__, __FILE__, __LINE__))

#define CHECK_CLOSE(a, b, tol)                                                                                 \
  do {                                                                                                         \
    const double check_a_ = static_cast<double>(a), check_b_ = static_cast<double>(b);                        \
    if (!(std::abs(check_a_ - check_b_) <= (tol))) {                                                           \
      ::notebook::check_failed(#a " ~= " #b, __FILE__, __LINE__,                                               \
                               std::to_string(check_a_) + " vs " + std::to_string(check_b_) + ", tol " #tol); \
    }                                                                                                          \
  } while (0)

#define CHECK_THROWS(expr, Exception)                                                          \
  do {                                                                                         \
    bool check_threw_ = false;                                                                 \
    try {                                                                                      \
      (void)(expr);                                                                            \
    } catch (const Exception&) {                                                               \
      check_threw_ = true;                                                                     \
    }                                                                                          \
    if (!check_threw_) ::notebook::check_failed(#expr " throws " #Exception, __FILE__, __LINE__); \
  } while (0)
