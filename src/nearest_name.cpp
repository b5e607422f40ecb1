// nearest_name: the "did you mean" of error messages.
#include <microtorch/nearest_name.hpp>

#include <algorithm>

namespace microtorch {

namespace {

// Levenshtein distance, one row of the dynamic programme at a time: row[j] is the distance
// between a's first i characters and b's first j.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string nearest_name(const std::string& given, const std::vector<std::string>& names) {
  std::string best;
  std::size_t best_d = given.size() / 3 + 1;  // suggest only names within a third of its length
  for (const std::string& name : names) {
    const std::size_t d = edit_distance(given, name);
    if (d < best_d) best = name, best_d = d;
  }
  return best;
}

}  // namespace microtorch
