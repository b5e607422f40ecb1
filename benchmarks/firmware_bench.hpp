// benchmarks/firmware_bench.hpp — what the firmware benchmarks (benchmarks/lower,
// benchmarks/mcu) share: the work folder, emptied on every run but only when it is the
// benchmark's own (a marker file) or already empty, so a mistyped --work never deletes
// someone's files; and counts printed with thousands separators.
#pragma once

#include <filesystem>
#include <fstream>
#include <iostream>
#include <locale>
#include <string>

#include <fmt/format.h>

// Empties `work` (made absolute in place) for `program`; false, with a message, when the
// folder holds anything that is not this benchmark's.
inline bool prepare_work_folder(std::string& work, const std::string& program) {
  namespace fs = std::filesystem;
  const std::string marker = "." + program;
  if (fs::exists(work) && !fs::is_empty(work) && !fs::exists(fs::path(work) / marker)) {
    std::cerr << fmt::format("{}: {} is not empty and not a work folder of this benchmark; pass another --work\n",
                             program, work);
    return false;
  }
  fs::remove_all(work);
  fs::create_directories(work);
  std::ofstream(fs::path(work) / marker) << "work folder of " << program << "; emptied on every run\n";
  work = fs::absolute(work).string();
  return true;
}

// 1,503,402: the classic locale with comma grouping by threes.
inline std::string thousands(long long v) {
  struct Grouping : std::numpunct<char> {
    char do_thousands_sep() const override { return ','; }
    std::string do_grouping() const override { return "\3"; }
  };
  static const std::locale grouped(std::locale::classic(), new Grouping);
  return fmt::format(grouped, "{:L}", v);
}
