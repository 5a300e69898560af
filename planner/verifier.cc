#include "planner/verifier.h"

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/parallel.h"
#include "base/sort.h"
#include "planner/sections.h"
#include "planner/shared_objects.h"
#include "planner/windows.h"

namespace memplan::planner {
namespace {

// Checks what concerns one buffer alone.
absl::Status CheckOne(const Buffer& b, Offset offset, Bytes arena) {
  if (offset < 0) {
    return absl::InternalError(
        absl::StrCat("buffer '", b.name, "' has negative offset ", offset));
  }
  if (b.alignment > 0 && offset % b.alignment != 0) {
    return absl::InternalError(absl::StrCat("buffer '", b.name, "' offset ",
                                            offset, " is not a multiple of ",
                                            b.alignment));
  }
  if (b.fixed_offset.has_value() && *b.fixed_offset != offset) {
    return absl::InternalError(absl::StrCat("buffer '", b.name,
                                            "' is pinned at ", *b.fixed_offset,
                                            " but placed at ", offset));
  }
  if (offset + b.size > arena) {
    return absl::InternalError(absl::StrCat("buffer '", b.name, "' ends at ",
                                            offset + b.size,
                                            ", past the arena size ", arena));
  }
  return absl::OkStatus();
}

absl::Status Collision(const Buffer& a, Offset oa, const Buffer& b, Offset ob) {
  return absl::InternalError(absl::StrCat(
      "buffers '", a.name, "' [", oa, ", ", oa + a.size, ") and '", b.name,
      "' [", ob, ", ", ob + b.size, ") are live together (steps [", a.start,
      ", ", a.end, ") and [", b.start, ", ", b.end,
      ")) and overlap in memory"));
}

absl::Status CheckEach(const Problem& problem, const Solution& solution) {
  if (solution.offsets.size() != problem.buffers.size()) {
    return absl::InternalError(
        absl::StrCat("solution has ", solution.offsets.size(), " offsets for ",
                     problem.buffers.size(), " buffers"));
  }
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    absl::Status s =
        CheckOne(problem.buffers[i], solution.offsets[i], solution.arena_size);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

constexpr int kCancelStride = 1 << 16;  // events between polls

// One end of a lifetime in the sweep, with what the sweep needs of the
// buffer: reading events in order then touches memory in sequence.
struct Event {
  Step step;      // when
  Offset offset;  // the buffer's offset
  Offset top;     // offset + size
  int index = 0;  // the buffer
  bool start = false;
};

// The lifetime events ordered by (step, ends before starts, index): a
// stable radix sort by step of the ends, then the starts, by index.
absl::StatusOr<std::vector<Event>> SortedEvents(
    const Problem& problem, const Solution& solution,
    const std::vector<Step>& ends, const base::CancelToken* cancel) {
  const int n = static_cast<int>(problem.buffers.size());
  std::vector<Event> events(2 * static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const Buffer& b = problem.buffers[i];
    const Offset offset = solution.offsets[i];
    events[i] = {ends[i], offset, offset + b.size, i, false};
    events[n + i] = {b.start, offset, offset + b.size, i, true};
  }
  if (!base::RadixSortOrCancel(
          &events, [](const Event& e) { return base::SignedKey(e.step); },
          cancel)) {
    return absl::DeadlineExceededError("verification cancelled");
  }
  return events;
}

absl::Status SweepEvents(const Problem& problem,
                         const std::vector<Event>& events,
                         const base::CancelToken* cancel);

// The sweep of Verify with each buffer ending at ends[i]: live buffers
// ordered by offset are pairwise disjoint in memory, so a new buffer only
// needs checking against its neighbours in offset order.
absl::Status Sweep(const Problem& problem, const Solution& solution,
                   const std::vector<Step>& ends,
                   const base::CancelToken* cancel) {
  absl::StatusOr<std::vector<Event>> events =
      SortedEvents(problem, solution, ends, cancel);
  if (!events.ok()) return events.status();
  return SweepEvents(problem, *events, cancel);
}

// The buffers live at one point of a sweep, by offset: pairwise disjoint
// in memory, so keyed by offset alone. Two kinds with one interface: a
// sorted vector, whose insertions move the entries above (cheaper while a
// few dozen are live: small graphs), and an ordered tree.
struct Live {
  Offset offset;
  Offset top;
  int index;
};

class LiveVector {
 public:
  using Iter = std::vector<Live>::iterator;
  Iter LowerBound(Offset offset) {
    return std::lower_bound(
        live_.begin(), live_.end(), offset,
        [](const Live& l, Offset o) { return l.offset < o; });
  }
  Iter begin() { return live_.begin(); }
  Iter end() { return live_.end(); }
  static const Live& At(Iter it) { return *it; }
  void Erase(Iter it) { live_.erase(it); }
  void Insert(Iter hint, const Live& l) { live_.insert(hint, l); }

 private:
  std::vector<Live> live_;
};

class LiveTree {
 public:
  using Map = absl::btree_map<Offset, std::pair<Offset, int>>;
  using Iter = Map::iterator;
  Iter LowerBound(Offset offset) { return live_.lower_bound(offset); }
  Iter begin() { return live_.begin(); }
  Iter end() { return live_.end(); }
  static Live At(Iter it) {
    return {it->first, it->second.first, it->second.second};
  }
  void Erase(Iter it) { live_.erase(it); }
  void Insert(Iter hint, const Live& l) {
    live_.emplace_hint(hint, l.offset, std::make_pair(l.top, l.index));
  }

 private:
  Map live_;
};

// Past this many buffers live at once the sweep keeps them in a tree.
constexpr int kMostLiveInVector = 64;

// The sweep proper over events in time order (ends before starts at one
// time), with the live buffers in `live`.
template <typename LiveSet>
absl::Status SweepEventsWith(const Problem& problem,
                             const std::vector<Event>& events,
                             const base::CancelToken* cancel, LiveSet live) {
  const auto& buffers = problem.buffers;
  int visited = 0;
  for (const Event& e : events) {
    if (++visited % kCancelStride == 0 && cancel && cancel->Cancelled()) {
      return absl::DeadlineExceededError("verification cancelled");
    }
    auto next = live.LowerBound(e.offset);
    if (!e.start) {
      if (next != live.end() && LiveSet::At(next).offset == e.offset &&
          LiveSet::At(next).index == e.index) {
        live.Erase(next);
      }
      continue;
    }
    if (next != live.end() && LiveSet::At(next).offset < e.top) {
      const Live n = LiveSet::At(next);
      return Collision(buffers[e.index], e.offset, buffers[n.index], n.offset);
    }
    if (next != live.begin()) {
      const Live p = LiveSet::At(std::prev(next));
      if (p.top > e.offset) {
        return Collision(buffers[p.index], p.offset, buffers[e.index],
                         e.offset);
      }
    }
    live.Insert(next, {e.offset, e.top, e.index});
  }
  return absl::OkStatus();
}

absl::Status SweepEvents(const Problem& problem,
                         const std::vector<Event>& events,
                         const base::CancelToken* cancel) {
  // The most buffers the sweep could hold at once (every start counted):
  // a vector while that stays small.
  int most = 0, live = 0;
  for (const Event& e : events) {
    live += e.start ? 1 : -1;
    most = std::max(most, live);
  }
  if (most <= kMostLiveInVector) {
    return SweepEventsWith(problem, events, cancel, LiveVector());
  }
  return SweepEventsWith(problem, events, cancel, LiveTree());
}

// Every buffer's own end.
std::vector<Step> Ends(const Problem& problem) {
  std::vector<Step> ends(problem.buffers.size());
  for (size_t i = 0; i < ends.size(); ++i) ends[i] = problem.buffers[i].end;
  return ends;
}

}  // namespace

absl::Status Verify(const Problem& problem, const Solution& solution,
                    const base::CancelToken* cancel) {
  if (absl::Status s = CheckEach(problem, solution); !s.ok()) return s;
  return Sweep(problem, solution, Ends(problem), cancel);
}

absl::Status Verify(const Problem& problem, const Solution& solution) {
  return Verify(problem, solution, nullptr);
}

namespace {

// Buffers CheckOne takes per chunk of the parallel checks.
constexpr int kCheckChunk = 1 << 16;

// CheckEach in chunks on the threads `parallel` gives; the first chunk's
// fault, if any.
absl::Status CheckEachInChunks(const Problem& problem, const Solution& solution,
                               const base::Parallelism& parallel) {
  const int n = static_cast<int>(problem.buffers.size());
  if (solution.offsets.size() != problem.buffers.size() || n <= kCheckChunk) {
    return CheckEach(problem, solution);
  }
  const int chunks = (n + kCheckChunk - 1) / kCheckChunk;
  std::vector<absl::Status> found(chunks);
  base::ParallelFor(parallel, chunks, [&](int c) {
    const int end = std::min(n, (c + 1) * kCheckChunk);
    for (int i = c * kCheckChunk; i < end && found[c].ok(); ++i) {
      found[c] = CheckOne(problem.buffers[i], solution.offsets[i],
                          solution.arena_size);
    }
  });
  for (absl::Status& s : found) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// The buffers live in each window: per window, those starting in it, then
// those reaching into it from an earlier one, each in order. In chunks on
// the threads `parallel` gives: each chunk counts its entries per window,
// then writes them where the one pass would (the same lists on any
// threads).
std::vector<std::vector<int>> BuffersByWindow(
    const Sections& time, const TimeWindows& windows,
    const base::Parallelism& parallel) {
  constexpr size_t kChunk = size_t{1} << 16;
  const size_t n = time.first.size();
  const size_t count = windows.count();
  const int chunks = base::ChunkCount(n, kChunk);
  // Per chunk and window: its buffers starting there, then reaching in.
  std::vector<size_t> starting(chunks * count, 0), reaching(chunks * count, 0);
  // visit(slot, w, i) for each window w of buffer i, with the chunk's
  // slot for w: its starting one, then the reaching ones.
  const auto each_window = [&](auto visit) {
    base::ParallelForRange(
        parallel, n, kChunk, [&](int c, size_t begin, size_t end) {
          size_t* starts = &starting[c * count];
          size_t* reaches = &reaching[c * count];
          for (size_t i = begin; i < end; ++i) {
            const int first = windows.WindowOf(time.first[i]);
            const int last = windows.WindowOf(time.last[i] - 1);
            visit(starts[first], first, i);
            for (int w = first + 1; w <= last; ++w) visit(reaches[w], w, i);
          }
        });
  };
  each_window([](size_t& entries, int, size_t) { ++entries; });
  std::vector<std::vector<int>> live(count);
  for (size_t w = 0; w < count; ++w) {  // counts to where each chunk writes
    size_t at = 0;
    for (std::vector<size_t>* counts : {&starting, &reaching}) {
      for (int c = 0; c < chunks; ++c) {
        const size_t entries = (*counts)[c * count + w];
        (*counts)[c * count + w] = at;
        at += entries;
      }
    }
    live[w].resize(at);
  }
  each_window([&](size_t& at, int w, size_t i) {
    live[w][at++] = static_cast<int>(i);
  });
  return live;
}

// The sweep of one window over its live buffers, each cut to the window:
// events ordered by (section, ends before starts) by a counting sort.
absl::Status SweepWindow(const Problem& problem, const Solution& solution,
                         const Sections& time, int lo, int hi,
                         const std::vector<int>& live,
                         const base::CancelToken* cancel) {
  const size_t keys = 2 * static_cast<size_t>(hi - lo) + 1;
  std::vector<int> start(keys + 1, 0);
  const auto start_key = [&](int i) {
    return 2 * static_cast<size_t>(std::max(time.first[i], lo) - lo) + 1;
  };
  const auto end_key = [&](int i) {
    return 2 * static_cast<size_t>(std::min(time.last[i], hi) - lo);
  };
  for (int i : live) {
    ++start[start_key(i) + 1];
    ++start[end_key(i) + 1];
  }
  for (size_t k = 0; k < keys; ++k) start[k + 1] += start[k];
  std::vector<Event> events(2 * live.size());
  for (int i : live) {
    const Offset offset = solution.offsets[i];
    const Offset top = offset + problem.buffers[i].size;
    events[start[start_key(i)]++] = {0, offset, top, i, true};
    events[start[end_key(i)]++] = {0, offset, top, i, false};
  }
  return SweepEvents(problem, events, cancel);
}

}  // namespace

absl::Status Verify(const Problem& problem, const Solution& solution,
                    const base::CancelToken* cancel, const Sections& time,
                    const base::Parallelism& parallel) {
  if (absl::Status s = CheckEachInChunks(problem, solution, parallel);
      !s.ok()) {
    return s;
  }
  const TimeWindows windows = CutTime(time);
  if (windows.count() == 1) {
    return Sweep(problem, solution, Ends(problem), cancel);
  }
  const std::vector<std::vector<int>> live =
      BuffersByWindow(time, windows, parallel);
  std::vector<absl::Status> found(windows.count());
  base::ParallelFor(parallel, windows.count(), [&](int w) {
    found[w] = SweepWindow(problem, solution, time, windows.begin[w],
                           windows.begin[w + 1], live[w], cancel);
  });
  for (absl::Status& s : found) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

namespace {

// Checks what makes one in-place pair legal.
absl::Status CheckPair(const Problem& problem, const Solution& solution,
                       const InPlacePair& pair) {
  const int n = static_cast<int>(problem.buffers.size());
  if (pair.output < 0 || pair.output >= n || pair.input < 0 ||
      pair.input >= n || pair.output == pair.input) {
    return absl::InternalError(absl::StrCat("bad in-place pair (", pair.output,
                                            ", ", pair.input, ")"));
  }
  const Buffer& out = problem.buffers[pair.output];
  const Buffer& in = problem.buffers[pair.input];
  const auto fail = [&](const char* why) {
    return absl::InternalError(
        absl::StrCat("'", out.name, "' in place of '", in.name, "': ", why));
  };
  if (solution.offsets[pair.output] != solution.offsets[pair.input]) {
    return fail("offsets differ");
  }
  if (out.size > in.size) return fail("the output is larger than the input");
  if (out.alignment != in.alignment) return fail("alignments differ");
  if (out.persistent || in.persistent) return fail("a tensor is persistent");
  if (in.start >= out.start || in.end != out.start + 1) {
    return fail("the output is not born at the input's last step");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyInPlace(const Problem& problem, const Solution& solution,
                           const std::vector<InPlacePair>& pairs,
                           const base::CancelToken* cancel) {
  if (absl::Status s = CheckEach(problem, solution); !s.ok()) return s;
  std::vector<Step> ends = Ends(problem);
  std::vector<bool> seen(problem.buffers.size(), false);
  for (const InPlacePair& pair : pairs) {
    if (absl::Status s = CheckPair(problem, solution, pair); !s.ok()) return s;
    if (seen[pair.input]) {
      return absl::InternalError(absl::StrCat(
          "'", problem.buffers[pair.input].name, "' is reused in place twice"));
    }
    seen[pair.input] = true;
    ends[pair.input] = problem.buffers[pair.output].start;
  }
  return Sweep(problem, solution, ends, cancel);
}

absl::Status VerifyInPlace(const Problem& problem, const Solution& solution,
                           const std::vector<InPlacePair>& pairs) {
  return VerifyInPlace(problem, solution, pairs, nullptr);
}

absl::Status VerifySharedObjects(const Problem& problem,
                                 const SharedObjects& objects) {
  return VerifySharedObjects(problem, objects, nullptr);
}

absl::Status VerifySharedObjects(const Problem& problem,
                                 const SharedObjects& objects,
                                 const base::CancelToken* cancel) {
  const auto& b = problem.buffers;
  if (objects.object_of.size() != b.size()) {
    return absl::InternalError(absl::StrCat("shared objects cover ",
                                            objects.object_of.size(), " of ",
                                            b.size(), " buffers"));
  }
  const auto stopped = [] {
    return absl::DeadlineExceededError("shared object check cancelled");
  };
  const size_t count = objects.size.size();
  std::vector<Bytes> largest(count, 0);
  // first[p]..first[p+1]: where object p's members go in `order`.
  std::vector<size_t> first(count + 1, 0);
  for (size_t i = 0; i < b.size(); ++i) {
    if (base::CancelledAt(cancel, i)) return stopped();
    const int p = objects.object_of[i];
    if (p < 0 || static_cast<size_t>(p) >= count) {
      return absl::InternalError(absl::StrCat(
          "buffer '", b[i].name, "' is in shared object ", p, " of ", count));
    }
    largest[p] = std::max(largest[p], b[i].size);
    ++first[p + 1];
  }
  for (size_t p = 0; p < count; ++p) {
    if (largest[p] == 0 || largest[p] != objects.size[p]) {
      return absl::InternalError(
          absl::StrCat("shared object ", p, " has size ", objects.size[p],
                       " but its largest member has ", largest[p]));
    }
    first[p + 1] += first[p];
  }
  // By object (a counting sort), then start: members of one object follow
  // each other, and each must start once the one before it has ended.
  std::vector<int> order(b.size());
  {
    std::vector<size_t> next(first.begin(), first.end() - 1);
    for (size_t i = 0; i < b.size(); ++i) {
      order[next[objects.object_of[i]]++] = static_cast<int>(i);
    }
  }
  const auto by_start = [&](int x, int y) { return b[x].start < b[y].start; };
  size_t since_poll = 0;
  for (size_t p = 0; p < count; ++p) {
    const size_t from = first[p], to = first[p + 1];
    since_poll += to - from;
    if (since_poll >= static_cast<size_t>(base::kPollStride)) {
      since_poll = 0;
      if (cancel != nullptr && cancel->Cancelled()) return stopped();
    }
    std::sort(order.begin() + from, order.begin() + to, by_start);
    for (size_t k = from + 1; k < to; ++k) {
      const Buffer& prev = b[order[k - 1]];
      const Buffer& next = b[order[k]];
      if (next.start < prev.end) {
        return absl::InternalError(absl::StrCat(
            "buffers '", prev.name, "' and '", next.name,
            "' share shared object ", p, " but are live together (steps [",
            prev.start, ", ", prev.end, ") and [", next.start, ", ", next.end,
            "))"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status VerifyAllPairs(const Problem& problem, const Solution& solution) {
  if (absl::Status s = CheckEach(problem, solution); !s.ok()) return s;
  const auto& b = problem.buffers;
  const auto& o = solution.offsets;
  for (size_t i = 0; i < b.size(); ++i) {
    for (size_t j = i + 1; j < b.size(); ++j) {
      if (LifetimesOverlap(b[i], b[j]) && o[i] < o[j] + b[j].size &&
          o[j] < o[i] + b[i].size) {
        return Collision(b[i], o[i], b[j], o[j]);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace memplan::planner
