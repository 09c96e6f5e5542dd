#pragma once

// Asynchronous memory access chaining (Kocberber et al.): each of G lookups is a hand-written
// state machine in a ring of slots; visiting a slot performs the read whose line was prefetched
// at the last visit, then prefetches the next probe, or finishes the lookup and starts the next
// one in the same slot. Lookups progress independently, unlike group prefetching.

#include <array>
#include <cstddef>
#include <span>

#include "keys.h"
#include "mx/system/cpu.h"

namespace mx::bench::bsearch {

inline constexpr std::size_t max_amac_group = 64;

template <class Key>
void search_amac(std::size_t group_size, std::span<const Key> table, std::span<const Key> keys,
                 std::span<std::size_t> out) noexcept {
    struct State {
        Key key;
        std::size_t index; // which lookup this slot serves
        std::size_t low;
        std::size_t size; // > 1 while a probe at low + size / 2 is in flight
    };
    group_size = group_size == 0 ? 1 : (group_size > max_amac_group ? max_amac_group : group_size);
    std::array<State, max_amac_group> ring{};
    std::size_t next = 0;

    // Starts lookups in `state` until one needs memory; false when the keys ran out.
    auto start = [&](State &state) noexcept {
        while (next < keys.size()) {
            state.index = next;
            state.key = keys[next++];
            state.low = 0;
            state.size = table.size();
            if (state.size > 1) {
                system::prefetch(&table[state.size / 2]);
                return true;
            }
            out[state.index] = (state.size == 1 && key_less(table[0], state.key)) ? 1 : 0;
        }
        return false;
    };

    std::size_t active = 0;
    while (active < group_size && start(ring[active])) {
        ++active;
    }
    while (active > 0) {
        for (std::size_t i = 0; i < active;) {
            State &state = ring[i];
            const std::size_t half = state.size / 2;
            const std::size_t probe = state.low + half;
            state.low = select_probe(key_less(table[probe], state.key), probe, state.low);
            state.size -= half;
            if (state.size > 1) {
                system::prefetch(&table[state.low + state.size / 2]);
                ++i;
                continue;
            }
            out[state.index] = key_less(table[state.low], state.key) ? state.low + 1 : state.low;
            if (start(state)) {
                ++i;
            } else {
                state = ring[--active];
            }
        }
    }
}

} // namespace mx::bench::bsearch
