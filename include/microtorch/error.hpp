/// \file
/// The exceptions microtorch throws: Error and one subclass per kind of mistake.
///
/// Every message names the op, the shapes involved and a fix, for example
///
///     matmul: inner dimensions differ: [2, 3] @ [4, 5]; did you forget transpose(-2, -1)?
#pragma once

#include <stdexcept>
#include <string>

namespace microtorch {

/// Base class of everything microtorch throws; catch this to catch them all.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Shapes that do not fit the op (broadcasting, matmul, reshape, cat, ...).
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// A dtype the op does not accept (e.g. autograd on int64, arithmetic on bool).
class DtypeError : public Error {
 public:
  using Error::Error;
};

/// A dimension or element index out of range.
class IndexError : public Error {
 public:
  using Error::Error;
};

/// An argument value the op cannot use (negative size, zero step, ...).
class ValueError : public Error {
 public:
  using Error::Error;
};

/// Misuse of the autograd tape (backward twice, non-scalar backward without a gradient, ...).
class AutogradError : public Error {
 public:
  using Error::Error;
};

/// Anomaly mode (set_detect_anomaly / DetectAnomalyGuard) found an op whose forward or
/// backward produced NaN or Inf; the message names the op, its shapes and how its inputs
/// were made.
class AnomalyError : public AutogradError {
 public:
  using AutogradError::AutogradError;
};

/// The system refused memory for a tensor (the message names the bytes and, where known,
/// the shape). Sizes that cannot exist at all are ShapeErrors before any allocation.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

/// A file that cannot be read or written, or whose contents are not valid.
class IoError : public Error {
 public:
  using Error::Error;
};

}  // namespace microtorch
