#include "mx/system/topology.h"

#include <hwloc.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <sstream>

namespace mx::system {

ShapeParse parse_simulated_shape(std::string_view text) {
    const auto x = text.find('x');
    if (x == std::string_view::npos) {
        return {std::nullopt, "topology '" + std::string{text} + "' must look like RxC, e.g. 2x1"};
    }
    // Each part is a decimal number without sign or blanks; one too long for 64 bits is out of
    // range like any other value above the limits below.
    enum class Part : std::uint8_t { ok, malformed, too_large };
    const auto parse = [](std::string_view part, std::uint64_t &out) {
        const auto *end = part.data() + part.size();
        const auto [ptr, ec] = std::from_chars(part.data(), end, out);
        if (part.empty() || ptr != end || (ec != std::errc{} && ec != std::errc::result_out_of_range)) {
            return Part::malformed;
        }
        return ec == std::errc::result_out_of_range ? Part::too_large : Part::ok;
    };
    std::uint64_t regions = 0;
    std::uint64_t cores = 0;
    const Part regions_part = parse(text.substr(0, x), regions);
    const Part cores_part = parse(text.substr(x + 1), cores);
    if (regions_part == Part::malformed || cores_part == Part::malformed) {
        return {std::nullopt,
                "topology '" + std::string{text} + "': R and C in RxC must be positive integers"};
    }
    // Each factor is checked before the product, so the product cannot overflow.
    constexpr std::uint64_t max_regions = 64;
    constexpr std::uint64_t max_cores = 4096;
    if (regions_part == Part::too_large || cores_part == Part::too_large || regions == 0 || cores == 0 ||
        regions > max_regions || cores > max_cores || regions * cores > max_cores) {
        return {std::nullopt, "topology '" + std::string{text} +
                                  "' is out of range (1-64 regions, at most 4096 cores in all)"};
    }
    return {SimulatedShape{static_cast<std::uint16_t>(regions), static_cast<std::uint16_t>(cores)}, {}};
}

namespace {

std::vector<std::uint16_t> affinity_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<std::uint16_t> cpus;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        for (std::size_t cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
            if (CPU_ISSET(cpu, &set)) {
                cpus.push_back(static_cast<std::uint16_t>(cpu));
            }
        }
    }
    if (cpus.empty()) {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        for (long cpu = 0; cpu < std::max(1L, n); ++cpu) {
            cpus.push_back(static_cast<std::uint16_t>(cpu));
        }
    }
    return cpus;
}

std::size_t cache_size(hwloc_topology_t topology, hwloc_obj_type_t type) {
    hwloc_obj_t obj = hwloc_get_next_obj_by_type(topology, type, nullptr);
    return obj != nullptr && obj->attr != nullptr ? static_cast<std::size_t>(obj->attr->cache.size) : 0;
}

} // namespace

Topology Topology::detect() {
    Topology result;
    result._usable_cpus = affinity_cpus();
    const std::uint16_t max_cpu = *std::max_element(result._usable_cpus.begin(), result._usable_cpus.end());
    result._node_of_cpu.assign(std::size_t{max_cpu} + 1, 0);

    hwloc_topology_t topology = nullptr;
    if (hwloc_topology_init(&topology) == 0 && hwloc_topology_load(topology) == 0) {
        const int nodes = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_NUMANODE);
        result._memory_nodes = static_cast<std::uint16_t>(std::max(1, nodes));
        for (int n = 0; n < nodes; ++n) {
            hwloc_obj_t node = hwloc_get_obj_by_type(topology, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(n));
            for (int cpu = hwloc_bitmap_first(node->cpuset); cpu >= 0;
                 cpu = hwloc_bitmap_next(node->cpuset, cpu)) {
                const auto index = static_cast<std::size_t>(cpu);
                if (index < result._node_of_cpu.size()) {
                    result._node_of_cpu[index] = static_cast<std::uint8_t>(node->os_index);
                }
            }
        }
        if (hwloc_obj_t l1 = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_L1CACHE, nullptr);
            l1 != nullptr && l1->attr != nullptr && l1->attr->cache.linesize > 0) {
            result._cache_line_size = l1->attr->cache.linesize;
        }
        if (const auto size = cache_size(topology, HWLOC_OBJ_L1CACHE); size > 0) {
            result._l1d_size = size;
        }
        if (const auto size = cache_size(topology, HWLOC_OBJ_L2CACHE); size > 0) {
            result._l2_size = size;
        }
        result._l3_size = cache_size(topology, HWLOC_OBJ_L3CACHE);
    }
    if (topology != nullptr) {
        hwloc_topology_destroy(topology);
    }

    // Regions are the distinct nodes of usable CPUs, numbered densely in node order.
    std::vector<std::uint8_t> nodes;
    for (const std::uint16_t cpu : result._usable_cpus) {
        nodes.push_back(result._node_of_cpu[cpu]);
    }
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    result._numa_regions = static_cast<std::uint16_t>(nodes.size());
    for (std::size_t region = 0; region < nodes.size(); ++region) {
        for (const std::uint16_t cpu : result._usable_cpus) {
            if (result._node_of_cpu[cpu] == nodes[region]) {
                result._cores.push_back(Core{cpu, static_cast<std::uint8_t>(region), nodes[region]});
            }
        }
    }
    return result;
}

Topology Topology::simulated(SimulatedShape shape) {
    Topology result = detect();
    result._simulated = true;
    result._numa_regions = shape.regions;
    result._cores.clear();
    const auto &cpus = result._usable_cpus;
    for (std::uint16_t region = 0; region < shape.regions; ++region) {
        for (std::uint16_t c = 0; c < shape.cores_per_region; ++c) {
            const std::size_t index = std::size_t{region} * shape.cores_per_region + c;
            const std::uint16_t cpu = cpus[index % cpus.size()];
            result._cores.push_back(Core{cpu, static_cast<std::uint8_t>(region),
                                         static_cast<std::uint8_t>(region % result._memory_nodes)});
        }
    }
    return result;
}

std::uint8_t Topology::memory_node_of_cpu(std::uint16_t cpu) const noexcept {
    return cpu < _node_of_cpu.size() ? _node_of_cpu[cpu] : 0;
}

std::string Topology::describe() const {
    std::ostringstream out;
    out << _cores.size() << " cores in " << _numa_regions << " NUMA region(s)"
        << (_simulated ? " (simulated)" : "") << ", " << _memory_nodes << " memory node(s), line "
        << _cache_line_size << " B, L1d " << (_l1d_size >> 10U) << " KiB, L2 " << (_l2_size >> 10U)
        << " KiB, L3 " << (_l3_size >> 10U) << " KiB";
    return out.str();
}

} // namespace mx::system
