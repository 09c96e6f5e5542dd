// Configuration resolution: RuntimeConfig (and MX_TOPOLOGY) to workers, CPUs and NUMA regions.

#include "config_resolution.h"

#include "mx/system/cpu.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace mx::tasking::detail {

namespace {

std::string cpu_list(const std::vector<std::uint16_t> &cpus) {
    std::string text;
    for (const std::uint16_t cpu : cpus) {
        text += (text.empty() ? "" : ",") + std::to_string(cpu);
    }
    return text;
}

} // namespace

std::vector<ResolvedCore> resolve(const RuntimeConfig &config, system::Topology &topology) {
    std::string shape_text = config.topology;
    std::string source = "RuntimeConfig::topology";
    if (shape_text.empty()) {
        if (const char *env = std::getenv("MX_TOPOLOGY"); env != nullptr && *env != '\0') {
            shape_text = env;
            source = "MX_TOPOLOGY";
        }
    }
    if (!shape_text.empty()) {
        const system::ShapeParse parsed = system::parse_simulated_shape(shape_text);
        if (!parsed.shape) {
            throw ConfigError{source + ": " + parsed.error};
        }
        topology = system::Topology::simulated(*parsed.shape);
    } else {
        topology = system::Topology::detect();
    }
    if (topology.cache_line_size() > system::cache_line_size) {
        throw ConfigError{
            "cache line of " + std::to_string(topology.cache_line_size()) +
            " bytes is larger than the compiled-in 64; rebuild with a larger mx::system::cache_line_size"};
    }
    if (config.domains_per_worker == 0) {
        throw ConfigError{"domains_per_worker must be at least 1"};
    }
    if (config.task_buffer_size == 0) {
        throw ConfigError{"task_buffer_size must be at least 1"};
    }
    if (config.allocator_batch == 0) {
        throw ConfigError{"allocator_batch must be at least 1"};
    }

    std::vector<system::Core> cores = topology.cores();
    if (!config.cores.empty()) {
        const auto &usable = topology.usable_cpus();
        std::vector<std::uint16_t> seen;
        for (const std::uint16_t cpu : config.cores) {
            if (std::find(usable.begin(), usable.end(), cpu) == usable.end()) {
                throw ConfigError{"core " + std::to_string(cpu) +
                                  " does not exist or is outside this process's CPU affinity (usable: " +
                                  cpu_list(usable) + ")"};
            }
            if (std::find(seen.begin(), seen.end(), cpu) != seen.end()) {
                throw ConfigError{"core " + std::to_string(cpu) + " is listed twice"};
            }
            seen.push_back(cpu);
        }
        if (topology.is_simulated()) {
            for (std::size_t i = 0; i < cores.size(); ++i) {
                cores[i].cpu = config.cores[i % config.cores.size()];
            }
        } else {
            cores.clear();
            for (const std::uint16_t cpu : config.cores) {
                cores.push_back(system::Core{cpu, 0, topology.memory_node_of_cpu(cpu)});
            }
        }
    }
    const std::size_t workers = config.workers.value_or(static_cast<std::uint16_t>(cores.size()));
    if (workers == 0) {
        throw ConfigError{"a runtime needs at least one worker (workers = 0)"};
    }
    if (workers > 4096) {
        throw ConfigError{"at most 4096 workers are supported"};
    }

    std::vector<ResolvedCore> resolved;
    for (std::size_t i = 0; i < workers; ++i) {
        const system::Core &core = cores[i % cores.size()];
        // Without a simulated shape, regions follow the real node of each CPU.
        const std::uint8_t key = topology.is_simulated() ? core.numa_region : core.memory_node;
        resolved.push_back(ResolvedCore{core.cpu, key, core.memory_node});
    }
    // Number regions densely in order of first appearance, so none is empty.
    std::vector<std::uint8_t> keys;
    for (auto &core : resolved) {
        auto it = std::find(keys.begin(), keys.end(), core.region);
        if (it == keys.end()) {
            keys.push_back(core.region);
            it = keys.end() - 1;
        }
        core.region = static_cast<std::uint8_t>(it - keys.begin());
    }
    return resolved;
}

} // namespace mx::tasking::detail
