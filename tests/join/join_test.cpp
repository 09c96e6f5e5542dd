// Radix join: the classic baseline and the task-based join return exactly what a textbook hash
// join returns, over sizes, seeds, radix bits, passes, write combining and fragment capacities,
// including empty relations, all-duplicate keys and skew. Seeds are in the test names for replay.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "mx/join/classic_radix_join.h"
#include "mx/join/micro_radix_join.h"
#include "mx/join/relation.h"
#include "mx/tasking/runtime.h"

namespace {

using mx::join::ClassicJoinConfig;
using mx::join::ClassicRadixJoin;
using mx::join::JoinResult;
using mx::join::JoinTimings;
using mx::join::MicroJoinConfig;
using mx::join::MicroRadixJoin;
using mx::join::Tuple;
using mx::join::TupleBuffer;

struct Workload {
    std::string name;
    TupleBuffer build;
    TupleBuffer probe;
};

TupleBuffer from_keys(const std::vector<std::uint64_t> &keys, std::uint64_t seed) {
    TupleBuffer relation{keys.size()};
    std::mt19937_64 random{seed};
    for (std::size_t i = 0; i < keys.size(); ++i) {
        relation[i] = Tuple{keys[i], random()};
    }
    return relation;
}

std::vector<Workload> workloads() {
    std::vector<Workload> result;
    for (const std::uint64_t seed : {1ULL, 42ULL, 977ULL}) {
        for (const std::size_t build : {std::size_t{1}, std::size_t{100}, std::size_t{4099}}) {
            const std::size_t probe = build * 5 + 3;
            result.push_back({"workload_a_seed" + std::to_string(seed) + "_" + std::to_string(build),
                              mx::join::make_build_relation(build, seed),
                              mx::join::make_probe_relation(probe, build, seed)});
        }
    }
    result.push_back({"empty_both", TupleBuffer{}, TupleBuffer{}});
    result.push_back({"empty_build", TupleBuffer{}, mx::join::make_probe_relation(500, 0, 7)});
    result.push_back({"empty_probe", mx::join::make_build_relation(500, 7), TupleBuffer{}});
    result.push_back({"zipf_0.9", mx::join::make_build_relation(3000, 11),
                      mx::join::make_probe_relation(20000, 3000, 11, 0.9)});
    result.push_back({"zipf_0.5", mx::join::make_build_relation(2048, 12),
                      mx::join::make_probe_relation(10000, 2048, 12, 0.5)});
    // Every key equal on both sides: |R| x |S| matches, one partition, one long chain.
    result.push_back({"all_duplicates", from_keys(std::vector<std::uint64_t>(150, 77), 3),
                      from_keys(std::vector<std::uint64_t>(90, 77), 4)});
    // Duplicates on both sides, keys spread over 64 bits (hash bits above the radix bits).
    {
        std::mt19937_64 random{5};
        std::vector<std::uint64_t> build_keys(3000);
        std::vector<std::uint64_t> probe_keys(7000);
        std::vector<std::uint64_t> domain(500);
        for (auto &key : domain) {
            key = random();
        }
        for (auto &key : build_keys) {
            key = domain[random() % domain.size()];
        }
        for (auto &key : probe_keys) {
            key = random() % 3 == 0 ? random() : domain[random() % domain.size()];
        }
        result.push_back({"random_keys_with_duplicates", from_keys(build_keys, 8), from_keys(probe_keys, 9)});
    }
    return result;
}

const std::vector<Workload> &all_workloads() {
    static const std::vector<Workload> cached = workloads();
    return cached;
}

TEST(ReferenceJoin, CountsEveryPairOfEqualKeys) {
    const TupleBuffer build = from_keys({1, 2, 2, 3}, 1);
    const TupleBuffer probe = from_keys({2, 3, 3, 4}, 2);
    EXPECT_EQ(mx::join::reference_join(build.span(), probe.span()).matches, 4U);
    // Workload A: every probe tuple finds exactly one build tuple.
    const TupleBuffer a_build = mx::join::make_build_relation(1000, 3);
    const TupleBuffer a_probe = mx::join::make_probe_relation(5000, 1000, 3, 0.8);
    EXPECT_EQ(mx::join::reference_join(a_build.span(), a_probe.span()).matches, 5000U);
}

TEST(ClassicRadixJoin, MatchesReference) {
    for (const Workload &workload : all_workloads()) {
        const JoinResult expected = mx::join::reference_join(workload.build.span(), workload.probe.span());
        for (const unsigned threads : {1U, 2U, 3U}) {
            for (const unsigned bits : {1U, 4U, 7U}) {
                for (const unsigned passes : {1U, 2U}) {
                    for (const bool combining : {false, true}) {
                        ClassicRadixJoin join{workload.build.span(), workload.probe.span(),
                                              ClassicJoinConfig{threads, bits, passes, combining}};
                        const JoinResult first = join.run();
                        JoinTimings timings;
                        const JoinResult second = join.run(&timings); // buffers are reusable
                        const std::string where = workload.name + " threads=" + std::to_string(threads) +
                                                  " bits=" + std::to_string(bits) +
                                                  " passes=" + std::to_string(passes) +
                                                  " wc=" + std::to_string(combining);
                        EXPECT_EQ(first, expected) << where;
                        EXPECT_EQ(second, expected) << where;
                    }
                }
            }
        }
    }
}

class MicroRadixJoinTest : public ::testing::TestWithParam<int> {};

TEST_P(MicroRadixJoinTest, MatchesReference) {
    mx::tasking::RuntimeConfig config;
    config.workers = static_cast<std::uint16_t>(GetParam());
    mx::tasking::Runtime runtime{config};
    for (const Workload &workload : all_workloads()) {
        const JoinResult expected = mx::join::reference_join(workload.build.span(), workload.probe.span());
        // (radix bits, fragment capacity): tiny fragments stress the spawn path, large ones are
        // the benchmark's settings.
        // Capacities that are not a multiple of 4 tuples fall back to plain stores.
        for (const auto &[bits, capacity] : {std::pair{1U, 7U}, std::pair{5U, 1U}, std::pair{3U, 4U},
                                             std::pair{9U, 128U}, std::pair{6U, 256U}}) {
            for (const bool combining : {false, true}) {
                for (const bool fuse : {false, true}) {
                    // Chunks of 1 (scattered fragments), 3, 6 and 8 fragments per partition.
                    const std::uint32_t chunk = 1U + (combining ? 2U : 0U) + (fuse ? 5U : 0U);
                    // Fused: table slots per worker, none (arena only), one (most tables fall
                    // back to the arena while a slot is taken) or the default.
                    const std::uint32_t slots = !fuse ? 0U : combining ? 64U : capacity % 2 == 0 ? 1U : 0U;
                    // Tasks over runs of up to 1, 2 or 8 adjacent fragments.
                    const std::uint32_t per_task = !fuse ? 1U : combining ? 2U : 8U;
                    // Morsels of 64 and 1000 tuples: producers carry their open fragments,
                    // lines and runs from morsel to morsel, and share the relations.
                    const std::uint32_t morsel = combining ? 64U : 1000U;
                    MicroRadixJoin join{
                        runtime, workload.build.span(), workload.probe.span(),
                        MicroJoinConfig{bits, capacity, combining, fuse, chunk, slots, per_task, morsel}};
                    const JoinResult first = join.run();
                    JoinTimings timings;
                    const JoinResult second = join.run(&timings); // squads and arenas are reusable
                    const std::string where =
                        workload.name + " bits=" + std::to_string(bits) +
                        " capacity=" + std::to_string(capacity) + " wc=" + std::to_string(combining) +
                        " fuse=" + std::to_string(fuse) + " chunk=" + std::to_string(chunk) +
                        " slots=" + std::to_string(slots) + " per_task=" + std::to_string(per_task) +
                        " morsel=" + std::to_string(morsel);
                    EXPECT_EQ(first, expected) << where;
                    EXPECT_EQ(second, expected) << where;
                    EXPECT_EQ(runtime.live_tasks(), 0U) << where;
                    // The partition phase ends (in the last producer task, fused) before the run
                    // does, and the phased schedule's build and probe phases fit in the rest
                    // (build_probe_ns = total_ns - partition_ns, so their sum would prove nothing).
                    EXPECT_LE(timings.partition_ns, timings.total_ns) << where;
                    EXPECT_LE(timings.build_ns + timings.probe_ns, timings.build_probe_ns) << where;
                }
            }
        }
    }
}

// Squads run each fragment task exactly once: with distinct keys on both sides, the number of
// matches counts every probe tuple exactly once, and so does a checksum over probe payloads only.
TEST_P(MicroRadixJoinTest, EveryFragmentTaskRunsExactlyOnce) {
    mx::tasking::RuntimeConfig config;
    config.workers = static_cast<std::uint16_t>(GetParam());
    mx::tasking::Runtime runtime{config};
    const std::size_t size = 20000;
    const TupleBuffer build = mx::join::make_build_relation(size, 99);
    TupleBuffer probe{size};
    for (std::size_t i = 0; i < size; ++i) {
        probe[i] = Tuple{build[size - 1 - i].key, i};
    }
    const JoinResult expected = mx::join::reference_join(build.span(), probe.span());
    ASSERT_EQ(expected.matches, size);
    for (const bool fuse : {false, true}) {
        MicroRadixJoin join{runtime, build.span(), probe.span(), MicroJoinConfig{6, 16, true, fuse}};
        for (int round = 0; round < 3; ++round) {
            EXPECT_EQ(join.run(), expected) << "round " << round << " fuse=" << fuse;
        }
        EXPECT_EQ(runtime.live_tasks(), 0U);
    }
}

INSTANTIATE_TEST_SUITE_P(Workers, MicroRadixJoinTest, ::testing::Values(1, 2, 4), [](const auto &param_info) {
    return std::to_string(param_info.param) + "_workers";
});

} // namespace
