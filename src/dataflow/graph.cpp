// The operator graph: building, validation, pipelines and the EXPLAIN text. Nothing here runs on
// the task path.

#include "mx/dataflow/graph.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <queue>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "mx/util/assert.h"

namespace mx::dataflow {

namespace {

std::string node_label(const Graph &graph, NodeId id) {
    std::string label = std::to_string(id);
    label.append(" '").append(graph.node(id).name()).append("'");
    return label;
}

/// Union-find over data edges: the pipelines are its components.
class Components {
public:
    explicit Components(std::size_t size) : _parent(size) { std::iota(_parent.begin(), _parent.end(), 0U); }
    NodeId find(NodeId id) {
        while (_parent[id] != id) {
            _parent[id] = _parent[_parent[id]];
            id = _parent[id];
        }
        return id;
    }
    void unite(NodeId a, NodeId b) {
        a = find(a);
        b = find(b);
        if (a != b) {
            _parent[std::max(a, b)] = std::min(a, b);
        }
    }

private:
    std::vector<NodeId> _parent;
};

/// Validates the graph and splits it into pipelines; throws std::invalid_argument.
std::vector<Pipeline> analyze(const Graph &graph) {
    const auto size = static_cast<NodeId>(graph.size());

    // Data edges must form a DAG: a topological order (Kahn, smallest id first so the order is
    // stable and readable).
    std::vector<std::uint32_t> in_degree(size);
    for (NodeId id = 0; id < size; ++id) {
        in_degree[id] = static_cast<std::uint32_t>(graph.predecessors(id).size());
    }
    std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready;
    for (NodeId id = 0; id < size; ++id) {
        if (in_degree[id] == 0) {
            ready.push(id);
        }
    }
    std::vector<NodeId> order;
    order.reserve(size);
    while (!ready.empty()) {
        const NodeId id = ready.top();
        ready.pop();
        order.push_back(id);
        for (const NodeId next : graph.successors(id)) {
            if (--in_degree[next] == 0) {
                ready.push(next);
            }
        }
    }
    if (order.size() != size) {
        NodeId on_cycle = 0;
        while (in_degree[on_cycle] == 0) {
            ++on_cycle;
        }
        std::string message = "dataflow graph: data edges form a cycle through node ";
        message.append(node_label(graph, on_cycle));
        throw std::invalid_argument(message);
    }

    Components components{size};
    for (NodeId id = 0; id < size; ++id) {
        for (const NodeId next : graph.successors(id)) {
            components.unite(id, next);
        }
    }
    // Pipelines numbered by their smallest node id.
    std::vector<std::uint32_t> pipeline_of(size);
    std::vector<Pipeline> pipelines;
    std::vector<std::uint32_t> root_pipeline(size, ~0U);
    for (NodeId id = 0; id < size; ++id) {
        const NodeId root = components.find(id);
        if (root_pipeline[root] == ~0U) {
            root_pipeline[root] = static_cast<std::uint32_t>(pipelines.size());
            pipelines.emplace_back();
            pipelines.back().id = root_pipeline[root];
        }
        pipeline_of[id] = root_pipeline[root];
    }
    for (const NodeId id : order) {
        Pipeline &pipeline = pipelines[pipeline_of[id]];
        pipeline.nodes.push_back(id);
        if (graph.predecessors(id).empty()) {
            pipeline.sources.push_back(id);
        }
        if (graph.successors(id).empty()) {
            pipeline.sinks.push_back(id);
        }
    }
    for (Pipeline &pipeline : pipelines) {
        std::sort(pipeline.sources.begin(), pipeline.sources.end());
        std::sort(pipeline.sinks.begin(), pipeline.sinks.end());
    }

    for (const auto &[before, after] : graph.dependencies()) {
        const std::uint32_t waiting = pipeline_of[after];
        if (pipeline_of[before] == waiting) {
            std::string message = "dataflow graph: node ";
            message.append(node_label(graph, after))
                .append(" depends on node ")
                .append(node_label(graph, before))
                .append(" of its own pipeline, which could never start");
            throw std::invalid_argument(message);
        }
        Pipeline &pipeline = pipelines[waiting];
        if (std::find(pipeline.depends_on.begin(), pipeline.depends_on.end(), before) ==
            pipeline.depends_on.end()) {
            pipeline.depends_on.push_back(before);
        }
        if (std::find(pipeline.after.begin(), pipeline.after.end(), pipeline_of[before]) ==
            pipeline.after.end()) {
            pipeline.after.push_back(pipeline_of[before]);
        }
    }
    for (Pipeline &pipeline : pipelines) {
        std::sort(pipeline.depends_on.begin(), pipeline.depends_on.end());
        std::sort(pipeline.after.begin(), pipeline.after.end());
    }

    // Dependencies between pipelines must form a DAG, too.
    std::vector<std::uint32_t> waiting_for(pipelines.size());
    std::vector<std::vector<std::uint32_t>> releases(pipelines.size());
    for (const Pipeline &pipeline : pipelines) {
        waiting_for[pipeline.id] = static_cast<std::uint32_t>(pipeline.after.size());
        for (const std::uint32_t before : pipeline.after) {
            releases[before].push_back(pipeline.id);
        }
    }
    std::vector<std::uint32_t> startable;
    for (const Pipeline &pipeline : pipelines) {
        if (waiting_for[pipeline.id] == 0) {
            startable.push_back(pipeline.id);
        }
    }
    std::size_t started = 0;
    while (!startable.empty()) {
        const std::uint32_t id = startable.back();
        startable.pop_back();
        ++started;
        for (const std::uint32_t next : releases[id]) {
            if (--waiting_for[next] == 0) {
                startable.push_back(next);
            }
        }
    }
    if (started != pipelines.size()) {
        std::uint32_t stuck = 0;
        while (waiting_for[stuck] == 0) {
            ++stuck;
        }
        std::string message = "dataflow graph: dependencies form a cycle between pipelines, e.g. through "
                              "the pipeline of node ";
        message.append(node_label(graph, pipelines[stuck].nodes.front()));
        throw std::invalid_argument(message);
    }
    return pipelines;
}

void append_ids(std::string &out, const Graph &graph, const std::vector<NodeId> &ids) {
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (i > 0) {
            out.append(", ");
        }
        out.append(node_label(graph, ids[i]));
    }
}

} // namespace

Graph::~Graph() { MX_ASSERT(!running(), "a graph was destroyed while a run of it was in flight"); }

Graph::Graph(Graph &&other) noexcept
    : _nodes(std::move(other._nodes)), _successors(std::move(other._successors)),
      _predecessors(std::move(other._predecessors)), _dependencies(std::move(other._dependencies)) {
    MX_ASSERT(!other.running(), "a graph was moved while a run of it was in flight");
    for (auto &node : _nodes) {
        node->_graph = this;
    }
}

Graph &Graph::operator=(Graph &&other) noexcept {
    MX_ASSERT(!running() && !other.running(), "a graph was moved while a run of it was in flight");
    if (this != &other) {
        _nodes = std::move(other._nodes);
        _successors = std::move(other._successors);
        _predecessors = std::move(other._predecessors);
        _dependencies = std::move(other._dependencies);
        for (auto &node : _nodes) {
            node->_graph = this;
        }
    }
    return *this;
}

NodeId Graph::add(std::unique_ptr<Node> node) {
    if (!node) {
        throw std::invalid_argument("dataflow graph: add() got no node");
    }
    if (node->_graph != nullptr) {
        std::string message = "dataflow graph: node '";
        message.append(node->name()).append("' already belongs to a graph");
        // The other graph owns the object; this pointer is an alias that must not free it.
        static_cast<void>(node.release());
        throw std::invalid_argument(message);
    }
    if (running()) {
        throw std::logic_error("dataflow graph: nodes cannot be added while the graph runs");
    }
    const auto id = static_cast<NodeId>(_nodes.size());
    node->_id = id;
    node->_graph = this;
    _nodes.push_back(std::move(node));
    _successors.emplace_back();
    _predecessors.emplace_back();
    return id;
}

Node &Graph::node(NodeId id) const {
    if (id >= _nodes.size()) {
        std::string message = "dataflow graph: there is no node ";
        message.append(std::to_string(id));
        throw std::invalid_argument(message);
    }
    return *_nodes[id];
}

void Graph::connect(NodeId from, NodeId to) {
    static_cast<void>(node(from));
    static_cast<void>(node(to));
    if (running()) {
        throw std::logic_error("dataflow graph: edges cannot be added while the graph runs");
    }
    if (from == to) {
        std::string message = "dataflow graph: node ";
        message.append(node_label(*this, from)).append(" cannot stream into itself");
        throw std::invalid_argument(message);
    }
    auto &next = _successors[from];
    if (std::find(next.begin(), next.end(), to) != next.end()) {
        std::string message = "dataflow graph: duplicate data edge ";
        message.append(node_label(*this, from)).append(" -> ").append(node_label(*this, to));
        throw std::invalid_argument(message);
    }
    next.push_back(to);
    _predecessors[to].push_back(from);
}

void Graph::depend(NodeId before, NodeId after) {
    static_cast<void>(node(before));
    static_cast<void>(node(after));
    if (running()) {
        throw std::logic_error("dataflow graph: dependencies cannot be added while the graph runs");
    }
    if (before == after) {
        std::string message = "dataflow graph: node ";
        message.append(node_label(*this, before)).append(" cannot depend on itself");
        throw std::invalid_argument(message);
    }
    const std::pair<NodeId, NodeId> dependency{before, after};
    if (std::find(_dependencies.begin(), _dependencies.end(), dependency) == _dependencies.end()) {
        _dependencies.push_back(dependency);
    }
}

std::vector<Pipeline> Graph::pipelines() const { return analyze(*this); }

void Graph::validate() const { static_cast<void>(analyze(*this)); }

std::string Graph::describe() const {
    const std::vector<Pipeline> plan = analyze(*this);
    std::string out;
    for (const Pipeline &pipeline : plan) {
        out.append("pipeline ").append(std::to_string(pipeline.id));
        if (!pipeline.depends_on.empty()) {
            out.append(" (after ");
            append_ids(out, *this, pipeline.depends_on);
            out.append(")");
        }
        out.append("\n");
        for (const NodeId id : pipeline.nodes) {
            out.append("  ").append(node_label(*this, id));
            const std::string details = node(id).details();
            if (!details.empty()) {
                out.append(" [").append(details).append("]");
            }
            if (predecessors(id).empty()) {
                out.append(" source");
            }
            if (!successors(id).empty()) {
                out.append(" -> ");
                append_ids(out, *this, successors(id));
            }
            out.append("\n");
        }
    }
    return out;
}

} // namespace mx::dataflow
