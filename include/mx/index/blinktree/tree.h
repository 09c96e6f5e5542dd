#pragma once

// The task-based B-link tree (dissertation ch. 5): every node is a runtime resource, every
// operation one task that moves down the tree node by node. The task is annotated as a reader
// of each inner node it visits and as a writer of the leaf from the branch level on, so the
// runtime wraps the node's synchronization primitive around each step and the tree code has no
// latch code at all. See docs/design/blinktree.md.

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mx/index/blinktree/check.h"
#include "mx/index/blinktree/node.h"
#include "mx/sync/primitives.h"
#include "mx/system/memory_latency.h"
#include "mx/tasking/coroutine_task.h"
#include "mx/tasking/runtime.h"
#include "mx/tasking/task_group.h"

namespace mx::index::blinktree {

enum class Operation : std::uint8_t { insert, lookup, update, remove, scan, insert_separator };

/// What an operation found or did. insert: found = the key was already there (nothing changed);
/// update / remove: found = the key was there (and was changed); lookup: found and value;
/// scan: count entries written to the request's buffer.
struct OpResult {
    Operation operation{Operation::lookup};
    Key key{0};
    Value value{0};
    bool found{false};
    std::uint32_t count{0};
};

/// Called once per operation on the worker that finished it, after the read was validated.
using Callback = void (*)(void *context, const OpResult &result, tasking::TaskContext &task_context) noexcept;
struct Listener {
    Callback callback{nullptr};
    void *context{nullptr};
};

struct Request {
    Operation operation{Operation::lookup};
    Key key{0};
    Value value{0};
    Listener listener{};
    /// Scans: up to scan_limit entries with keys >= key are written here.
    std::pair<Key, Value> *scan_out{nullptr};
    std::uint32_t scan_limit{0};
};

struct TreeConfig {
    /// Forces every node's primitive (the cost model decides otherwise: optimistic scheduling for
    /// inner nodes, optimistic latches for leaves).
    std::optional<sync::Primitive> primitive{};
    double inner_read_ratio{0.99};
    double leaf_read_ratio{0.5};
    /// Prefetch hints: header plus this many eighths of the key array, for reading and for
    /// writing steps. Half the keys for lookups, as the dissertation (5.4) found: fewer lines in
    /// flight per step leave room to prefetch further ahead (RuntimeConfig::prefetch_distance 4
    /// in the YCSB driver), which beat all key lines at distance 3 on the Intel guest by 10-15 %
    /// (the sweeps are in docs/benchmarks.md, B-link tree).
    std::uint32_t read_prefetch_eighths{4};
    std::uint32_t write_prefetch_eighths{8};
    /// How reading steps prefetch: into all cache levels (temporal), or non-temporal, which
    /// keeps lines read once per visit from displacing the upper levels in L2/L3.
    system::PrefetchMode read_prefetch_mode{system::PrefetchMode::temporal};
    /// Off: no hints; the runtime then prefetches the first line of each node only.
    bool prefetch_hints{true};
    /// Steps into nodes on this level or above run right after the step that found them
    /// (TaskResult::bypass) instead of going through the worker's pool: the upper levels are a
    /// few nodes that stay in cache, so a prefetch hides nothing there and the dispatch is pure
    /// overhead. Branch nodes (level 1) and leaves are far more numerous and keep their prefetch.
    /// 0 = never bypass.
    std::uint16_t bypass_min_level{2};
    /// Operations submitted from inside a task run their bypassed steps (root and upper levels)
    /// at once, inside the submitting task (TaskContext::run_inline), instead of starting with a
    /// round through the pool for the root.
    bool submit_inline{true};
    /// Reading steps on pooled nodes (below bypass_min_level) in two rounds: the first searches
    /// the prefetched key lines and queues the task again with a hint for the one payload line
    /// the step needs (the child, or the found value); the second reads it. The payload line of
    /// a lookup is otherwise a miss the worker waits for. Off by default: on the 2-core VM the
    /// extra round cost more than the miss (lookups there are bound by the lines in flight, not
    /// by the latency of one; docs/benchmarks.md). Unset (nullopt): on when the runtime's
    /// measured load latency is at least payload_step_min_latency cycles. With interleaved
    /// lookups a lookup's second round is one more suspension of its coroutine.
    std::optional<bool> payload_step{false};
    std::uint32_t payload_step_min_latency{payload_step_default_min_latency};
    /// A dispatch costs on the order of a hundred cycles; below this latency the second round
    /// costs more than the miss it hides.
    static constexpr std::uint32_t payload_step_default_min_latency = 400;
    /// Lookups as coroutine tasks (interleaved execution, docs/design/coroutines.md): one task
    /// walks from the root to the leaf, prefetches each pooled node's lines and suspends, and the
    /// worker resumes the other lookups of its coroutine group meanwhile; each node is read
    /// through TaskContext::read under the node's primitive. A step then costs a coroutine switch
    /// instead of a round through the worker's pool. Other operations stay operation tasks. Off
    /// by default: fewer instructions per lookup, but not faster on the 2-core VM, where lookups
    /// are bound by the lines in flight (docs/benchmarks.md, B-link tree).
    bool interleaved_lookups{false};
};

template <std::size_t NodeSize = 1024>
class BLinkTree {
public:
    using NodeType = Node<NodeSize>;

    /// Creates an empty tree (one leaf as root). The runtime must outlive the tree.
    explicit BLinkTree(tasking::Runtime &runtime, TreeConfig config = {})
        : _runtime(&runtime), _config(config),
          _read_mask(NodeType::header_and_keys_mask(config.read_prefetch_eighths)),
          _write_mask(NodeType::header_and_keys_mask(config.write_prefetch_eighths)),
          _payload_step(config.payload_step.value_or(system::load_latency_cycles() >=
                                                     config.payload_step_min_latency)) {
        _root.store(runtime.new_resource<NodeType>(node_annotation(0), std::uint16_t{0}),
                    std::memory_order_release);
    }
    /// Retires every node through the runtime's reclamation. No operation may be in flight.
    ~BLinkTree() {
        for_each_node<NodeSize>(_root.load(std::memory_order_acquire),
                                [this](NodeRef ref) { _runtime->delete_resource(ref); });
    }
    BLinkTree(const BLinkTree &) = delete;
    BLinkTree &operator=(const BLinkTree &) = delete;

    /// From inside a task: starts an operation. Its steps on bypassed upper levels run inside
    /// the calling task where run_inline allows it (TreeConfig::submit_inline); otherwise it is
    /// spawned locally, or to the root's worker.
    void submit(tasking::TaskContext &context, const Request &request) noexcept {
        if (_config.interleaved_lookups && request.operation == Operation::lookup) {
            context.spawn(*context.new_task<LookupTask>(*this, request));
            return;
        }
        OperationTask *task = start(context.new_task<OperationTask>(*this, request));
        const std::uint16_t bypass_from = _config.bypass_min_level;
        if (_config.submit_inline && bypass_from != 0 &&
            task->resource().template get<NodeType>()->level >= bypass_from) {
            // The root is on a bypassed level (in cache): its steps run from here, down to the
            // first level that goes through the pool, saving the operation one round there.
            context.run_inline(*task);
        } else {
            context.spawn(*task);
        }
    }
    /// From any thread outside the runtime's workers (or inside, like Runtime::spawn).
    void submit(const Request &request) noexcept {
        if (_config.interleaved_lookups && request.operation == Operation::lookup) {
            _runtime->spawn(*_runtime->new_task<LookupTask>(*this, request));
            return;
        }
        _runtime->spawn(*start(_runtime->new_task<OperationTask>(*this, request)));
    }

    // Synchronous wrappers for callers outside the runtime (tests, examples): each submits one
    // operation and waits for its result. Never call them from inside a task.
    bool insert(Key key, Value value) {
        return !run({.operation = Operation::insert, .key = key, .value = value}).found;
    }
    std::optional<Value> lookup(Key key) {
        const OpResult result = run({.operation = Operation::lookup, .key = key});
        return result.found ? std::optional<Value>{result.value} : std::nullopt;
    }
    bool update(Key key, Value value) {
        return run({.operation = Operation::update, .key = key, .value = value}).found;
    }
    bool remove(Key key) { return run({.operation = Operation::remove, .key = key}).found; }
    std::vector<std::pair<Key, Value>> scan(Key from, std::uint32_t limit) {
        std::vector<std::pair<Key, Value>> entries(limit);
        const OpResult result =
            run({.operation = Operation::scan, .key = from, .scan_out = entries.data(), .scan_limit = limit});
        entries.resize(result.count);
        return entries;
    }

    // Quiescent inspection (no operation in flight).
    [[nodiscard]] NodeRef root() const noexcept { return _root.load(std::memory_order_acquire); }
    [[nodiscard]] std::string check(TreeShape *shape = nullptr) const {
        return check_structure<NodeSize>(root(), shape);
    }
    [[nodiscard]] std::vector<std::pair<Key, Value>> entries() const {
        return collect_entries<NodeSize>(root());
    }
    [[nodiscard]] const TreeConfig &config() const noexcept { return _config; }
    /// TreeConfig::payload_step as resolved at construction.
    [[nodiscard]] bool payload_step() const noexcept { return _payload_step; }

private:
    class OperationTask;
    class LookupTask;

    [[nodiscard]] tasking::ResourceAnnotation node_annotation(std::uint16_t level) const noexcept {
        const bool leaf = level == 0;
        return tasking::ResourceAnnotation{
            .isolation = tasking::Isolation::exclusive_writer,
            .read_ratio = leaf ? _config.leaf_read_ratio : _config.inner_read_ratio,
            .frequency = leaf ? tasking::AccessFrequency::normal : tasking::AccessFrequency::high,
            .primitive = _config.primitive};
    }

    OperationTask *start(OperationTask *task) const noexcept {
        const NodeRef root_ref = _root.load(std::memory_order_acquire);
        // A node's level never changes after creation, so reading it unsynchronized is safe.
        const bool leaf = root_ref.get<NodeType>()->is_leaf();
        task->move_to(root_ref, leaf && task->writes_leaf() ? tasking::AccessMode::write
                                                            : tasking::AccessMode::read_only);
        return task;
    }

    /// One operation as a task group of one: the listener (called in the task's commit(), after
    /// validation) stores the result and counts the group down; the caller sleeps in wait().
    OpResult run(const Request &request) {
        // On a worker, group.wait() aborts with a message (submit() with a listener instead).
        struct Outcome {
            tasking::TaskGroup *group;
            OpResult result; // written by the worker before done(), read after wait()
        };
        tasking::TaskGroup group{*_runtime};
        Outcome outcome{&group, {}};
        Request with_listener = request;
        with_listener.listener =
            Listener{[](void *context, const OpResult &result, tasking::TaskContext &task_context) noexcept {
                         auto *target = static_cast<Outcome *>(context);
                         target->result = result;
                         target->group->done(task_context); // last access: the caller may return now
                     },
                     &outcome};
        group.add();
        submit(with_listener);
        [[maybe_unused]] const tasking::GroupResult status = group.wait();
        MX_ASSERT(status.ok(), "a tree operation neither fails nor cancels its group");
        return outcome.result;
    }

    /// Called by a writer that split `node` (which it still holds): makes a new root above it,
    /// or hands the separator to a follow-up task for the parent level.
    void propagate_split(tasking::TaskContext &context, NodeRef node_ref, std::uint16_t level, Key separator,
                         NodeRef sibling, NodeRef parent_hint) noexcept {
        if (_root.load(std::memory_order_acquire) == node_ref) {
            // Only a writer of the current root gets here, so root changes are serialized.
            const NodeRef new_root =
                context.new_resource<NodeType>(node_annotation(static_cast<std::uint16_t>(level + 1)),
                                               static_cast<std::uint16_t>(level + 1));
            NodeType &root_node = *new_root.get<NodeType>();
            root_node.leftmost = node_ref;
            root_node.keys[0] = separator;
            root_node.payload[0] = NodeType::raw(sibling);
            root_node.count = 1;
            _root.store(new_root, std::memory_order_release);
            return;
        }
        Request request{
            .operation = Operation::insert_separator, .key = separator, .value = NodeType::raw(sibling)};
        auto *task = context.new_task<OperationTask>(*this, request);
        task->set_target_level(static_cast<std::uint16_t>(level + 1));
        if (parent_hint) {
            task->move_to(parent_hint, tasking::AccessMode::write);
        } else {
            start(task);
        }
        context.spawn(*task);
    }

    NodeRef new_node(tasking::TaskContext &context, std::uint16_t level) noexcept {
        return context.new_resource<NodeType>(node_annotation(level), level);
    }

    tasking::Runtime *_runtime;
    TreeConfig _config;
    std::uint64_t _read_mask;
    std::uint64_t _write_mask;
    bool _payload_step;
    // Written by the writer of the current root when it splits; read by every operation start.
    alignas(system::cache_line_size) std::atomic<NodeRef> _root{};
};

template <std::size_t NodeSize>
class BLinkTree<NodeSize>::OperationTask final : public tasking::Task {
public:
    OperationTask(BLinkTree &tree, const Request &request) noexcept
        : _tree(&tree), _request(request),
          _plain_lookup(request.operation == Operation::lookup && !tree._payload_step) {}

    [[nodiscard]] bool writes_leaf() const noexcept {
        return _request.operation == Operation::insert || _request.operation == Operation::update ||
               _request.operation == Operation::remove;
    }
    void set_target_level(std::uint16_t level) noexcept { _target_level = level; }

    void move_to(NodeRef node, tasking::AccessMode mode) noexcept {
        annotate(node, mode);
        if (_tree->_config.prefetch_hints) {
            const bool write = mode == tasking::AccessMode::write;
            annotate(tasking::PrefetchHint::lines(node.get(), write ? _tree->_write_mask : _tree->_read_mask,
                                                  write ? system::PrefetchMode::for_write
                                                        : _tree->_config.read_prefetch_mode));
        }
    }

    tasking::TaskResult execute(tasking::TaskContext &context) noexcept override {
        const NodeRef ref = resource();
        if (_plain_lookup) {
            return lookup_step(*ref.get<NodeType>());
        }
        return any_step(context, ref);
    }

    /// Scans append to the caller's buffer while reading a leaf: a failed validation must put
    /// the cursor back. Other members a read writes are simply overwritten by the re-run.
    std::span<std::byte> optimistic_state() noexcept override {
        return _request.operation == Operation::scan ? state_bytes(_cursor) : std::span<std::byte>{};
    }

private:
    struct ScanCursor {
        Key from;
        std::uint32_t count;
    };

    /// The result of a step that moved this task to a node on `level`.
    [[nodiscard]] tasking::TaskResult next_step(std::uint16_t level) noexcept {
        const std::uint16_t bypass_from = _tree->_config.bypass_min_level;
        return bypass_from != 0 && level >= bypass_from ? tasking::TaskResult::bypass(this)
                                                        : tasking::TaskResult::successor(this);
    }

    /// The step of a lookup without payload rounds, the bulk of a read-mostly workload: only
    /// the branches a lookup takes, so the step is a small function with few registers to save,
    /// while every other operation goes through any_step.
    [[gnu::always_inline]] tasking::TaskResult lookup_step(const NodeType &node) noexcept {
        const Key key = _request.key;
        if (node.beyond(key)) {
            move_to(node.right, tasking::AccessMode::read_only);
            return next_step(node.level);
        }
        if (!node.is_leaf()) {
            move_to(node.child(key), tasking::AccessMode::read_only);
            return next_step(static_cast<std::uint16_t>(node.level - 1));
        }
        return read_entry(node, key);
    }

    /// The last step of a lookup: the leaf's entry for `key`, if any, is the result.
    [[gnu::always_inline]] tasking::TaskResult read_entry(const NodeType &node, Key key) noexcept {
        const std::uint16_t index = node.find(key);
        _result.found = index != NodeType::capacity;
        _result.value = _result.found ? node.payload[index] : 0;
        return finish();
    }

    [[gnu::noinline]] tasking::TaskResult any_step(tasking::TaskContext &context, NodeRef ref) noexcept {
        if (access() == tasking::AccessMode::write) {
            return write_step(context, ref, *ref.get<NodeType>());
        }
        return read_step(ref, *ref.get<NodeType>());
    }

    tasking::TaskResult read_step(NodeRef ref, const NodeType &node) noexcept {
        const Key key = search_key();
        if (node.beyond(key)) {
            move_to(node.right, tasking::AccessMode::read_only);
            return next_step(node.level);
        }
        if (node.is_leaf() && writes_leaf()) {
            // The first round of a writer with payload steps (without them writers reach leaves
            // annotated as writers): name the lines the write will touch.
            write_leaf_next(ref, node, key);
            return tasking::TaskResult::successor(this);
        }
        if (_payload_pending) {
            // Second round: the payload line was prefetched; the step below searches the keys
            // again (cached) and so stands on its own under the node's primitive.
            _payload_pending = false;
        } else if (const void *line = payload_to_prefetch(node, key); line != nullptr) {
            _payload_pending = true;
            annotate(ref, tasking::AccessMode::read_only);
            annotate(tasking::PrefetchHint::lines(line, 1U, _tree->_config.read_prefetch_mode));
            return tasking::TaskResult::successor(this);
        }
        if (!node.is_leaf()) {
            if (_request.operation == Operation::insert_separator && node.level == _target_level) {
                // Reached the parent level as a reader (a root that has grown meanwhile): write.
                move_to(ref, tasking::AccessMode::write);
                return tasking::TaskResult::successor(this);
            }
            const NodeRef child = node.child(key);
            // With payload steps a writer reads the leaf first (see write_leaf_next).
            const bool write_child = _request.operation == Operation::insert_separator
                                         ? node.level == _target_level + 1
                                         : node.is_branch() && writes_leaf() && !_tree->_payload_step;
            _parent = ref;
            move_to(child, write_child ? tasking::AccessMode::write : tasking::AccessMode::read_only);
            return next_step(static_cast<std::uint16_t>(node.level - 1));
        }
        if (_request.operation == Operation::scan) {
            return scan_leaf(node);
        }
        return read_entry(node, key);
    }

    /// The payload line the step on `node` will read, when it is worth a round of its own (see
    /// TreeConfig::payload_step); nullptr otherwise.
    [[nodiscard]] const void *payload_to_prefetch(const NodeType &node, Key key) const noexcept {
        const std::uint16_t bypass_from = _tree->_config.bypass_min_level;
        const bool pooled = bypass_from == 0 || node.level < bypass_from;
        if (!_tree->_payload_step || !pooled || _request.operation == Operation::scan ||
            _request.operation == Operation::insert_separator) {
            return nullptr;
        }
        return node.payload_line_for(key);
    }

    /// Annotates this task as the writer of `node` with a hint for the key lines and the
    /// payload lines the write touches: the found entry's (update), or those from the entry's
    /// position to the end (an insert or remove shifts them).
    void write_leaf_next(NodeRef ref, const NodeType &node, Key key) noexcept {
        const std::uint16_t index = node.lower_bound(key);
        const std::uint16_t count = node.safe_count();
        const bool exact = index < count && node.keys[index] == key;
        std::uint64_t mask = _tree->_write_mask;
        const auto line_of = [](std::uint16_t slot) { return NodeType::payload_line_number(slot); };
        if (_request.operation == Operation::update) {
            mask |= exact ? std::uint64_t{1} << line_of(index) : 0U;
        } else {
            for (std::uint32_t line = line_of(index); line <= line_of(count); ++line) {
                mask |= std::uint64_t{1} << line;
            }
        }
        annotate(ref, tasking::AccessMode::write);
        if (_tree->_config.prefetch_hints) {
            annotate(tasking::PrefetchHint::lines(&node, mask, system::PrefetchMode::for_write));
        }
    }

    tasking::TaskResult scan_leaf(const NodeType &node) noexcept {
        const std::uint16_t count = node.safe_count();
        for (std::uint16_t i = node.lower_bound(_cursor.from);
             i < count && _cursor.count < _request.scan_limit; ++i) {
            _request.scan_out[_cursor.count++] = {node.keys[i], node.payload[i]};
        }
        if (_cursor.count < _request.scan_limit && node.right) {
            // Keys below the high key were all seen here; a later split only moves keys right.
            _cursor.from = node.high_key;
            move_to(node.right, tasking::AccessMode::read_only);
            return tasking::TaskResult::successor(this);
        }
        _result.count = _cursor.count;
        return finish();
    }

    tasking::TaskResult write_step(tasking::TaskContext &context, NodeRef ref, NodeType &node) noexcept {
        const Key key = search_key();
        if (node.beyond(key)) {
            move_to(node.right, tasking::AccessMode::write);
            return tasking::TaskResult::successor(this);
        }
        if (!node.is_leaf()) {
            MX_ASSERT(_request.operation == Operation::insert_separator && node.level == _target_level,
                      "only separator inserts write inner nodes");
            insert_entry(context, ref, node, key, _request.value);
            return tasking::TaskResult::remove();
        }
        const std::uint16_t index = node.lower_bound(key);
        const bool exists = index < node.count && node.keys[index] == key;
        _result.found = exists;
        switch (_request.operation) {
        case Operation::insert:
            if (!exists) {
                insert_entry(context, ref, node, key, _request.value);
            }
            break;
        case Operation::update:
            if (exists) {
                node.payload[index] = _request.value;
            }
            break;
        case Operation::remove:
            if (exists) {
                node.erase_at(index);
            }
            break;
        default:
            MX_ASSERT(false, "readers never write leaves");
            break;
        }
        _result.value = _request.value;
        return finish();
    }

    /// Inserts into a node this task writes; splits it when full.
    void insert_entry(tasking::TaskContext &context, NodeRef ref, NodeType &node, Key key,
                      std::uint64_t payload) noexcept {
        if (!node.full()) {
            node.insert_at(node.lower_bound(key), key, payload);
            return;
        }
        const NodeRef sibling_ref = _tree->new_node(context, node.level);
        NodeType &sibling = *sibling_ref.get<NodeType>();
        const Key separator = node.split_into(sibling, sibling_ref);
        // Inner nodes promoted the separator: it is in neither half, so `>=` picks the sibling.
        NodeType &target = key >= separator ? sibling : node;
        target.insert_at(target.lower_bound(key), key, payload);
        _tree->propagate_split(context, ref, node.level, separator, sibling_ref, _parent);
    }

    /// Ends a step that produced the result. The runtime calls commit() (which delivers it)
    /// only once the step stands: after the validation of an optimistic read, after a
    /// transaction committed, or at once under a latch or scheduling.
    [[nodiscard]] tasking::TaskResult finish() const noexcept {
        return _request.listener.callback == nullptr ? tasking::TaskResult::remove()
                                                     : tasking::TaskResult::commit();
    }

    void commit(tasking::TaskContext &context) noexcept override { deliver(context); }

    [[nodiscard]] Key search_key() const noexcept {
        return _request.operation == Operation::scan ? _cursor.from : _request.key;
    }

    void deliver(tasking::TaskContext &context) noexcept {
        _result.operation = _request.operation;
        _result.key = _request.key;
        if (_request.listener.callback != nullptr) {
            _request.listener.callback(_request.listener.context, _result, context);
        }
    }

private:
    BLinkTree *_tree;
    Request _request;
    ScanCursor _cursor{_request.key, 0};
    OpResult _result{};
    NodeRef _parent{}; // last inner node this task descended from (hint for split propagation)
    std::uint16_t _target_level{0};
    // Set by a step that queued this task again for its payload line (TreeConfig::payload_step).
    // A re-run after a failed validation sees it set and performs the whole step in one round.
    bool _payload_pending{false};
    // A lookup whose steps all take lookup_step (no payload rounds): fixed at construction, one
    // byte of the task the step reads instead of the operation and the tree's setting.
    const bool _plain_lookup;
};

/// A lookup as a coroutine task (TreeConfig::interleaved_lookups): reads the cached upper levels
/// at once, and for each node below prefetches its lines and suspends, so that the worker resumes
/// the other lookups of its coroutine group while the lines arrive. Each node is read through
/// TaskContext::read, so the result it delivers comes from validated reads only.
template <std::size_t NodeSize>
class BLinkTree<NodeSize>::LookupTask final : public tasking::CoroutineTask {
public:
    LookupTask(BLinkTree &tree, const Request &request) noexcept
        : _tree(&tree), _key(request.key), _listener(request.listener) {}

protected:
    // What one node says about the key: go on at `next` (on `level`), or the answer.
    struct Step {
        NodeRef next;
        std::uint16_t level;
        bool found;
        Value value;
    };

    /// The read of one node, as a function object so that it is inlined into the validated
    /// read (which may run it more than once); a lambda's call operator is not.
    struct ReadStep {
        NodeRef at;
        Key key;
        [[gnu::always_inline]] Step operator()() const noexcept { return step_at(*at.get<NodeType>(), key); }
    };
    [[gnu::always_inline]] static Step step_at(const NodeType &node, Key key) noexcept {
        if (node.beyond(key)) {
            return Step{node.right, node.level, false, 0};
        }
        if (!node.is_leaf()) {
            return Step{node.child(key), static_cast<std::uint16_t>(node.level - 1), false, 0};
        }
        const std::uint16_t index = node.find(key);
        const bool found = index != NodeType::capacity;
        return Step{NodeRef{}, 0, found, found ? node.payload[index] : 0};
    }

    coro::Coroutine<> body(tasking::TaskContext &context) noexcept override {
        BLinkTree &tree = *_tree;
        const Key key = _key;
        const std::uint16_t bypass_from = tree._config.bypass_min_level;
        // Without hints the header line and the node's first line, as the runtime does.
        const std::uint64_t read_mask = tree._config.prefetch_hints ? tree._read_mask : 1U;
        NodeRef ref = tree._root.load(std::memory_order_acquire);
        // A node's level never changes after creation; the root is in cache.
        std::uint16_t level = ref.get<NodeType>()->level;
        while (true) {
            if (bypass_from == 0 || level < bypass_from) {
                // A pooled level (not in cache): its lines arrive while the group's other lookups
                // run.
                tasking::TaskContext::prefetch_for_read(ref, read_mask, tree._config.read_prefetch_mode);
                co_await std::suspend_always{};
                if (tree._payload_step) {
                    // The line with the child or value is the step's one remaining miss: found
                    // from the cached keys, prefetched, and read after one more suspension.
                    const NodeRef at = ref;
                    const std::optional<const void *> line = context.read(
                        at, [at, key]() noexcept { return at.get<NodeType>()->payload_line_for(key); });
                    if (line && *line != nullptr) {
                        system::prefetch(*line, tree._config.read_prefetch_mode);
                        co_await std::suspend_always{};
                    }
                }
            }
            const NodeRef at = ref;
            const std::optional<Step> step = context.read(at, ReadStep{at, key});
            if (!step) {
                // This worker cannot read the node now (scheduled elsewhere): an operation task
                // takes the lookup on from here, dispatched to the node's domain.
                auto *task = context.new_task<OperationTask>(
                    tree, Request{.operation = Operation::lookup, .key = key, .listener = _listener});
                task->move_to(at, tasking::AccessMode::read_only);
                context.spawn(*task);
                co_return;
            }
            if (!step->next) {
                if (_listener.callback != nullptr) {
                    const OpResult result{.operation = Operation::lookup,
                                          .key = key,
                                          .value = step->value,
                                          .found = step->found};
                    _listener.callback(_listener.context, result, context);
                }
                co_return;
            }
            ref = step->next;
            level = step->level;
        }
    }

private:
    BLinkTree *_tree;
    Key _key;
    Listener _listener;
};

} // namespace mx::index::blinktree
