#include <gtest/gtest.h>

#include <cstddef>

#include "mx/coro/mapped_buffer.h"
#include "mx/coro/model.h"

namespace {

TEST(Model, GroupSizeFollowsFormula) {
    // 300 ns stall, 10 ns compute, 5 ns switch: (300 - 5) / 15 = 19.7 -> 20 + 1, clamped.
    EXPECT_EQ(mx::coro::model_group_size({.stall_ns = 300, .compute_ns = 10, .switch_ns = 5}, 64), 21U);
    EXPECT_EQ(mx::coro::model_group_size({.stall_ns = 300, .compute_ns = 10, .switch_ns = 5}, 16), 16U);
    EXPECT_EQ(mx::coro::model_group_size({.stall_ns = 20, .compute_ns = 10, .switch_ns = 5}), 2U);
    EXPECT_EQ(mx::coro::model_group_size({.stall_ns = 2, .compute_ns = 10, .switch_ns = 5}), 1U);
    EXPECT_EQ(mx::coro::model_group_size({.stall_ns = 0, .compute_ns = 0, .switch_ns = 0}), 1U);
    EXPECT_DOUBLE_EQ(mx::coro::model_max_speedup({.stall_ns = 90, .compute_ns = 10, .switch_ns = 0}), 10.0);
}

TEST(Model, MeasurementsArePlausible) {
    const double latency =
        mx::coro::measure_memory_latency_ns(std::size_t{8} << 20U, mx::coro::PageMode::huge, 0.01);
    EXPECT_GT(latency, 0.5);
    EXPECT_LT(latency, 10000.0);
    const double switch_ns = mx::coro::measure_switch_ns(4, 10000);
    EXPECT_GE(switch_ns, 0.0);
    EXPECT_LT(switch_ns, 1000.0);
    const std::size_t g =
        mx::coro::measure_default_group_size(1.0, mx::coro::PageMode::huge, 16, std::size_t{8} << 20U);
    EXPECT_GE(g, 1U);
    EXPECT_LE(g, 16U);
}

TEST(MappedBuffer, IsAlignedWritableAndReportsHugePages) {
    mx::coro::MappedBuffer buffer(std::size_t{5} << 20U, mx::coro::PageMode::huge);
    ASSERT_NE(buffer.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.data()) % mx::coro::MappedBuffer::huge_page_bytes, 0U);
    EXPECT_EQ(buffer.size(), std::size_t{6} << 20U);
    buffer.data()[buffer.size() - 1] = std::byte{1};
    EXPECT_LE(buffer.huge_page_backed_bytes(), buffer.size());
    mx::coro::MappedBuffer small(std::size_t{4} << 20U, mx::coro::PageMode::small);
    EXPECT_EQ(small.huge_page_backed_bytes(), 0U);
    mx::coro::MappedBuffer empty(0, mx::coro::PageMode::huge);
    EXPECT_EQ(empty.data(), nullptr);
}

} // namespace
