// microtorch/nn.hpp — every module, loss, optimizer and data utility in one include.
#pragma once

#include "microtorch/microtorch.hpp"
#include "microtorch/nn/attention.hpp"
#include "microtorch/nn/checkpoint.hpp"
#include "microtorch/nn/data.hpp"
#include "microtorch/nn/layers.hpp"
#include "microtorch/nn/linear_attention.hpp"
#include "microtorch/nn/loss.hpp"
#include "microtorch/nn/module.hpp"
#include "microtorch/nn/optim.hpp"
#include "microtorch/nn/transformer.hpp"
