// PyTorch oracle tests (see tools/gen_fixtures.py).
#include "helpers.hpp"
