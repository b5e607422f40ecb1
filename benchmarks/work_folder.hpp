// benchmarks/work_folder.hpp — the work folder of a benchmark that builds firmware: emptied
// on every run, but only when it is this benchmark's own (a marker file) or already empty,
// so a mistyped --work never deletes someone's files.
#pragma once

#include <filesystem>
#include <fstream>
#include <iostream>
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
