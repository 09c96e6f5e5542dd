// The operators' zeroed working memory (src/db/operators/large_buffer.cpp): small buffers from
// the allocator, big ones as 2 MiB-aligned mappings that a freed buffer hands to the next one of
// about its size. Every buffer must arrive zeroed, however dirty its recycled memory was, and the
// process keeps no more than its limit.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "operators/large_buffer.h"

namespace mx::db::detail {
namespace {

constexpr std::size_t mib = std::size_t{1} << 20U;

bool all_zero(const LargeBuffer &buffer) {
    return std::all_of(buffer.data(), buffer.data() + buffer.bytes(),
                       [](std::byte b) { return b == std::byte{0}; });
}

class LargeBufferTest : public ::testing::Test {
protected:
    void SetUp() override { release_recycled_buffers(); }
    void TearDown() override { release_recycled_buffers(); }
};

TEST_F(LargeBufferTest, SmallBuffersAreZeroedAndNotKept) {
    for (const std::size_t bytes : {std::size_t{1}, std::size_t{4096}, mib}) {
        {
            LargeBuffer buffer(bytes);
            ASSERT_NE(buffer.data(), nullptr);
            EXPECT_EQ(buffer.bytes(), bytes);
            EXPECT_TRUE(all_zero(buffer));
            std::memset(buffer.data(), 0xab, bytes);
        }
        EXPECT_EQ(recycled_buffer_bytes(), 0U) << bytes;
    }
    const LargeBuffer empty(0);
    EXPECT_EQ(empty.bytes(), 0U);
}

TEST_F(LargeBufferTest, BigBuffersAreHugePageAlignedAndRecycledZeroed) {
    const std::size_t bytes = 6 * mib - 1000; // within an eighth of 2 MiB of three pages
    std::byte *first = nullptr;
    {
        LargeBuffer buffer(bytes);
        ASSERT_NE(buffer.data(), nullptr);
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.data()) % LargeBuffer::huge_page_bytes, 0U);
        EXPECT_TRUE(all_zero(buffer));
        std::memset(buffer.data(), 0x5a, bytes);
        first = buffer.data();
    }
    EXPECT_EQ(recycled_buffer_bytes(), 6 * mib);
    {
        // The same size class takes the kept mapping, cleaned.
        const LargeBuffer again(6 * mib);
        EXPECT_EQ(again.data(), first);
        EXPECT_TRUE(all_zero(again));
        EXPECT_EQ(recycled_buffer_bytes(), 0U);
    }
    EXPECT_EQ(recycled_buffer_bytes(), 6 * mib);
    {
        // Much smaller or bigger requests do not take it (at most a quarter more than asked).
        const LargeBuffer smaller(2 * mib);
        const LargeBuffer bigger(8 * mib);
        EXPECT_NE(smaller.data(), first);
        EXPECT_NE(bigger.data(), first);
        EXPECT_TRUE(all_zero(smaller));
        EXPECT_TRUE(all_zero(bigger));
        EXPECT_EQ(recycled_buffer_bytes(), 6 * mib);
    }
    EXPECT_EQ(recycled_buffer_bytes(), 16 * mib);
    release_recycled_buffers();
    EXPECT_EQ(recycled_buffer_bytes(), 0U);
}

TEST_F(LargeBufferTest, MovesHandOverTheMemory) {
    LargeBuffer a(4 * mib);
    std::byte *memory = a.data();
    LargeBuffer b(std::move(a));
    EXPECT_EQ(b.data(), memory);
    EXPECT_EQ(a.data(), nullptr); // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    LargeBuffer c(2 * mib);
    c = std::move(b); // c's own mapping goes back to the recycler
    EXPECT_EQ(c.data(), memory);
    EXPECT_EQ(recycled_buffer_bytes(), 2 * mib);
}

TEST_F(LargeBufferTest, KeepsNoMoreThanItsLimit) {
    const std::size_t limit = recycled_buffer_limit();
    ASSERT_GE(limit, 2 * mib);
    {
        std::vector<LargeBuffer> buffers;
        const std::size_t count = limit / (64 * mib) + 2;
        for (std::size_t i = 0; i < count; ++i) {
            buffers.emplace_back(64 * mib);
        }
    }
    EXPECT_LE(recycled_buffer_bytes(), limit);
    EXPECT_GT(recycled_buffer_bytes(), 0U);
}

TEST_F(LargeBufferTest, ExhaustedMemoryGivesAnEmptyBufferOrBadAlloc) {
    const std::size_t absurd = std::size_t{1} << 62U;
    const LargeBuffer none = LargeBuffer::try_zeroed(absurd);
    EXPECT_EQ(none.data(), nullptr);
    EXPECT_EQ(none.bytes(), 0U);
    EXPECT_THROW(LargeBuffer{absurd}, std::bad_alloc);
    const LargeBuffer fine = LargeBuffer::try_zeroed(4 * mib);
    ASSERT_NE(fine.data(), nullptr);
    EXPECT_TRUE(all_zero(fine));
}

TEST_F(LargeBufferTest, ThreadsShareTheRecycler) {
    std::vector<std::thread> threads;
    std::vector<int> dirty(4, 0);
    for (std::size_t t = 0; t < dirty.size(); ++t) {
        threads.emplace_back([t, &dirty] {
            for (std::size_t round = 0; round < 16; ++round) {
                LargeBuffer buffer((2 + (round + t) % 2 * 2) * mib);
                dirty[t] += all_zero(buffer) ? 0 : 1;
                std::memset(buffer.data(), 0xff, buffer.bytes());
            }
        });
    }
    for (auto &thread : threads) {
        thread.join();
    }
    for (const int count : dirty) {
        EXPECT_EQ(count, 0);
    }
}

} // namespace
} // namespace mx::db::detail
