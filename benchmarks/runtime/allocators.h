#pragma once

// Task allocation: mxtasking's TaskAllocator against the process's malloc (glibc, or jemalloc /
// TCMalloc when the driver runs under LD_PRELOAD).

#include <cstdint>
#include <string>

#include "common.h"

namespace mx::bench {

struct AllocSizes {
    std::uint64_t ops{2'000'000}; // allocations (and frees) per run
    std::uint32_t batch{64};      // alloc_batch: objects allocated before they are freed
};

/// "glibc", "jemalloc" or "tcmalloc": which malloc this process really uses.
std::string malloc_name();

/// The label a variant gets in the results: "mx_task_allocator", "<malloc>_malloc", ...
std::string alloc_variant_label(const std::string &variant);

/// Runs one pattern ("alloc_single", "alloc_batch" or "alloc_cross") with one variant ("mx",
/// "malloc" or "aligned_new"). State (heap, allocators) persists between calls, so repetitions
/// after the warm-up run on warm memory for every variant.
Run run_alloc(const std::string &pattern, const std::string &variant, const AllocSizes &sizes);

} // namespace mx::bench
