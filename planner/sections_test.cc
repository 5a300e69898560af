#include "planner/sections.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/cancel.h"
#include "base/worker_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/testing/random_problems.h"
#include "planner/windows.h"

namespace memplan::planner {
namespace {

using ::testing::ElementsAre;

// The buffers live at `step`, ascending by (start, index).
std::vector<int> LiveAt(const Problem& p, Step step) {
  std::vector<std::pair<Step, int>> live;
  for (int i = 0; i < static_cast<int>(p.buffers.size()); ++i) {
    if (p.buffers[i].start <= step && step < p.buffers[i].end) {
      live.push_back({p.buffers[i].start, i});
    }
  }
  std::sort(live.begin(), live.end());
  std::vector<int> out;
  for (const auto& [start, i] : live) out.push_back(i);
  return out;
}

TEST(SectionsTest, PaperExampleHasOneSectionPerStep) {
  Problem p;
  p.buffers = {{"a", 0, 2, 32}, {"b", 1, 5, 28}, {"c", 2, 6, 36}};
  const Sections s = SweepSections(p);
  EXPECT_THAT(s.begin, ElementsAre(0, 1, 2, 5));
  EXPECT_THAT(s.end, ElementsAre(1, 2, 5, 6));
  EXPECT_THAT(s.first, ElementsAre(0, 1, 2));
  EXPECT_THAT(s.last, ElementsAre(2, 3, 4));
  EXPECT_THAT(SectionTotals(s, [&](int i) { return p.buffers[i].size; }),
              ElementsAre(32, 60, 64, 36));
  EXPECT_TRUE(s.live.empty());
}

// Every section of kAll holds one live set, the one its steps see; sections
// tile the span; totals are the live sums.
TEST(SectionsTest, AllSectionsMatchTheStepsOnRandomProblems) {
  for (uint32_t seed = 0; seed < 300; ++seed) {
    const Problem p = testing::RandomProblem(1 + seed % 60, seed);
    SectionOptions options;
    options.list_live = true;
    const Sections s = SweepSections(p, options);
    const auto [first, last] = ScheduleSpan(p);
    ASSERT_GT(s.size(), 0);
    EXPECT_EQ(s.begin.front(), first);
    EXPECT_EQ(s.end.back(), last);
    const std::vector<Bytes> totals =
        SectionTotals(s, [&](int i) { return p.buffers[i].size; });
    for (int k = 0; k < s.size(); ++k) {
      if (k + 1 < s.size()) {
        ASSERT_EQ(s.end[k], s.begin[k + 1]);
      }
      for (Step t = s.begin[k]; t < s.end[k]; ++t) {
        ASSERT_EQ(LiveAt(p, t), s.live[k]) << "seed " << seed << " step " << t;
      }
      Bytes sum = 0;
      for (int i : s.live[k]) sum += p.buffers[i].size;
      ASSERT_EQ(totals[k], sum);
      for (int i = 0; i < static_cast<int>(p.buffers.size()); ++i) {
        const bool in = s.first[i] <= k && k < s.last[i];
        ASSERT_EQ(in, std::count(s.live[k].begin(), s.live[k].end(), i) == 1);
      }
    }
  }
}

// kMaximal keeps exactly the sections of kAll whose live set is in no
// neighbour's, with the same lists, and first/last index into them.
TEST(SectionsTest, MaximalSectionsAreTheUncontainedOnes) {
  auto subset = [](const std::vector<int>& a, const std::vector<int>& b) {
    return std::all_of(a.begin(), a.end(), [&](int x) {
      return std::find(b.begin(), b.end(), x) != b.end();
    });
  };
  for (uint32_t seed = 0; seed < 300; ++seed) {
    const Problem p = testing::DenseProblem(2 + seed % 50, seed);
    SectionOptions options;
    options.list_live = true;
    const Sections all = SweepSections(p, options);
    options.kind = SectionKind::kMaximal;
    const Sections max = SweepSections(p, options);
    std::vector<std::vector<int>> expected;
    for (int k = 0; k < all.size(); ++k) {
      const auto& here = all.live[k];
      if (here.empty()) continue;
      const bool in_left = k > 0 && subset(here, all.live[k - 1]);
      const bool in_right = k + 1 < all.size() && subset(here, all.live[k + 1]);
      if (!in_left && !in_right) expected.push_back(here);
    }
    ASSERT_EQ(max.live, expected) << "seed " << seed;
    for (int i = 0; i < static_cast<int>(p.buffers.size()); ++i) {
      ASSERT_LT(max.first[i], max.last[i]);
      for (int k = 0; k < max.size(); ++k) {
        const bool in = max.first[i] <= k && k < max.last[i];
        ASSERT_EQ(in,
                  std::count(max.live[k].begin(), max.live[k].end(), i) == 1);
      }
    }
  }
}

// The event sweep the exact solver used before sections had one home: a
// section is recorded at the first end after some start.
Sections EventSweep(const Problem& p) {
  const int m = static_cast<int>(p.buffers.size());
  std::vector<std::pair<Step, int>> events;  // (time, +1+i | -1-i)
  for (int i = 0; i < m; ++i) {
    events.emplace_back(p.buffers[i].start, i + 1);
    events.emplace_back(p.buffers[i].end, -(i + 1));
  }
  std::sort(events.begin(), events.end());
  Sections s;
  s.first.resize(m);
  s.last.resize(m);
  std::vector<int> live;
  bool grown = false;
  for (const auto& [time, code] : events) {
    if (code > 0) {
      s.first[code - 1] = static_cast<int>(s.live.size());
      live.push_back(code - 1);
      grown = true;
      continue;
    }
    if (grown) s.live.push_back(live);
    grown = false;
    s.last[-code - 1] = static_cast<int>(s.live.size());
    live.erase(std::find(live.begin(), live.end(), -code - 1));
  }
  return s;
}

TEST(SectionsTest, MaximalSectionsMatchTheEventSweep) {
  for (uint32_t seed = 0; seed < 500; ++seed) {
    const Problem p = seed % 2 ? testing::DenseProblem(2 + seed % 90, seed)
                               : testing::RandomProblem(1 + seed % 90, seed);
    SectionOptions options;
    options.kind = SectionKind::kMaximal;
    options.list_live = true;
    const Sections got = SweepSections(p, options);
    const Sections want = EventSweep(p);
    ASSERT_EQ(got.live, want.live) << "seed " << seed;
    ASSERT_EQ(got.first, want.first) << "seed " << seed;
    ASSERT_EQ(got.last, want.last) << "seed " << seed;
  }
}

// Compressed time keeps exactly the overlaps of the lifetimes.
TEST(SectionsTest, CompressedTimeKeepsEveryOverlap) {
  for (uint32_t seed = 0; seed < 400; ++seed) {
    const Problem p = seed % 2 ? testing::DenseProblem(2 + seed % 70, seed)
                               : testing::RandomProblem(1 + seed % 70, seed);
    const Sections t = *CompressTime(p);
    const int n = static_cast<int>(p.buffers.size());
    ASSERT_LE(t.size(), n);
    int64_t pairs = 0;  // ordered: each overlapping pair from both ends
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        const bool compressed =
            t.first[i] < t.last[j] && t.first[j] < t.last[i];
        ASSERT_EQ(compressed, LifetimesOverlap(p.buffers[i], p.buffers[j]))
            << "seed " << seed << " buffers " << i << ", " << j;
        pairs += i != j && compressed;
      }
    }
    // The sweep counts the overlap total as it goes, with every section
    // kept as with the maximal ones alone.
    EXPECT_EQ(t.overlap_total, pairs) << "seed " << seed;
    EXPECT_EQ(SweepSections(p).overlap_total, pairs) << "seed " << seed;
  }
}

// Many events are numbered in ranges of time on several threads: the same
// sections as one walk, also where many buffers start at one step (a
// range's first step shared with the one before) and where steps spread.
TEST(SectionsTest, CompressedTimeInRangesIsTheOneWalks) {
  Problem crowded;  // 300,000 buffers over 40 steps
  std::mt19937 rng(7);
  for (int i = 0; i < 300000; ++i) {
    const Step start = static_cast<Step>(rng() % 40);
    crowded.buffers.push_back({"b" + std::to_string(i), start,
                               start + 1 + static_cast<Step>(rng() % 5), 8});
  }
  base::WorkerPool pool(3, 64);
  for (const Problem& p : {crowded, testing::RandomProblem(300000, 3),
                           testing::RandomProblem(70000, 4, 64)}) {
    const Sections one = *CompressTime(p, nullptr);
    ASSERT_GT(one.size(), 0);
    for (int threads : {2, 4}) {
      const Sections ranges =
          *CompressTime(p, nullptr, base::Parallelism{&pool, threads});
      EXPECT_EQ(ranges.begin, one.begin);
      EXPECT_EQ(ranges.end, one.end);
      EXPECT_EQ(ranges.first, one.first);
      EXPECT_EQ(ranges.last, one.last);
    }
  }
}

TEST(SectionsTest, SubsetIsIndexedByPosition) {
  Problem p;
  p.buffers = {{"a", 0, 4, 1}, {"b", 10, 20, 1}, {"c", 2, 6, 1}};
  const std::vector<int> subset = {2, 0};
  SectionOptions options;
  options.subset = &subset;
  const Sections s = SweepSections(p, options);
  EXPECT_THAT(s.begin, ElementsAre(0, 2, 4));
  EXPECT_THAT(s.first, ElementsAre(1, 0));
  EXPECT_THAT(s.last, ElementsAre(3, 2));
}

TEST(SectionsTest, ExtremeAndNegativeStepsNeedNoArithmetic) {
  constexpr Step kMin = std::numeric_limits<Step>::min();
  constexpr Step kMax = std::numeric_limits<Step>::max();
  Problem p;
  p.buffers = {{"a", kMin, kMax, 8}, {"b", -5, 3, 4}, {"c", 3, kMax, 2}};
  const Sections s = SweepSections(p);
  EXPECT_THAT(s.begin, ElementsAre(kMin, -5, 3));
  EXPECT_THAT(s.end, ElementsAre(-5, 3, kMax));
  EXPECT_THAT(SectionTotals(s, [&](int i) { return p.buffers[i].size; }),
              ElementsAre(8, 12, 10));
  EXPECT_EQ(LowerBound(p), 12);
}

TEST(SectionsTest, MaximaAreTheLargestLiveWeights) {
  for (uint32_t seed = 0; seed < 200; ++seed) {
    const Problem p = testing::RandomProblem(1 + seed % 60, seed);
    SectionOptions options;
    options.list_live = true;
    const Sections s = SweepSections(p, options);
    const auto weight = [&](int i) { return p.buffers[i].size % 97; };
    const std::vector<Bytes> max = SectionMaxima(s, weight);
    for (int k = 0; k < s.size(); ++k) {
      Bytes want = 0;
      for (int i : s.live[k]) want = std::max(want, weight(i));
      ASSERT_EQ(max[k], want) << "seed " << seed << " section " << k;
    }
  }
}

// The overlap total is the sum of every buffer's overlap count: as the
// sweep counts it (in one walk, or in ranges of time on threads), and as
// OverlapTotal counts it (in parts on the threads) for sections made
// otherwise.
TEST(SectionsTest, OverlapTotalOnThreadsIsTheSumOfTheCounts) {
  base::WorkerPool pool(3, 64);
  for (const Problem& p : {testing::RandomProblem(600000, 8, 64),
                           testing::DenseProblem(3000, 2)}) {
    const Sections s = *CompressTime(p, nullptr);
    const std::vector<int64_t> counts = OverlapCounts(s);
    const int64_t sum =
        std::accumulate(counts.begin(), counts.end(), int64_t{0});
    ASSERT_GT(sum, 0);
    EXPECT_EQ(s.overlap_total, sum);
    EXPECT_EQ(OverlapTotal(s), sum);
    EXPECT_EQ(
        CompressTime(p, nullptr, base::Parallelism{&pool, 4})->overlap_total,
        sum);
    Sections counted = s;
    counted.overlap_total = -1;  // as for sections cut from others
    EXPECT_EQ(OverlapTotal(counted), sum);
    EXPECT_EQ(OverlapTotal(counted, base::Parallelism{&pool, 4}), sum);
  }
}

// Past a part's worth of buffers the totals are summed in parts (on
// workers or not): the totals of the whole, and at a sample the sum over a
// sweep of the live sets.
TEST(SectionsTest, TotalsInPartsAreTheWholesTotals) {
  const Problem p = testing::RandomProblem(600000, 6, 64);
  const Sections s = *CompressTime(p, nullptr);
  const auto weight = [&](int i) { return AlignUp(p.buffers[i].size, 64); };
  const std::vector<Bytes> whole = SectionTotals(s, weight);
  base::WorkerPool pool(3, 64);
  for (base::WorkerPool* workers : {(base::WorkerPool*)nullptr, &pool}) {
    EXPECT_EQ(SectionTotals(s, weight, base::Parallelism{workers, 4}), whole);
  }
  SectionOptions options;
  options.kind = SectionKind::kMaximal;
  options.list_live = true;
  const Sections live = SweepSections(p, options);
  ASSERT_EQ(live.size(), s.size());
  for (int k = 0; k < s.size(); k += 4099) {
    Bytes want = 0;
    for (int i : live.live[k]) want += weight(i);
    ASSERT_EQ(whole[k], want) << "section " << k;
  }
}

// A cancelled sweep stops early (the bounds of a call cancelled while
// they run end within a poll stride, not after the whole sweep).
TEST(SectionsTest, CancelledSweepsStopEarly) {
  const Problem p = testing::RandomProblem(600000, 5, 64);
  const Sections s = *CompressTime(p, nullptr);
  const int n = static_cast<int>(p.buffers.size());
  base::CancelToken cancelled;
  cancelled.Cancel();
  std::atomic<int> weighed{0};
  const auto weight = [&](int i) {
    ++weighed;
    return AlignUp(p.buffers[i].size, 64) - p.buffers[i].size;
  };
  (void)SectionTotals(s, weight, &cancelled);
  EXPECT_EQ(weighed.load(), 0);
  base::WorkerPool pool(3, 64);
  for (base::WorkerPool* workers : {(base::WorkerPool*)nullptr, &pool}) {
    weighed = 0;
    (void)SectionTotals(s, weight, base::Parallelism{workers, 4}, &cancelled);
    EXPECT_LT(weighed.load(), n / 2);  // each part to its first poll
    // The maxima weigh every buffer first, then stop before painting.
    const std::vector<Bytes> max =
        SectionMaxima(s, weight, base::Parallelism{workers, 4}, &cancelled);
    ASSERT_FALSE(max.empty());
    EXPECT_EQ(std::count(max.begin(), max.end(), Bytes{0}),
              static_cast<int64_t>(max.size()));
  }
  EXPECT_NE(SectionMaxima(s, weight, base::Parallelism{&pool, 4}),
            std::vector<Bytes>(s.size(), 0));  // not cancelled: painted
}

// Past a part's worth of buffers the maxima are found in parts (on
// workers or not) and merged: the maxima of the whole.
TEST(SectionsTest, MaximaInPartsAreTheWholesMaxima) {
  const Problem p = testing::RandomProblem(600000, 5, 64);
  const Sections s = *CompressTime(p, nullptr);
  const auto weight = [&](int i) {
    return AlignUp(p.buffers[i].size, 64) - p.buffers[i].size;
  };
  const std::vector<Bytes> whole = SectionMaxima(s, weight);
  base::WorkerPool pool(3, 64);
  for (base::WorkerPool* workers : {(base::WorkerPool*)nullptr, &pool}) {
    EXPECT_EQ(SectionMaxima(s, weight, base::Parallelism{workers, 4}), whole);
  }
  // And the whole's against a sweep of the live sets, at a sample.
  for (int k = 0; k < s.size(); k += 4099) {
    Bytes want = 0;
    for (int i = 0; i < static_cast<int>(p.buffers.size()); ++i) {
      if (s.first[i] <= k && k < s.last[i]) want = std::max(want, weight(i));
    }
    ASSERT_EQ(whole[k], want) << "section " << k;
  }
}

// A windowed pass lists the entries and crossings its definition gives,
// in the same order, whether its lists were built on workers or not.
TEST(WindowsTest, PassListsAreTheSameOnAnyThreads) {
  const Problem p = testing::RandomProblem(200000, 3, 16);
  const Sections s = *CompressTime(p, nullptr);
  const TimeWindows windows = CutTime(s);
  ASSERT_GT(windows.count(), 4);
  std::vector<int> order;  // a pass order that is not the index order
  for (int i = static_cast<int>(p.buffers.size()); i-- > 0;) {
    if (i % 7 != 3) order.push_back(i);
  }
  // The lists by their definition: each buffer, in order, in every window
  // it touches, crossings numbered in order.
  std::vector<std::vector<WindowedPass::Entry>> want(windows.count());
  int crossings = 0;
  for (int i : order) {
    const int first = windows.WindowOf(s.first[i]);
    const int last = windows.WindowOf(s.last[i] - 1);
    const int cross = first == last ? -1 : crossings++;
    for (int w = first; w <= last; ++w) want[w].push_back({i, cross});
  }
  ASSERT_GT(crossings, 0);  // the test has crossings to number
  base::WorkerPool pool(3, 64);
  for (base::WorkerPool* workers : {(base::WorkerPool*)nullptr, &pool}) {
    const WindowedPass pass(s, windows, order, {workers, 4});
    for (int w = 0; w < windows.count(); ++w) {
      const auto& got = pass.entries(w);
      ASSERT_EQ(got.size(), want[w].size()) << "window " << w;
      for (size_t k = 0; k < got.size(); ++k) {
        ASSERT_EQ(got[k].buffer, want[w][k].buffer) << w << " " << k;
        ASSERT_EQ(got[k].cross, want[w][k].cross) << w << " " << k;
      }
    }
  }
}

// The cuts the sweep finds from its sorted starts are those CutTime counts
// from the sections: on random lists, on lists whose buffers all start in
// a few sections (cuts pushed one section on by the one before) or that
// have fewer sections than windows, on one thread and on several.
TEST(WindowsTest, SweptCutsAreTheCountedOnes) {
  std::vector<std::pair<std::string, Problem>> problems = {
      {"random 40000", testing::RandomProblem(40000, 1, 64)},
      {"random 300000", testing::RandomProblem(300000, 2, 64)},
      {"long 100000", testing::RandomProblem(100000, 3, 64)},
  };
  Problem bunched;  // 200,000 buffers starting at 5 steps
  for (int i = 0; i < 200000; ++i) {
    const Step start = (i % 5) * 1000;
    bunched.buffers.push_back(
        {absl::StrCat("b", i), start, start + 1 + i % 3000, 64, 64});
  }
  problems.push_back({"bunched", bunched});
  Problem few;  // 100,000 buffers over 3 steps
  for (int i = 0; i < 100000; ++i) {
    few.buffers.push_back({absl::StrCat("f", i), i % 3, 3, 64, 64});
  }
  problems.push_back({"few sections", few});
  base::WorkerPool pool(3, 64);
  for (const auto& [name, p] : problems) {
    for (base::WorkerPool* workers : {(base::WorkerPool*)nullptr, &pool}) {
      for (SectionKind kind : {SectionKind::kMaximal, SectionKind::kAll}) {
        SectionOptions options;
        options.kind = kind;
        absl::StatusOr<Sections> swept =
            kind == SectionKind::kMaximal
                ? CompressTime(p, nullptr, {workers, 4})
                : SweepSectionsOrCancel(p, options, nullptr);
        ASSERT_TRUE(swept.ok());
        ASSERT_TRUE(swept->window_cuts.has_value()) << name;
        const TimeWindows got = CutTime(*swept);
        Sections counted = *swept;
        counted.window_cuts.reset();
        const TimeWindows want = CutTime(counted);
        EXPECT_EQ(got.begin, want.begin) << name;
        EXPECT_EQ(got.window_of, want.window_of) << name;
      }
    }
  }
}

TEST(SectionsTest, EmptyProblemHasNoSections) {
  const Sections s = SweepSections(Problem{});
  EXPECT_EQ(s.size(), 0);
  EXPECT_TRUE(SectionTotals(s, [](int) { return 1; }).empty());
  EXPECT_EQ(LowerBound(Problem{}), 0);
}

}  // namespace
}  // namespace memplan::planner
