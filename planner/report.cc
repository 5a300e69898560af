// The text report of a plan (FormatReport in planner.h).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "planner/planner.h"

namespace memplan::planner {
namespace {

// How graph inputs and outputs were planned (PlanResult::io), when the
// request has any.
void AppendIoPolicy(const PlanResult& r, std::string* out) {
  const bool io = std::any_of(
      r.tensors.begin(), r.tensors.end(), [](const TensorPlacement& t) {
        return t.kind == TensorKind::kInput || t.kind == TensorKind::kOutput;
      });
  if (!io) return;
  const char* how = "";
  switch (r.io) {
    case IoPolicy::kRuntime:
      how =
          "inputs from step 0 to their last use, outputs from their producer "
          "to the end";
      break;
    case IoPolicy::kKeepInputs:
      how =
          "inputs kept for the whole run, outputs from their producer to "
          "the end";
      break;
    case IoPolicy::kExclude:
      how = "inputs and outputs left to the caller, not in the arena";
      break;
  }
  absl::StrAppend(out, "io:           ", IoPolicyName(r.io), " (", how, ")\n");
}

// How many tensors of each kind, and what was left out of the arena.
void AppendKinds(const PlanResult& r, std::string* out) {
  constexpr TensorKind kKinds[] = {
      TensorKind::kActivation, TensorKind::kInput,    TensorKind::kOutput,
      TensorKind::kWeight,     TensorKind::kVariable, TensorKind::kScratch};
  std::string line;
  for (TensorKind kind : kKinds) {
    int planned = 0, left_out = 0;
    for (const TensorPlacement& t : r.tensors) {
      if (t.kind != kind) continue;
      (t.buffer >= 0 ? planned : left_out) += 1;
    }
    if (planned + left_out == 0) continue;
    absl::StrAppend(
        &line, line.empty() ? "" : ", ", planned + left_out, " ",
        TensorKindName(kind),
        left_out > 0 ? absl::StrCat(" (", left_out, " not planned)") : "");
  }
  absl::StrAppend(out, "tensors:      ", line, "\n");
  AppendIoPolicy(r, out);
  if (r.weights_bytes > 0) {
    absl::StrAppendFormat(out,
                          "weights:      %d bytes, kept in the model (not in "
                          "the arena)\n",
                          r.weights_bytes);
  }
}

// The summary lines: sizes and ratios a user looks at first.
void AppendSummary(const PlanResult& r, std::string* out) {
  const Bytes arena = r.solution.arena_size;
  absl::StrAppendFormat(out, "arena:        %d bytes\n", arena);
  absl::StrAppendFormat(out, "lower bound:  %d bytes", r.lower_bound);
  if (r.unaligned_lower_bound != r.lower_bound) {
    absl::StrAppendFormat(out, " (%d without alignment padding)",
                          r.unaligned_lower_bound);
  }
  absl::StrAppend(out, "\n");
  absl::StrAppendFormat(
      out, "efficiency:   %.3f (arena / lower bound)%s\n",
      r.lower_bound > 0 ? static_cast<double>(arena) / r.lower_bound : 1.0,
      r.proven_optimal ? ", optimal" : "");
  absl::StrAppendFormat(
      out, "naive:        %d bytes (saving %.1f%%)\n", r.naive_bytes,
      r.naive_bytes > 0 ? 100.0 * (r.naive_bytes - arena) / r.naive_bytes : 0);
  absl::StrAppendFormat(out, "buffers:      %d\n", r.problem.buffers.size());
  AppendKinds(r, out);
  int in_place = 0;
  for (const TensorPlacement& t : r.tensors) in_place += !t.in_place_of.empty();
  if (in_place > 0) {
    absl::StrAppendFormat(
        out, "in place:     %d tensors reuse an input's memory\n", in_place);
  }
  absl::StrAppendFormat(out, "strategy:     %s\n", r.strategy);
  if (r.time_limited) {
    absl::StrAppend(out,
                    "search:       stopped by the time budget or deadline; "
                    "another machine may plan differently (an effort bounds "
                    "it by work)\n");
  }
}

// The memory pools table, when there are several memories.
void AppendMemoryPools(const PlanResult& r, std::string* out) {
  if (r.memory_spaces.empty()) return;
  absl::StrAppend(
      out, "memory pools: (offsets are within each)\n",
      "  name              arena     capacity  buffers  strategy\n");
  for (const MemorySpacePlan& m : r.memory_spaces) {
    absl::StrAppendFormat(
        out, "  %-12s %10d %12s %8d  %s\n", m.name, m.arena_size,
        m.capacity > 0 ? absl::StrCat(m.capacity) : std::string("unbounded"),
        m.buffers, m.strategy);
  }
}

// The shared objects table ("pools" to users): id, size, members.
void AppendPools(const PlanResult& r, std::string* out) {
  absl::StrAppendFormat(out, "pools:        %d, %d bytes in all\n",
                        r.shared_objects.size.size(),
                        r.shared_objects.TotalBytes());
  std::vector<int> members(r.shared_objects.size.size(), 0);
  for (int p : r.shared_objects.object_of) ++members[p];
  absl::StrAppend(out, "  pool        size  members\n");
  const size_t shown = std::min<size_t>(r.shared_objects.size.size(), 20);
  for (size_t p = 0; p < shown; ++p) {
    absl::StrAppendFormat(out, "  %4d  %10d  %7d\n", p,
                          r.shared_objects.size[p], members[p]);
  }
  if (shown < r.shared_objects.size.size()) {
    absl::StrAppendFormat(out, "  ... %d more\n",
                          r.shared_objects.size.size() - shown);
  }
}

// An ASCII picture: one row per slice of memory, one column per step; each
// buffer drawn with a letter (tflite-micro's PrintMemoryPlan idea). Plans
// too large for it get a pointer to the SVG/HTML pictures instead.
void AppendPicture(const PlanResult& r, int rows, std::string* out) {
  const auto& b = r.problem.buffers;
  const auto [first, steps] = ScheduleSpan(r.problem);
  const Bytes arena = r.solution.arena_size;
  if (arena == 0 || rows <= 0) return;
  if (b.size() > 62 || first < 0 || steps > 100) {
    absl::StrAppendFormat(
        out,
        "picture:      too large to draw here (%d buffers, steps %d..%d); "
        "--emit svg -o plan.svg or --emit html -o plan.html draws it\n",
        b.size(), first, steps - 1);
    return;
  }
  rows = static_cast<int>(std::min<Bytes>(rows, arena));
  const char* kSymbols =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::vector<std::string> grid(rows, std::string(steps, '.'));
  for (size_t i = 0; i < b.size(); ++i) {
    const Offset lo = r.solution.offsets[i];
    const Offset hi = lo + b[i].size;
    for (int row = 0; row < rows; ++row) {
      // In 128 bits: arenas may be up to 2^62 bytes.
      const Bytes row_lo = static_cast<Bytes>(static_cast<__int128>(arena) *
                                              row / rows),
                  row_hi = static_cast<Bytes>(static_cast<__int128>(arena) *
                                              (row + 1) / rows);
      if (lo >= row_hi || hi <= row_lo) continue;
      for (Step s = b[i].start; s < b[i].end; ++s) grid[row][s] = kSymbols[i];
    }
  }
  absl::StrAppend(out,
                  "\nplan (steps across, memory down, one row = ", arena / rows,
                  " bytes):\n");
  for (const std::string& line : grid) absl::StrAppend(out, "  |", line, "|\n");
  absl::StrAppend(out, "legend:");
  for (size_t i = 0; i < b.size(); ++i) {
    absl::StrAppend(out, " ", std::string(1, kSymbols[i]), "=", b[i].name);
  }
  absl::StrAppend(out, "\n");
}

}  // namespace

std::string FormatReport(const PlanResult& result, int max_picture_rows) {
  std::string out;
  AppendSummary(result, &out);
  AppendMemoryPools(result, &out);
  AppendPools(result, &out);
  if (!result.stages.empty()) {  // none with no_timings
    absl::StrAppend(&out, "stages (us):  ");
    for (const StageTime& s : result.stages) {
      absl::StrAppend(&out, s.stage, "=", s.micros, " ");
    }
    absl::StrAppend(&out, "\n");
  }
  // With several memories the ASCII picture would need one per memory; the
  // SVG/HTML pictures stack them.
  if (result.memory_spaces.empty()) {
    AppendPicture(result, max_picture_rows, &out);
  } else if (result.solution.arena_size > 0) {
    absl::StrAppend(&out,
                    "picture:      one per memory pool: --emit svg -o "
                    "plan.svg or --emit html -o plan.html draws them\n");
  }
  return out;
}

}  // namespace memplan::planner
