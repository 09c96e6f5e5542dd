// The operator graph without a runtime: building, validation errors, pipelines, the plan text.

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <mx/dataflow/graph.h>

namespace {

using mx::dataflow::FlowContext;
using mx::dataflow::Graph;
using mx::dataflow::Node;
using mx::dataflow::NodeId;
using mx::dataflow::Pipeline;
using mx::dataflow::Token;

class Nop final : public Node {
public:
    explicit Nop(std::string name, std::string details = {})
        : Node(std::move(name)), _details(std::move(details)) {}
    void consume(FlowContext & /*context*/, Token /*token*/) noexcept override {}
    [[nodiscard]] std::string details() const override { return _details; }

private:
    std::string _details;
};

/// Expects `call` to throw std::invalid_argument whose message contains `needle`.
template <class Call>
void expect_invalid(Call call, const std::string &needle) {
    try {
        call();
        ADD_FAILURE() << "expected std::invalid_argument mentioning '" << needle << "'";
    } catch (const std::invalid_argument &error) {
        EXPECT_NE(std::string{error.what()}.find(needle), std::string::npos) << error.what();
    }
}

TEST(DataflowGraph, IdsFollowInsertionOrder) {
    Graph graph;
    auto &a = graph.add<Nop>("a");
    auto &b = graph.add<Nop>("b");
    const NodeId c = graph.add(std::make_unique<Nop>("c"));
    EXPECT_EQ(a.id(), 0U);
    EXPECT_EQ(b.id(), 1U);
    EXPECT_EQ(c, 2U);
    EXPECT_EQ(graph.size(), 3U);
    EXPECT_EQ(&graph.node(1), &b);
    EXPECT_EQ(graph.node(2).name(), "c");
}

TEST(DataflowGraph, BuildErrorsAreReportedAtOnce) {
    Graph graph;
    auto &a = graph.add<Nop>("a");
    auto &b = graph.add<Nop>("b");
    expect_invalid([&] { graph.connect(a.id(), 7); }, "no node 7");
    expect_invalid([&] { graph.depend(9, a.id()); }, "no node 9");
    expect_invalid([&] { graph.connect(a, a); }, "cannot stream into itself");
    expect_invalid([&] { graph.depend(b, b); }, "cannot depend on itself");
    graph.connect(a, b);
    expect_invalid([&] { graph.connect(a, b); }, "duplicate data edge");
    expect_invalid([&] { graph.add(std::unique_ptr<Node>{}); }, "no node");
    expect_invalid([&] { static_cast<void>(graph.node(5)); }, "no node 5");

    Graph other;
    auto orphan = std::make_unique<Nop>("orphan");
    Node *raw = orphan.get();
    other.add(std::move(orphan));
    // The same object cannot be handed to a second graph.
    expect_invalid([&] { graph.add(std::unique_ptr<Node>{raw}); }, "already belongs");
}

TEST(DataflowGraph, DataCycleIsRejected) {
    Graph graph;
    auto &a = graph.add<Nop>("a");
    auto &b = graph.add<Nop>("b");
    auto &c = graph.add<Nop>("c");
    graph.connect(a, b);
    graph.connect(b, c);
    graph.connect(c, b);
    expect_invalid([&] { graph.validate(); }, "cycle");
    expect_invalid([&] { static_cast<void>(graph.pipelines()); }, "cycle");
    expect_invalid([&] { static_cast<void>(graph.describe()); }, "'b'");
}

TEST(DataflowGraph, DependencyInsideOnePipelineIsRejected) {
    Graph graph;
    auto &scan = graph.add<Nop>("scan");
    auto &filter = graph.add<Nop>("filter");
    auto &sink = graph.add<Nop>("sink");
    graph.connect(scan, filter);
    graph.connect(filter, sink);
    graph.validate();
    graph.depend(sink, scan); // the pipeline would wait for its own end
    expect_invalid([&] { graph.validate(); }, "own pipeline");
}

TEST(DataflowGraph, DependencyCycleBetweenPipelinesIsRejected) {
    Graph graph;
    auto &a1 = graph.add<Nop>("a1");
    auto &a2 = graph.add<Nop>("a2");
    auto &b1 = graph.add<Nop>("b1");
    auto &c1 = graph.add<Nop>("c1");
    graph.connect(a1, a2);
    graph.depend(a2, b1);
    graph.depend(b1, c1);
    graph.validate();
    graph.depend(c1, a1);
    expect_invalid([&] { graph.validate(); }, "cycle between pipelines");
}

TEST(DataflowGraph, PipelinesAreConnectedComponents) {
    // Hash join: scan R -> build; scan S -> probe -> aggregate -> output; build before probe.
    Graph graph;
    auto &scan_s = graph.add<Nop>("scan_s");
    auto &probe = graph.add<Nop>("probe");
    auto &aggregate = graph.add<Nop>("aggregate");
    auto &scan_r = graph.add<Nop>("scan_r");
    auto &build = graph.add<Nop>("build", "key=r.a");
    auto &output = graph.add<Nop>("output");
    graph.connect(scan_s, probe);
    graph.connect(probe, aggregate);
    graph.connect(aggregate, output);
    graph.connect(scan_r, build);
    graph.depend(build, probe);
    graph.depend(build, aggregate); // same pipeline twice: counted once

    const std::vector<Pipeline> pipelines = graph.pipelines();
    ASSERT_EQ(pipelines.size(), 2U);
    EXPECT_EQ(pipelines[0].id, 0U);
    EXPECT_EQ(pipelines[0].nodes,
              (std::vector<NodeId>{scan_s.id(), probe.id(), aggregate.id(), output.id()}));
    EXPECT_EQ(pipelines[0].sources, (std::vector<NodeId>{scan_s.id()}));
    EXPECT_EQ(pipelines[0].sinks, (std::vector<NodeId>{output.id()}));
    EXPECT_EQ(pipelines[0].depends_on, (std::vector<NodeId>{build.id()}));
    EXPECT_EQ(pipelines[0].after, (std::vector<std::uint32_t>{1}));
    EXPECT_EQ(pipelines[1].nodes, (std::vector<NodeId>{scan_r.id(), build.id()}));
    EXPECT_TRUE(pipelines[1].depends_on.empty());

    const std::string plan = graph.describe();
    EXPECT_NE(plan.find("pipeline 0 (after 4 'build')"), std::string::npos) << plan;
    EXPECT_NE(plan.find("0 'scan_s' source -> 1 'probe'"), std::string::npos) << plan;
    EXPECT_NE(plan.find("4 'build' [key=r.a]"), std::string::npos) << plan;
    EXPECT_NE(plan.find("pipeline 1\n"), std::string::npos) << plan;
}

TEST(DataflowGraph, DiamondIsOnePipelineInTopologicalOrder) {
    Graph graph;
    auto &join = graph.add<Nop>("join");
    auto &left = graph.add<Nop>("left");
    auto &right = graph.add<Nop>("right");
    auto &source = graph.add<Nop>("source");
    graph.connect(source, left);
    graph.connect(source, right);
    graph.connect(left, join);
    graph.connect(right, join);
    const auto pipelines = graph.pipelines();
    ASSERT_EQ(pipelines.size(), 1U);
    EXPECT_EQ(pipelines[0].nodes, (std::vector<NodeId>{source.id(), left.id(), right.id(), join.id()}));
    EXPECT_EQ(graph.predecessors(join.id()), (std::vector<NodeId>{left.id(), right.id()}));
    EXPECT_EQ(graph.successors(source.id()), (std::vector<NodeId>{left.id(), right.id()}));
}

TEST(DataflowGraph, MovedGraphKeepsItsNodes) {
    Graph graph;
    auto &a = graph.add<Nop>("a");
    auto &b = graph.add<Nop>("b");
    graph.connect(a, b);
    Graph moved{std::move(graph)};
    EXPECT_EQ(moved.size(), 2U);
    EXPECT_EQ(&moved.node(0), &a);
    // The nodes now belong to `moved`: handing one to another graph still fails.
    Graph third;
    expect_invalid([&] { third.add(std::unique_ptr<Node>{&a}); }, "already belongs");
    EXPECT_EQ(moved.pipelines().size(), 1U);
}

TEST(DataflowGraph, EmptyGraphHasNoPipelines) {
    const Graph graph;
    graph.validate();
    EXPECT_TRUE(graph.pipelines().empty());
    EXPECT_EQ(graph.describe(), "");
}

} // namespace
