#pragma once

// Shared pieces of the contention benchmark: the workload (K objects of one counter pair each,
// a read ratio, operations drawn uniformly with a seeded generator), the interface every
// variant implements (mxtasking primitives, std::thread with std locks or a hand-written
// optimistic lock, oneTBB with spin_rw_mutex) and timing with the time-stamp counter.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <mx/system/cpu.h>

namespace mx::bench::sync {

/// One object: a counter pair that writers increment together and readers check, padded to a
/// cache line so objects never share one.
struct alignas(system::cache_line_size) Counters {
    std::uint64_t a{0};
    std::uint64_t b{0};
};
static_assert(sizeof(Counters) == system::cache_line_size);

/// What one run does. Every worker performs `operations_per_worker` operations; worker w
/// draws them from generator seed (seed, w), so each variant sees the same sequence.
struct Workload {
    std::uint64_t objects{1000};
    std::uint32_t read_percent{95};
    std::uint64_t operations_per_worker{200'000};
    std::uint32_t batch{500}; // mxtasking: operation tasks a producer spawns per round
    std::uint64_t seed{42};
};

__extension__ using Uint128 = unsigned __int128;

/// xorshift64*: small, fast, seeded; a worker's stream of operations.
class OperationStream {
public:
    OperationStream(std::uint64_t seed, std::uint64_t worker) noexcept
        : _state((seed + 1) * 0x9E3779B97F4A7C15ULL ^ (worker + 1) * 0xD1B54A32D192ED03ULL) {
        if (_state == 0) {
            _state = 1;
        }
    }
    struct Operation {
        std::uint64_t object;
        bool read;
    };
    Operation next(std::uint64_t objects, std::uint32_t read_percent) noexcept {
        _state ^= _state >> 12U;
        _state ^= _state << 25U;
        _state ^= _state >> 27U;
        const std::uint64_t random = _state * 0x2545F4914F6CDD1DULL;
        // Multiply-shift maps to [0, objects) without a division.
        const auto object = static_cast<std::uint64_t>((static_cast<Uint128>(random) * objects) >> 64U);
        const bool read = static_cast<std::uint32_t>((random & 0xFFFFU) % 100U) < read_percent;
        return {object, read};
    }

private:
    std::uint64_t _state;
};

/// Keeps a value alive without storing it anywhere.
inline void keep(std::uint64_t value) noexcept { asm volatile("" : : "r"(value)); }

struct Run {
    std::uint64_t operations{0};
    std::uint64_t writes{0};
    std::uint64_t cycles{0}; // time-stamp counter ticks, wall time
    double seconds{0.0};
};

class Stopwatch {
public:
    Stopwatch() noexcept : _start_time(std::chrono::steady_clock::now()), _start_cycles(system::cycles()) {}
    [[nodiscard]] Run stop(std::uint64_t operations, std::uint64_t writes) const noexcept {
        const std::uint64_t end_cycles = system::cycles();
        const auto end_time = std::chrono::steady_clock::now();
        return Run{operations, writes, end_cycles - _start_cycles,
                   std::chrono::duration<double>(end_time - _start_time).count()};
    }

private:
    std::chrono::steady_clock::time_point _start_time;
    std::uint64_t _start_cycles;
};

/// One system under test with a fixed worker count. Objects are created by prepare() and stay
/// alive across runs, so variants can be interleaved run by run.
class Variant {
public:
    virtual ~Variant() = default;
    [[nodiscard]] virtual std::string name() const = 0;
    virtual void prepare(std::uint64_t objects) = 0;
    virtual Run run(const Workload &workload) = 0;
    /// Every object's pair matches and the first fields add up to the writes of all runs.
    [[nodiscard]] virtual bool verify(std::uint64_t writes, std::string &problem) const = 0;
    virtual void release() = 0;
};

/// Checks a range of counter pairs (shared by the variants' verify()).
template <class Get>
bool verify_pairs(std::uint64_t objects, std::uint64_t writes, Get get, std::string &problem) {
    std::uint64_t sum = 0;
    for (std::uint64_t i = 0; i < objects; ++i) {
        const Counters &counters = get(i);
        if (counters.a != counters.b) {
            problem = "object " + std::to_string(i) + " has a torn pair (" + std::to_string(counters.a) +
                      " != " + std::to_string(counters.b) + ")";
            return false;
        }
        sum += counters.a;
    }
    if (sum != writes) {
        problem = "lost updates: objects hold " + std::to_string(sum) + " increments, " +
                  std::to_string(writes) + " were made";
        return false;
    }
    return true;
}

/// mxtasking: one runtime per worker count and reclamation setting, shared by its variants.
class MxRuntime;
/// `allocator_batch` 0 keeps the runtime's default (RuntimeConfig::allocator_batch).
std::shared_ptr<MxRuntime> make_mx_runtime(std::uint16_t workers, bool memory_reclamation,
                                           std::uint32_t allocator_batch);
bool mx_htm_available(const MxRuntime &runtime);
/// `primitive` is a name from mx::sync::to_string (spinlock, rw_latch, optimistic_latched,
/// optimistic_scheduled, htm, scheduling).
std::unique_ptr<Variant> make_mx_variant(std::shared_ptr<MxRuntime> runtime, const std::string &primitive,
                                         const std::string &name);

std::unique_ptr<Variant> make_threads_mutex(std::uint16_t workers);
std::unique_ptr<Variant> make_threads_shared_mutex(std::uint16_t workers);
std::unique_ptr<Variant> make_threads_optimistic(std::uint16_t workers);
std::unique_ptr<Variant> make_tbb_spin_rw_mutex(std::uint16_t workers);

} // namespace mx::bench::sync
