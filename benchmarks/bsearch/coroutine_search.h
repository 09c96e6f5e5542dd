#pragma once

// Binary search as an interleavable coroutine: the branch-free baseline with the probe read
// turned into `co_await load<Policy>(...)`, `co_return`, and an explicit branch-free select. Under
// Interleaved it is run by mx::coro::interleave with G lookups in flight; under Sequential the same code
// never suspends.

#include <cstddef>
#include <span>

#include "keys.h"
#include "mx/coro/coroutine.h"

namespace mx::bench::bsearch {

template <mx::coro::InterleavePolicy Policy, class Key>
mx::coro::Coroutine<std::size_t> lower_bound_coroutine(std::span<const Key> table, Key key) {
    std::size_t low = 0;
    std::size_t size = table.size();
    while (size > 1) {
        const std::size_t half = size / 2;
        const std::size_t probe = low + half;
        low = select_probe(key_less(co_await mx::coro::load<Policy>(table[probe]), key), probe, low);
        size -= half;
    }
    if (size == 1 && key_less(table[low], key)) {
        ++low;
    }
    co_return low;
}

template <class Policy = mx::coro::Interleaved, class Key>
void search_coroutines(std::size_t group_size, std::span<const Key> table, std::span<const Key> keys,
                       std::span<std::size_t> out) noexcept {
    mx::coro::interleave(
        group_size, keys.size(), [&](std::size_t i) { return lower_bound_coroutine<Policy>(table, keys[i]); },
        [&](std::size_t i, std::size_t result) { out[i] = result; });
}

/// The same coroutine under the Sequential policy: the "zero-cost sequential path" check.
template <class Key>
void search_coroutines_sequential(std::span<const Key> table, std::span<const Key> keys,
                                  std::span<std::size_t> out) noexcept {
    mx::coro::run_sequential(
        keys.size(),
        [&](std::size_t i) { return lower_bound_coroutine<mx::coro::Sequential>(table, keys[i]); },
        [&](std::size_t i, std::size_t result) { out[i] = result; });
}

} // namespace mx::bench::bsearch
