#pragma once

// Hardware topology as the runtime sees it: which cores exist, how they group into NUMA regions,
// and the cache geometry. Read from hwloc, or simulated (MX_TOPOLOGY / RuntimeConfig::topology)
// so that multi-region code paths run on single-node machines.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mx::system {

struct Core {
    std::uint16_t cpu;        ///< OS logical CPU id the worker is pinned to.
    std::uint8_t numa_region; ///< Region the runtime assigns (simulated or real).
    std::uint8_t memory_node; ///< Real NUMA node memory for this region comes from.
};

struct SimulatedShape {
    std::uint16_t regions;
    std::uint16_t cores_per_region;
};

/// Parses "RxC" (R regions of C cores each, e.g. "2x1"). Returns an error message on bad input.
struct ShapeParse {
    std::optional<SimulatedShape> shape;
    std::string error;
};
ShapeParse parse_simulated_shape(std::string_view text);

class Topology {
public:
    /// The machine's topology restricted to the CPUs this process may run on.
    static Topology detect();

    /// A simulated shape mapped onto the usable CPUs (core i runs on usable cpu i mod n;
    /// region r takes memory from real node r mod nodes).
    static Topology simulated(SimulatedShape shape);

    [[nodiscard]] const std::vector<std::uint16_t> &usable_cpus() const noexcept { return _usable_cpus; }
    [[nodiscard]] std::uint16_t numa_regions() const noexcept { return _numa_regions; }
    [[nodiscard]] std::uint16_t memory_nodes() const noexcept { return _memory_nodes; }
    [[nodiscard]] bool is_simulated() const noexcept { return _simulated; }
    [[nodiscard]] std::size_t cache_line_size() const noexcept { return _cache_line_size; }
    [[nodiscard]] std::size_t l1d_size() const noexcept { return _l1d_size; }
    [[nodiscard]] std::size_t l2_size() const noexcept { return _l2_size; }
    [[nodiscard]] std::size_t l3_size() const noexcept { return _l3_size; }

    /// Cores in the order workers are assigned to them; for the real topology this is every
    /// usable CPU grouped by NUMA node.
    [[nodiscard]] const std::vector<Core> &cores() const noexcept { return _cores; }

    /// Real NUMA node of an OS CPU (0 where unknown).
    [[nodiscard]] std::uint8_t memory_node_of_cpu(std::uint16_t cpu) const noexcept;

    [[nodiscard]] std::string describe() const;

private:
    std::vector<std::uint16_t> _usable_cpus;
    std::vector<std::uint8_t> _node_of_cpu; // indexed by OS cpu id
    std::vector<Core> _cores;
    std::uint16_t _numa_regions{1};
    std::uint16_t _memory_nodes{1};
    bool _simulated{false};
    std::size_t _cache_line_size{64};
    std::size_t _l1d_size{32 * 1024};
    std::size_t _l2_size{1024 * 1024};
    std::size_t _l3_size{0};
};

} // namespace mx::system
