#pragma once

// Structural invariants of a quiescent B-link tree (no operation in flight), shared by the
// task-based tree and the thread-based baselines: sorted keys, keys below the high key, sibling
// chains with increasing high keys, every node referenced by exactly one parent entry whose
// separator equals the child's lower bound, children one level down, all leaves on level 0.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mx/index/blinktree/node.h"

namespace mx::index::blinktree {

struct TreeShape {
    std::uint32_t height{0};
    std::uint64_t nodes{0};
    std::uint64_t leaves{0};
    std::uint64_t entries{0};
};

/// Returns "" when every invariant holds, else a description of the first violation.
/// `shape`, when given, receives height and node counts.
template <std::size_t NodeSize>
std::string check_structure(NodeRef root, TreeShape *shape = nullptr) {
    using NodeType = Node<NodeSize>;
    const auto at = [](NodeRef ref) { return ref.get<NodeType>(); };
    if (!root) {
        return "tree has no root";
    }
    TreeShape result{};
    result.height = static_cast<std::uint32_t>(at(root)->level) + 1U;
    NodeRef first = root;
    // Children expected on the next level, in order, with their [low, high) bounds.
    struct Expected {
        NodeRef node;
        bool has_low;
        Key low;
        bool has_high;
        Key high;
    };
    std::vector<Expected> expected{{root, false, 0, false, 0}};
    for (int level = at(root)->level; level >= 0; --level) {
        std::vector<Expected> next;
        std::size_t position = 0;
        bool has_previous_high = false;
        Key previous_high = 0;
        for (NodeRef ref = first; ref; ref = at(ref)->right) {
            const NodeType &node = *at(ref);
            const std::string where = "level " + std::to_string(level) + " node " + std::to_string(position);
            ++result.nodes;
            if (node.level != level) {
                return where + ": level " + std::to_string(node.level) + " in the chain of level " +
                       std::to_string(level);
            }
            if (node.count > NodeType::capacity) {
                return where + ": count above capacity";
            }
            if (position >= expected.size() || expected[position].node != ref) {
                return where + ": sibling chain and parent entries disagree (a separator is missing)";
            }
            const Expected &bounds = expected[position];
            if (bounds.has_high != static_cast<bool>(node.right) ||
                (bounds.has_high && bounds.high != node.high_key)) {
                return where + ": high key differs from the parent's next separator";
            }
            if (has_previous_high != bounds.has_low || (bounds.has_low && previous_high != bounds.low)) {
                return where + ": lower bound differs from the left sibling's high key";
            }
            for (std::uint16_t i = 0; i < node.count; ++i) {
                if (i > 0 && node.keys[i - 1] >= node.keys[i]) {
                    return where + ": keys not strictly sorted at " + std::to_string(i);
                }
                if (node.right && node.keys[i] >= node.high_key) {
                    return where + ": key at " + std::to_string(i) + " not below the high key";
                }
                if (bounds.has_low && node.keys[i] < bounds.low) {
                    return where + ": key at " + std::to_string(i) + " below the lower bound";
                }
            }
            if (node.is_leaf()) {
                ++result.leaves;
                result.entries += node.count;
            } else {
                const auto child_bound = [&](int index, bool &has, Key &key) {
                    if (index < 0) {
                        has = bounds.has_low;
                        key = bounds.low;
                    } else if (index >= node.count) {
                        has = static_cast<bool>(node.right);
                        key = node.high_key;
                    } else {
                        has = true;
                        key = node.keys[index];
                    }
                };
                for (int i = -1; i < static_cast<int>(node.count); ++i) {
                    const NodeRef child =
                        i < 0 ? node.leftmost : node.child_at(static_cast<std::uint16_t>(i));
                    if (!child) {
                        return where + ": null child";
                    }
                    if (at(child)->level + 1 != node.level) {
                        return where + ": child not one level down";
                    }
                    Expected entry{child, false, 0, false, 0};
                    child_bound(i, entry.has_low, entry.low);
                    child_bound(i + 1, entry.has_high, entry.high);
                    next.push_back(entry);
                }
            }
            has_previous_high = static_cast<bool>(node.right);
            previous_high = node.high_key;
            ++position;
        }
        if (position != expected.size()) {
            return "level " + std::to_string(level) +
                   ": parents reference nodes missing from the sibling chain";
        }
        if (level > 0) {
            first = at(first)->leftmost;
            expected = std::move(next);
        }
    }
    if (shape != nullptr) {
        *shape = result;
    }
    return {};
}

/// Visits every node (leftmost chain per level), e.g. to free them.
template <std::size_t NodeSize, class Visitor>
void for_each_node(NodeRef root, Visitor &&visit) {
    using NodeType = Node<NodeSize>;
    NodeRef first = root;
    while (first) {
        const NodeRef below = first.get<NodeType>()->is_leaf() ? NodeRef{} : first.get<NodeType>()->leftmost;
        for (NodeRef ref = first; ref;) {
            const NodeRef right = ref.get<NodeType>()->right;
            visit(ref);
            ref = right;
        }
        first = below;
    }
}

/// All entries in key order (leaf chain walk); the tree must be quiescent.
template <std::size_t NodeSize>
std::vector<std::pair<Key, Value>> collect_entries(NodeRef root) {
    using NodeType = Node<NodeSize>;
    NodeRef ref = root;
    while (!ref.get<NodeType>()->is_leaf()) {
        ref = ref.get<NodeType>()->leftmost;
    }
    std::vector<std::pair<Key, Value>> entries;
    for (; ref; ref = ref.get<NodeType>()->right) {
        const NodeType &leaf = *ref.get<NodeType>();
        for (std::uint16_t i = 0; i < leaf.count; ++i) {
            entries.emplace_back(leaf.keys[i], leaf.payload[i]);
        }
    }
    return entries;
}

} // namespace mx::index::blinktree
