#include "formats/c_header.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/cancel.h"
#include "base/sha256.h"
#include "base/text.h"
#include "planner/tflm_greedy.h"

namespace memplan::formats {
namespace {

// Text safe inside a C comment: no control characters, no "*/" or "/*"
// and no "??" (C99 trigraphs), at most `max` bytes, not cut inside a
// character.
std::string CommentText(absl::string_view raw, size_t max = 120) {
  std::string out;
  for (char c : base::Utf8Prefix(raw, max)) {
    const bool control = static_cast<unsigned char>(c) < 0x20 || c == 0x7F;
    const char before = out.empty() ? ' ' : out.back();
    if (control || c == '?' || (c == '/' && before == '*') ||
        (c == '*' && before == '/')) {
      out.push_back('_');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// The first `max` bytes of `text` as a C identifier part: letters and
// digits kept (in lower case), every run of other bytes one '_', none at
// either end; empty when nothing is left.
std::string IdentifierPart(absl::string_view text, size_t max) {
  std::string id;
  for (char c : text.substr(0, max)) {
    const bool ok = absl::ascii_isalnum(static_cast<unsigned char>(c));
    const char out =
        ok ? absl::ascii_tolower(static_cast<unsigned char>(c)) : '_';
    if (out == '_' && (id.empty() || id.back() == '_')) continue;
    id.push_back(out);
  }
  while (!id.empty() && id.back() == '_') id.pop_back();
  return id;
}

// 8 hex digits of a hash of the input's bytes and its plan (not of where
// the file lies): what a header's default ID adds to the file name. SHA-256
// (base/sha256.h): the same in every process and on every machine. Empty
// when `meter` says stop (a model of up to the request limit takes a few
// hundred milliseconds to hash).
std::string InputHash(const CHeaderInput& in, base::WorkMeter* meter) {
  constexpr size_t kChunk = 64 << 10;  // bytes hashed between polls
  base::Sha256 h;
  for (size_t at = 0; at < in.content.size(); at += kChunk) {
    if (meter->Stop(base::WorkMeter::kUnitsPerPoll)) return "";
    h.Update(in.content.substr(at, kChunk));
  }
  h.UpdateInt64(static_cast<int64_t>(in.content.size()));
  const planner::PlanResult& r = *in.result;
  h.UpdateInt64(r.solution.arena_size);
  for (size_t t = 0; t < r.tensors.size(); ++t) {
    if (meter->Stop(16)) return "";
    const planner::TensorPlacement& p = r.tensors[t];
    h.Update(p.name);
    h.UpdateInt64(static_cast<int64_t>(p.name.size()));
    for (int64_t v : {p.size, r.OffsetOf(static_cast<int>(t)), p.start, p.end,
                      static_cast<int64_t>(p.kind)}) {
      h.UpdateInt64(v);
    }
  }
  for (const planner::MemorySpacePlan& space : r.memory_spaces) {
    h.Update(space.name);
    h.UpdateInt64(static_cast<int64_t>(space.name.size()));
    h.UpdateInt64(space.arena_size);
  }
  return base::Sha256::Hex(h.Finish()).substr(0, 8);
}

// The header's ID (see CHeaderIdFor), "" when `meter` says stop.
std::string IdFor(const CHeaderInput& input, base::WorkMeter* meter) {
  if (!input.id.empty()) return absl::AsciiStrToLower(input.id);
  const std::string hash = InputHash(input, meter);
  if (hash.empty()) return "";
  return absl::StrCat(CHeaderId(input.name), "_", hash);
}

// One column of the header: a name, a C element type wide enough for its
// values, and per entry a value and a comment.
struct Column {
  std::string name;                // e.g. "offsets"
  std::string doc;                 // what the values mean
  std::vector<int64_t> values;     // one per entry
  std::vector<std::string> notes;  // one per entry, may be empty
};

std::string CType(const std::vector<int64_t>& values) {
  for (int64_t v : values) {
    if (v < std::numeric_limits<int32_t>::min() ||
        v > std::numeric_limits<int32_t>::max()) {
      return "int64_t";
    }
  }
  return "int32_t";
}

// The header of one model or graph.
class HeaderWriter {
 public:
  explicit HeaderWriter(const CHeaderInput& in)
      : in_(in), r_(*in.result), meter_(in.cancel) {}

  absl::StatusOr<std::string> Write() {
    id_ = IdFor(in_, &meter_);
    if (id_.empty()) return Stopped();
    macro_ = absl::AsciiStrToUpper(id_);
    Columns();
    if (stopped_) return Stopped();
    absl::StatusOr<bool> tflm = TflmColumn();
    if (!tflm.ok()) return tflm.status();
    if (stopped_) return Stopped();
    Preamble();
    Macros();
    for (const Column& c : columns_) Declare(c);
    if (*tflm) {
      // TFLM rounds every buffer up to 16 bytes; offsets are multiples of it.
      const int64_t a = planner::kTflmAlignment;
      absl::StrAppend(&out_,
                      "\n/* The arena TFLite Micro must be given for "
                      "this plan (its buffers end on\n * multiples of ",
                      a,
                      "), besides its own persistent allocations. */\n#define ",
                      Macro("TFLM_ARENA_BYTES"), " ",
                      std::max((r_.solution.arena_size + a - 1) / a * a,
                               in_.tflm_arena_bytes.value_or(0)),
                      "\n");
      DeclareBufferPlan();
    } else if (tflm_refused_) {
      absl::StrAppend(&out_,
                      "\n/* No TFLite Micro section (its arena size and "
                      "buffer plan): TFLite Micro\n * would not run this "
                      "plan as it is: ",
                      CommentText(in_.tflm_refusal, 1024), ". */\n");
    }
    absl::StrAppend(&out_, "\n#ifdef MEMPLAN_", macro_, "_IMPLEMENTATION\n");
    for (const Column& c : columns_) Define(c);
    if (*tflm) DefineBufferPlan();
    if (stopped_) return Stopped();
    absl::StrAppend(&out_, "#endif  /* MEMPLAN_", macro_,
                    "_IMPLEMENTATION */\n\n#endif  /* MEMPLAN_", macro_,
                    "_PLAN_H_ */\n");
    return std::move(out_);
  }

 private:
  // Whether the call's token fired, polled every few thousand entries.
  bool Stop() {
    stopped_ = stopped_ || meter_.Stop(16);
    return stopped_;
  }
  absl::Status Stopped() const {
    return absl::DeadlineExceededError("emit c_header cancelled");
  }
  std::string Name(absl::string_view what) const {
    return absl::StrCat("memplan_", id_, "_", what);
  }
  std::string Macro(absl::string_view what) const {
    return absl::StrCat("MEMPLAN_", macro_, "_", what);
  }
  int PoolOf(int t) const {
    const int b = r_.tensors[t].buffer;
    if (b < 0) return -1;
    return r_.memory_space_of.empty() ? 0 : r_.memory_space_of[b];
  }

  void Columns();
  std::vector<std::string> PoolIds() const;
  absl::StatusOr<bool> TflmColumn();
  void Preamble();
  void Macros();
  void Declare(const Column& c);
  void Define(const Column& c);
  void DeclareBufferPlan();
  void DefineBufferPlan();

  const CHeaderInput& in_;
  const planner::PlanResult& r_;
  base::WorkMeter meter_;
  bool stopped_ = false;
  std::string id_, macro_;
  std::vector<Column> columns_;
  Column tflm_;                // TFLM's buffer plan entries
  bool tflm_refused_ = false;  // none: in_.tflm_refusal says why
  std::string out_;
};

void HeaderWriter::Columns() {
  absl::flat_hash_map<std::string, int> index;
  const int n = static_cast<int>(r_.tensors.size());
  for (int t = 0; t < n; ++t) {
    if (Stop()) return;
    index[r_.tensors[t].name] = t;
  }
  Column offsets{"offsets",
                 "bytes from the start of its pool's arena; -1: "
                 "not in the arena",
                 {},
                 {}};
  Column sizes{"sizes", "bytes", {}, {}};
  Column pools{"pools", "memory pool (index), -1: not in the arena", {}, {}};
  Column first{"first_steps", "first step live", {}, {}};
  Column end{"end_steps", "one past the last step live", {}, {}};
  Column reuses{
      "reuses", "tensor whose memory it takes over in place, -1", {}, {}};
  for (int t = 0; t < n; ++t) {
    if (Stop()) return;
    const planner::TensorPlacement& p = r_.tensors[t];
    offsets.values.push_back(r_.OffsetOf(t));
    offsets.notes.push_back(absl::StrCat(t, " ", CommentText(p.name), " (",
                                         planner::TensorKindName(p.kind), ")"));
    sizes.values.push_back(p.size);
    pools.values.push_back(PoolOf(t));
    first.values.push_back(p.start);
    end.values.push_back(p.end);
    auto it = index.find(p.in_place_of);
    reuses.values.push_back(
        p.in_place_of.empty() || it == index.end() ? -1 : it->second);
  }
  columns_ = {offsets, sizes, pools, first, end, reuses};
}

// TFLite: TFLM's BufferPlan entries, in the order its allocator adds
// buffers. False when there is none to write.
absl::StatusOr<bool> HeaderWriter::TflmColumn() {
  if (in_.model == nullptr || in_.model->format != Format::kTflite ||
      !r_.memory_spaces.empty()) {
    return false;
  }
  if (!in_.model->tflm_uses_status.ok()) return in_.model->tflm_uses_status;
  if (!in_.tflm_refusal.empty()) {
    tflm_refused_ = true;
    return false;
  }
  const std::vector<TflmTensorUse>* uses = &in_.model->tflm_uses;
  // Tensors are numbered as in the offline plan: subgraphs concatenated.
  std::vector<int> graph_of(uses->size(), -1);
  for (size_t i = 0; i < in_.model->tflite_tensors.size(); ++i) {
    const TfliteTensorRef& ref = in_.model->tflite_tensors[i];
    const size_t g = in_.model->tflite_tensor_base[ref.subgraph] + ref.tensor;
    if (g < graph_of.size()) graph_of[g] = static_cast<int>(i);
  }
  tflm_.name = "buffer_plan";
  for (size_t g = 0; g < uses->size(); ++g) {
    if (Stop()) return false;
    if (!(*uses)[g].planned) continue;
    const int t = graph_of[g];
    const int64_t offset = t < 0 ? -1 : r_.OffsetOf(t);
    if (offset > std::numeric_limits<int32_t>::max()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "c_header: offset ", offset, " does not fit TFLite Micro's int32"));
    }
    tflm_.values.push_back(std::max<int64_t>(offset, 0));
    tflm_.notes.push_back(
        absl::StrCat("tensor ", g, t < 0 ? "" : " ",
                     t < 0 ? "" : CommentText(r_.tensors[t].name),
                     offset < 0 ? ": not planned by memplan (unused)" : ""));
  }
  return true;
}

// Per memory pool, the part of its macro's name after POOL_: its name as
// an upper-case C identifier (its index when nothing is left), unique with
// a suffix (sram.0, sram, SRAM -> SRAM_0, SRAM, SRAM_2).
std::vector<std::string> HeaderWriter::PoolIds() const {
  std::vector<std::string> ids;
  for (size_t k = 0; k < r_.memory_spaces.size(); ++k) {
    std::string id =
        absl::AsciiStrToUpper(IdentifierPart(r_.memory_spaces[k].name, 48));
    ids.push_back(id.empty() ? absl::StrCat(k) : std::move(id));
  }
  base::MakeUnique(&ids, "_");
  return ids;
}

void HeaderWriter::Preamble() {
  absl::StrAppend(
      &out_, "/* Memory plan of ",
      // The file name only: a header committed from one checkout is the
      // same from another.
      CommentText(in_.name.substr(in_.name.find_last_of('/') + 1)),
      ", written by memplan.\n"
      " *\n"
      " * Per tensor, in the input's tensor order: its offset in bytes from\n"
      " * the start of its memory pool's arena (one arena unless pools were\n"
      " * asked for), -1 for a tensor not in the arena (a weight kept in the\n"
      " * model, or an input or output left to the caller); its size, pool\n"
      " * and lifetime, steps [first, end). Two tensors whose lifetimes\n"
      " * overlap never share a byte, except a tensor written in place over\n"
      " * the one named in reuses[]. Steps run from FIRST_STEP (0 unless\n"
      " * the input has earlier ones) to END_STEP - 1: STEP_COUNT steps.\n"
      " *\n"
      " * The arrays are defined where ",
      Macro("IMPLEMENTATION"),
      " is\n * defined before this file is included (in one .c file).\n */\n");
  absl::StrAppend(&out_, "#ifndef MEMPLAN_", macro_,
                  "_PLAN_H_\n#define MEMPLAN_", macro_,
                  "_PLAN_H_\n\n#include <stdint.h>\n\n");
}

void HeaderWriter::Macros() {
  const int pools = std::max<int>(1, static_cast<int>(r_.memory_spaces.size()));
  Column pool_bytes{"pool_bytes", "arena bytes of each memory pool", {}, {}};
  // Steps FIRST_STEP to END_STEP - 1 (STEP_COUNT of them): from 0 for a
  // graph; a buffer list may start earlier (its steps are any integers
  // within +-2^62, so the count may be 2^63: written unsigned then).
  int64_t first_step = 0, end_step = 0;
  for (const planner::TensorPlacement& p : r_.tensors) {
    first_step = std::min(first_step, p.start);
    end_step = std::max(end_step, p.end);
  }
  const uint64_t step_count =
      static_cast<uint64_t>(end_step) - static_cast<uint64_t>(first_step);
  const std::string count_text =
      step_count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
          ? absl::StrCat(step_count, "ULL")
          : absl::StrCat(step_count);
  absl::StrAppend(
      &out_, "#define ", Macro("ARENA_BYTES"), " ", r_.solution.arena_size,
      "\n#define ", Macro("ALIGNMENT"), " ", in_.options->alignment,
      "\n#define ", Macro("LOWER_BOUND_BYTES"), " ", r_.lower_bound,
      "\n#define ", Macro("TENSOR_COUNT"), " ", r_.tensors.size(), "\n#define ",
      Macro("FIRST_STEP"), " ", first_step, "\n#define ", Macro("END_STEP"),
      " ", end_step, "\n#define ", Macro("STEP_COUNT"), " ", count_text,
      "\n#define ", Macro("POOL_COUNT"), " ", pools, "\n");
  const std::vector<std::string> pool_ids = PoolIds();
  for (int k = 0; k < static_cast<int>(r_.memory_spaces.size()); ++k) {
    const planner::MemorySpacePlan& space = r_.memory_spaces[k];
    absl::StrAppend(&out_, "#define ",
                    Macro(absl::StrCat("POOL_", pool_ids[k], "_BYTES")), " ",
                    space.arena_size, "  /* pool ", k, ": ",
                    CommentText(space.name), " */\n");
    pool_bytes.values.push_back(space.arena_size);
    pool_bytes.notes.push_back(CommentText(space.name));
  }
  if (r_.memory_spaces.empty()) {
    pool_bytes.values.push_back(r_.solution.arena_size);
    pool_bytes.notes.push_back("the arena");
  }
  columns_.insert(columns_.begin(), pool_bytes);
  out_ += "\n";
}

void HeaderWriter::Declare(const Column& c) {
  absl::StrAppend(&out_, "/* ", c.doc, " */\nextern const ", CType(c.values),
                  " ", Name(c.name), "[", c.values.size(), "];\n");
}

void HeaderWriter::Define(const Column& c) {
  absl::StrAppend(&out_, "const ", CType(c.values), " ", Name(c.name), "[",
                  c.values.size(), "] = {\n");
  for (size_t i = 0; i < c.values.size(); ++i) {
    if (Stop()) return;
    absl::StrAppend(&out_, "    ", c.values[i], ",");
    if (c.name == "offsets" || c.name == "pool_bytes") {
      absl::StrAppend(&out_, "  /* ", c.notes[i], " */");
    }
    out_ += "\n";
  }
  out_ += "};\n";
}

void HeaderWriter::DeclareBufferPlan() {
  const size_t k = tflm_.values.size();
  absl::StrAppend(
      &out_,
      "\n/* TFLite Micro: the plan as its NonPersistentMemoryPlannerShim "
      "takes\n"
      " * it, laid out as a tflite::BufferPlan (memory_plan_struct.h): the\n"
      " * buffer count, then one offset per buffer in the order TFLM's\n"
      " * allocator adds them: the tensors it plans (no data in the model, "
      "not\n"
      " * variable, not empty), subgraphs in order. Scratch buffers kernels\n"
      " * request come after those and are not known offline. */\n",
      "#define ", Macro("TFLM_BUFFER_COUNT"), " ", k, "\ntypedef struct {\n",
      "  int32_t offset;\n} ", Name("buffer_descriptor_t"),
      ";\ntypedef struct {\n  int32_t buffer_count;\n  ",
      Name("buffer_descriptor_t"), " buffer_plan_entries[",
      std::max<size_t>(k, 1), "];\n} ", Name("buffer_plan_t"),
      ";\nextern const ", Name("buffer_plan_t"), " ", Name("buffer_plan"),
      ";\n");
}

void HeaderWriter::DefineBufferPlan() {
  absl::StrAppend(&out_, "const ", Name("buffer_plan_t"), " ",
                  Name("buffer_plan"), " = {\n    ", tflm_.values.size(),
                  ",\n    {\n");
  for (size_t i = 0; i < tflm_.values.size(); ++i) {
    if (Stop()) return;
    absl::StrAppend(&out_, "        {", tflm_.values[i], "},  /* ",
                    tflm_.notes[i], " */\n");
  }
  if (tflm_.values.empty()) out_ += "        {0},  /* none */\n";
  out_ += "    }\n};\n";
}

}  // namespace

std::string CHeaderId(absl::string_view name) {
  const size_t slash = name.find_last_of("/\\");
  if (slash != absl::string_view::npos) name.remove_prefix(slash + 1);
  const size_t dot = name.rfind('.');
  if (dot != absl::string_view::npos && dot > 0) name = name.substr(0, dot);
  std::string id = IdentifierPart(name, 48);
  if (id.empty()) return "plan";
  if (absl::ascii_isdigit(static_cast<unsigned char>(id[0]))) id = "m" + id;
  return id;
}

bool IsCHeaderId(absl::string_view id) {
  if (id.empty() || id.size() > 64 ||
      !absl::ascii_isalpha(static_cast<unsigned char>(id[0]))) {
    return false;
  }
  for (char c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') {
      return false;
    }
  }
  return true;
}

std::string CHeaderIdFor(const CHeaderInput& input) {
  base::WorkMeter meter(input.cancel);
  return IdFor(input, &meter);
}

absl::StatusOr<std::string> EmitCHeader(const CHeaderInput& input) {
  return HeaderWriter(input).Write();
}

}  // namespace memplan::formats
