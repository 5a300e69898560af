// The process's memory mappings as /proc/self/maps lists them, for tests
// that check what a mapping allocator left behind (Linux only).
//
//   for (const testing::Mapping& m : testing::ReadMappings()) {
//     if (m.path.find(dir) == 0) ...  // a file of `dir` still mapped
//   }
#ifndef MEMPLAN_ALLOCATORS_TESTING_PROC_MAPS_H_
#define MEMPLAN_ALLOCATORS_TESTING_PROC_MAPS_H_

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"

namespace memplan::allocators::testing {

// One line of /proc/self/maps.
struct Mapping {
  uintptr_t begin = 0;  // first address
  uintptr_t end = 0;    // one past the last address
  std::string perms;    // "rw-s", "---p", ...
  std::string path;     // file, "[heap]", or empty for anonymous memory
  size_t size() const { return end - begin; }
};

inline std::vector<Mapping> ReadMappings() {
  std::vector<Mapping> out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    Mapping m;
    std::string range, offset, device, inode;
    in >> range >> m.perms >> offset >> device >> inode;
    const size_t dash = range.find('-');
    m.begin = std::stoull(range.substr(0, dash), nullptr, 16);
    m.end = std::stoull(range.substr(dash + 1), nullptr, 16);
    std::getline(in >> std::ws, m.path);
    out.push_back(m);
  }
  return out;
}

// Mappings of files whose path starts with `prefix` (a deleted file's path
// ends in " (deleted)").
inline std::vector<Mapping> MappingsUnder(const std::string& prefix) {
  std::vector<Mapping> out;
  for (const Mapping& m : ReadMappings()) {
    if (absl::StartsWith(m.path, prefix)) out.push_back(m);
  }
  return out;
}

// Bytes of address space reserved without access (PROT_NONE).
inline size_t InaccessibleBytes() {
  size_t bytes = 0;
  for (const Mapping& m : ReadMappings()) {
    if (m.perms.compare(0, 3, "---") == 0) bytes += m.size();
  }
  return bytes;
}

}  // namespace memplan::allocators::testing

#endif  // MEMPLAN_ALLOCATORS_TESTING_PROC_MAPS_H_
