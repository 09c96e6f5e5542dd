#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "mx/coro/coroutine.h"
#include "mx/coro/frame_pool.h"

#include "amac.h"
#include "coroutine_search.h"
#include "group_prefetch.h"
#include "sequential.h"

namespace {

using namespace mx::bench::bsearch;

// Sorted array with many duplicates when `distinct` is small, and keys that fall before, inside,
// between and after the stored values.
struct Workload {
    std::vector<IntKey> table;
    std::vector<IntKey> keys;
    std::vector<std::size_t> expected;
};

Workload make_workload(std::uint64_t seed, std::size_t size, std::uint32_t distinct, std::size_t lookups) {
    std::mt19937_64 random(seed);
    Workload w;
    std::uniform_int_distribution<std::uint32_t> value(0, distinct * 2);
    w.table.resize(size);
    for (auto &v : w.table) {
        v = value(random);
    }
    std::sort(w.table.begin(), w.table.end());
    std::uniform_int_distribution<std::uint32_t> key(0, distinct * 2 + 2);
    w.keys.resize(lookups);
    for (auto &k : w.keys) {
        k = key(random);
    }
    for (const IntKey k : w.keys) {
        w.expected.push_back(
            static_cast<std::size_t>(std::lower_bound(w.table.begin(), w.table.end(), k) - w.table.begin()));
    }
    return w;
}

constexpr std::size_t sizes[] = {0, 1, 2, 3, 5, 16, 17, 100, 1000, 4097};
constexpr std::uint32_t distincts[] = {1, 3, 50, 1000000};

TEST(CoroutineSearch, InterleavedMatchesSequentialForEveryGroupSize) {
    for (std::uint64_t seed = 1; seed <= 8; ++seed) {
        for (const std::size_t size : sizes) {
            for (const std::uint32_t distinct : distincts) {
                const Workload w = make_workload(seed, size, distinct, 257);
                SCOPED_TRACE(::testing::Message()
                             << "seed " << seed << " size " << size << " distinct " << distinct);
                const std::span<const IntKey> table(w.table);
                const std::span<const IntKey> keys(w.keys);
                std::vector<std::size_t> sequential(keys.size(), 99);
                search_coroutines_sequential(table, keys, std::span(sequential));
                ASSERT_EQ(sequential, w.expected);
                std::vector<std::size_t> branch_free(keys.size(), 99);
                search_branch_free(table, keys, std::span(branch_free));
                ASSERT_EQ(branch_free, w.expected);
                for (std::size_t g = 1; g <= 16; ++g) {
                    std::vector<std::size_t> out(keys.size(), 99);
                    search_coroutines(g, table, keys, std::span(out));
                    ASSERT_EQ(out, w.expected) << "coroutines, G = " << g;
                    std::fill(out.begin(), out.end(), 99);
                    search_coroutines<mx::coro::InterleavedNonTemporal>(g, table, keys, std::span(out));
                    ASSERT_EQ(out, w.expected) << "coroutines (nta), G = " << g;
                }
            }
        }
    }
}

TEST(CoroutineSearch, GroupPrefetchAndAmacMatchStdLowerBound) {
    for (std::uint64_t seed = 100; seed < 108; ++seed) {
        for (const std::size_t size : sizes) {
            for (const std::uint32_t distinct : distincts) {
                // Lookup counts that are not multiples of G exercise the partial last group.
                const Workload w = make_workload(seed, size, distinct, 131);
                SCOPED_TRACE(::testing::Message()
                             << "seed " << seed << " size " << size << " distinct " << distinct);
                for (std::size_t g = 1; g <= 16; ++g) {
                    std::vector<std::size_t> out(w.keys.size(), 99);
                    search_group_prefetch(g, std::span<const IntKey>(w.table),
                                          std::span<const IntKey>(w.keys), std::span(out));
                    ASSERT_EQ(out, w.expected) << "GP, G = " << g;
                    std::fill(out.begin(), out.end(), 99);
                    search_amac(g, std::span<const IntKey>(w.table), std::span<const IntKey>(w.keys),
                                std::span(out));
                    ASSERT_EQ(out, w.expected) << "AMAC, G = " << g;
                }
            }
        }
    }
}

TEST(CoroutineSearch, StringKeysAgreeAcrossVariants) {
    std::mt19937_64 random(7);
    for (const std::size_t size : sizes) {
        std::vector<StringKey> table(size);
        fill_table(table.data(), size);
        for (std::size_t i = 0; i < size; ++i) {
            ASSERT_EQ(table[i], key_at<StringKey>(i));
        }
        std::vector<StringKey> keys;
        std::uniform_int_distribution<std::uint64_t> number(0, 2 * size + 1);
        for (int i = 0; i < 200; ++i) {
            keys.push_back(StringKey::from(number(random)));
        }
        std::vector<std::size_t> expected(keys.size());
        search_std(std::span<const StringKey>(table), std::span<const StringKey>(keys), std::span(expected));
        for (std::size_t i = 0; i < keys.size(); ++i) {
            // Byte order is numeric order: key 2k+1 lands after k+1 values, key 2k at index k.
            const std::string text = keys[i].str();
            const std::uint64_t n = std::stoull(text);
            ASSERT_EQ(expected[i], std::min<std::size_t>(size, (n + 1) / 2));
        }
        for (std::size_t g = 1; g <= 16; ++g) {
            std::vector<std::size_t> out(keys.size());
            search_coroutines(g, std::span<const StringKey>(table), std::span<const StringKey>(keys),
                              std::span(out));
            ASSERT_EQ(out, expected) << "G " << g;
            search_group_prefetch(g, std::span<const StringKey>(table), std::span<const StringKey>(keys),
                                  std::span(out));
            ASSERT_EQ(out, expected) << "G " << g;
            search_amac(g, std::span<const StringKey>(table), std::span<const StringKey>(keys),
                        std::span(out));
            ASSERT_EQ(out, expected) << "G " << g;
        }
    }
}

TEST(FramePool, FramesAreRecycled) {
    auto &pool = mx::coro::FramePool::local();
    const std::int64_t outstanding = pool.outstanding();
    const Workload w = make_workload(3, 10000, 1000000, 5000);
    std::vector<std::size_t> out(w.keys.size());
    search_coroutines(16, std::span<const IntKey>(w.table), std::span<const IntKey>(w.keys), std::span(out));
    EXPECT_EQ(pool.outstanding(), outstanding);
    const std::size_t cached = pool.cached();
    const std::uint64_t refills = pool.refills();
    // Steady state: a second run of the same group size is served from the free list alone.
    for (std::size_t g = 1; g <= 16; ++g) {
        search_coroutines(g, std::span<const IntKey>(w.table), std::span<const IntKey>(w.keys),
                          std::span(out));
        ASSERT_EQ(out, w.expected);
        EXPECT_EQ(pool.outstanding(), outstanding);
    }
    EXPECT_EQ(pool.refills(), refills);
    EXPECT_EQ(pool.cached(), cached);
    EXPECT_EQ(pool.oversized(), 0U) << "a binary-search frame should fit the pooled classes";
}

TEST(FramePool, OwnedCoroutineFramesReturnOnDestruction) {
    auto &pool = mx::coro::FramePool::local();
    const std::int64_t outstanding = pool.outstanding();
    const std::vector<IntKey> table{1, 2, 3, 4, 5, 6, 7, 8};
    {
        std::vector<mx::coro::Coroutine<std::size_t>> held;
        for (IntKey k = 0; k < 40; ++k) {
            held.push_back(lower_bound_coroutine<mx::coro::Interleaved>(std::span<const IntKey>(table), k));
        }
        EXPECT_EQ(pool.outstanding(), outstanding + 40);
        // Half are destroyed while still suspended, half run to completion first.
        for (std::size_t i = 0; i < held.size(); i += 2) {
            while (!held[i].done()) {
                held[i].resume();
            }
            EXPECT_EQ(held[i].result(), std::min<std::size_t>(8, i == 0 ? 0 : i - 1));
        }
    }
    EXPECT_EQ(pool.outstanding(), outstanding);
}

TEST(FramePool, FrameMayBeFreedOnAnotherThread) {
    // A coroutine task that migrates between workers is destroyed by another thread than the one
    // that allocated its frame; the per-thread counts then disagree by one each, by design.
    const std::int64_t outstanding = mx::coro::FramePool::local().outstanding();
    const std::vector<IntKey> table{1, 2, 3};
    auto co = lower_bound_coroutine<mx::coro::Interleaved>(std::span<const IntKey>(table), IntKey{2});
    EXPECT_EQ(mx::coro::FramePool::local().outstanding(), outstanding + 1);
    std::size_t result = 0;
    std::int64_t other_outstanding = 0;
    std::thread other([moved = std::move(co), &result, &other_outstanding]() mutable {
        while (!moved.done()) {
            moved.resume();
        }
        result = moved.result();
        moved.reset();
        other_outstanding = mx::coro::FramePool::local().outstanding();
    });
    other.join();
    EXPECT_EQ(result, 1U);
    EXPECT_EQ(other_outstanding, -1);
    EXPECT_EQ(mx::coro::FramePool::local().outstanding(), outstanding + 1);
}

mx::coro::Coroutine<> count_down(int steps, int &finished) {
    const int probe = 0;
    for (int i = 0; i < steps; ++i) {
        co_await mx::coro::prefetch<mx::coro::Interleaved>(&probe);
    }
    ++finished;
}

TEST(Interleave, VoidCoroutinesOfUnevenLengthAllFinish) {
    for (std::size_t g = 1; g <= 16; ++g) {
        int finished = 0;
        std::vector<int> seen(100, 0);
        mx::coro::interleave(
            g, seen.size(), [&](std::size_t i) { return count_down(static_cast<int>(i % 7), finished); },
            [&](std::size_t i) { ++seen[i]; });
        EXPECT_EQ(finished, 100);
        EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    }
}

TEST(RoundRobinGroup, ResumesMembersInTurnUntilAllFinish) {
    auto &pool = mx::coro::FramePool::local();
    const std::int64_t outstanding = pool.outstanding();
    int finished = 0;
    mx::coro::RoundRobinGroup group(4);
    std::vector<mx::coro::Coroutine<>::Handle> parked;
    for (int steps = 1; steps <= 6; ++steps) {
        auto handle = count_down(steps, finished).release();
        if (!group.try_add(handle)) {
            parked.push_back(handle);
        }
    }
    EXPECT_TRUE(group.full());
    EXPECT_EQ(parked.size(), 2U);
    std::size_t done = 0;
    while (!group.empty()) {
        group.resume_round([&](std::coroutine_handle<> handle) {
            handle.destroy();
            ++done;
            if (!parked.empty()) {
                EXPECT_TRUE(group.try_add(parked.back()));
                parked.pop_back();
            }
        });
    }
    EXPECT_EQ(done, 6U);
    EXPECT_EQ(finished, 6);
    EXPECT_EQ(pool.outstanding(), outstanding);
}

} // namespace
