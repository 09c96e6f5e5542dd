#pragma once

// The thread-based baselines: the same nodes as the task-based tree, each preceded by one cache
// line with a latch, driven by the calling thread. With OptimisticLatch readers validate a
// version per node (optimistic lock coupling in the B-link form: a stale child pointer is fixed
// by moving right, so the parent's version need not be re-checked after entering the child);
// with SharedLatch they hold a reader/writer latch per node. Writers descend like readers and
// latch the leaf; splits insert the separator into the parent remembered on the way down
// (Lehman and Yao), re-traversing when there is none.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mx/index/blinktree/check.h"
#include "mx/index/blinktree/node.h"
#include "mx/sync/primitives.h"

namespace mx::index::blinktree {

/// Readers validate a version; writers take the version as a latch (OLFIT / OLC).
struct OptimisticLatch {
    static constexpr bool optimistic = true;
    std::uint64_t read_lock() const noexcept {
        while (true) {
            const std::uint64_t version = _version.read_begin();
            if ((version & 1U) == 0) {
                sync::detail::ignore_reads_begin();
                return version;
            }
        }
    }
    /// False: a writer interfered, read again.
    bool read_unlock(std::uint64_t version) const noexcept {
        sync::detail::ignore_reads_end();
        return _version.validate(version);
    }
    void lock() noexcept { _version.write_lock(); }
    void unlock() noexcept { _version.write_end(); }

private:
    sync::OptimisticVersion _version{}; // any thread
};

/// Readers share a reader/writer latch; writers hold it exclusively.
struct SharedLatch {
    static constexpr bool optimistic = false;
    std::uint64_t read_lock() noexcept {
        _latch.lock_shared();
        return 0;
    }
    bool read_unlock(std::uint64_t) noexcept {
        _latch.unlock_shared();
        return true;
    }
    void lock() noexcept { _latch.lock(); }
    void unlock() noexcept { _latch.unlock(); }

private:
    sync::RwLatch _latch{}; // any thread
};

template <class Latch, std::size_t NodeSize = 1024>
class ThreadBLinkTree {
public:
    using NodeType = Node<NodeSize>;
    static constexpr std::uint32_t max_levels = 32;

    ThreadBLinkTree() { _root.store(allocate(0), std::memory_order_release); }
    ~ThreadBLinkTree() {
        std::vector<NodeRef> nodes;
        for_each_node<NodeSize>(root(), [&](NodeRef ref) { nodes.push_back(ref); });
        for (const NodeRef ref : nodes) {
            release(ref);
        }
    }
    ThreadBLinkTree(const ThreadBLinkTree &) = delete;
    ThreadBLinkTree &operator=(const ThreadBLinkTree &) = delete;

    std::optional<Value> lookup(Key key) const noexcept {
        NodeRef ref = _root.load(std::memory_order_acquire);
        while (true) {
            const NodeType &node = *ref.get<NodeType>();
            Latch &latch = latch_of(ref);
            const std::uint64_t version = latch.read_lock();
            NodeRef next{};
            bool found = false;
            Value value = 0;
            const bool leaf = node.is_leaf();
            if (node.beyond(key)) {
                next = node.right;
            } else if (!leaf) {
                next = node.template child<true>(key);
            } else {
                const std::uint16_t index = node.template find<true>(key);
                found = index != NodeType::capacity;
                value = found ? node.payload[index] : 0;
            }
            if (!latch.read_unlock(version)) {
                continue; // read this node again; nodes are never freed while the tree lives
            }
            if (!next) {
                return found ? std::optional<Value>{value} : std::nullopt;
            }
            ref = next;
        }
    }

    /// True when inserted, false when the key was present (unchanged).
    bool insert(Key key, Value value) noexcept {
        bool inserted = false;
        modify(key, [&](Path &path, NodeRef ref, NodeType &, std::uint16_t index, bool exists) {
            if (!exists) {
                inserted = true;
                insert_entry(path, ref, index, key, value);
                return;
            }
            latch_of(ref).unlock();
        });
        return inserted;
    }
    bool update(Key key, Value value) noexcept {
        bool found = false;
        modify(key, [&](Path &, NodeRef ref, NodeType &leaf, std::uint16_t index, bool exists) {
            if (exists) {
                found = true;
                leaf.payload[index] = value;
            }
            latch_of(ref).unlock();
        });
        return found;
    }
    bool remove(Key key) noexcept {
        bool found = false;
        modify(key, [&](Path &, NodeRef ref, NodeType &leaf, std::uint16_t index, bool exists) {
            if (exists) {
                found = true;
                leaf.erase_at(index);
            }
            latch_of(ref).unlock();
        });
        return found;
    }
    /// Up to `limit` entries with keys >= from (each leaf read consistently).
    std::uint32_t scan(Key from, std::uint32_t limit, std::pair<Key, Value> *out) const noexcept {
        NodeRef ref = _root.load(std::memory_order_acquire);
        std::uint32_t count = 0;
        while (count < limit) {
            const NodeType &node = *ref.get<NodeType>();
            Latch &latch = latch_of(ref);
            const std::uint64_t version = latch.read_lock();
            const std::uint32_t before = count;
            NodeRef next{};
            Key next_from = from;
            if (node.beyond(from)) {
                next = node.right;
            } else if (!node.is_leaf()) {
                next = node.template child<true>(from);
            } else {
                const std::uint16_t n = node.safe_count();
                for (std::uint16_t i = node.lower_bound(from); i < n && count < limit; ++i) {
                    out[count++] = {node.keys[i], node.payload[i]};
                }
                next = node.right;
                next_from = node.high_key;
            }
            if (!latch.read_unlock(version)) {
                count = before;
                continue;
            }
            if (!next) {
                break;
            }
            from = next_from;
            ref = next;
        }
        return count;
    }

    [[nodiscard]] NodeRef root() const noexcept { return _root.load(std::memory_order_acquire); }
    [[nodiscard]] std::string check(TreeShape *shape = nullptr) const {
        return check_structure<NodeSize>(root(), shape);
    }
    [[nodiscard]] std::vector<std::pair<Key, Value>> entries() const {
        return collect_entries<NodeSize>(root());
    }

private:
    struct alignas(system::cache_line_size) LatchLine {
        Latch latch{};
    };
    static_assert(sizeof(LatchLine) == system::cache_line_size);

    /// Nodes this operation descended from, per level (hints for separator inserts).
    struct Path {
        NodeRef nodes[max_levels]{};
    };

    static Latch &latch_of(NodeRef ref) noexcept { return (static_cast<LatchLine *>(ref.get()) - 1)->latch; }

    static NodeRef allocate(std::uint16_t level) {
        void *memory = ::operator new(NodeSize, std::align_val_t{system::cache_line_size});
        auto *line = new (memory) LatchLine{};
        return NodeRef{new (line + 1) NodeType(level)};
    }
    static void release(NodeRef ref) noexcept {
        auto *line = static_cast<LatchLine *>(ref.get()) - 1;
        ref.get<NodeType>()->~NodeType();
        line->~LatchLine();
        ::operator delete(static_cast<void *>(line), std::align_val_t{system::cache_line_size});
    }

    /// Descends optimistically until `level` (recording the path), then latches the node
    /// covering `key` on that level for writing, moving right as long as needed.
    NodeRef descend_and_lock(Key key, std::uint16_t level, Path &path, NodeRef start = {}) noexcept {
        NodeRef ref = start ? start : _root.load(std::memory_order_acquire);
        while (ref.get<NodeType>()->level > level) {
            const NodeType &node = *ref.get<NodeType>();
            Latch &latch = latch_of(ref);
            const std::uint64_t version = latch.read_lock();
            const NodeRef next = node.beyond(key) ? node.right : node.template child<true>(key);
            const bool descended = !node.beyond(key);
            if (!latch.read_unlock(version)) {
                continue;
            }
            if (descended) {
                path.nodes[node.level] = ref;
            }
            ref = next;
        }
        latch_of(ref).lock();
        while (ref.get<NodeType>()->beyond(key)) {
            const NodeRef right = ref.get<NodeType>()->right;
            latch_of(right).lock();
            latch_of(ref).unlock();
            ref = right;
        }
        return ref;
    }

    /// Latches the leaf of `key` and hands it to `action`, which must unlock it.
    template <class Action>
    void modify(Key key, Action &&action) noexcept {
        Path path{};
        const NodeRef ref = descend_and_lock(key, 0, path);
        NodeType &leaf = *ref.get<NodeType>();
        const std::uint16_t index = leaf.template lower_bound<true>(key);
        action(path, ref, leaf, index, index < leaf.count && leaf.keys[index] == key);
    }

    /// Inserts into the latched node, splits it when full, unlocks it and propagates the split.
    void insert_entry(Path &path, NodeRef ref, std::uint16_t index, Key key, std::uint64_t payload) noexcept {
        while (true) {
            NodeType &node = *ref.get<NodeType>();
            if (!node.full()) {
                node.insert_at(index, key, payload);
                latch_of(ref).unlock();
                return;
            }
            const std::uint16_t level = node.level;
            const NodeRef sibling_ref = allocate(level);
            NodeType &sibling = *sibling_ref.get<NodeType>();
            const Key separator = node.split_into(sibling, sibling_ref);
            // Inner nodes promoted the separator: it is in neither half, so `>=` picks the sibling.
            NodeType &target = key >= separator ? sibling : node;
            target.insert_at(target.lower_bound(key), key, payload);
            if (_root.load(std::memory_order_acquire) == ref) {
                // Only the writer of the current root gets here: root changes are serialized.
                const NodeRef new_root = allocate(static_cast<std::uint16_t>(level + 1));
                NodeType &root_node = *new_root.get<NodeType>();
                root_node.leftmost = ref;
                root_node.keys[0] = separator;
                root_node.payload[0] = NodeType::raw(sibling_ref);
                root_node.count = 1;
                _root.store(new_root, std::memory_order_release);
                latch_of(ref).unlock();
                return;
            }
            latch_of(ref).unlock();
            // Insert (separator, sibling) one level up, starting at the remembered parent.
            const auto parent_level = static_cast<std::uint16_t>(level + 1);
            const NodeRef hint = parent_level < max_levels ? path.nodes[parent_level] : NodeRef{};
            ref = descend_and_lock(separator, parent_level, path, hint);
            key = separator;
            payload = NodeType::raw(sibling_ref);
            index = ref.get<NodeType>()->lower_bound(key);
        }
    }

    // Written by the writer of the current root when it splits; read by every operation.
    alignas(system::cache_line_size) std::atomic<NodeRef> _root{};
};

} // namespace mx::index::blinktree
