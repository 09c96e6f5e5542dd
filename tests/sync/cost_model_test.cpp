// The parts of synchronization that need no running tasks: the cost model's table, the tag
// encoding of ResourcePtr, the weighted round-robin worker mapping, and the latches themselves
// under plain threads.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include <mx/sync/primitives.h>
#include <mx/tasking/resource.h>
#include <mx/tasking/runtime.h>

#include "sync_support.h"

namespace {

using mx::sync::Primitive;
using mx::tasking::AccessFrequency;
using mx::tasking::choose_primitive;
using mx::tasking::Isolation;
using mx::tasking::ResourceAnnotation;
using mx::tasking::ResourcePtr;
using mx::tasking::Runtime;
using mx::tasking::RuntimeConfig;

const std::vector<Primitive> all_primitives{Primitive::none,
                                            Primitive::spinlock,
                                            Primitive::rw_latch,
                                            Primitive::optimistic_latched,
                                            Primitive::optimistic_scheduled,
                                            Primitive::htm,
                                            Primitive::scheduling};
const std::vector<AccessFrequency> all_frequencies{AccessFrequency::unused, AccessFrequency::normal,
                                                   AccessFrequency::high, AccessFrequency::excessive};
const std::vector<double> read_ratios{0.0, 0.1, 0.19, 0.2, 0.5, 0.95, 1.0};

/// The table of dissertation 4.3 as this runtime implements it, written out independently of
/// choose_primitive so that a change to the model shows up here.
Primitive expected_primitive(Isolation isolation, AccessFrequency frequency, double read_ratio, bool htm) {
    switch (isolation) {
    case Isolation::none:
        return Primitive::none;
    case Isolation::exclusive:
        return htm ? Primitive::htm : Primitive::scheduling;
    case Isolation::exclusive_writer:
        break;
    }
    if (frequency == AccessFrequency::unused || frequency == AccessFrequency::normal) {
        return Primitive::optimistic_latched;
    }
    return read_ratio < 0.2 ? Primitive::scheduling : Primitive::optimistic_scheduled;
}

TEST(CostModel, EveryAnnotationCombinationMatchesTheTable) {
    for (const bool htm : {false, true}) {
        for (const Isolation isolation :
             {Isolation::none, Isolation::exclusive, Isolation::exclusive_writer}) {
            for (const AccessFrequency frequency : all_frequencies) {
                for (const double ratio : read_ratios) {
                    ResourceAnnotation annotation;
                    annotation.isolation = isolation;
                    annotation.frequency = frequency;
                    annotation.read_ratio = ratio;
                    EXPECT_EQ(choose_primitive(annotation, htm),
                              expected_primitive(isolation, frequency, ratio, htm))
                        << "isolation " << static_cast<int>(isolation) << ", frequency "
                        << static_cast<int>(frequency) << ", read ratio " << ratio << ", htm " << htm;
                }
            }
        }
    }
}

TEST(CostModel, ForcedPrimitiveWinsOverTheModelAndHtmFallsBackWithoutRtm) {
    for (const bool htm : {false, true}) {
        for (const Primitive primitive : all_primitives) {
            for (const Isolation isolation :
                 {Isolation::none, Isolation::exclusive, Isolation::exclusive_writer}) {
                ResourceAnnotation annotation;
                annotation.isolation = isolation;
                annotation.frequency = AccessFrequency::excessive;
                annotation.read_ratio = 0.9;
                annotation.primitive = primitive;
                const Primitive expected =
                    primitive == Primitive::htm && !htm ? Primitive::spinlock : primitive;
                EXPECT_EQ(choose_primitive(annotation, htm), expected)
                    << mx::sync::to_string(primitive) << ", htm " << htm;
            }
        }
    }
}

TEST(CostModel, PrimitiveNamesAreDistinct) {
    std::map<std::string, Primitive> names;
    for (const Primitive primitive : all_primitives) {
        const std::string name = mx::sync::to_string(primitive);
        EXPECT_NE(name, "unknown");
        EXPECT_TRUE(names.emplace(name, primitive).second) << name;
    }
    EXPECT_EQ(names.size(), mx::sync::primitive_count);
}

TEST(TagEncoding, RoundTripsEveryPrimitiveAndDomainRange) {
    alignas(64) static std::uint64_t object[8]{};
    for (const Primitive primitive : all_primitives) {
        for (const std::uint16_t domain : std::vector<std::uint16_t>{0, 1, 2, 7, 63, 4095, 8191}) {
            const std::uint16_t tag = mx::tasking::detail::make_tag(primitive, domain);
            EXPECT_EQ(mx::tasking::detail::tag_primitive(tag), primitive);
            EXPECT_EQ(mx::tasking::detail::tag_domain(tag), domain);
            const ResourcePtr resource{object, tag};
            EXPECT_EQ(resource.get(), static_cast<void *>(object)) << "the tag must not disturb the address";
            EXPECT_EQ(resource.tag(), tag);
            EXPECT_EQ(mx::tasking::primitive_of(resource), primitive);
            EXPECT_EQ(mx::tasking::domain_of(resource), domain);
        }
    }
}

TEST(TagEncoding, PlainPointerMeansNoSynchronization) {
    int object = 0;
    const ResourcePtr resource{&object};
    EXPECT_EQ(mx::tasking::primitive_of(resource), Primitive::none);
    EXPECT_EQ(mx::tasking::domain_of(resource), 0U);
    EXPECT_EQ(resource.get<int>(), &object);
}

struct Payload {
    std::uint64_t a{0};
    std::uint64_t b{0};
};

class ResourceCreation : public ::testing::TestWithParam<mx::sync_test::Shape> {};

TEST_P(ResourceCreation, TagHeaderAndCostModelAgree) {
    Runtime runtime{mx::sync_test::config_of(GetParam())};
    std::vector<ResourcePtr> resources;
    for (const Isolation isolation : {Isolation::none, Isolation::exclusive, Isolation::exclusive_writer}) {
        for (const AccessFrequency frequency : all_frequencies) {
            for (const double ratio : read_ratios) {
                ResourceAnnotation annotation;
                annotation.isolation = isolation;
                annotation.frequency = frequency;
                annotation.read_ratio = ratio;
                const ResourcePtr resource = runtime.new_resource<Payload>(annotation, Payload{1, 2});
                EXPECT_EQ(mx::tasking::primitive_of(resource),
                          choose_primitive(annotation, runtime.htm_available()));
                EXPECT_LT(mx::tasking::domain_of(resource), runtime.domain_count());
                EXPECT_LT(runtime.owner_of(resource), runtime.worker_count());
                const auto &header = mx::tasking::detail::header_of(resource);
                EXPECT_EQ(header.domain, mx::tasking::domain_of(resource));
                EXPECT_EQ(header.object_size, sizeof(Payload));
                EXPECT_EQ(header.state.load(), mx::tasking::detail::ResourceHeader::alive);
                EXPECT_EQ(reinterpret_cast<std::uintptr_t>(resource.get()) % mx::system::cache_line_size, 0U);
                EXPECT_EQ(resource.get<Payload>()->a, 1U);
                EXPECT_EQ(resource.get<Payload>()->b, 2U);
                resources.push_back(resource);
            }
        }
    }
    for (const ResourcePtr resource : resources) {
        runtime.delete_resource(resource);
    }
}

TEST_P(ResourceCreation, ForcedWorkerIsHonouredAndAMissingOneThrows) {
    Runtime runtime{mx::sync_test::config_of(GetParam())};
    for (std::uint16_t w = 0; w < runtime.worker_count(); ++w) {
        ResourceAnnotation annotation;
        annotation.worker = w;
        const ResourcePtr resource = runtime.new_resource<Payload>(annotation);
        EXPECT_EQ(runtime.owner_of(resource), w) << "the resource's domain starts on the forced worker";
        runtime.delete_resource(resource);
    }
    ResourceAnnotation missing;
    missing.worker = runtime.worker_count();
    EXPECT_THROW(static_cast<void>(runtime.new_resource<Payload>(missing)), mx::tasking::ConfigError);
}

TEST_P(ResourceCreation, WeightedRoundRobinSpreadsResourcesByFrequency) {
    Runtime runtime{mx::sync_test::config_of(GetParam())};
    const std::uint16_t workers = runtime.worker_count();
    const std::uint32_t domains = runtime.domain_count();
    ASSERT_EQ(domains % workers, 0U) << "every worker starts with the same number of domains";
    ResourceAnnotation normal;
    normal.frequency = AccessFrequency::normal;

    // Equal weights: every domain, and so every worker, gets the same number of resources.
    std::vector<ResourcePtr> resources;
    std::vector<std::uint32_t> per_domain(domains, 0);
    std::vector<std::uint32_t> per_worker(workers, 0);
    const std::uint32_t rounds = 5;
    for (std::uint32_t i = 0; i < rounds * domains; ++i) {
        resources.push_back(runtime.new_resource<Payload>(normal));
        ++per_domain[mx::tasking::domain_of(resources.back())];
        ++per_worker[runtime.owner_of(resources.back())];
    }
    for (std::uint32_t d = 0; d < domains; ++d) {
        EXPECT_EQ(per_domain[d], rounds) << "domain " << d;
    }
    for (std::uint16_t w = 0; w < workers; ++w) {
        EXPECT_EQ(per_worker[w], rounds * domains / workers) << "worker " << w;
    }
    for (const ResourcePtr resource : resources) {
        runtime.delete_resource(resource);
    }
    resources.clear();

    // Deleting released the weight: one excessive resource (weight 8) then normal ones (weight
    // 1) fill the other domains first, so the excessive one's domain gets no normal resource
    // until the others carry the same weight.
    ResourceAnnotation excessive;
    excessive.frequency = AccessFrequency::excessive;
    const ResourcePtr hot = runtime.new_resource<Payload>(excessive);
    const std::uint16_t hot_domain = mx::tasking::domain_of(hot);
    std::uint32_t on_hot_domain = 0;
    for (std::uint32_t i = 0; i < 8U * (domains - 1U); ++i) {
        resources.push_back(runtime.new_resource<Payload>(normal));
        on_hot_domain += mx::tasking::domain_of(resources.back()) == hot_domain ? 1U : 0U;
    }
    EXPECT_EQ(on_hot_domain, 0U)
        << "a domain with a hot resource must not get more until the others catch up";
    // All weights are now 8: the rotation continues evenly.
    std::vector<std::uint32_t> next(domains, 0);
    for (std::uint32_t i = 0; i < domains; ++i) {
        resources.push_back(runtime.new_resource<Payload>(normal));
        ++next[mx::tasking::domain_of(resources.back())];
    }
    EXPECT_TRUE(std::all_of(next.begin(), next.end(), [](std::uint32_t n) { return n == 1; }));
    runtime.delete_resource(hot);
    for (const ResourcePtr resource : resources) {
        runtime.delete_resource(resource);
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ResourceCreation, ::testing::ValuesIn(mx::sync_test::shapes()),
                         mx::sync_test::shape_name);

// --- the latches under plain threads -------------------------------------------------------

constexpr int thread_count = 4;

TEST(Latches, SpinlockCounterAddsUp) {
    mx::sync::Spinlock lock;
    std::uint64_t counter = 0;
    const std::uint32_t per_thread = mx::sync_test::scaled(20'000);
    std::vector<std::thread> threads;
    for (int t = 0; t < thread_count; ++t) {
        threads.emplace_back([&] {
            for (std::uint32_t i = 0; i < per_thread; ++i) {
                lock.lock();
                ++counter;
                lock.unlock();
            }
        });
    }
    for (auto &thread : threads) {
        thread.join();
    }
    EXPECT_EQ(counter, std::uint64_t{per_thread} * thread_count);
    EXPECT_FALSE(lock.is_locked());
    EXPECT_TRUE(lock.try_lock());
    EXPECT_FALSE(lock.try_lock());
    lock.unlock();
}

TEST(Latches, RwLatchWritersExcludeReaders) {
    mx::sync::RwLatch latch;
    std::uint64_t a = 0;
    std::uint64_t b = 0;
    std::atomic<std::uint64_t> torn{0};
    const std::uint32_t per_thread = mx::sync_test::scaled(10'000);
    std::vector<std::thread> threads;
    for (int t = 0; t < thread_count; ++t) {
        threads.emplace_back([&, t] {
            for (std::uint32_t i = 0; i < per_thread; ++i) {
                if ((i + static_cast<std::uint32_t>(t)) % 4 == 0) {
                    latch.lock();
                    ++a;
                    ++b;
                    latch.unlock();
                } else {
                    latch.lock_shared();
                    if (a != b) {
                        torn.fetch_add(1, std::memory_order_relaxed);
                    }
                    latch.unlock_shared();
                }
            }
        });
    }
    for (auto &thread : threads) {
        thread.join();
    }
    EXPECT_EQ(torn.load(), 0U);
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, std::uint64_t{per_thread} * thread_count / 4);
}

TEST(Latches, OptimisticVersionValidatesOnlyUntouchedReads) {
    mx::sync::OptimisticVersion version;
    const std::uint64_t v0 = version.read_begin();
    EXPECT_EQ(v0 % 2, 0U);
    EXPECT_TRUE(version.validate(v0));
    version.write_lock();
    EXPECT_EQ(version.load() % 2, 1U) << "a writer inside makes the version odd";
    EXPECT_EQ(version.read_begin(4) % 2, 1U) << "read_begin gives up with an odd version";
    version.write_end();
    EXPECT_FALSE(version.validate(v0)) << "a write in between must fail validation";
    const std::uint64_t v1 = version.read_begin();
    version.write_begin_exclusive();
    version.write_end();
    EXPECT_FALSE(version.validate(v1));
    EXPECT_EQ(version.load(), v1 + 2);
}

TEST(Latches, OptimisticVersionSeqlockNeverValidatesATornRead) {
    mx::sync::OptimisticVersion version;
    // Seqlock-style data: read racily by design, so atomics with relaxed order (plain fields
    // would be a data race that TSan reports; the runtime's own readers use its ignore-reads
    // annotations instead).
    std::atomic<std::uint64_t> a{0};
    std::atomic<std::uint64_t> b{0};
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> validated{0};
    std::atomic<std::uint64_t> torn{0};
    const std::uint32_t writes = mx::sync_test::scaled(20'000);
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
        threads.emplace_back([&] {
            for (std::uint32_t i = 0; i < writes; ++i) {
                version.write_lock();
                a.store(a.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
                b.store(b.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
                version.write_end();
            }
        });
    }
    for (int t = 0; t < 2; ++t) {
        threads.emplace_back([&] {
            // Each reader validates at least once (once the writers are done the version is
            // stable), so a reader thread that starts late still checks something.
            bool mine = false;
            while (!done.load(std::memory_order_acquire) || !mine) {
                const std::uint64_t v = version.read_begin();
                if (v % 2 != 0) {
                    continue;
                }
                const std::uint64_t x = a.load(std::memory_order_relaxed);
                const std::uint64_t y = b.load(std::memory_order_relaxed);
                if (version.validate(v)) {
                    mine = true;
                    validated.fetch_add(1, std::memory_order_relaxed);
                    if (x != y) {
                        torn.fetch_add(1, std::memory_order_relaxed);
                    }
                }
            }
        });
    }
    threads[0].join();
    threads[1].join();
    done.store(true, std::memory_order_release);
    threads[2].join();
    threads[3].join();
    EXPECT_EQ(torn.load(), 0U);
    EXPECT_GT(validated.load(), 0U);
    EXPECT_EQ(a.load(), 2U * writes);
}

TEST(Latches, HtmDetectionIsStableAndOffUnderTsan) {
    const bool first = mx::sync::htm_available();
    EXPECT_EQ(mx::sync::htm_available(), first);
    if (mx::sync_test::tsan_build) {
        EXPECT_FALSE(first) << "ThreadSanitizer cannot follow transactions";
    }
    RuntimeConfig config;
    config.workers = 1;
    Runtime runtime{config};
    EXPECT_EQ(runtime.htm_available(), first);
}

} // namespace
