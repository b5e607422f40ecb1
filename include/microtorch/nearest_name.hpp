/// \file
/// The nearest of a list of names to a mistyped one: the "did you mean" of error messages
/// (state dict keys, parameter names, command-line options).
#pragma once

#include <string>
#include <vector>

namespace microtorch {

/// The name of `names` nearest `given` (Levenshtein distance: insertions, deletions and
/// substitutions), or "" when none is within a third of `given`'s length: for the
/// "did you mean" of error messages about a mistyped parameter, key or option name.
std::string nearest_name(const std::string& given, const std::vector<std::string>& names);

}  // namespace microtorch
