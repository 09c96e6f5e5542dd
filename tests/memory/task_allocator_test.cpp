// Task allocator: size classes, the region heap, the worker-local free lists, and the allocator
// under a running runtime (cross-worker frees, oversized tasks).

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <set>
#include <thread>
#include <unordered_set>
#include <vector>

#include <mx/memory/task_allocator.h>
#include <mx/tasking/runtime.h>

#include "support/runtime_fixture.h"

namespace {

using mx::memory::RegionHeap;
using mx::memory::task_size_classes;
using mx::memory::TaskAllocator;
using mx::tasking::Annotation;
using mx::tasking::Task;
using mx::tasking::TaskContext;
using mx::tasking::TaskResult;
using mx::test::scaled;

// ---- size classes --------------------------------------------------------------------------

TEST(SizeClassTest, SmallestClassThatFits) {
    using mx::memory::size_class_of;
    EXPECT_EQ(size_class_of(1), 0);
    EXPECT_EQ(size_class_of(64), 0);
    EXPECT_EQ(size_class_of(65), 1);
    EXPECT_EQ(size_class_of(128), 1);
    EXPECT_EQ(size_class_of(129), 2);
    EXPECT_EQ(size_class_of(512), 3);
    EXPECT_EQ(size_class_of(1024), 4);
    EXPECT_EQ(size_class_of(1025), mx::memory::oversized_class);
    EXPECT_EQ(size_class_of(1U << 20U), mx::memory::oversized_class);
    for (std::uint8_t c = 0; c < mx::memory::size_class_count; ++c) {
        EXPECT_EQ(task_size_classes[c] % mx::system::cache_line_size, 0U) << "class " << int{c};
        EXPECT_EQ(size_class_of(task_size_classes[c]), c);
    }
    // A task header alone fits the smallest class.
    EXPECT_EQ(size_class_of(sizeof(Task)), 0);
}

// ---- region heap ---------------------------------------------------------------------------

/// Takes blocks from the heap as a vector.
std::vector<void *> take(RegionHeap &heap, std::uint8_t size_class, std::uint32_t count) {
    std::vector<void *> blocks(count, nullptr);
    const std::uint32_t taken = heap.take(size_class, blocks.data(), count);
    EXPECT_LE(taken, count);
    blocks.resize(taken);
    return blocks;
}

/// Hands `blocks` back.
void give_back(RegionHeap &heap, std::uint8_t size_class, const std::vector<void *> &blocks) {
    heap.give_back(size_class, blocks.data(), static_cast<std::uint32_t>(blocks.size()));
}

/// Blocks are cache-line aligned, pairwise disjoint and writable.
void expect_usable_blocks(const std::vector<void *> &blocks, std::uint8_t size_class) {
    const std::size_t size = task_size_classes[size_class];
    std::vector<std::uintptr_t> addresses;
    for (void *block : blocks) {
        addresses.push_back(reinterpret_cast<std::uintptr_t>(block));
        EXPECT_EQ(addresses.back() % mx::system::cache_line_size, 0U);
    }
    std::sort(addresses.begin(), addresses.end());
    for (std::size_t i = 1; i < addresses.size(); ++i) {
        EXPECT_GE(addresses[i] - addresses[i - 1], size) << "blocks overlap";
    }
    for (void *block : blocks) {
        std::fill_n(reinterpret_cast<std::byte *>(block), size, std::byte{0xAB});
    }
}

TEST(RegionHeapTest, TakeHandsOutDistinctAlignedBlocks) {
    RegionHeap heap{0};
    EXPECT_EQ(heap.memory_node(), 0);
    EXPECT_EQ(heap.reserved_bytes(), 0U) << "memory is taken lazily";
    for (std::uint8_t c = 0; c < mx::memory::size_class_count; ++c) {
        SCOPED_TRACE(int{c});
        const auto blocks = take(heap, c, 37);
        ASSERT_EQ(blocks.size(), 37U);
        expect_usable_blocks(blocks, c);
    }
    EXPECT_GE(heap.reserved_bytes(), std::size_t{2} << 20U);
}

TEST(RegionHeapTest, GivenBackBlocksAreTakenFirst) {
    RegionHeap heap{0};
    const auto first = take(heap, 1, 16);
    ASSERT_EQ(first.size(), 16U);
    const std::size_t reserved = heap.reserved_bytes();
    give_back(heap, 1, first);
    const auto again = take(heap, 1, 16);
    ASSERT_EQ(again.size(), 16U);
    EXPECT_EQ(std::set<void *>(first.begin(), first.end()), std::set<void *>(again.begin(), again.end()))
        << "returned blocks must be reused before new memory is carved";
    EXPECT_EQ(heap.reserved_bytes(), reserved);

    // Asking for more than was given back: every returned block comes back (possibly with
    // fresh ones), none twice.
    give_back(heap, 1, again);
    const auto more = take(heap, 1, 20);
    ASSERT_GE(more.size(), 16U);
    ASSERT_LE(more.size(), 20U);
    const std::set<void *> unique(more.begin(), more.end());
    EXPECT_EQ(unique.size(), more.size());
    EXPECT_EQ(
        std::count_if(more.begin(), more.end(),
                      [&first](void *b) { return std::find(first.begin(), first.end(), b) != first.end(); }),
        16);
    expect_usable_blocks(more, 1);
}

TEST(RegionHeapTest, GrowsBeyondOneChunk) {
    const std::size_t chunk = 64 * 1024;
    RegionHeap heap{0, chunk};
    // Several takes that together need more than one chunk, and one larger than a chunk.
    std::vector<void *> all;
    for (int i = 0; i < 4; ++i) {
        const auto blocks = take(heap, 4, 40); // 40 KiB each
        ASSERT_EQ(blocks.size(), 40U);
        all.insert(all.end(), blocks.begin(), blocks.end());
    }
    const auto big = take(heap, 4, 100); // 100 KiB > chunk
    ASSERT_EQ(big.size(), 100U);
    all.insert(all.end(), big.begin(), big.end());
    expect_usable_blocks(all, 4);
    EXPECT_GE(heap.reserved_bytes(), std::size_t{260} * 1024);
}

TEST(RegionHeapTest, ConcurrentTakeAndGiveBack) {
    RegionHeap heap{0};
    constexpr int thread_count = 4;
    const int rounds = static_cast<int>(scaled(2000));
    std::vector<std::vector<void *>> kept(thread_count);
    std::vector<std::thread> threads;
    for (int t = 0; t < thread_count; ++t) {
        threads.emplace_back([&heap, &kept, t, rounds] {
            for (int r = 0; r < rounds; ++r) {
                auto blocks = take(heap, 0, 8);
                if (blocks.empty()) {
                    ADD_FAILURE() << "the heap handed out no blocks";
                    return;
                }
                for (void *block : blocks) {
                    // Owned by this thread now: a data race here means two threads got one block.
                    *reinterpret_cast<std::uint64_t *>(reinterpret_cast<std::byte *>(block) + 8) =
                        static_cast<std::uint64_t>(t);
                }
                // Keep one, give the rest back as one list.
                kept[static_cast<std::size_t>(t)].push_back(blocks.back());
                blocks.pop_back();
                if (!blocks.empty()) {
                    give_back(heap, 0, blocks);
                }
            }
        });
    }
    for (auto &thread : threads) {
        thread.join();
    }
    std::unordered_set<void *> unique;
    for (int t = 0; t < thread_count; ++t) {
        for (void *block : kept[static_cast<std::size_t>(t)]) {
            EXPECT_TRUE(unique.insert(block).second) << "block handed out twice";
            EXPECT_EQ(*reinterpret_cast<std::uint64_t *>(reinterpret_cast<std::byte *>(block) + 8),
                      static_cast<std::uint64_t>(t));
        }
    }
    // Each round keeps one block; given-back blocks are reused, so little memory is carved.
    EXPECT_LE(heap.reserved_bytes(), std::size_t{4} << 20U);
}

// ---- worker-local allocator ----------------------------------------------------------------

TEST(TaskAllocatorTest, AllocateFreeIsLifo) {
    RegionHeap heap{0};
    TaskAllocator allocator{heap, 8};
    void *a = allocator.allocate(0);
    void *b = allocator.allocate(0);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_NE(a, b);
    allocator.free(a, 0);
    EXPECT_EQ(allocator.allocate(0), a) << "the most recently freed (warm) block comes back first";
    allocator.free(a, 0);
    allocator.free(b, 0);
    EXPECT_EQ(allocator.held(), 0) << "every block is back on a list";
    void *c = allocator.allocate(0);
    EXPECT_EQ(allocator.held(), 1);
    allocator.free(c, 0);
    allocator.flush();
    EXPECT_EQ(allocator.held(), 0);
}

TEST(TaskAllocatorTest, RefillsInBatches) {
    RegionHeap heap{0};
    constexpr std::uint32_t batch = 4;
    TaskAllocator allocator{heap, batch};
    EXPECT_EQ(allocator.refills(), 0U);
    std::vector<void *> blocks;
    for (std::uint32_t i = 0; i < batch; ++i) {
        blocks.push_back(allocator.allocate(2));
    }
    EXPECT_EQ(allocator.refills(), 1U);
    blocks.push_back(allocator.allocate(2));
    EXPECT_EQ(allocator.refills(), 2U);
    // Another size class has its own list.
    void *other = allocator.allocate(0);
    EXPECT_EQ(allocator.refills(), 3U);
    allocator.free(other, 0);
    for (void *block : blocks) {
        allocator.free(block, 2);
    }
    EXPECT_EQ(allocator.held(), 0);
    allocator.flush();
}

TEST(TaskAllocatorTest, LongFreeListsGoBackToTheHeapAndAreReused) {
    RegionHeap heap{0};
    constexpr std::uint32_t batch = 4;
    TaskAllocator producer{heap, batch};
    TaskAllocator consumer{heap, batch};
    // The producer allocates many blocks, the consumer frees them all (a producer/consumer
    // pattern): the consumer's list must not hoard them.
    std::vector<void *> blocks;
    for (int i = 0; i < 40; ++i) {
        blocks.push_back(producer.allocate(1));
    }
    const std::size_t reserved = heap.reserved_bytes();
    for (void *block : blocks) {
        consumer.free(block, 1);
    }
    // The producer gets blocks back from the heap instead of carving new ones.
    const std::uint64_t refills_before = producer.refills();
    std::set<void *> reused;
    for (int i = 0; i < 20; ++i) {
        reused.insert(producer.allocate(1));
    }
    EXPECT_GT(producer.refills(), refills_before);
    EXPECT_EQ(heap.reserved_bytes(), reserved);
    for (void *block : reused) {
        EXPECT_NE(std::find(blocks.begin(), blocks.end(), block), blocks.end())
            << "a fresh block was carved although freed ones were available";
    }
    for (void *block : reused) {
        producer.free(block, 1);
    }
    producer.flush();
    consumer.flush();
}

TEST(TaskAllocatorTest, BurstsUpToTwoBatchesStayOffTheHeap) {
    // A task that spawns a burst of tasks which all finish before the next burst (the YCSB batch
    // task): once both magazines are filled, no burst of up to two batches goes to the heap. (The
    // single list with a give-back bound that this replaced churned under that pattern when a
    // refill brought a large batch another worker had given back: the list overshot its bound,
    // the frees handed most of it back by walking it, the next burst refilled again.)
    RegionHeap heap{0};
    constexpr std::uint32_t batch = 8;
    TaskAllocator allocator{heap, batch};
    std::vector<void *> blocks;
    const auto burst = [&](std::uint32_t size) {
        for (std::uint32_t i = 0; i < size; ++i) {
            blocks.push_back(allocator.allocate(2));
        }
        for (void *block : blocks) {
            allocator.free(block, 2);
        }
        blocks.clear();
    };
    burst(2 * batch);
    const std::uint64_t refills = allocator.refills();
    const std::size_t reserved = heap.reserved_bytes();
    for (std::uint32_t round = 0; round < 50; ++round) {
        burst(batch / 2 + round % (2 * batch - batch / 2 + 1));
    }
    EXPECT_EQ(allocator.refills(), refills) << "a burst of at most two batches went to the heap";
    EXPECT_EQ(heap.reserved_bytes(), reserved);
    EXPECT_EQ(allocator.held(), 0);
    allocator.flush();
}

TEST(TaskAllocatorTest, AFreeingWorkerKeepsAtMostTwoBatches) {
    RegionHeap heap{0};
    constexpr std::uint32_t batch = 4;
    constexpr std::uint32_t total = 10 * batch;
    TaskAllocator producer{heap, batch};
    TaskAllocator consumer{heap, batch};
    std::vector<void *> blocks;
    for (std::uint32_t i = 0; i < total; ++i) {
        blocks.push_back(producer.allocate(1));
    }
    for (void *block : blocks) {
        consumer.free(block, 1);
    }
    EXPECT_EQ(consumer.held(), -static_cast<std::int64_t>(total)) << "every freed block is accounted for";
    // All but the consumer's two magazines went back to the heap: the producer (whose own
    // magazines are empty) gets exactly those again before any fresh block is carved.
    const std::size_t reserved = heap.reserved_bytes();
    std::vector<void *> again;
    for (std::uint32_t i = 0; i < total - 2 * batch; ++i) {
        again.push_back(producer.allocate(1));
        EXPECT_NE(std::find(blocks.begin(), blocks.end(), again.back()), blocks.end())
            << "block " << i << " was carved fresh: the consumer kept more than two batches";
    }
    EXPECT_EQ(std::set<void *>(again.begin(), again.end()).size(), again.size());
    EXPECT_EQ(heap.reserved_bytes(), reserved);
    for (void *block : again) {
        producer.free(block, 1);
    }
    producer.flush();
    consumer.flush();
}

TEST(TaskAllocatorTest, FlushHandsEverythingBack) {
    RegionHeap heap{0};
    TaskAllocator first{heap, 8};
    std::vector<void *> blocks;
    for (int i = 0; i < 8; ++i) {
        blocks.push_back(first.allocate(3));
    }
    for (void *block : blocks) {
        first.free(block, 3);
    }
    first.flush();
    TaskAllocator second{heap, 8};
    std::set<void *> taken;
    for (int i = 0; i < 8; ++i) {
        taken.insert(second.allocate(3));
    }
    EXPECT_EQ(taken, std::set<void *>(blocks.begin(), blocks.end()));
    for (void *block : taken) {
        second.free(block, 3);
    }
    second.flush();
}

// ---- the allocator inside a running runtime -------------------------------------------------

class AllocatorRuntimeTest : public mx::test::RuntimeFixture {};

/// One hop of a chain: allocated on one worker, sent to the next worker (chosen from the seed),
/// which removes it there. Records its own address on the worker that runs it.
class Hop final : public Task {
public:
    struct Shared {
        std::uint64_t seed;
        std::vector<std::vector<std::uintptr_t>> *addresses; // [worker], appended by that worker
        std::atomic<std::uint64_t> *hops;
    };
    Hop(const Shared *shared, std::uint32_t chain, std::uint32_t remaining) noexcept
        : _shared(shared), _chain(chain), _remaining(remaining) {}

    TaskResult execute(TaskContext &context) noexcept override {
        (*_shared->addresses)[context.worker_id()].push_back(reinterpret_cast<std::uintptr_t>(this));
        _shared->hops->fetch_add(1, std::memory_order_relaxed);
        if (_remaining == 0) {
            return TaskResult::remove();
        }
        auto *next = context.new_task<Hop>(_shared, _chain, _remaining - 1);
        next->annotate(static_cast<std::uint16_t>(mx::test::mix(_shared->seed, _chain, _remaining) %
                                                  context.worker_count()));
        // The successor is queued before this task is freed, so two blocks per chain are live.
        return TaskResult::successor_and_remove(next);
    }

private:
    const Shared *_shared;
    std::uint32_t _chain;
    std::uint32_t _remaining;
};

TEST_P(AllocatorRuntimeTest, CrossWorkerFreesReuseBlocks) {
    constexpr std::uint32_t batch = 8;
    auto config = shape_config();
    config.allocator_batch = batch;
    start_runtime(config);

    const std::uint64_t seed = mx::test::test_seed();
    const std::uint16_t n = workers();
    constexpr std::uint32_t chains_per_worker = 4;
    const std::uint32_t length = scaled(800, 4);
    std::vector<std::vector<std::uintptr_t>> addresses(n);
    std::atomic<std::uint64_t> hops{0};
    const Hop::Shared shared{seed, &addresses, &hops};

    for (std::uint16_t w = 0; w < n; ++w) {
        runtime().spawn(
            [&shared, w, length](TaskContext &context) {
                for (std::uint32_t c = 0; c < chains_per_worker; ++c) {
                    context.spawn(*context.new_task<Hop>(&shared, w * chains_per_worker + c, length));
                }
            },
            Annotation{.target_worker = w});
    }
    runtime().wait();

    const std::uint64_t chains = std::uint64_t{n} * chains_per_worker;
    const std::uint64_t total = chains * (length + 1);
    ASSERT_EQ(hops.load(), total);
    std::unordered_set<std::uintptr_t> distinct;
    for (const auto &list : addresses) {
        distinct.insert(list.begin(), list.end());
    }
    // Blocks ever carved for this size class are bounded by what the free lists may cache
    // (at most 4 batches each plus a fresh batch, for n workers and the outside allocator) plus
    // the blocks live at once; a runtime that never reuses freed blocks needs `total`.
    const std::uint64_t bound = (std::uint64_t{n} + 1) * 5 * batch + 2 * chains + n;
    EXPECT_LE(distinct.size(), bound)
        << total << " tasks used " << distinct.size() << " distinct blocks: freed blocks are not reused";
    EXPECT_LT(bound, total) << "test too small to show reuse";

    std::uint64_t refills = 0;
    for (const auto &stats : runtime().statistics()) {
        refills += stats.allocator_refills;
    }
    EXPECT_GE(refills, 1U);
}

/// A lambda task far larger than the biggest size class.
struct LargePayload {
    std::array<std::uint8_t, 1500> bytes;
};

std::uint32_t checksum(const LargePayload &payload) noexcept {
    return std::accumulate(payload.bytes.begin(), payload.bytes.end(), std::uint32_t{0});
}

TEST_P(AllocatorRuntimeTest, OversizedTasksWorkAndAreCounted) {
    LargePayload payload{};
    for (std::size_t i = 0; i < payload.bytes.size(); ++i) {
        payload.bytes[i] = static_cast<std::uint8_t>(i * 7U);
    }
    const std::uint32_t expected_sum = checksum(payload);
    std::atomic<std::uint64_t> ran{0};
    std::atomic<std::uint64_t> corrupt{0};
    const auto make = [&ran, &corrupt, expected_sum](const LargePayload &data) {
        return [&ran, &corrupt, expected_sum, data](TaskContext &) {
            if (checksum(data) != expected_sum) {
                corrupt.fetch_add(1, std::memory_order_relaxed);
            }
            ran.fetch_add(1, std::memory_order_relaxed);
        };
    };
    static_assert(sizeof(mx::tasking::LambdaTask<decltype(make(payload))>) > task_size_classes.back());

    runtime().wait();
    Task *lonely = runtime().new_task(make(payload));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(lonely) % mx::system::cache_line_size, 0U);
    EXPECT_EQ(runtime().live_tasks(), 1U) << "oversized tasks count as live";
    runtime().delete_task(*lonely);
    EXPECT_EQ(runtime().live_tasks(), 0U);

    const std::uint32_t count = scaled(200);
    for (std::uint32_t i = 0; i < count; ++i) {
        runtime().spawn(make(payload)); // allocated outside, freed on a worker
    }
    runtime().spawn([&make, &payload, count](TaskContext &context) {
        for (std::uint32_t i = 0; i < count; ++i) {
            context.spawn(
                make(payload), // allocated on a worker, freed on another
                Annotation{.target_worker = static_cast<std::uint16_t>(i % context.worker_count())});
        }
    });
    runtime().wait();
    EXPECT_EQ(ran.load(), 2U * count);
    EXPECT_EQ(corrupt.load(), 0U);
}

TEST_P(AllocatorRuntimeTest, OutsideAllocationsFreedOnWorkers) {
    // Tasks allocated by outside threads are removed by workers: the blocks migrate to the
    // workers' lists and must still be accounted for.
    const std::uint32_t count = scaled(4000);
    std::atomic<std::uint64_t> ran{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
        threads.emplace_back([this, &ran, count] {
            for (std::uint32_t i = 0; i < count; ++i) {
                runtime().spawn([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
            }
        });
    }
    for (auto &thread : threads) {
        thread.join();
    }
    runtime().wait();
    EXPECT_EQ(ran.load(), 2U * count);
    EXPECT_EQ(runtime().live_tasks(), 0U);
}

MX_INSTANTIATE_RUNTIME_SUITE(AllocatorRuntimeTest);

} // namespace
