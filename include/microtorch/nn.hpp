/// \file
/// Every module, loss, optimizer and data utility in one include (and microtorch.hpp).
#pragma once

#include "microtorch/microtorch.hpp"
#include "microtorch/nn/attention.hpp"
#include "microtorch/nn/batchnorm.hpp"
#include "microtorch/nn/checkpoint.hpp"
#include "microtorch/nn/conv.hpp"
#include "microtorch/nn/data.hpp"
#include "microtorch/nn/layers.hpp"
#include "microtorch/nn/linear_attention.hpp"
#include "microtorch/nn/loss.hpp"
#include "microtorch/nn/module.hpp"
#include "microtorch/nn/optim.hpp"
#include "microtorch/nn/pooling.hpp"
#include "microtorch/nn/transformer.hpp"
// decoder-only models and generation
#include "microtorch/nn/decoder.hpp"
#include "microtorch/nn/generation.hpp"
#include "microtorch/nn/rope.hpp"

/// \namespace microtorch::nn
/// Modules with PyTorch's names, constructor arguments and state-dict keys: the Module base,
/// layers, convolution, pooling and batch normalisation, attention, the transformer encoder, losses and checkpoints.
