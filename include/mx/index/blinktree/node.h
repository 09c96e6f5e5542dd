#pragma once

// The node layout shared by the task-based B-link tree and its thread-based baselines: a header
// (level, count, high key, right sibling, leftmost child), a dense key array and a payload array
// (values in leaves, children in inner nodes). Keys and payloads are split so that the binary
// search of a lookup touches only the key lines, which are the lines the prefetch hints name.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "mx/system/cpu.h"
#include "mx/tasking/annotation.h"

namespace mx::index::blinktree {

using Key = std::uint64_t;
using Value = std::uint64_t;
using NodeRef = tasking::ResourcePtr;

/// A node of `NodeSize` bytes including the one cache line in front of it that holds the
/// synchronization state (the runtime's ResourceHeader, or the baselines' latch line).
template <std::size_t NodeSize>
struct Node {
    static_assert(NodeSize % system::cache_line_size == 0 && NodeSize >= 256,
                  "node size: >= 256, whole lines");
    static constexpr std::size_t object_size = NodeSize - system::cache_line_size;
    static constexpr std::size_t header_size = 32;
    /// Entries per node; inner nodes hold one more child in `leftmost`.
    static constexpr std::uint16_t capacity =
        static_cast<std::uint16_t>((object_size - header_size) / (sizeof(Key) + sizeof(Value)));
    static_assert(capacity < 2048, "lower_bound unrolls windows of up to 1024 keys");
    static constexpr std::size_t lines = object_size / system::cache_line_size;
    /// Lines holding the header and the key array.
    static constexpr std::size_t key_lines =
        (header_size + capacity * sizeof(Key) + system::cache_line_size - 1) / system::cache_line_size;

    // Header. `level` is written once at creation; everything else by the node's writers.
    std::uint16_t level{0}; // 0 = leaf, 1 = branch (children are leaves), > 1 = inner
    std::uint16_t count{0};
    std::uint32_t reserved{0};
    Key high_key{0};    // keys >= high_key live to the right; meaningless when right is null
    NodeRef right{};    // right sibling on the same level
    NodeRef leftmost{}; // inner nodes: child for keys below keys[0]
    Key keys[capacity];
    std::uint64_t payload[capacity]; // values, or children as the bits of a NodeRef

    explicit Node(std::uint16_t node_level) noexcept : level(node_level) {}

    [[nodiscard]] bool is_leaf() const noexcept { return level == 0; }
    [[nodiscard]] bool is_branch() const noexcept { return level == 1; }
    [[nodiscard]] bool full() const noexcept { return count >= capacity; }
    /// True when `key` belongs to a node further right (a split moved it).
    [[nodiscard]] bool beyond(Key key) const noexcept { return static_cast<bool>(right) && key >= high_key; }

    /// Count clamped to the capacity: optimistic readers may see a torn count and must not read
    /// outside the node before validation throws their result away.
    [[nodiscard]] std::uint16_t safe_count() const noexcept { return std::min(count, capacity); }

    /// First index whose key is >= `key`. The branch-free form (default) has no mispredictions
    /// and suits nodes whose lines were prefetched; the branchy form lets the CPU speculate past
    /// a missing line and load the next probe early, which is faster for a thread walking cold
    /// nodes without prefetching (measured: about 2x on 1 M keys). Each tree uses its best one.
    template <bool Branchy = false>
    [[nodiscard, gnu::always_inline]] std::uint16_t lower_bound(Key key) const noexcept {
        const std::uint32_t n = safe_count();
        if constexpr (Branchy) {
            std::uint32_t remaining = n;
            std::uint32_t base = 0;
            while (remaining > 1) {
                const std::uint32_t half = remaining / 2;
                if (__builtin_expect_with_probability(keys[base + half - 1] < key, 1, 0.5)) {
                    base += half;
                }
                remaining -= half;
            }
            return static_cast<std::uint16_t>(base +
                                              static_cast<std::uint32_t>(remaining == 1 && keys[base] < key));
        } else {
            if (n == 0) {
                return 0;
            }
            // Shar's search: the first probe leaves a window of a power-of-two size (the first
            // `window` keys, or the last), whose halvings have constant sizes; the switch jumps
            // into the unrolled sequence of halvings. A halving is a compare, an add and a
            // multiply by the comparison (which keeps the compiler from emitting a branch), with no
            // loop counter: about half the instructions of a loop over a varying size.
            const std::uint32_t window = std::bit_floor(n);
            std::uint32_t base = static_cast<std::uint32_t>(keys[window - 1] < key) * (n - window);
            const auto halve = [&](std::uint32_t step) noexcept {
                base += static_cast<std::uint32_t>(keys[base + step - 1] < key) * step;
            };
            switch (std::countr_zero(window)) {
            case 10:
                halve(512);
                [[fallthrough]];
            case 9:
                halve(256);
                [[fallthrough]];
            case 8:
                halve(128);
                [[fallthrough]];
            case 7:
                halve(64);
                [[fallthrough]];
            case 6:
                halve(32);
                [[fallthrough]];
            case 5:
                halve(16);
                [[fallthrough]];
            case 4:
                halve(8);
                [[fallthrough]];
            case 3:
                halve(4);
                [[fallthrough]];
            case 2:
                halve(2);
                [[fallthrough]];
            case 1:
                halve(1);
                [[fallthrough]];
            default:
                break;
            }
            return static_cast<std::uint16_t>(base + static_cast<std::uint32_t>(keys[base] < key));
        }
    }

    /// Inner nodes: the child covering `key`.
    template <bool Branchy = false>
    [[nodiscard, gnu::always_inline]] NodeRef child(Key key) const noexcept {
        // Child i covers [keys[i], keys[i+1]); count the keys <= key.
        const std::uint16_t index = lower_bound<Branchy>(key);
        const std::uint16_t n = safe_count();
        const bool exact = index < n && keys[index] == key;
        const int slot = static_cast<int>(index) + (exact ? 1 : 0) - 1;
        return slot < 0 ? leftmost : child_at(static_cast<std::uint16_t>(slot));
    }

    /// Leaves: index of `key` or capacity when absent.
    template <bool Branchy = false>
    [[nodiscard, gnu::always_inline]] std::uint16_t find(Key key) const noexcept {
        const std::uint16_t index = lower_bound<Branchy>(key);
        return index < safe_count() && keys[index] == key ? index : capacity;
    }

    [[nodiscard]] NodeRef child_at(std::uint16_t index) const noexcept {
        return std::bit_cast<NodeRef>(payload[index]);
    }
    static std::uint64_t raw(NodeRef child) noexcept { return std::bit_cast<std::uint64_t>(child); }

    /// Inserts at `index`, shifting the tail. The caller checked that the node is not full.
    void insert_at(std::uint16_t index, Key key, std::uint64_t payload_value) noexcept {
        const std::size_t tail = count - index;
        std::memmove(&keys[index + 1], &keys[index], tail * sizeof(Key));
        std::memmove(&payload[index + 1], &payload[index], tail * sizeof(std::uint64_t));
        keys[index] = key;
        payload[index] = payload_value;
        ++count;
    }
    void erase_at(std::uint16_t index) noexcept {
        const std::size_t tail = count - index - 1U;
        std::memmove(&keys[index], &keys[index + 1], tail * sizeof(Key));
        std::memmove(&payload[index], &payload[index + 1], tail * sizeof(std::uint64_t));
        --count;
    }

    /// Moves the upper half into the empty `sibling` and links it; returns the separator (the
    /// sibling's lowest key). Inner nodes promote the middle key: it becomes the sibling's
    /// lower bound and its child the sibling's leftmost child.
    Key split_into(Node &sibling, NodeRef sibling_ref) noexcept {
        const std::uint16_t middle = count / 2;
        Key separator = keys[middle];
        if (is_leaf()) {
            const auto moved = static_cast<std::uint16_t>(count - middle);
            std::memcpy(sibling.keys, &keys[middle], moved * sizeof(Key));
            std::memcpy(sibling.payload, &payload[middle], moved * sizeof(std::uint64_t));
            sibling.count = moved;
        } else {
            const auto moved = static_cast<std::uint16_t>(count - middle - 1);
            sibling.leftmost = child_at(middle);
            std::memcpy(sibling.keys, &keys[middle + 1], moved * sizeof(Key));
            std::memcpy(sibling.payload, &payload[middle + 1], moved * sizeof(std::uint64_t));
            sibling.count = moved;
        }
        count = middle;
        sibling.high_key = high_key;
        sibling.right = right;
        high_key = separator;
        right = sibling_ref;
        return separator;
    }

    /// Inner nodes: adds the separator of a split child. The caller made sure the separator
    /// belongs here (not beyond the high key) and the node is not full.
    void insert_separator(Key separator, NodeRef new_child) noexcept {
        insert_at(lower_bound(separator), separator, raw(new_child));
    }

    /// Line mask (relative to the node) of the header and the first `fraction_of_keys` of the
    /// key array (in eighths); the prefetch hints of dissertation 5.4.
    static constexpr std::uint64_t header_and_keys_mask(std::uint32_t eighths) noexcept {
        const std::size_t bytes = header_size + (capacity * sizeof(Key) * eighths) / 8;
        const std::size_t count_lines = std::max<std::size_t>(
            1, std::min<std::size_t>(60, (bytes + system::cache_line_size - 1) / system::cache_line_size));
        return count_lines >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << count_lines) - 1U;
    }
    /// Number of the line (relative to the node) holding payload slot `index`.
    static std::uint32_t payload_line_number(std::uint16_t index) noexcept {
        return static_cast<std::uint32_t>(
            (offsetof(Node, payload) + sizeof(std::uint64_t) * std::min<std::uint16_t>(index, capacity - 1)) /
            system::cache_line_size);
    }
    /// The payload line a reader of `key` needs: the child's (inner nodes) or the value's (leaves,
    /// only when the key is there); nullptr when there is none or it is the header line (the
    /// leftmost child). Does not look at the high key.
    [[nodiscard]] const void *payload_line_for(Key key) const noexcept {
        const std::uint16_t index = lower_bound(key);
        const bool exact = index < safe_count() && keys[index] == key;
        if (is_leaf()) {
            return exact ? payload_line(index) : nullptr;
        }
        const int slot = static_cast<int>(index) + (exact ? 1 : 0) - 1;
        return slot < 0 ? nullptr : payload_line(static_cast<std::uint16_t>(slot));
    }
    /// Line of payload slot `index`.
    [[nodiscard]] const void *payload_line(std::uint16_t index) const noexcept {
        return &payload[std::min<std::uint16_t>(index, capacity - 1)];
    }
};

} // namespace mx::index::blinktree
