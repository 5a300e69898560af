// The traces of bench/data/traces (and MiniMalloc's suite) for planner
// tests: MiniMalloc CSV of exactly the columns id,lower,upper,size, as
// those files have. formats::ReadMinimallocCsv is the product's reader (any
// columns, checked); it is a layer above planner/, whose tests also build
// without it (MEMPLAN_ONLY_LIBS).
#ifndef MEMPLAN_PLANNER_TESTING_TRACES_H_
#define MEMPLAN_PLANNER_TESTING_TRACES_H_

#include <fstream>
#include <sstream>
#include <string>

#include "planner/problem.h"

namespace memplan::planner::testing {

// The buffers of the CSV at `path` (header id,lower,upper,size), named by
// id; empty when the file cannot be read.
inline Problem ReadTrace(const std::string& path) {
  std::ifstream in(path);
  Problem p;
  std::string line;
  if (!std::getline(in, line)) return p;  // the header
  while (std::getline(in, line)) {
    std::istringstream row(line);
    Buffer b;
    char comma = 0;
    std::getline(row, b.name, ',');
    row >> b.start >> comma >> b.end >> comma >> b.size;
    p.buffers.push_back(std::move(b));
  }
  return p;
}

}  // namespace memplan::planner::testing

#endif  // MEMPLAN_PLANNER_TESTING_TRACES_H_
