/// \file
/// A module's state dict to and from a numpy .npz file.
///
/// The file holds one `<dotted name>.npy` array per parameter and buffer, exactly the keys
/// of state_dict(), so numpy opens it (`np.load("model.npz")["fc1.weight"]`) and
/// tools/state_dict_npz.py converts it to and from a PyTorch state dict:
///
/// \code
///   nn::save(*model, "model.npz");          // atomic: a crash leaves the old file intact
///   nn::load(*model, "model.npz");          // strict: every key, shape and dtype must match
///
///   // weights trained in PyTorch:
///   //   /usr/bin/python3 tools/state_dict_npz.py export model.pt model.npz
///   nn::load(*model, "model.npz");
/// \endcode
#pragma once

#include <string>

#include "microtorch/nn/module.hpp"

namespace microtorch::nn {

/// Writes m.state_dict() to `path` as a .npz archive (see save_npz: written to a temporary
/// file, flushed and renamed, so a failure leaves an existing checkpoint untouched).
/// Throws IoError when the file cannot be written.
void save(const Module& m, const std::string& path);

/// Reads a .npz archive and copies it into m with load_state_dict: every key, shape and
/// dtype kind is checked before any tensor is written, so on error the module is unchanged
/// (a floating tensor never loads from an int64 or bool array or the reverse; float64
/// values load into float32 tensors, as in PyTorch).
/// A file that cannot be read throws IoError; a state dict that does not fit the module
/// throws ValueError listing the missing and unexpected keys and the mismatched shapes
/// (strict = false skips missing and unexpected keys but not mismatches).
void load(Module& m, const std::string& path, bool strict = true);

}  // namespace microtorch::nn
