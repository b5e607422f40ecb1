// microtorch/microtorch.hpp — everything in one include.
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
