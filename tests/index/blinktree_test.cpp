// The task-based B-link tree: sequential behaviour, concurrent clients checked against per-client
// std::map oracles, structural invariants after every run, with every forced primitive.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "mx/index/blinktree/tree.h"
#include "support/runtime_fixture.h"

namespace {

std::vector<std::pair<mx::index::blinktree::Key, mx::index::blinktree::Value>>
as_vector(const std::map<mx::index::blinktree::Key, mx::index::blinktree::Value> &map) {
    return {map.begin(), map.end()};
}

using mx::index::blinktree::BLinkTree;
using mx::index::blinktree::Key;
using mx::index::blinktree::Listener;
using mx::index::blinktree::Operation;
using mx::index::blinktree::OpResult;
using mx::index::blinktree::Request;
using mx::index::blinktree::TreeConfig;
using mx::index::blinktree::TreeShape;
using mx::index::blinktree::Value;
using mx::sync::Primitive;
using mx::tasking::Runtime;
using mx::tasking::RuntimeConfig;
using mx::tasking::TaskContext;

// Small nodes (7 entries per node) make deep trees and frequent splits from few keys.
using SmallTree = BLinkTree<256>;

template <std::size_t NodeSize>
void expect_lower_bound_matches_std() {
    using NodeType = mx::index::blinktree::Node<NodeSize>;
    auto node = std::make_unique<NodeType>(std::uint16_t{0});
    // Keys beyond the count hold stale values in a real node: fill them with small ones, which a
    // search that looked past the count would take for keys below every probe.
    for (std::uint16_t i = 0; i < NodeType::capacity; ++i) {
        node->keys[i] = 0;
    }
    for (std::uint16_t count = 0; count <= NodeType::capacity; ++count) {
        node->count = count;
        for (std::uint16_t i = 0; i < count; ++i) {
            node->keys[i] = 2U * i + 2U; // 2, 4, 6, ...: every gap and every key is probed
        }
        for (Key key = 0; key <= 2U * count + 3U; ++key) {
            const auto expected = static_cast<std::uint16_t>(
                std::lower_bound(node->keys, node->keys + count, key) - node->keys);
            ASSERT_EQ(node->template lower_bound<false>(key), expected)
                << "count " << count << " key " << key;
            ASSERT_EQ(node->template lower_bound<true>(key), expected) << "count " << count << " key " << key;
        }
        for (std::uint16_t i = count; i < NodeType::capacity; ++i) {
            node->keys[i] = 0;
        }
    }
}

TEST(BLinkTreeNode, LowerBoundMatchesTheStandardOneForEveryCount) {
    expect_lower_bound_matches_std<256>();
    expect_lower_bound_matches_std<1024>();
    expect_lower_bound_matches_std<4096>();
}

TEST(BLinkTree, SequentialOperationsMatchAMap) {
    RuntimeConfig config;
    config.workers = 2;
    Runtime runtime{config};
    {
        SmallTree tree{runtime};
        std::map<Key, Value> oracle;
        std::mt19937_64 random{42};
        for (int i = 0; i < 3000; ++i) {
            const Key key = random() % 5000;
            const Value value = random();
            const bool inserted = oracle.emplace(key, value).second;
            ASSERT_EQ(tree.insert(key, value), inserted) << "key " << key;
        }
        for (Key key = 0; key < 5000; ++key) {
            const auto found = tree.lookup(key);
            const auto expected = oracle.find(key);
            ASSERT_EQ(found.has_value(), expected != oracle.end()) << "key " << key;
            if (found) {
                ASSERT_EQ(*found, expected->second);
            }
        }
        for (Key key = 0; key < 5000; key += 3) {
            ASSERT_EQ(tree.update(key, key * 7), oracle.contains(key));
            if (oracle.contains(key)) {
                oracle[key] = key * 7;
            }
        }
        for (Key key = 0; key < 5000; key += 5) {
            ASSERT_EQ(tree.remove(key), oracle.erase(key) == 1);
        }
        const auto scanned = tree.scan(1000, 100);
        auto it = oracle.lower_bound(1000);
        ASSERT_EQ(scanned.size(), 100U);
        for (const auto &entry : scanned) {
            ASSERT_EQ(entry.first, it->first);
            ASSERT_EQ(entry.second, it->second);
            ++it;
        }
        EXPECT_EQ(tree.scan(100000, 10).size(), 0U);
        TreeShape shape;
        EXPECT_EQ(tree.check(&shape), "");
        EXPECT_GE(shape.height, 3U);
        EXPECT_EQ(tree.entries(), as_vector(oracle));
    }
    runtime.wait();
    EXPECT_EQ(runtime.live_tasks(), 0U);
}

TEST(BLinkTree, PayloadStepIsOffByDefaultAndFollowsTheMeasuredLatencyWhenUnset) {
    Runtime runtime{RuntimeConfig{.workers = 1}};
    EXPECT_FALSE(SmallTree(runtime, TreeConfig{}).payload_step()) << "off by default";
    TreeConfig always;
    always.payload_step = std::nullopt;
    always.payload_step_min_latency = 0;
    TreeConfig never;
    never.payload_step = std::nullopt;
    never.payload_step_min_latency = std::numeric_limits<std::uint32_t>::max();
    TreeConfig forced_off = always;
    forced_off.payload_step = false;
    TreeConfig forced_on = never;
    forced_on.payload_step = true;
    EXPECT_TRUE(SmallTree(runtime, always).payload_step());
    EXPECT_FALSE(SmallTree(runtime, never).payload_step());
    EXPECT_FALSE(SmallTree(runtime, forced_off).payload_step());
    EXPECT_TRUE(SmallTree(runtime, forced_on).payload_step());
    runtime.wait();
}

TEST(BLinkTree, DefaultNodeSizeGrowsSeveralLevels) {
    RuntimeConfig config;
    config.workers = 2;
    Runtime runtime{config};
    {
        BLinkTree<> tree{runtime};
        for (Key key = 0; key < 20000; ++key) {
            ASSERT_TRUE(tree.insert(mx::test::mix(key), key));
        }
        TreeShape shape;
        EXPECT_EQ(tree.check(&shape), "");
        EXPECT_EQ(shape.entries, 20000U);
        EXPECT_EQ(shape.height, 3U);
        for (Key key = 0; key < 20000; key += 7) {
            ASSERT_EQ(tree.lookup(mx::test::mix(key)), std::optional<Value>{key});
        }
    }
    runtime.wait();
    EXPECT_EQ(runtime.live_tasks(), 0U);
}

// ---- concurrent clients ----------------------------------------------------------------------

constexpr std::uint32_t clients = 48;
constexpr std::uint32_t keys_per_client = 400;
constexpr std::uint32_t scan_limit = 24;

struct ClientRun;

/// One client: a sequence of operations on its own keys (key % clients == id), one at a time,
/// each submitted from the callback of the previous one. Every result is checked against the
/// client's oracle at the moment of submission, which is exact because no other client touches
/// these keys, while all clients share leaves and splits.
struct Client {
    ClientRun *run{nullptr};
    std::uint32_t id{0};
    std::uint64_t seed{0};
    std::uint32_t step{0};
    std::uint32_t steps{0};
    std::map<Key, Value> oracle;
    OpResult expected{};
    Key scan_from{0};
    std::vector<std::pair<Key, Value>> scan_buffer = std::vector<std::pair<Key, Value>>(scan_limit);

    Request next();
    void check(const OpResult &result);
};

struct ClientRun {
    SmallTree *tree{nullptr};
    std::vector<Client> clients;
    std::atomic<std::uint64_t> mismatches{0};
    std::atomic<std::uint64_t> completed{0};
    std::string first_error; // written under the first mismatch only (guarded by mismatches 0 -> 1)
};

Request Client::next() {
    const std::uint64_t r = mx::test::mix(seed, id, step);
    const Key key = (r >> 8U) % keys_per_client * clients + id;
    const Value value = mx::test::mix(r);
    Request request{.key = key, .value = value};
    expected = OpResult{.key = key};
    const std::uint32_t kind = static_cast<std::uint32_t>(r % 100);
    // Grow first, then mix: 60 % inserts in the first half, then a balanced mix.
    const bool growing = step < steps / 2;
    if (kind < (growing ? 60U : 30U)) {
        request.operation = Operation::insert;
        const auto [it, inserted] = oracle.emplace(key, value);
        expected.found = !inserted;
    } else if (kind < (growing ? 70U : 50U)) {
        request.operation = Operation::update;
        expected.found = oracle.contains(key);
        if (expected.found) {
            oracle[key] = value;
        }
    } else if (kind < (growing ? 75U : 70U)) {
        request.operation = Operation::remove;
        expected.found = oracle.erase(key) == 1;
    } else if (kind < 95U) {
        request.operation = Operation::lookup;
        const auto it = oracle.find(key);
        expected.found = it != oracle.end();
        expected.value = expected.found ? it->second : 0;
    } else {
        request.operation = Operation::scan;
        request.scan_out = scan_buffer.data();
        request.scan_limit = scan_limit;
        scan_from = key;
    }
    expected.operation = request.operation;
    return request;
}

void Client::check(const OpResult &result) {
    std::string error;
    if (result.operation != expected.operation || result.key != expected.key) {
        error = "result for the wrong request";
    } else if (result.operation == Operation::scan) {
        // The client's own keys in the scanned range must be exactly the oracle's.
        if (result.count > scan_limit) {
            error = "scan overflow";
        } else {
            const bool complete = result.count < scan_limit;
            const Key last = result.count == 0 ? 0 : scan_buffer[result.count - 1].first;
            auto it = oracle.lower_bound(scan_from);
            for (std::uint32_t i = 0; i < result.count && error.empty(); ++i) {
                const auto &entry = scan_buffer[i];
                if (i > 0 && scan_buffer[i - 1].first >= entry.first) {
                    error = "scan not sorted";
                } else if (entry.first % clients == id) {
                    if (it == oracle.end() || it->first != entry.first || it->second != entry.second) {
                        error = "scan returned " + std::to_string(entry.first) + " not matching the oracle";
                    } else {
                        ++it;
                    }
                }
            }
            if (error.empty() && it != oracle.end() && (complete || it->first <= last)) {
                error = "scan missed key " + std::to_string(it->first);
            }
        }
    } else if (result.found != expected.found ||
               (result.operation == Operation::lookup && result.found && result.value != expected.value)) {
        error = "operation " + std::to_string(static_cast<int>(result.operation)) + " on key " +
                std::to_string(result.key) + ": found " + std::to_string(result.found) + " value " +
                std::to_string(result.value) + ", expected found " + std::to_string(expected.found) +
                " value " + std::to_string(expected.value);
    }
    if (!error.empty() && run->mismatches.fetch_add(1) == 0) {
        run->first_error = error;
    }
}

void on_result(void *context, const OpResult &result, TaskContext &task_context) noexcept {
    auto *client = static_cast<Client *>(context);
    client->check(result);
    client->run->completed.fetch_add(1, std::memory_order_relaxed);
    if (++client->step < client->steps) {
        Request request = client->next();
        request.listener = Listener{&on_result, client};
        if (client->id % 2 == 0) {
            // From the finishing operation's commit (a task on a node): a plain spawn.
            client->run->tree->submit(task_context, request);
        } else {
            // From a task without a resource, as a feeder submits: the bypassed upper steps run
            // inside it (TreeConfig::submit_inline).
            task_context.spawn(
                [client, request](TaskContext &feeder) { client->run->tree->submit(feeder, request); });
        }
    }
}

struct StressParam {
    const char *name;
    std::optional<Primitive> primitive;
    std::uint16_t workers;
    std::uint16_t bypass_min_level{2}; // TreeConfig's default
    bool payload_step{false};
    bool interleaved_lookups{false};
};

class BLinkTreeStress : public ::testing::TestWithParam<StressParam> {};

TEST_P(BLinkTreeStress, ClientsMatchTheirOraclesAndTheTreeStaysValid) {
    const std::uint64_t seed = mx::test::test_seed();
    RuntimeConfig config;
    config.workers = GetParam().workers;
    config.epoch_interval_ms = 1; // let reclamation run during the test
    Runtime runtime{config};
    {
        TreeConfig tree_config;
        tree_config.primitive = GetParam().primitive;
        tree_config.bypass_min_level = GetParam().bypass_min_level;
        tree_config.payload_step = GetParam().payload_step;
        tree_config.interleaved_lookups = GetParam().interleaved_lookups;
        SmallTree tree{runtime, tree_config};
        ASSERT_EQ(tree.payload_step(), GetParam().payload_step);
        ClientRun run;
        run.tree = &tree;
        run.clients.resize(clients);
        const std::uint32_t steps = mx::test::scaled(1500, 6);
        for (std::uint32_t c = 0; c < clients; ++c) {
            Client &client = run.clients[c];
            client.run = &run;
            client.id = c;
            client.seed = seed;
            client.steps = steps;
        }
        for (Client &client : run.clients) {
            Request request = client.next();
            request.listener = Listener{&on_result, &client};
            tree.submit(request);
        }
        runtime.wait();
        EXPECT_EQ(run.mismatches.load(), 0U) << run.first_error;
        EXPECT_EQ(run.completed.load(), std::uint64_t{clients} * steps);
        TreeShape shape;
        EXPECT_EQ(tree.check(&shape), "");
        std::map<Key, Value> all;
        for (const Client &client : run.clients) {
            all.insert(client.oracle.begin(), client.oracle.end());
        }
        EXPECT_EQ(tree.entries(), as_vector(all));
        EXPECT_GE(shape.height, 3U);
    }
    runtime.wait();
    EXPECT_EQ(runtime.live_tasks(), 0U);
}

std::vector<StressParam> stress_params() {
    std::vector<StressParam> params;
    const std::pair<const char *, std::optional<Primitive>> primitives[] = {
        {"cost_model", std::nullopt},
        {"spinlock", Primitive::spinlock},
        {"rw_latch", Primitive::rw_latch},
        {"optimistic_latched", Primitive::optimistic_latched},
        {"optimistic_scheduled", Primitive::optimistic_scheduled},
        {"htm", Primitive::htm},
        {"scheduling", Primitive::scheduling},
    };
    static std::vector<std::string> names;
    names.reserve(256); // params keep pointers into it: no reallocation
    // Reading steps in one round, and in two rounds (the payload line in a round of its own).
    for (const bool payload_step : {false, true}) {
        const std::string suffix = payload_step ? "_payload_step" : "";
        for (const auto &[name, primitive] : primitives) {
            for (const std::uint16_t workers : {std::uint16_t{1}, std::uint16_t{2}, std::uint16_t{4}}) {
                names.push_back(std::string{name} + "_workers" + std::to_string(workers) + suffix);
                params.push_back(StressParam{names.back().c_str(), primitive, workers, 2, payload_step});
            }
        }
        // Every step through the pool (no bypass), and bypass down to the branch level.
        for (const std::uint16_t bypass : {std::uint16_t{0}, std::uint16_t{1}}) {
            for (const std::uint16_t workers : {std::uint16_t{1}, std::uint16_t{2}, std::uint16_t{4}}) {
                names.push_back("cost_model_bypass" + std::to_string(bypass) + "_workers" +
                                std::to_string(workers) + suffix);
                params.push_back(
                    StressParam{names.back().c_str(), std::nullopt, workers, bypass, payload_step});
            }
        }
    }
    // Lookups as coroutine tasks that read each node through TaskContext::read (under scheduling
    // they hand over to operation tasks on the node's domain), with every level suspending
    // (bypass 0) and with the upper levels read at once (bypass 2).
    for (const auto &[name, primitive] : primitives) {
        for (const std::uint16_t bypass : {std::uint16_t{0}, std::uint16_t{2}}) {
            for (const std::uint16_t workers : {std::uint16_t{1}, std::uint16_t{2}, std::uint16_t{4}}) {
                names.push_back(std::string{name} + "_interleaved_bypass" + std::to_string(bypass) +
                                "_workers" + std::to_string(workers));
                params.push_back(StressParam{names.back().c_str(), primitive, workers, bypass, false, true});
            }
        }
    }
    // Interleaved lookups with payload steps: a second suspension for the child's or value's line.
    for (const auto &[name, primitive] : primitives) {
        for (const std::uint16_t workers : {std::uint16_t{1}, std::uint16_t{2}, std::uint16_t{4}}) {
            names.push_back(std::string{name} + "_interleaved_payload_step_workers" +
                            std::to_string(workers));
            params.push_back(StressParam{names.back().c_str(), primitive, workers, 0, true, true});
        }
    }
    return params;
}

INSTANTIATE_TEST_SUITE_P(Primitives, BLinkTreeStress, ::testing::ValuesIn(stress_params()),
                         [](const ::testing::TestParamInfo<StressParam> &param_info) {
                             return std::string{param_info.param.name};
                         });

} // namespace
