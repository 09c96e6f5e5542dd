#include "mx/system/memory_latency.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "mx/system/cpu.h"

namespace mx::system {

std::uint32_t measure_load_latency_cycles(std::size_t bytes, std::uint32_t loads) {
    struct alignas(cache_line_size) Node {
        Node *next;
    };
    const std::size_t count = std::max<std::size_t>(2, bytes / sizeof(Node));
    std::vector<Node> nodes(count);
    std::vector<std::size_t> order(count);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::mt19937_64 random{0x5eed};
    std::shuffle(order.begin(), order.end(), random);
    for (std::size_t i = 0; i < count; ++i) {
        nodes[order[i]].next = &nodes[order[(i + 1) % count]];
    }
    Node *node = &nodes[order[0]];
    for (std::uint32_t i = 0; i < std::min<std::uint32_t>(loads, 1000); ++i) { // warm the TLB a little
        node = node->next;
    }
    const std::uint64_t start = cycles();
    for (std::uint32_t i = 0; i < loads; ++i) {
        node = node->next;
    }
    const std::uint64_t elapsed = cycles() - start;
    // Keep the chase alive.
    if (node == nullptr) {
        return 0;
    }
    return static_cast<std::uint32_t>(
        std::max<std::uint64_t>(1, elapsed / std::max<std::uint32_t>(loads, 1)));
}

std::uint32_t load_latency_cycles() noexcept {
    static const std::uint32_t latency = [] {
        try {
            return measure_load_latency_cycles();
        } catch (...) {
            return std::uint32_t{300}; // no memory for the probe: a typical DRAM figure
        }
    }();
    return latency;
}

} // namespace mx::system
