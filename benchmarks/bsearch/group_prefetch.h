#pragma once

// Group prefetching (Chen et al., generalized to a loop of run-time length by Psaropoulos 3.3.1):
// G lookups advance in lock step. All lookups over one array take the same number of halving
// steps, so the loop and `size` are shared; each step first prefetches every lookup's probe, then
// reads and compares them.

#include <array>
#include <cstddef>
#include <span>

#include "keys.h"
#include "mx/system/cpu.h"

namespace mx::bench::bsearch {

inline constexpr std::size_t max_gp_group = 64;

template <class Key>
void search_group_prefetch(std::size_t group_size, std::span<const Key> table, std::span<const Key> keys,
                           std::span<std::size_t> out) noexcept {
    group_size = group_size == 0 ? 1 : (group_size > max_gp_group ? max_gp_group : group_size);
    std::array<std::size_t, max_gp_group> lows{};
    for (std::size_t start = 0; start < keys.size(); start += group_size) {
        const std::size_t members = std::min(group_size, keys.size() - start);
        const Key *group_keys = keys.data() + start;
        std::size_t size = table.size();
        for (std::size_t g = 0; g < members; ++g) {
            lows[g] = 0;
        }
        while (size > 1) {
            const std::size_t half = size / 2;
            for (std::size_t g = 0; g < members; ++g) {
                system::prefetch(&table[lows[g] + half]);
            }
            for (std::size_t g = 0; g < members; ++g) {
                const std::size_t probe = lows[g] + half;
                lows[g] = select_probe(key_less(table[probe], group_keys[g]), probe, lows[g]);
            }
            size -= half;
        }
        for (std::size_t g = 0; g < members; ++g) {
            std::size_t low = lows[g];
            if (size == 1 && key_less(table[low], group_keys[g])) {
                ++low;
            }
            out[start + g] = low;
        }
    }
}

} // namespace mx::bench::bsearch
