// Internal: the parts of the .npy codec (npy.cpp) that the .npz members share (npz.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "microtorch/tensor.hpp"

namespace microtorch::detail {

/// The preamble and header of a .npy file holding a tensor of this dtype and shape (C
/// order, version 1.0, padded so the data starts at a multiple of 64 bytes, as numpy does).
std::string npy_header(Dtype dtype, const Shape& shape);

/// read(buffer, n): up to n bytes into buffer, returning how many it gave (0 at the end).
using ReadBytes = std::function<std::size_t(char*, std::size_t)>;

/// Reads one .npy of exactly `size` bytes through read: preamble and header first, then the
/// data straight into the tensor. Everything is checked before the tensor is allocated: the
/// header's sizes against the bytes the source holds, in both directions. IoError names
/// `where` and the problem.
Tensor read_npy(const ReadBytes& read, std::uint64_t size, const std::string& where);

}  // namespace microtorch::detail
