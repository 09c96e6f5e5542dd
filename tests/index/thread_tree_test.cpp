// The thread-based baselines (optimistic and reader/writer latched): threads with disjoint key
// sets check every result against their own std::map oracle while sharing leaves and splits.

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "mx/index/blinktree/thread_tree.h"
#include "support/runtime_fixture.h"

namespace {

std::vector<std::pair<mx::index::blinktree::Key, mx::index::blinktree::Value>>
as_vector(const std::map<mx::index::blinktree::Key, mx::index::blinktree::Value> &map) {
    return {map.begin(), map.end()};
}

using mx::index::blinktree::Key;
using mx::index::blinktree::OptimisticLatch;
using mx::index::blinktree::SharedLatch;
using mx::index::blinktree::ThreadBLinkTree;
using mx::index::blinktree::TreeShape;
using mx::index::blinktree::Value;

template <class Tree>
void stress(std::uint64_t seed) {
    constexpr std::uint32_t threads = 4;
    constexpr std::uint32_t keys_per_thread = 3000;
    const std::uint32_t steps = mx::test::scaled(20000, 8);
    Tree tree;
    std::vector<std::map<Key, Value>> oracles(threads);
    std::vector<std::string> errors(threads);
    std::vector<std::thread> workers;
    for (std::uint32_t t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            auto &oracle = oracles[t];
            std::vector<std::pair<Key, Value>> buffer(16);
            for (std::uint32_t step = 0; step < steps && errors[t].empty(); ++step) {
                const std::uint64_t r = mx::test::mix(seed, t, step);
                const Key key = (r >> 8U) % keys_per_thread * threads + t;
                const Value value = mx::test::mix(r);
                const auto kind = static_cast<std::uint32_t>(r % 100);
                if (kind < 45) {
                    if (tree.insert(key, value) != oracle.emplace(key, value).second) {
                        errors[t] = "insert " + std::to_string(key);
                    }
                } else if (kind < 60) {
                    const bool present = oracle.contains(key);
                    if (present) {
                        oracle[key] = value;
                    }
                    if (tree.update(key, value) != present) {
                        errors[t] = "update " + std::to_string(key);
                    }
                } else if (kind < 70) {
                    if (tree.remove(key) != (oracle.erase(key) == 1)) {
                        errors[t] = "remove " + std::to_string(key);
                    }
                } else if (kind < 97) {
                    const auto found = tree.lookup(key);
                    const auto it = oracle.find(key);
                    if (found.has_value() != (it != oracle.end()) || (found && *found != it->second)) {
                        errors[t] = "lookup " + std::to_string(key);
                    }
                } else {
                    const std::uint32_t count = tree.scan(key, 16, buffer.data());
                    auto it = oracle.lower_bound(key);
                    for (std::uint32_t i = 0; i < count && errors[t].empty(); ++i) {
                        if (buffer[i].first % threads != t) {
                            continue;
                        }
                        if (it == oracle.end() || it->first != buffer[i].first ||
                            it->second != buffer[i].second) {
                            errors[t] = "scan from " + std::to_string(key);
                        }
                        ++it;
                    }
                    if (errors[t].empty() && it != oracle.end() &&
                        (count < 16 || it->first <= buffer[count - 1].first)) {
                        errors[t] = "scan missed a key from " + std::to_string(key);
                    }
                }
            }
        });
    }
    for (auto &worker : workers) {
        worker.join();
    }
    for (const auto &error : errors) {
        EXPECT_EQ(error, "");
    }
    TreeShape shape;
    EXPECT_EQ(tree.check(&shape), "");
    std::map<Key, Value> all;
    for (const auto &oracle : oracles) {
        all.insert(oracle.begin(), oracle.end());
    }
    EXPECT_EQ(tree.entries(), as_vector(all));
    EXPECT_GE(shape.height, 3U);
}

TEST(ThreadBLinkTree, OptimisticThreadsMatchTheirOracles) {
    stress<ThreadBLinkTree<OptimisticLatch, 256>>(mx::test::test_seed());
}
TEST(ThreadBLinkTree, LatchedThreadsMatchTheirOracles) {
    stress<ThreadBLinkTree<SharedLatch, 256>>(mx::test::test_seed());
}
TEST(ThreadBLinkTree, DefaultNodeSizeOptimistic) {
    stress<ThreadBLinkTree<OptimisticLatch>>(mx::test::test_seed());
}

} // namespace
