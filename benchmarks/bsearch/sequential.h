#pragma once

// Sequential lookups: std::lower_bound and the branch-free baseline every interleaved variant is
// measured against (Psaropoulos listing 2.1: the comparison becomes a conditional move, so no
// branch mispredicts, but every probe waits for its miss).

#include <algorithm>
#include <cstddef>
#include <span>

#include "keys.h"

namespace mx::bench::bsearch {

template <class Key>
std::size_t lower_bound_branch_free(std::span<const Key> table, const Key &key) noexcept {
    std::size_t low = 0;
    std::size_t size = table.size();
    while (size > 1) {
        const std::size_t half = size / 2;
        const std::size_t probe = low + half;
        low = select_probe(key_less(table[probe], key), probe, low);
        size -= half;
    }
    if (size == 1 && key_less(table[low], key)) {
        ++low;
    }
    return low;
}

template <class Key>
void search_branch_free(std::span<const Key> table, std::span<const Key> keys,
                        std::span<std::size_t> out) noexcept {
    for (std::size_t i = 0; i < keys.size(); ++i) {
        out[i] = lower_bound_branch_free(table, keys[i]);
    }
}

template <class Key>
void search_std(std::span<const Key> table, std::span<const Key> keys, std::span<std::size_t> out) noexcept {
    for (std::size_t i = 0; i < keys.size(); ++i) {
        out[i] = static_cast<std::size_t>(std::lower_bound(table.begin(), table.end(), keys[i], KeyLess{}) -
                                          table.begin());
    }
}

} // namespace mx::bench::bsearch
