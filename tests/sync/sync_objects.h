#pragma once

// The objects and tasks the synchronization tests share: a two-field object whose fields must
// always be equal, a writer that updates them with a window in between, and a reader that
// copies both during its (possibly optimistic) read and checks them only after the runtime
// validated that read.
//
// ThreadSanitizer: the fields are plain on purpose. Optimistic readers race with writers by
// design (seqlock style); the worker brackets an optimistic execute() with TSan's
// AnnotateIgnoreReadsBegin/End (mx/sync/primitives.h), so those reads are neither recorded nor
// reported, while the writers' accesses (under a latch or on the owning worker) still are. A
// reader only trusts its copy after validation, in a second phase that reads nothing shared.
// Tests that race on data outside the runtime (the seqlock test on plain threads) use relaxed
// atomics instead, because no annotation covers them.

#include <atomic>
#include <cstdint>
#include <span>

#include <mx/system/cpu.h>
#include <mx/tasking/runtime.h>

namespace mx::sync_test {

/// Two fields a writer updates one after the other: a reader that sees them differ saw a torn
/// write. 64 bytes, so objects do not share cache lines.
struct alignas(system::cache_line_size) Pair {
    static constexpr std::uint64_t live_magic = 0x4c49'5645'4c49'5645ULL;
    static constexpr std::uint64_t dead_magic = 0xDEAD'DEAD'DEAD'DEADULL;

    Pair() noexcept = default;
    explicit Pair(std::uint64_t value, std::atomic<std::uint64_t> *destroyed = nullptr) noexcept
        : a(value), b(value), destructions(destroyed) {}
    Pair(const Pair &) = delete;
    Pair &operator=(const Pair &) = delete;
    ~Pair() {
        magic = dead_magic;
        if (destructions != nullptr) {
            destructions->fetch_add(1, std::memory_order_relaxed);
        }
    }

    std::uint64_t magic{live_magic};
    std::uint64_t a{0};
    std::uint64_t b{0};
    std::atomic<std::uint64_t> *destructions{nullptr};
};

/// Widens the window between two accesses, so that a primitive that does not isolate them is
/// caught in the act. The signal fences keep the compiler from merging or reordering the
/// accesses across the pause.
inline void window(int pauses) noexcept {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    for (int i = 0; i < pauses; ++i) {
        system::pause();
    }
    std::atomic_signal_fence(std::memory_order_seq_cst);
}

/// Adds `delta` to both fields, non-atomically and each from its own old value: two writers
/// that overlap lose different updates on a and b, which shows in the totals and in a != b.
inline void add(Pair &pair, std::uint64_t delta) noexcept {
    const std::uint64_t a = pair.a + delta;
    window(4);
    pair.a = a;
    window(4);
    pair.b = pair.b + delta;
}

/// What readers found once their reads were validated. Written by any worker.
struct ReadStats {
    std::atomic<std::uint64_t> validated{0};
    std::atomic<std::uint64_t> torn{0};
    std::atomic<std::uint64_t> dead{0};       ///< saw a destroyed object
    std::atomic<std::uint64_t> max_value{0};  ///< largest field value seen
    std::atomic<std::uint64_t> bad_commit{0}; ///< commit() of a reader that did not ask for it
};

/// Reads a Pair in phase 0 under the task's resource annotation (possibly optimistically: the
/// copy may be torn and is then thrown away), drops the annotation and returns itself as the
/// successor; phase 1 runs only after the runtime validated phase 0 and checks the copy. A
/// failed optimistic run is undone by the runtime: the annotation and the state bytes. With
/// `commit`, phase 0 returns TaskResult::commit() instead and the check runs in commit(), which
/// the runtime calls only for a run that stands.
class PairReader final : public tasking::Task {
public:
    PairReader(tasking::ResourcePtr resource, ReadStats *stats, bool commit = false) noexcept
        : Task(tasking::Annotation{.resource = resource, .access = tasking::AccessMode::read_only}),
          _stats(stats), _commit(commit) {}

    tasking::TaskResult execute(tasking::TaskContext & /*context*/) noexcept override {
        if (_state.phase == 0) {
            const auto *pair = resource().get<Pair>();
            _state.magic = pair->magic;
            _state.a = pair->a;
            // Longer than a writer's whole update, so an unvalidated read is likely to be torn.
            window(24);
            _state.b = pair->b;
            _state.phase = 1;
            if (_commit) {
                return tasking::TaskResult::commit();
            }
            annotate(tasking::ResourcePtr{}, tasking::AccessMode::none);
            return tasking::TaskResult::successor(this);
        }
        check();
        return tasking::TaskResult::remove();
    }

    void commit(tasking::TaskContext & /*context*/) noexcept override {
        if (!_commit || _state.phase != 1) {
            _stats->bad_commit.fetch_add(1, std::memory_order_relaxed);
        }
        check();
    }

    std::span<std::byte> optimistic_state() noexcept override { return state_bytes(_state); }

private:
    void check() noexcept {
        _stats->validated.fetch_add(1, std::memory_order_relaxed);
        if (_state.a != _state.b) {
            _stats->torn.fetch_add(1, std::memory_order_relaxed);
        }
        if (_state.magic != Pair::live_magic) {
            _stats->dead.fetch_add(1, std::memory_order_relaxed);
        }
        std::uint64_t seen = _stats->max_value.load(std::memory_order_relaxed);
        while (_state.a > seen && !_stats->max_value.compare_exchange_weak(seen, _state.a)) {
        }
    }

    struct State {
        std::uint64_t magic{0};
        std::uint64_t a{0};
        std::uint64_t b{0};
        std::uint32_t phase{0};
    };
    State _state{};
    ReadStats *_stats;
    bool _commit;
};

inline tasking::Annotation writing(tasking::ResourcePtr resource) noexcept {
    return tasking::Annotation{.resource = resource, .access = tasking::AccessMode::write};
}
inline tasking::Annotation reading(tasking::ResourcePtr resource) noexcept {
    return tasking::Annotation{.resource = resource, .access = tasking::AccessMode::read_only};
}

} // namespace mx::sync_test
