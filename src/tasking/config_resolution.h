#pragma once

// Configuration resolution: which workers a RuntimeConfig asks for. Private to the runtime.

#include <cstdint>
#include <vector>

#include "mx/system/topology.h"
#include "mx/tasking/config.h"

namespace mx::tasking::detail {

struct ResolvedCore {
    std::uint16_t cpu;
    std::uint8_t region;
    std::uint8_t memory_node;
};

/// Turns a configuration into the list of workers (cpu, region, memory node), or throws
/// ConfigError with a message a user can act on.
std::vector<ResolvedCore> resolve(const RuntimeConfig &config, system::Topology &topology);

} // namespace mx::tasking::detail
