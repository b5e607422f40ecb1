/// \file
/// Everything of the tensor library in one include: tensors, ops, autograd, random, I/O,
/// printing, masks, threads and memory. Modules, losses and optimizers are in nn.hpp; the
/// lowering to fixed-point C in microtorch/lower/.
#pragma once

#include "microtorch/autograd.hpp"
#include "microtorch/dtype.hpp"
#include "microtorch/error.hpp"
#include "microtorch/format.hpp"
#include "microtorch/io.hpp"
#include "microtorch/mask.hpp"
#include "microtorch/ops.hpp"
#include "microtorch/memory.hpp"
#include "microtorch/parallel.hpp"
#include "microtorch/random.hpp"
#include "microtorch/shape.hpp"
#include "microtorch/tensor.hpp"

/// \namespace microtorch
/// Tensors, their ops and the autograd tape; the nested namespaces hold the rest: nn
/// (modules, losses), optim, data, init, autograd (the tape's records), memory, display
/// and lower (fixed-point C for microcontrollers).
