#include "planner/gap_index.h"

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"

namespace memplan::planner {
namespace {

// One inserted range with its sections.
struct Inserted {
  int lo, hi;
  TakenRange range;
};

// The union of the ranges taken during [lo, hi), merged, by brute force.
std::vector<TakenRange> UnionDuring(const std::vector<Inserted>& all, int lo,
                                    int hi) {
  std::vector<TakenRange> ranges;
  for (const Inserted& x : all) {
    if (x.lo < hi && lo < x.hi) ranges.push_back(x.range);
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<TakenRange> merged;
  for (const TakenRange& r : ranges) {
    if (!merged.empty() && r.offset <= merged.back().top) {
      merged.back().top = std::max(merged.back().top, r.top);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

// Random sections [lo, hi) within [0, sections).
std::pair<int, int> RandomSections(std::mt19937& rng, int sections) {
  const int lo = static_cast<int>(rng() % sections);
  return {lo, lo + 1 + static_cast<int>(rng() % (sections - lo))};
}

// A GapIndex and, beside it, every range inserted (for UnionDuring).
struct IndexAndInserts {
  explicit IndexAndInserts(int sections) : index(sections) {}
  void Insert(int lo, int hi, TakenRange r) {
    index.Insert(lo, hi, r);
    all.push_back({lo, hi, r});
  }
  GapIndex index;
  std::vector<Inserted> all;
};

// The gaps between consecutive merged ranges.
std::vector<TakenRange> GapsOf(const std::vector<TakenRange>& merged) {
  std::vector<TakenRange> gaps;
  for (size_t k = 1; k < merged.size(); ++k) {
    gaps.push_back({merged[k - 1].top, merged[k].offset});
  }
  return gaps;
}

// Whether `got` and `want` hold the same ranges, in the same order.
::testing::AssertionResult SameRanges(absl::Span<const TakenRange> got,
                                      const std::vector<TakenRange>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << got.size() << " ranges, want " << want.size();
  }
  for (size_t k = 0; k < got.size(); ++k) {
    if (got[k].offset != want[k].offset || got[k].top != want[k].top) {
      return ::testing::AssertionFailure()
             << "range " << k << ": [" << got[k].offset << ", " << got[k].top
             << "), want [" << want[k].offset << ", " << want[k].top << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(GapIndexTest, TakenIsTheUnionDuringTheRange) {
  for (uint32_t seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(seed);
    const int sections = 1 + static_cast<int>(rng() % 40);
    IndexAndInserts x(sections);
    for (int op = 0; op < 200; ++op) {
      const auto [lo, hi] = RandomSections(rng, sections);
      if (rng() % 2) {
        const Offset at = static_cast<Offset>(rng() % 2000);
        x.Insert(lo, hi, {at, at + 1 + static_cast<Offset>(rng() % 100)});
        continue;
      }
      ASSERT_TRUE(SameRanges(x.index.Taken(lo, hi), UnionDuring(x.all, lo, hi)))
          << "seed " << seed << " op " << op;
    }
    EXPECT_LE(x.index.stored_ranges(), static_cast<int64_t>(x.all.size()) * 64);
  }
}

// Sets past a few hundred ranges (held in a tree, not a vector): many
// small disjoint ranges over few sections, inserted in falling and random
// order, then wide ones that swallow many; the same union throughout.
TEST(GapIndexTest, LargeSetsGiveTheSameUnion) {
  for (uint32_t seed = 0; seed < 6; ++seed) {
    std::mt19937 rng(seed);
    const int sections = 1 + static_cast<int>(rng() % 4);
    IndexAndInserts x(sections);
    size_t largest = 0;  // the longest union read
    for (int op = 0; op < 3000; ++op) {
      const auto [lo, hi] = RandomSections(rng, sections);
      if (op % 10 != 9) {
        const Offset at = op < 1000 ? Offset{100} * (1000 - op)
                                    : static_cast<Offset>(rng() % 200'000);
        const Offset size = op < 2500 ? 1 + static_cast<Offset>(rng() % 40)
                                      : 500 + static_cast<Offset>(rng() % 5000);
        x.Insert(lo, hi, {at, at + size});
        continue;
      }
      const absl::Span<const TakenRange> got = x.index.Taken(lo, hi);
      const std::vector<TakenRange> want = UnionDuring(x.all, lo, hi);
      ASSERT_TRUE(SameRanges(got, want)) << "seed " << seed << " op " << op;
      largest = std::max(largest, got.size());
    }
    // Past the vector's 256 ranges (the root's set holds the whole union).
    EXPECT_GT(largest, 1000u) << "seed " << seed;
  }
}

// With a smallest request, gaps it cannot use may be filled; the usable
// gaps and the top stay exactly those of the union.
TEST(GapIndexTest, OnlyUnusableGapsAreFilled) {
  for (uint32_t seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(seed);
    const int sections = 1 + static_cast<int>(rng() % 40);
    const Bytes min_size = 1 + static_cast<Bytes>(rng() % 40);
    const Bytes min_align = Bytes{1} << (rng() % 6);
    IndexAndInserts x(sections);
    x.index.SetSmallestRequest(min_size, min_align);
    const auto usable = [&](const TakenRange& gap) {
      return AlignUp(gap.offset, min_align) + min_size <= gap.top;
    };
    for (int op = 0; op < 200; ++op) {
      const auto [lo, hi] = RandomSections(rng, sections);
      if (rng() % 2) {
        const Offset at = static_cast<Offset>(rng() % 3000);
        x.Insert(lo, hi, {at, at + 1 + static_cast<Offset>(rng() % 60)});
        continue;
      }
      const absl::Span<const TakenRange> taken = x.index.Taken(lo, hi);
      const std::vector<TakenRange> got(taken.begin(), taken.end());
      const std::vector<TakenRange> want = UnionDuring(x.all, lo, hi);
      if (want.empty()) {
        ASSERT_TRUE(got.empty());
        continue;
      }
      ASSERT_FALSE(got.empty());
      ASSERT_EQ(got.back().top, want.back().top) << "seed " << seed;
      ASSERT_EQ(got.front().offset, want.front().offset) << "seed " << seed;
      std::vector<TakenRange> want_usable, got_usable;
      for (const TakenRange& g : GapsOf(want)) {
        if (usable(g)) want_usable.push_back(g);
      }
      for (const TakenRange& g : GapsOf(got)) {
        if (usable(g)) got_usable.push_back(g);
      }
      ASSERT_EQ(got_usable.size(), want_usable.size())
          << "seed " << seed << " op " << op;
      for (size_t k = 0; k < got_usable.size(); ++k) {
        ASSERT_EQ(got_usable[k].offset, want_usable[k].offset);
        ASSERT_EQ(got_usable[k].top, want_usable[k].top);
      }
    }
  }
}

// FirstFit reads the sets only up to the gap it finds: the same offset
// as first fit among the whole union, and the same work counted. Small
// sets (vectors) and, from op 1000 on in the few-section cases, sets held
// in trees; requests at and above the smallest, on random bases.
TEST(GapIndexTest, FirstFitIsFirstFitAmongTheUnion) {
  for (uint32_t seed = 0; seed < 400; ++seed) {
    std::mt19937 rng(seed);
    const bool few = seed % 4 == 0;  // few sections, long sets
    const int sections = few ? 1 + static_cast<int>(rng() % 3)
                             : 1 + static_cast<int>(rng() % 64);
    const Bytes min_size = 1 + static_cast<Bytes>(rng() % 8);
    const Bytes min_align = Bytes{1} << (rng() % 4);
    GapIndex index(sections);
    index.SetSmallestRequest(min_size, min_align);
    const int ops = few ? 1500 : 300;
    for (int op = 0; op < ops; ++op) {
      const auto [lo, hi] = RandomSections(rng, sections);
      if (rng() % 3 != 0) {
        const Offset at = static_cast<Offset>(rng() % (few ? 60'000 : 3000));
        index.Insert(lo, hi, {at, at + 1 + static_cast<Offset>(rng() % 60)});
        continue;
      }
      const Bytes size = min_size + static_cast<Bytes>(rng() % 50);
      const Bytes alignment = min_align << (rng() % 3);
      const Offset base = static_cast<Offset>(rng() % 200);
      const int64_t before = index.ranges_read();
      const Offset want = FindGap(index.Taken(lo, hi), size, alignment,
                                  FitPolicy::kFirstFit, base);
      const int64_t taken_read = index.ranges_read() - before;
      const Offset got = index.FirstFit(lo, hi, size, alignment, base);
      ASSERT_EQ(got, want) << "seed " << seed << " op " << op;
      ASSERT_EQ(index.ranges_read() - before, 2 * taken_read);
    }
  }
}

// A chain of ranges, each overlapping the next, spread over the eight sets
// a query of section 0 reads (the leaf's subtree set, then the own sets of
// its ancestors up to the root) in the opposite order: each pass over the
// sets moves the cursor one range, past FirstFit's budget, so the union is
// merged whole; the answer stays first fit's.
TEST(GapIndexTest, FirstFitAlongAChainAcrossSets) {
  GapIndex index(128);
  for (int i = 1; i <= 80; ++i) {
    const int level = 7 - (i - 1) % 8;  // 7: the root's [0, 128)
    const Offset at = 10 * i;
    index.Insert(0, 1 << level, {at, at + 15});
  }
  for (Offset base : {0, 10, 11, 200, 900}) {
    for (Bytes size : {1, 5, 6, 100}) {
      const Offset want =
          FindGap(index.Taken(0, 1), size, 1, FitPolicy::kFirstFit, base);
      EXPECT_EQ(index.FirstFit(0, 1, size, 1, base), want)
          << "base " << base << " size " << size;
    }
  }
  EXPECT_EQ(index.FirstFit(0, 1, 1, 1, 10), 815);  // above the whole chain
  EXPECT_EQ(index.FirstFit(0, 1, 10, 1, 0), 0);    // below it
}

// Ranges stacked on one another over one lifetime collapse into one: the
// work of a query does not grow with the buffers under it.
TEST(GapIndexTest, StackedRangesCostOneRange) {
  GapIndex index(1);
  index.SetSmallestRequest(16, 64);
  Offset top = 0;
  for (int i = 0; i < 100000; ++i) {
    const Bytes size = 16 + (i % 7) * 40;
    ASSERT_LE(index.Taken(0, 1).size(), 1u);
    top = AlignUp(top, 64);
    index.Insert(0, 1, {top, top + size});
    top += size;
  }
  EXPECT_LE(index.ranges_read(), 100000);
  EXPECT_EQ(index.stored_ranges(), 2);  // the leaf's own and subtree sets
}

}  // namespace
}  // namespace memplan::planner
