// Running operator graphs on every runtime shape (1, 2, 4, 8 workers; simulated NUMA regions),
// each with FIFO and with LIFO local order: chains, diamonds, fan-out, many pipelines at once,
// dependencies, finalize parts and merge trees, emits to chosen workers, consume tasks finishing
// out of spawn order, empty inputs, cancellation, concurrent and repeated runs, and random graphs
// checked against an oracle.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <mx/dataflow/graph.h>
#include <mx/tasking/runtime.h>
#include <mx/tasking/trace.h>

#include "support/runtime_fixture.h"
#include "test_nodes.h"

namespace {

using mx::dataflow::CancelToken;
using mx::dataflow::DispatchTarget;
using mx::dataflow::FlowContext;
using mx::dataflow::Graph;
using mx::dataflow::Node;
using mx::dataflow::NodeId;
using mx::dataflow::RunHandle;
using mx::dataflow::RunResult;
using mx::dataflow::Token;
using mx::test::scaled;
using mx::test::dataflow::Op;
using mx::test::dataflow::OpConfig;
using mx::test::dataflow::Send;

/// A runtime shape with a local order: the layer must not depend on the order in which a worker
/// runs its tasks.
struct FlowShape {
    mx::test::RuntimeShape shape;
    mx::tasking::LocalOrder order;
    std::string name;
};

std::vector<FlowShape> flow_shapes() {
    std::vector<FlowShape> shapes;
    for (const auto order : {mx::tasking::LocalOrder::fifo, mx::tasking::LocalOrder::lifo}) {
        for (const mx::test::RuntimeShape &shape : mx::test::runtime_shapes()) {
            std::string name{shape.name};
            name.append(order == mx::tasking::LocalOrder::fifo ? "_fifo" : "_lifo");
            shapes.push_back(FlowShape{shape, order, std::move(name)});
        }
    }
    return shapes;
}

/// Failure messages name the shape instead of dumping its bytes (GoogleTest looks for this name).
// NOLINTNEXTLINE(readability-identifier-naming)
[[maybe_unused]] void PrintTo(const FlowShape &shape, std::ostream *out) { *out << shape.name; }

/// Starts a runtime of the parameter's shape and order before each test and, after it, waits for
/// all work and checks that every runtime-owned task was freed (as mx::test::RuntimeFixture).
class DataflowRun : public ::testing::TestWithParam<FlowShape> {
protected:
    void SetUp() override {
        mx::tasking::RuntimeConfig config;
        config.workers = GetParam().shape.workers;
        config.topology = GetParam().shape.topology;
        config.local_order = GetParam().order;
        _runtime = std::make_unique<mx::tasking::Runtime>(config);
    }

    void TearDown() override {
        _runtime->wait();
        EXPECT_EQ(_runtime->live_tasks(), std::uint64_t{0})
            << "runtime-owned tasks were not freed after wait() (a task leaked or was dropped)";
        _runtime.reset();
    }

    [[nodiscard]] mx::tasking::Runtime &runtime() noexcept { return *_runtime; }
    [[nodiscard]] std::uint16_t workers() const noexcept { return _runtime->worker_count(); }

private:
    std::unique_ptr<mx::tasking::Runtime> _runtime;
};

std::uint64_t triangle(std::uint64_t n) { return n * (n + 1) / 2; }

/// prefix + number, without operator+ on strings (GCC 12 -O2 warns falsely on that, -Wrestrict).
template <class Number>
std::string named(const char *prefix, Number number) {
    std::string name{prefix};
    name.append(std::to_string(number));
    return name;
}

/// What every Op of a graph must have seen, computed from the graph alone.
struct Expected {
    std::uint64_t count{0};
    std::uint64_t sum{0};
};

std::vector<Expected> oracle(const Graph &graph) {
    const auto size = static_cast<NodeId>(graph.size());
    std::vector<Expected> in(size);
    std::vector<Expected> out(size);
    for (const auto &pipeline : graph.pipelines()) {
        for (const NodeId id : pipeline.nodes) {
            const auto &op = static_cast<const Op &>(graph.node(id));
            const OpConfig &config = op.config();
            Expected received{};
            for (const NodeId previous : graph.predecessors(id)) {
                received.count += out[previous].count;
                received.sum += out[previous].sum;
            }
            Expected emitted{};
            if (graph.predecessors(id).empty()) {
                const bool dispatched = config.source_send == Send::dispatch_any ||
                                        config.source_send == Send::dispatch_worker ||
                                        config.source_send == Send::dispatch_region;
                if (dispatched) {
                    received.count += config.source_tokens;
                    received.sum += triangle(config.source_tokens);
                } else {
                    emitted.count += config.source_tokens;
                    emitted.sum += triangle(config.source_tokens);
                }
            }
            if (config.forward) {
                emitted.count += received.count;
                emitted.sum += received.sum + received.count * config.add;
            }
            if (config.finalize_send != Send::none) {
                emitted.count += config.finalize_tokens;
                emitted.sum += std::uint64_t{config.finalize_tokens} * config.finalize_value;
            }
            in[id] = received;
            out[id] = emitted;
        }
    }
    return in;
}

/// Checks every Op against the oracle and the ordering rules: finalize once, after every
/// consume, after every data predecessor's finalize, and sources started after dependencies.
void check_graph(const Graph &graph, const RunResult &result) {
    ASSERT_TRUE(result.ok) << result.error;
    const std::vector<Expected> expected = oracle(graph);
    for (NodeId id = 0; id < graph.size(); ++id) {
        const auto &op = static_cast<const Op &>(graph.node(id));
        EXPECT_EQ(op.finalize_calls, 1U) << op.name();
        EXPECT_EQ(op.final_count, expected[id].count) << op.name() << ": finalize saw a different count";
        EXPECT_EQ(op.final_sum, expected[id].sum) << op.name() << ": finalize saw a different sum";
        EXPECT_EQ(op.late.load(), 0U) << op.name() << ": consume tasks ran after finalize";
        EXPECT_EQ(op.bad_merges.load(), 0U) << op.name() << ": finalize parts / merge tree out of order";
        for (const NodeId previous : graph.predecessors(id)) {
            EXPECT_GT(op.finalized_at, static_cast<const Op &>(graph.node(previous)).finalized_at)
                << op.name() << " finalized before its predecessor";
        }
    }
    for (const auto &pipeline : graph.pipelines()) {
        for (const NodeId before : pipeline.depends_on) {
            for (const NodeId source : pipeline.sources) {
                EXPECT_GT(static_cast<const Op &>(graph.node(source)).started_at,
                          static_cast<const Op &>(graph.node(before)).finalized_at)
                    << "pipeline " << pipeline.id << " started before its dependency completed";
            }
        }
    }
    EXPECT_EQ(result.pipelines.size(), graph.pipelines().size());
}

Op &source(Graph &graph, std::string name, std::uint64_t tokens, Send send = Send::dispatch_any) {
    return graph.add<Op>(std::move(name), OpConfig{.source_tokens = tokens, .source_send = send});
}

TEST_P(DataflowRun, ChainSumsMatchTheFormula) {
    for (const Send send : {Send::dispatch_any, Send::dispatch_worker, Send::dispatch_region,
                            Send::emit_local, Send::emit_worker, Send::emit_region, Send::emit_any}) {
        Graph graph;
        const std::uint64_t n = scaled(2000);
        auto &scan = source(graph, "scan", n, send);
        auto &map = graph.add<Op>("map", OpConfig{.add = 3, .spin = 50});
        auto &sum = graph.add<Op>("sum", OpConfig{.forward = false});
        graph.connect(scan, map);
        graph.connect(map, sum);
        check_graph(graph, mx::dataflow::run(runtime(), graph));
        EXPECT_EQ(sum.final_count, n);
        EXPECT_EQ(sum.final_sum, triangle(n) + 3 * n) << "send mode " << static_cast<int>(send);
    }
}

TEST_P(DataflowRun, DiamondJoinsBothBranches) {
    Graph graph;
    const std::uint64_t n = scaled(1500);
    auto &scan = source(graph, "scan", n, Send::dispatch_worker);
    // The left branch also emits from finalize: those tokens must reach the join before its
    // finalize, which runs only after BOTH branches completed.
    auto &left = graph.add<Op>(
        "left", OpConfig{.add = 1, .spin = 200, .finalize_tokens = 64, .finalize_send = Send::emit_worker});
    auto &right = graph.add<Op>("right", OpConfig{.add = 2});
    auto &join = graph.add<Op>("join", OpConfig{.forward = false, .use_parts = true});
    graph.connect(scan, left);
    graph.connect(scan, right);
    graph.connect(left, join);
    graph.connect(right, join);
    check_graph(graph, mx::dataflow::run(runtime(), graph));
    EXPECT_EQ(join.final_count, 2 * n + 64);
    EXPECT_EQ(join.final_sum, 2 * triangle(n) + 3 * n + 64 * 1000);
}

TEST_P(DataflowRun, FanOutDeliversEveryTokenToEverySuccessor) {
    Graph graph;
    const std::uint64_t n = scaled(1000);
    auto &scan = source(graph, "scan", n, Send::dispatch_region);
    std::vector<Op *> sinks;
    for (int i = 0; i < 4; ++i) {
        sinks.push_back(&graph.add<Op>(named("sink", i), OpConfig{.forward = false}));
        graph.connect(scan, *sinks.back());
    }
    check_graph(graph, mx::dataflow::run(runtime(), graph));
    for (const Op *sink : sinks) {
        EXPECT_EQ(sink->final_sum, triangle(n));
    }
}

TEST_P(DataflowRun, ManyIndependentPipelinesRunAtOnce) {
    Graph graph;
    constexpr int pipelines = 50;
    const std::uint64_t n = scaled(200, 4);
    for (int p = 0; p < pipelines; ++p) {
        auto &scan = source(graph, named("scan", p), n + static_cast<std::uint64_t>(p));
        auto &sum =
            graph.add<Op>(named("sum", p), OpConfig{.add = static_cast<std::uint64_t>(p), .forward = false});
        graph.connect(scan, sum);
    }
    const RunResult result = mx::dataflow::run(runtime(), graph);
    check_graph(graph, result);
    ASSERT_EQ(result.pipelines.size(), static_cast<std::size_t>(pipelines));
    for (const auto &timing : result.pipelines) {
        EXPECT_LE(timing.started, timing.finished);
        EXPECT_LE(timing.finished, result.elapsed);
    }
}

/// Build side of a hash join: collects keys worker-locally, merges them into one table in
/// finalize. Probe side: looks every key up; the table is a plain map, so a probe that ran
/// before the build's finalize would miss keys (and TSan would report the race).
class Build final : public Node {
public:
    Build() : Node("build") {}
    void prepare(std::uint16_t workers, std::uint16_t /*regions*/) override {
        _local.assign(workers, {});
        table.clear();
        done.store(false);
    }
    void consume(FlowContext &context, Token token) noexcept override {
        _local[context.worker_id()].push_back(token.value);
    }
    void finalize(FlowContext & /*context*/) noexcept override {
        for (const auto &keys : _local) {
            for (const std::uint64_t key : keys) {
                table.emplace(key, key * 7);
            }
        }
        done.store(true, std::memory_order_relaxed);
    }
    std::unordered_map<std::uint64_t, std::uint64_t> table; // written by finalize only
    std::atomic<bool> done{false};

private:
    std::vector<std::vector<std::uint64_t>> _local; // per worker
};

class Probe final : public Node {
public:
    explicit Probe(const Build &build) : Node("probe"), _build(build) {}
    void prepare(std::uint16_t workers, std::uint16_t /*regions*/) override {
        _found.assign(workers, {});
        early.store(0);
    }
    void consume(FlowContext &context, Token token) noexcept override {
        if (!_build.done.load(std::memory_order_relaxed)) {
            early.fetch_add(1);
            return;
        }
        const auto it = _build.table.find(token.value);
        if (it != _build.table.end()) {
            _found[context.worker_id()].sum += it->second;
            ++_found[context.worker_id()].count;
        }
    }
    void finalize(FlowContext & /*context*/) noexcept override {
        for (const auto &found : _found) {
            matches += found.count;
            sum += found.sum;
        }
    }
    std::atomic<std::uint64_t> early{0};
    std::uint64_t matches{0};
    std::uint64_t sum{0};

private:
    const Build &_build;
    std::vector<mx::test::dataflow::Partial> _found;
};

TEST_P(DataflowRun, ProbeSeesTheCompleteBuild) {
    Graph graph;
    const std::uint64_t build_keys = scaled(3000);
    const std::uint64_t probe_keys = scaled(4000);
    // Make the build slow (spinning scan) so a probe started too early would notice.
    auto &scan_r = graph.add<Op>("scan_r", OpConfig{.source_tokens = build_keys, .spin = 100});
    auto &build = graph.add<Build>();
    auto &scan_s = source(graph, "scan_s", probe_keys);
    auto &probe = graph.add<Probe>(build);
    graph.connect(scan_r, build);
    graph.connect(scan_s, probe);
    graph.depend(build, probe);
    const RunResult result = mx::dataflow::run(runtime(), graph);
    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_EQ(probe.early.load(), 0U) << "probe consumed before the build's finalize";
    EXPECT_EQ(build.table.size(), build_keys);
    const std::uint64_t common = std::min(build_keys, probe_keys);
    EXPECT_EQ(probe.matches, common);
    EXPECT_EQ(probe.sum, 7 * triangle(common));
    ASSERT_EQ(result.pipelines.size(), 2U);
    EXPECT_GE(result.pipelines[1].started, result.pipelines[0].finished)
        << "the probe pipeline (1) started before the build pipeline (0) finished";
}

TEST_P(DataflowRun, DependencyChainsAndFanIn) {
    // p0 -> p1 -> p3, p2 -> p3 (p3 waits for two pipelines), p4 independent.
    Graph graph;
    std::vector<Op *> sinks;
    for (int p = 0; p < 5; ++p) {
        auto &scan = source(graph, named("scan", p), scaled(300) + static_cast<std::uint64_t>(p));
        sinks.push_back(&graph.add<Op>(named("sink", p), OpConfig{.forward = false, .use_parts = true}));
        graph.connect(scan, *sinks.back());
    }
    graph.depend(*sinks[0], graph.node(2));
    graph.depend(*sinks[1], graph.node(6));
    graph.depend(*sinks[2], graph.node(6));
    check_graph(graph, mx::dataflow::run(runtime(), graph));
}

TEST_P(DataflowRun, FinalizePartsAndMergeTree) {
    Graph graph;
    const std::uint64_t n = scaled(5000);
    auto &scan = source(graph, "scan", n, Send::dispatch_worker);
    auto &sum = graph.add<Op>("sum", OpConfig{.forward = false, .use_parts = true});
    graph.connect(scan, sum);
    check_graph(graph, mx::dataflow::run(runtime(), graph));
    EXPECT_EQ(sum.final_sum, triangle(n));
}

/// A node whose merge tree has a given number of inputs (independent of the worker count), to
/// cover odd shapes of the tree.
class MergeCounter final : public Node {
public:
    explicit MergeCounter(std::uint32_t inputs) : Node("merge"), _inputs(inputs) {}
    void prepare(std::uint16_t /*workers*/, std::uint16_t /*regions*/) override {
        _values.assign(_inputs, 0);
        _merges_into.assign(_inputs, 0);
        _merged_away.assign(_inputs, 0);
        for (std::uint32_t i = 0; i < _inputs; ++i) {
            _values[i] = std::uint64_t{1} << (i % 60);
        }
        violations.store(0);
    }
    void consume(FlowContext & /*context*/, Token /*token*/) noexcept override {}
    [[nodiscard]] std::uint32_t merge_inputs(std::uint16_t /*workers*/) const noexcept override {
        return _inputs;
    }
    void merge(FlowContext &context, std::uint32_t into, std::uint32_t from) noexcept override {
        if (_merges_into[from] != Op::expected_merges_into(from, _inputs) || _merged_away[from] != 0 ||
            _merged_away[into] != 0 || context.worker_id() != into % context.worker_count()) {
            violations.fetch_add(1);
        }
        _values[into] |= _values[from];
        ++_merges_into[into];
        ++_merged_away[from];
    }
    void finalize(FlowContext & /*context*/) noexcept override { result = _inputs == 0 ? 0 : _values[0]; }
    std::atomic<std::uint64_t> violations{0};
    std::uint64_t result{0};

private:
    std::uint32_t _inputs;
    std::vector<std::uint64_t> _values;
    std::vector<std::uint32_t> _merges_into;
    std::vector<std::uint32_t> _merged_away;
};

TEST_P(DataflowRun, MergeTreesOfEveryShape) {
    for (const std::uint32_t inputs : {0U, 1U, 2U, 3U, 5U, 7U, 8U, 13U, 33U}) {
        Graph graph;
        auto &merge = graph.add<MergeCounter>(inputs);
        const RunResult result = mx::dataflow::run(runtime(), graph);
        ASSERT_TRUE(result.ok) << result.error;
        EXPECT_EQ(merge.violations.load(), 0U) << inputs << " inputs";
        std::uint64_t expected = 0;
        for (std::uint32_t i = 0; i < inputs; ++i) {
            expected |= std::uint64_t{1} << (i % 60);
        }
        EXPECT_EQ(merge.result, expected) << inputs << " inputs";
    }
}

/// Records on which worker each token ran; the token's value names the worker it was sent to.
class WhereSink final : public Node {
public:
    WhereSink() : Node("where") {}
    void prepare(std::uint16_t workers, std::uint16_t /*regions*/) override {
        _counts.assign(workers, {});
        misplaced.store(0);
    }
    void consume(FlowContext &context, Token token) noexcept override {
        const auto target = static_cast<std::uint16_t>(token.value >> 32U);
        if (target != context.worker_id()) {
            misplaced.fetch_add(1);
        }
        ++_counts[context.worker_id()].count;
        _counts[context.worker_id()].sum += token.value & 0xFFFFFFFFU;
    }
    void finalize(FlowContext & /*context*/) noexcept override {
        for (const auto &slot : _counts) {
            count += slot.count;
            sum += slot.sum;
        }
    }
    std::atomic<std::uint64_t> misplaced{0};
    std::uint64_t count{0};
    std::uint64_t sum{0};

private:
    std::vector<mx::test::dataflow::Partial> _counts;
};

/// Consumes nothing useful; its finalize emits `tokens` tokens round-robin to every worker.
class Scatter final : public Node {
public:
    Scatter(std::string name, std::uint32_t tokens, std::uint16_t finalize_on)
        : Node(std::move(name)), _tokens(tokens), _finalize_on(finalize_on) {}
    void consume(FlowContext & /*context*/, Token /*token*/) noexcept override {}
    // One part on a chosen worker, so that the two scatters finalize on different workers.
    [[nodiscard]] std::uint32_t finalize_parts(std::uint16_t /*workers*/) const noexcept override {
        return 1;
    }
    [[nodiscard]] std::uint16_t finalize_worker(std::uint32_t /*index*/,
                                                std::uint16_t workers) const noexcept override {
        return static_cast<std::uint16_t>(_finalize_on % workers);
    }
    void finalize_part(FlowContext &context, std::uint32_t /*part*/) noexcept override {
        for (std::uint32_t i = 0; i < _tokens; ++i) {
            const auto target = static_cast<std::uint16_t>(i % context.worker_count());
            context.emit(Token{nullptr, (std::uint64_t{target} << 32U) | 1U}, DispatchTarget::worker(target));
        }
    }
    void finalize(FlowContext &context) noexcept override {
        for (std::uint32_t i = 0; i < _tokens; ++i) {
            const auto target = static_cast<std::uint16_t>((i + 1) % context.worker_count());
            context.emit(Token{nullptr, (std::uint64_t{target} << 32U) | 2U}, DispatchTarget::worker(target));
        }
    }

private:
    std::uint32_t _tokens;
    std::uint16_t _finalize_on;
};

TEST_P(DataflowRun, ProfileCountsEveryTaskOfEveryNode) {
    Graph graph;
    const std::uint64_t n = scaled(500);
    auto &scan = source(graph, "scan", n);
    auto &map = graph.add<Op>("map", OpConfig{.add = 1, .spin = 200});
    auto &sum = graph.add<Op>("sum", OpConfig{.forward = false, .use_parts = true});
    graph.connect(scan, map);
    graph.connect(map, sum);
    const RunResult plain = mx::dataflow::run(runtime(), graph);
    check_graph(graph, plain);
    EXPECT_TRUE(plain.nodes.empty()) << "an unprofiled run counts nothing";

    const RunResult profiled =
        mx::dataflow::run(runtime(), graph, {}, mx::dataflow::RunOptions{.profile = true});
    check_graph(graph, profiled);
    ASSERT_EQ(profiled.nodes.size(), 3U);
    // The start task plus one consume task per token; a node whose consume phase ends when its
    // predecessor completes runs one more task for that (ConsumeEndTask).
    EXPECT_EQ(profiled.nodes[scan.id()].tasks, n + 1);
    EXPECT_GE(profiled.nodes[map.id()].tasks, n);
    EXPECT_LE(profiled.nodes[map.id()].tasks, n + 1);
    // Consume tasks, one part per worker, workers - 1 merges.
    const std::uint64_t sum_tasks = n + workers() + (workers() - 1U);
    EXPECT_GE(profiled.nodes[sum.id()].tasks, sum_tasks);
    EXPECT_LE(profiled.nodes[sum.id()].tasks, sum_tasks + 1);
    for (const mx::dataflow::NodeProfile &node : profiled.nodes) {
        ASSERT_EQ(node.tasks_per_worker.size(), workers());
        std::uint64_t spread = 0;
        for (const std::uint64_t tasks : node.tasks_per_worker) {
            spread += tasks;
        }
        EXPECT_EQ(spread, node.tasks) << "every task is counted for the worker that ran it";
    }
    EXPECT_GT(profiled.nodes[map.id()].busy.count(), 0);
    EXPECT_LE(profiled.nodes[map.id()].busy, profiled.elapsed * workers());
}

TEST_P(DataflowRun, TracedRunShowsEachPipelineAsASpanAroundItsTasks) {
    // Pipeline 0: "a scan" -> "a sink"; pipeline 1: "b scan" -> "b sink", after "a sink".
    Graph graph;
    auto &scan_a = source(graph, "a scan", scaled(400));
    auto &sink_a = graph.add<Op>("a sink", OpConfig{.forward = false, .spin = 50, .use_parts = true});
    auto &scan_b = source(graph, "b scan", scaled(300));
    auto &sink_b = graph.add<Op>("b sink", OpConfig{.forward = false, .use_parts = true});
    graph.connect(scan_a, sink_a);
    graph.connect(scan_b, sink_b);
    graph.depend(sink_a, scan_b);
    ASSERT_EQ(runtime().start_trace(), "");
    check_graph(graph, mx::dataflow::run(runtime(), graph));
    const std::optional<mx::tasking::Trace> trace = runtime().stop_trace();
    ASSERT_TRUE(trace);
    ASSERT_EQ(trace->spans.size(), 2U);
    const std::vector<std::pair<std::string, std::vector<std::string>>> pipelines = {
        {"pipeline 0: a scan, a sink", {"a scan", "a sink"}},
        {"pipeline 1: b scan, b sink", {"b scan", "b sink"}}};
    for (const auto &[label, nodes] : pipelines) {
        SCOPED_TRACE(label);
        const auto span =
            std::find_if(trace->spans.begin(), trace->spans.end(),
                         [&, &label = label](const auto &event) { return trace->name(event) == label; });
        ASSERT_NE(span, trace->spans.end()) << "no span named like the pipeline in EXPLAIN";
        const auto of_pipeline = [&, &nodes = nodes](const std::string &name) {
            return std::any_of(nodes.begin(), nodes.end(),
                               [&](const std::string &node) { return name.rfind(node, 0) == 0; });
        };
        std::uint64_t tasks = 0;
        bool ends_with_last_slice = false;
        for (const auto &worker : trace->workers) {
            for (const mx::tasking::TraceEvent &event : worker.events) {
                if (event.kind != mx::tasking::TraceEventKind::task || !of_pipeline(trace->name(event))) {
                    continue;
                }
                tasks += event.count;
                // Every task of the pipeline starts inside its span; the slice of the task that
                // completed the pipeline ends the span.
                EXPECT_GE(event.start, span->start) << trace->name(event);
                EXPECT_LE(event.start, span->end) << trace->name(event);
                ends_with_last_slice = ends_with_last_slice || event.end == span->end;
            }
        }
        EXPECT_GT(tasks, 0U);
        EXPECT_TRUE(ends_with_last_slice) << "the span ends with the slice of the pipeline's last task";
    }
    EXPECT_GE(trace->spans[1].start, trace->spans[0].start) << "pipeline 1 waits for pipeline 0";
    EXPECT_NE(trace->to_json().find("\"name\":\"pipelines\""), std::string::npos);
    // Without a trace, no spans are recorded (and none are waiting for the next trace).
    check_graph(graph, mx::dataflow::run(runtime(), graph));
    ASSERT_EQ(runtime().start_trace(), "");
    const std::optional<mx::tasking::Trace> empty = runtime().stop_trace();
    ASSERT_TRUE(empty);
    EXPECT_TRUE(empty->spans.empty());
}

TEST_P(DataflowRun, FinalizeEmitsToOtherWorkersBeforeTheSinkFinalizes) {
    // Two predecessors finalize on different workers and send tokens to every worker; the sink's
    // consume phase may end only after whichever finishes last. Every token must be consumed
    // before the sink's finalize, on the worker it was sent to.
    for (int round = 0; round < 5; ++round) {
        Graph graph;
        const std::uint32_t tokens = scaled(600, 4);
        auto &a = graph.add<Scatter>("a", tokens, 0);
        auto &b = graph.add<Scatter>("b", tokens, static_cast<std::uint16_t>(workers() - 1));
        auto &sink = graph.add<WhereSink>();
        graph.connect(a, sink);
        graph.connect(b, sink);
        const RunResult result = mx::dataflow::run(runtime(), graph);
        ASSERT_TRUE(result.ok) << result.error;
        EXPECT_EQ(sink.misplaced.load(), 0U);
        EXPECT_EQ(sink.count, 4U * tokens)
            << "tokens emitted in finalize were consumed after the sink's finalize";
        EXPECT_EQ(sink.sum, 2U * tokens * 3U);
    }
}

/// Forwards every token from consume() to a worker chosen by its value, as WhereSink expects it.
class Router final : public Node {
public:
    Router() : Node("router") {}
    void consume(FlowContext &context, Token token) noexcept override {
        const auto target = static_cast<std::uint16_t>(token.value % context.worker_count());
        context.emit(Token{nullptr, (std::uint64_t{target} << 32U) | 1U}, DispatchTarget::worker(target));
    }
};

TEST_P(DataflowRun, TargetedEmitsFromConsumeStayPinned) {
    Graph graph;
    const std::uint64_t n = scaled(3000);
    auto &scan = source(graph, "scan", n, Send::dispatch_any);
    auto &router = graph.add<Router>();
    auto &sink = graph.add<WhereSink>();
    graph.connect(scan, router);
    graph.connect(router, sink);
    const RunResult result = mx::dataflow::run(runtime(), graph);
    ASSERT_TRUE(result.ok) << result.error;
    EXPECT_EQ(sink.misplaced.load(), 0U) << "a token ran on another worker than the one it was sent to";
    EXPECT_EQ(sink.count, n);
    EXPECT_EQ(sink.sum, n);
}

/// start() sends token i to worker i, one per worker.
class PinnedSource final : public Node {
public:
    PinnedSource() : Node("pinned") {}
    void start(FlowContext &context) noexcept override {
        for (std::uint16_t worker = 0; worker < context.worker_count(); ++worker) {
            context.emit(Token{nullptr, worker}, DispatchTarget::worker(worker));
        }
    }
    void consume(FlowContext & /*context*/, Token /*token*/) noexcept override {}
};

/// The consume task of token i (on worker i) waits until the one of token i + 1 has finished, so
/// the node's consume tasks finish in the reverse of their spawn order; each records its place
/// in the order of finishing.
class ReverseRelay final : public Node {
public:
    ReverseRelay() : Node("reverse") {}
    void prepare(std::uint16_t workers, std::uint16_t /*regions*/) override {
        _workers = workers;
        _finished = std::make_unique<std::atomic<bool>[]>(workers); // all false
        _place.assign(workers, 0);
        _finishing.store(0);
        _finalized.store(false);
        timeouts.store(0);
        late.store(0);
        finalize_calls = 0;
        out_of_order = 0;
    }
    void consume(FlowContext &context, Token token) noexcept override {
        const std::uint64_t index = token.value;
        if (index + 1 < _workers && !mx::test::spin_until(_finished[index + 1])) {
            timeouts.fetch_add(1);
        }
        if (_finalized.load()) {
            late.fetch_add(1);
        }
        _place[index] = _finishing.fetch_add(1); // this task's slot only; finalize reads it
        context.emit(token);
        _finished[index].store(true, std::memory_order_release);
    }
    void finalize(FlowContext & /*context*/) noexcept override {
        ++finalize_calls;
        _finalized.store(true);
        for (std::uint32_t index = 0; index < _workers; ++index) {
            if (_place[index] != _workers - 1U - index) {
                ++out_of_order;
            }
        }
    }
    std::atomic<std::uint64_t> timeouts{0};
    std::atomic<std::uint64_t> late{0};
    std::uint32_t finalize_calls{0}; // read by the test thread after the run
    std::uint32_t out_of_order{0};

private:
    std::uint16_t _workers{1};
    std::unique_ptr<std::atomic<bool>[]> _finished; // per token: set when its task is done
    std::vector<std::uint64_t> _place;              // per token: written by its task only
    std::atomic<std::uint64_t> _finishing{0};
    std::atomic<bool> _finalized{false};
};

TEST_P(DataflowRun, ConsumeTasksFinishingInReverseOrder) {
    // The last consume task of the node to finish is its first one spawned: the node must still
    // end exactly once, after all of them, and its successor after it.
    for (int round = 0; round < 10; ++round) {
        Graph graph;
        auto &scan = graph.add<PinnedSource>();
        auto &relay = graph.add<ReverseRelay>();
        auto &sink = graph.add<Op>("sink", OpConfig{.forward = false, .use_parts = true});
        graph.connect(scan, relay);
        graph.connect(relay, sink);
        const RunResult result = mx::dataflow::run(runtime(), graph);
        ASSERT_TRUE(result.ok) << result.error;
        ASSERT_EQ(relay.timeouts.load(), 0U);
        EXPECT_EQ(relay.out_of_order, 0U) << "the tasks did not finish in reverse spawn order";
        EXPECT_EQ(relay.finalize_calls, 1U);
        EXPECT_EQ(relay.late.load(), 0U) << "a consume task ran after finalize";
        EXPECT_EQ(sink.finalize_calls, 1U);
        EXPECT_EQ(sink.late.load(), 0U);
        EXPECT_EQ(sink.final_count, workers());
        EXPECT_EQ(sink.final_sum, triangle(workers() - 1U));
    }
}

/// Sleeps a random while per token (from the seed and the token), counts it worker-locally and
/// forwards it: its consume tasks finish in no particular order, and its successor's count keeps
/// falling back to the shares of the producers while they still emit.
class Sleepy final : public Node {
public:
    Sleepy(std::string name, std::uint64_t seed, std::uint32_t max_micros)
        : Node(std::move(name)), _seed(seed), _max_micros(max_micros) {}
    void prepare(std::uint16_t workers, std::uint16_t /*regions*/) override {
        _slots.assign(workers, {});
        finalize_calls = 0;
        count = 0;
        sum = 0;
    }
    void consume(FlowContext &context, Token token) noexcept override {
        std::this_thread::sleep_for(
            std::chrono::microseconds{mx::test::mix(_seed, token.value) % _max_micros});
        ++_slots[context.worker_id()].count;
        _slots[context.worker_id()].sum += token.value;
        context.emit(token);
    }
    void finalize(FlowContext & /*context*/) noexcept override {
        ++finalize_calls;
        for (const auto &slot : _slots) {
            count += slot.count;
            sum += slot.sum;
        }
    }
    // Read by the test thread after the run.
    std::uint32_t finalize_calls{0};
    std::uint64_t count{0};
    std::uint64_t sum{0};

private:
    std::uint64_t _seed;
    std::uint32_t _max_micros;
    std::vector<mx::test::dataflow::Partial> _slots; // per worker
};

TEST_P(DataflowRun, RandomDelaysEndEveryNodeOnceAfterAllItsTokens) {
    const std::uint64_t seed = mx::test::test_seed();
    Graph graph;
    const std::uint64_t n = scaled(400, 4);
    auto &scan = source(graph, "scan", n, Send::dispatch_any);
    auto &slow = graph.add<Sleepy>("slow", seed, 200);
    auto &fast = graph.add<Op>("fast", OpConfig{.add = 1});
    auto &slower = graph.add<Sleepy>("slower", seed + 1, 400);
    auto &sum = graph.add<Op>("sum", OpConfig{.forward = false, .use_parts = true});
    graph.connect(scan, slow);
    graph.connect(slow, fast);
    graph.connect(fast, slower);
    graph.connect(slower, sum);
    const RunResult result = mx::dataflow::run(runtime(), graph);
    ASSERT_TRUE(result.ok) << result.error;
    for (const Sleepy *node : {&slow, &slower}) {
        EXPECT_EQ(node->finalize_calls, 1U) << node->name();
    }
    EXPECT_EQ(slow.count, n);
    EXPECT_EQ(slow.sum, triangle(n));
    EXPECT_EQ(slower.count, n);
    EXPECT_EQ(slower.sum, triangle(n) + n);
    for (const Op *node : {&fast, &sum}) {
        EXPECT_EQ(node->finalize_calls, 1U) << node->name();
        EXPECT_EQ(node->late.load(), 0U) << node->name() << ": consume tasks ran after finalize";
        EXPECT_EQ(node->final_count, n) << node->name() << " ended before all its tokens were consumed";
        EXPECT_EQ(node->bad_merges.load(), 0U) << node->name();
    }
    EXPECT_EQ(sum.final_sum, triangle(n) + n);
}

TEST_P(DataflowRun, EmptyInputsStillComplete) {
    Graph graph;
    auto &scan = source(graph, "scan", 0);
    auto &map = graph.add<Op>("map", OpConfig{.add = 1});
    auto &sum = graph.add<Op>("sum", OpConfig{.forward = false, .use_parts = true});
    auto &lonely = graph.add<Op>("lonely", OpConfig{}); // a source with no tokens, alone
    graph.connect(scan, map);
    graph.connect(map, sum);
    graph.depend(sum, lonely);
    check_graph(graph, mx::dataflow::run(runtime(), graph));
    EXPECT_EQ(sum.final_count, 0U);

    Graph nothing;
    const RunResult result = mx::dataflow::run(runtime(), nothing);
    EXPECT_TRUE(result.ok);
    EXPECT_TRUE(result.pipelines.empty());
}

/// Fails the run in its k-th consume call, whatever order the tokens run in (and fails again at
/// once: the first message wins).
class Failing final : public Node {
public:
    explicit Failing(std::uint64_t at) : Node("failing"), _at(at) {}
    void consume(FlowContext &context, Token token) noexcept override {
        if (reported.load()) {
            after_failure.fetch_add(1);
        }
        if (consumed.fetch_add(1) + 1 == _at) {
            context.fail(named("call ", _at).append(" is bad"));
            reported.store(true);
            if (!context.cancelled()) {
                not_cancelled.fetch_add(1);
            }
            context.fail("second error");
        }
        context.emit(token);
    }
    void discard(const Token & /*token*/) noexcept override { discarded.fetch_add(1); }
    void finalize(FlowContext & /*context*/) noexcept override { finalized.store(true); }
    std::atomic<std::uint64_t> consumed{0};
    std::atomic<std::uint64_t> discarded{0};
    std::atomic<std::uint64_t> not_cancelled{0};
    std::atomic<std::uint64_t> after_failure{0}; // calls that began once fail() had returned
    std::atomic<bool> reported{false};
    std::atomic<bool> finalized{false};

private:
    std::uint64_t _at;
};

TEST_P(DataflowRun, FailCancelsTheRun) {
    Graph graph;
    const std::uint64_t n = scaled(4000);
    // One worker gets all tokens, so the failure comes early and cuts the rest.
    auto &scan = source(graph, "scan", n, Send::emit_local);
    auto &failing = graph.add<Failing>(5);
    auto &sum = graph.add<Op>("sum", OpConfig{.forward = false});
    auto &later = source(graph, "later", 100);
    graph.connect(scan, failing);
    graph.connect(failing, sum);
    graph.depend(sum, later);
    const RunResult result = mx::dataflow::run(runtime(), graph);
    EXPECT_FALSE(result.ok);
    EXPECT_EQ(result.error, "call 5 is bad");
    EXPECT_FALSE(failing.finalized.load()) << "finalize runs only in runs that were not cancelled";
    EXPECT_EQ(sum.finalize_calls, 0U);
    EXPECT_EQ(later.started_at, 0U) << "pipelines not started yet do not start once cancelled";
    EXPECT_EQ(failing.not_cancelled.load(), 0U);
    // Once fail() returned, a worker starts at most one more call (it may have passed the
    // cancellation check just before); the others are skipped. Calls numbered after the failing
    // one may still run before it reports (its worker can be preempted in between).
    EXPECT_GE(failing.consumed.load(), 5U);
    EXPECT_LE(failing.after_failure.load(), workers() - 1U)
        << "consume calls after the failure must be skipped";
    EXPECT_EQ(failing.consumed.load() + failing.discarded.load(), n)
        << "every skipped token is handed to discard()";
}

/// Holds a worker until the run is cancelled; tells the test thread when it started.
class Blocker final : public Node {
public:
    Blocker() : Node("blocker") {}
    void consume(FlowContext &context, Token /*token*/) noexcept override {
        consumed.fetch_add(1);
        running.store(true, std::memory_order_release);
        const auto deadline = std::chrono::steady_clock::now() + mx::test::patience;
        while (!context.cancelled() && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::yield();
        }
    }
    std::atomic<bool> running{false};
    std::atomic<std::uint64_t> consumed{0};
};

TEST_P(DataflowRun, CancelFromAnotherThread) {
    Graph graph;
    const std::uint64_t n = 10000;
    auto &scan = source(graph, "scan", n, Send::emit_local);
    auto &blocker = graph.add<Blocker>();
    graph.connect(scan, blocker);
    CancelToken token;
    RunHandle handle = mx::dataflow::start(runtime(), graph, {}, token);
    ASSERT_TRUE(mx::test::eventually([&] { return blocker.running.load(std::memory_order_acquire); }));
    EXPECT_FALSE(handle.done());
    handle.cancel("interrupted");
    token.cancel("too late: the first reason wins");
    const RunResult result = handle.wait();
    EXPECT_FALSE(result.ok);
    EXPECT_EQ(result.error, "interrupted");
    EXPECT_TRUE(handle.done());
    // Every token queues on one worker behind the blocking one: none runs after the cancel (a
    // worker that took some of them blocks, too, until the cancel).
    EXPECT_GE(blocker.consumed.load(), 1U);
    EXPECT_LE(blocker.consumed.load(), std::uint64_t{workers()}) << "consume kept running after cancel";
}

TEST_P(DataflowRun, RepeatedRunsOfOneGraph) {
    Graph graph;
    const std::uint64_t n = scaled(500);
    auto &scan = source(graph, "scan", n, Send::dispatch_worker);
    auto &map =
        graph.add<Op>("map", OpConfig{.add = 2, .finalize_tokens = 3, .finalize_send = Send::emit_any});
    auto &sum = graph.add<Op>("sum", OpConfig{.forward = false, .use_parts = true});
    graph.connect(scan, map);
    graph.connect(map, sum);
    for (int i = 0; i < 20; ++i) {
        check_graph(graph, mx::dataflow::run(runtime(), graph));
        ASSERT_EQ(sum.final_sum, triangle(n) + 2 * n + 3000) << "run " << i;
        EXPECT_FALSE(graph.running());
    }
}

TEST_P(DataflowRun, RestartFromOnDone) {
    // on_done runs on a worker after the graph is marked as not running: it may start it again.
    Graph graph;
    auto &scan = source(graph, "scan", scaled(200));
    auto &sum = graph.add<Op>("sum", OpConfig{.forward = false});
    graph.connect(scan, sum);
    std::atomic<int> runs{0};
    std::atomic<bool> all_ok{true};
    std::atomic<bool> finished{false};
    mx::tasking::Runtime &rt = runtime();
    std::function<void(RunResult)> again;
    again = [&](const RunResult &result) {
        if (!result.ok || sum.final_sum != triangle(scaled(200))) {
            all_ok.store(false);
        }
        if (runs.fetch_add(1) + 1 < 10) {
            mx::dataflow::start(rt, graph, again);
        } else {
            finished.store(true, std::memory_order_release);
        }
    };
    mx::dataflow::start(rt, graph, again);
    ASSERT_TRUE(mx::test::eventually([&] { return finished.load(std::memory_order_acquire); }));
    EXPECT_TRUE(all_ok.load());
    EXPECT_EQ(runs.load(), 10);
    ASSERT_TRUE(mx::test::eventually([&] { return !graph.running(); }));
}

TEST_P(DataflowRun, TwoGraphsFromTwoThreads) {
    const std::uint64_t n = scaled(1500);
    Graph first;
    Graph second;
    for (Graph *graph : {&first, &second}) {
        auto &scan = source(*graph, "scan", n, Send::dispatch_region);
        auto &map = graph->add<Op>("map", OpConfig{.add = 5, .spin = 20});
        auto &sum = graph->add<Op>("sum", OpConfig{.forward = false, .use_parts = true});
        graph->connect(scan, map);
        graph->connect(map, sum);
    }
    RunResult first_result;
    RunResult second_result;
    std::thread a{[&] {
        for (int i = 0; i < 5; ++i) {
            first_result = mx::dataflow::run(runtime(), first);
        }
    }};
    std::thread b{[&] {
        for (int i = 0; i < 5; ++i) {
            second_result = mx::dataflow::run(runtime(), second);
        }
    }};
    a.join();
    b.join();
    check_graph(first, first_result);
    check_graph(second, second_result);
}

TEST_P(DataflowRun, MisuseIsReported) {
    Graph graph;
    auto &blocker_source = source(graph, "scan", 1, Send::emit_local);
    auto &blocker = graph.add<Blocker>();
    graph.connect(blocker_source, blocker);
    CancelToken token;
    RunHandle handle = mx::dataflow::start(runtime(), graph, {}, token);
    EXPECT_THROW(mx::dataflow::run(runtime(), graph), std::logic_error) << "a graph runs once at a time";
    EXPECT_THROW(graph.connect(blocker, blocker_source), std::logic_error);
    token.cancel();
    EXPECT_FALSE(handle.wait().ok);

    Graph cyclic;
    auto &a = cyclic.add<Op>("a", OpConfig{});
    auto &b = cyclic.add<Op>("b", OpConfig{});
    cyclic.connect(a, b);
    cyclic.connect(b, a);
    EXPECT_THROW(mx::dataflow::run(runtime(), cyclic), std::invalid_argument);
    EXPECT_FALSE(cyclic.running());

    // run() blocks: from inside a task it throws instead of deadlocking.
    std::atomic<int> threw{0};
    Graph inner;
    source(inner, "scan", 1);
    mx::tasking::Runtime &rt = runtime();
    rt.spawn([&] {
        try {
            mx::dataflow::run(rt, inner);
        } catch (const std::logic_error &) {
            threw.store(1);
        }
    });
    rt.wait();
    EXPECT_EQ(threw.load(), 1);
}

/// Prefetch callback: sees the tokens of queued consume tasks before they run.
class Prefetched final : public Node {
public:
    explicit Prefetched(std::uint64_t tokens) : Node("prefetched"), _tokens(tokens) {}
    void consume(FlowContext & /*context*/, Token token) noexcept override {
        if (token.value == 0 || token.value > _tokens) {
            bad.fetch_add(1);
        }
    }
    void prefetch(const Token &token) const noexcept override {
        prefetches.fetch_add(1, std::memory_order_relaxed);
        if (token.value == 0 || token.value > _tokens) {
            bad.fetch_add(1);
        }
    }
    [[nodiscard]] bool has_prefetch() const noexcept override { return true; }
    mutable std::atomic<std::uint64_t> prefetches{0};
    mutable std::atomic<std::uint64_t> bad{0};

private:
    std::uint64_t _tokens;
};

TEST_P(DataflowRun, PrefetchCallbackSeesQueuedTokens) {
    Graph graph;
    const std::uint64_t n = scaled(2000);
    auto &scan = source(graph, "scan", n, Send::emit_local);
    auto &node = graph.add<Prefetched>(n);
    graph.connect(scan, node);
    ASSERT_TRUE(mx::dataflow::run(runtime(), graph).ok);
    EXPECT_GT(node.prefetches.load(), 0U);
    EXPECT_LE(node.prefetches.load(), n);
    EXPECT_EQ(node.bad.load(), 0U);
}

/// Random DAGs: random edges, sources, send modes, finalize emits, parts, dependencies; every
/// node checked against the oracle.
TEST_P(DataflowRun, RandomGraphsMatchTheOracle) {
    const std::uint64_t seed = mx::test::test_seed();
    std::mt19937_64 random{seed};
    const int graphs = static_cast<int>(scaled(12, 3));
    for (int g = 0; g < graphs; ++g) {
        Graph graph;
        const auto nodes = static_cast<NodeId>(3 + random() % 10);
        constexpr Send source_sends[] = {Send::dispatch_any, Send::dispatch_worker, Send::dispatch_region,
                                         Send::emit_local,   Send::emit_worker,     Send::emit_region,
                                         Send::emit_any};
        constexpr Send finalize_sends[] = {Send::none, Send::emit_local, Send::emit_worker, Send::emit_region,
                                           Send::emit_any};
        // Decide edges first: a node is a source if no earlier node streams into it.
        std::vector<std::vector<NodeId>> predecessors(nodes);
        for (NodeId to = 1; to < nodes; ++to) {
            for (NodeId from = 0; from < to; ++from) {
                if (random() % 4 == 0) {
                    predecessors[to].push_back(from);
                }
            }
        }
        for (NodeId id = 0; id < nodes; ++id) {
            OpConfig config{};
            config.add = random() % 5;
            config.forward = random() % 5 != 0;
            config.spin = static_cast<std::uint32_t>(random() % 3 == 0 ? random() % 300 : 0);
            config.use_parts = random() % 3 == 0;
            config.finalize_send = finalize_sends[random() % std::size(finalize_sends)];
            config.finalize_tokens = static_cast<std::uint32_t>(random() % 20);
            if (predecessors[id].empty()) {
                config.source_tokens =
                    random() % 8 == 0 ? 0 : scaled(static_cast<std::uint32_t>(random() % 400));
                config.source_send = source_sends[random() % std::size(source_sends)];
            }
            graph.add<Op>(named("n", id), config);
            for (const NodeId from : predecessors[id]) {
                graph.connect(from, id);
            }
        }
        // Dependencies only from lower- to higher-numbered pipelines: acyclic.
        const auto pipelines = graph.pipelines();
        for (std::size_t before = 0; before < pipelines.size(); ++before) {
            for (std::size_t after = before + 1; after < pipelines.size(); ++after) {
                if (random() % 3 == 0) {
                    const auto &from = pipelines[before].nodes;
                    const auto &to = pipelines[after].nodes;
                    graph.depend(from[random() % from.size()], to[random() % to.size()]);
                }
            }
        }
        std::string trace = named("graph ", g);
        trace.append(" of seed ").append(std::to_string(seed)).append(":\n").append(graph.describe());
        SCOPED_TRACE(trace);
        check_graph(graph, mx::dataflow::run(runtime(), graph));
        if (HasFailure()) {
            return;
        }
    }
}

std::string flow_shape_name(const ::testing::TestParamInfo<FlowShape> &param) { return param.param.name; }

INSTANTIATE_TEST_SUITE_P(Shapes, DataflowRun, ::testing::ValuesIn(flow_shapes()), flow_shape_name);

TEST(DataflowConfig, LifoRuntimeRuns) {
    // run() and start() + wait() on a LIFO runtime: both succeed (the suite above runs every test
    // under LIFO as well; this one checks the entry points and the handle).
    mx::tasking::RuntimeConfig config;
    config.workers = 2;
    config.local_order = mx::tasking::LocalOrder::lifo;
    mx::tasking::Runtime runtime{config};
    Graph graph;
    auto &scan = graph.add<Op>("scan", OpConfig{.source_tokens = 100});
    auto &sum = graph.add<Op>("sum", OpConfig{.forward = false});
    graph.connect(scan, sum);
    const RunResult blocking = mx::dataflow::run(runtime, graph);
    EXPECT_TRUE(blocking.ok) << blocking.error;
    EXPECT_EQ(sum.final_sum, triangle(100));
    std::atomic<bool> called{false};
    RunHandle handle = mx::dataflow::start(runtime, graph, [&](const RunResult &result) {
        if (result.ok) {
            called.store(true);
        }
    });
    const RunResult waited = handle.wait();
    EXPECT_TRUE(waited.ok) << waited.error;
    EXPECT_EQ(sum.finalize_calls, 1U);
    EXPECT_EQ(sum.final_sum, triangle(100));
    EXPECT_TRUE(called.load());
    EXPECT_FALSE(graph.running());
    runtime.wait();
    EXPECT_EQ(runtime.live_tasks(), 0U);
}

TEST(DataflowConfig, StoppedRuntimeIsRejected) {
    mx::tasking::RuntimeConfig config;
    config.workers = 1;
    mx::tasking::Runtime runtime{config};
    runtime.stop();
    Graph graph;
    graph.add<Op>("scan", OpConfig{.source_tokens = 1});
    EXPECT_THROW(mx::dataflow::run(runtime, graph), std::logic_error);
    EXPECT_FALSE(graph.running());
}

} // namespace
