#pragma once

// The classic baseline of the radix join demonstrator (Balkesen et al., "Main-memory hash joins
// on multi-core CPUs"): plain threads, no runtime. Each thread builds a histogram of its chunk,
// the histograms give every (thread, partition) an exclusive output range, and the threads
// scatter; one or two passes, with or without software write-combining buffers. Then threads
// take partitions from a shared counter and build and probe one hash table per partition.

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <thread>
#include <vector>

#include "mx/join/hash_table.h"
#include "mx/join/relation.h"
#include "mx/system/cpu.h"
#include "mx/util/assert.h"

namespace mx::join {

struct ClassicJoinConfig {
    unsigned threads{1};
    unsigned radix_bits{11};
    unsigned passes{1};          // 1 or 2
    bool write_combining{false}; // software write-combining buffers in the scatter
};

namespace detail {

/// One cache line of a software write-combining buffer: tuples of one partition collect here
/// and leave as one non-temporal full-line store, so the scatter does not read the target lines.
struct alignas(system::cache_line_size) CombineLine {
    Tuple slots[4];
};
inline constexpr std::size_t tuples_per_line = 4;

/// What a scatter that just stored `slot` prefetches for writing: the next line of the
/// partition when `slot` is the first tuple of its line, else `slot` itself (in L1 already, so the
/// prefetch is nearly free). One prefetch per line instead of one per tuple: the three repeated
/// prefetches of a line in flight cost ~10-15 % of the partition time in both joins (see
/// docs/benchmarks.md, radix join). Computed as an integer and selected without a
/// branch (which line a tuple lands on is random): the next line may lie past the end of the
/// buffer, where a prefetch never faults but pointer arithmetic is undefined.
inline const void *write_front(const Tuple *slot) noexcept {
    const auto address = reinterpret_cast<std::uintptr_t>(slot);
    const bool line_start = (address & (system::cache_line_size - 1)) == 0;
    return reinterpret_cast<const void *>(address + (line_start ? system::cache_line_size : 0));
}

inline void stream_line(Tuple *target, const CombineLine &line) noexcept {
    const auto *source = reinterpret_cast<const __m128i *>(line.slots);
    auto *destination = reinterpret_cast<__m128i *>(target);
    for (std::size_t i = 0; i < 4; ++i) {
        _mm_stream_si128(destination + i, _mm_load_si128(source + i));
    }
}

/// Scatters `input` to `output` by (key >> shift) & mask. `cursor[p]` is the next output index
/// of partition p (advanced); `start[p]` the first index this caller owns (write-combining only
/// stream-stores lines it owns completely; shared edge lines get plain stores per tuple).
inline void scatter(std::span<const Tuple> input, Tuple *output, std::size_t *cursor,
                    const std::size_t *start, unsigned shift, std::size_t mask, CombineLine *lines) noexcept {
    if (lines == nullptr) {
        for (const Tuple &tuple : input) {
            Tuple *slot = output + cursor[(tuple.key >> shift) & mask]++;
            *slot = tuple;
            // The partition's next line, for writing: its read-for-ownership miss overlaps the
            // next tuples instead of stalling the store that first touches it (as in the
            // task-based join's plain scatter; 1.3-1.8x faster partitioning under memory load here).
            system::prefetch(detail::write_front(slot), system::PrefetchMode::for_write);
        }
        return;
    }
    for (const Tuple &tuple : input) {
        const std::size_t partition = (tuple.key >> shift) & mask;
        const std::size_t position = cursor[partition]++;
        CombineLine &line = lines[partition];
        line.slots[position % tuples_per_line] = tuple;
        if (position % tuples_per_line == tuples_per_line - 1) {
            const std::size_t line_start = position + 1 - tuples_per_line;
            if (line_start >= start[partition]) {
                stream_line(output + line_start, line);
            } else {
                for (std::size_t i = start[partition]; i <= position; ++i) {
                    output[i] = line.slots[i % tuples_per_line];
                }
            }
        }
    }
    for (std::size_t partition = 0; partition <= mask; ++partition) {
        const std::size_t end = cursor[partition];
        const std::size_t from = std::max(end - end % tuples_per_line, start[partition]);
        for (std::size_t i = from; i < end; ++i) {
            output[i] = lines[partition].slots[i % tuples_per_line];
        }
    }
    _mm_sfence(); // non-temporal stores are weakly ordered: drain them before the phase ends
}

inline std::uint64_t elapsed_ns(std::chrono::steady_clock::time_point since) noexcept {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since)
            .count());
}

} // namespace detail

/// A classic radix join over two fixed relations. Construction allocates and pre-faults every
/// buffer, so run() times only partitioning and joining; run() may be called repeatedly.
class ClassicRadixJoin {
public:
    ClassicRadixJoin(std::span<const Tuple> build, std::span<const Tuple> probe,
                     const ClassicJoinConfig &config)
        : _build(build), _probe(probe), _config(config), _partitions(std::size_t{1} << config.radix_bits),
          _build_out(build.size()), _probe_out(probe.size()) {
        MX_ASSERT(config.threads >= 1, "at least one thread");
        MX_ASSERT(config.passes == 1 || config.passes == 2, "one or two partitioning passes");
        MX_ASSERT(config.radix_bits >= 1 && config.radix_bits <= 24, "radix bits out of range");
        _build_out.prefault();
        _probe_out.prefault();
        if (config.passes == 2) {
            _build_tmp = TupleBuffer{build.size()};
            _probe_tmp = TupleBuffer{probe.size()};
            _build_tmp.prefault();
            _probe_tmp.prefault();
        }
        _build_bounds.resize(_partitions + 1);
        _probe_bounds.resize(_partitions + 1);
    }

    JoinResult run(JoinTimings *timings = nullptr) {
        const auto start = std::chrono::steady_clock::now();
        const std::uint64_t start_cycles = system::cycles();
        partition(_build, _build_tmp, _build_out, _build_bounds);
        partition(_probe, _probe_tmp, _probe_out, _probe_bounds);
        const std::uint64_t partition_ns = detail::elapsed_ns(start);
        const auto join_start = std::chrono::steady_clock::now();
        const JoinResult result = join_partitions();
        if (timings != nullptr) {
            timings->partition_ns = partition_ns;
            timings->build_probe_ns = detail::elapsed_ns(join_start);
            timings->build_ns = 0;
            timings->probe_ns = 0;
            timings->total_ns = detail::elapsed_ns(start);
            timings->total_cycles = system::cycles() - start_cycles;
        }
        return result;
    }

private:
    template <class F>
    void parallel(F &&body) {
        std::vector<std::thread> threads;
        threads.reserve(_config.threads - 1);
        for (unsigned t = 1; t < _config.threads; ++t) {
            threads.emplace_back([&body, t] { body(t); });
        }
        body(0U);
        for (std::thread &thread : threads) {
            thread.join();
        }
    }

    /// Partitions `input` into `output`; bounds[p] is where final partition p starts.
    void partition(std::span<const Tuple> input, TupleBuffer &tmp, TupleBuffer &output,
                   std::vector<std::size_t> &bounds) {
        if (_config.passes == 1) {
            first_pass(input, output.data(), _config.radix_bits, bounds);
            return;
        }
        const unsigned bits1 = (_config.radix_bits + 1) / 2;
        const unsigned bits2 = _config.radix_bits - bits1;
        std::vector<std::size_t> bounds1((std::size_t{1} << bits1) + 1);
        first_pass(input, tmp.data(), bits1, bounds1);
        second_pass(tmp.data(), output.data(), bits1, bits2, bounds1, bounds);
    }

    /// Parallel pass over the whole input by the low `bits` of the key.
    void first_pass(std::span<const Tuple> input, Tuple *output, unsigned bits,
                    std::vector<std::size_t> &bounds) {
        const std::size_t fanout = std::size_t{1} << bits;
        const unsigned threads = _config.threads;
        // histograms[t * fanout + p]: written by thread t before the barrier, read by all after.
        std::vector<std::size_t> histograms(threads * fanout, 0);
        std::barrier sync{static_cast<std::ptrdiff_t>(threads)};
        parallel([&](unsigned t) {
            const std::size_t begin = input.size() * t / threads;
            const std::size_t end = input.size() * (t + 1) / threads;
            const std::span<const Tuple> chunk = input.subspan(begin, end - begin);
            std::size_t *histogram = histograms.data() + t * fanout;
            for (const Tuple &tuple : chunk) {
                ++histogram[tuple.key & (fanout - 1)];
            }
            sync.arrive_and_wait();
            std::vector<std::size_t> cursor(fanout);
            std::size_t offset = 0;
            for (std::size_t p = 0; p < fanout; ++p) {
                if (t == 0) {
                    bounds[p] = offset;
                }
                for (unsigned other = 0; other < threads; ++other) {
                    if (other == t) {
                        cursor[p] = offset;
                    }
                    offset += histograms[other * fanout + p];
                }
            }
            if (t == 0) {
                bounds[fanout] = offset;
            }
            const std::vector<std::size_t> start = cursor;
            std::vector<detail::CombineLine> lines(_config.write_combining ? fanout : 0);
            detail::scatter(chunk, output, cursor.data(), start.data(), 0, fanout - 1,
                            _config.write_combining ? lines.data() : nullptr);
        });
    }

    /// Second pass: threads take first-level partitions from a counter and split each by the next
    /// `bits2` bits into the same index range of `output`.
    void second_pass(const Tuple *input, Tuple *output, unsigned bits1, unsigned bits2,
                     const std::vector<std::size_t> &bounds1, std::vector<std::size_t> &bounds) {
        const std::size_t fanout1 = std::size_t{1} << bits1;
        const std::size_t fanout2 = std::size_t{1} << bits2;
        std::atomic<std::size_t> next{0};
        parallel([&](unsigned) {
            std::vector<std::size_t> cursor(fanout2);
            std::vector<std::size_t> start(fanout2);
            std::vector<detail::CombineLine> lines(_config.write_combining ? fanout2 : 0);
            for (std::size_t q = next.fetch_add(1, std::memory_order_relaxed); q < fanout1;
                 q = next.fetch_add(1, std::memory_order_relaxed)) {
                const std::span<const Tuple> segment{input + bounds1[q], bounds1[q + 1] - bounds1[q]};
                std::fill(cursor.begin(), cursor.end(), 0);
                for (const Tuple &tuple : segment) {
                    ++cursor[(tuple.key >> bits1) & (fanout2 - 1)];
                }
                std::size_t offset = bounds1[q];
                for (std::size_t p = 0; p < fanout2; ++p) {
                    const std::size_t count = cursor[p];
                    bounds[q * fanout2 + p] = offset; // each q is written by one thread only
                    cursor[p] = offset;
                    start[p] = offset;
                    offset += count;
                }
                detail::scatter(segment, output, cursor.data(), start.data(), bits1, fanout2 - 1,
                                _config.write_combining ? lines.data() : nullptr);
            }
        });
        bounds[fanout1 * fanout2] = bounds1[fanout1];
    }

    JoinResult join_partitions() {
        std::size_t largest = 0;
        for (std::size_t p = 0; p < _partitions; ++p) {
            largest = std::max(largest, _build_bounds[p + 1] - _build_bounds[p]);
        }
        std::atomic<std::size_t> next{0};
        std::atomic<std::uint64_t> matches{0};
        std::atomic<std::uint64_t> checksum{0};
        parallel([&](unsigned) {
            std::vector<std::uint32_t> heads(PartitionHashTable::bucket_count_for(largest));
            std::vector<std::uint32_t> chain(largest);
            JoinResult local;
            for (std::size_t p = next.fetch_add(1, std::memory_order_relaxed); p < _partitions;
                 p = next.fetch_add(1, std::memory_order_relaxed)) {
                const std::size_t build_size = _build_bounds[p + 1] - _build_bounds[p];
                // The classic join builds on its own partition in place: the table only links it.
                PartitionHashTable table{heads.data(), chain.data(), _build_out.data() + _build_bounds[p],
                                         build_size, _config.radix_bits};
                table.link_all(build_size);
                for (std::size_t i = _probe_bounds[p]; i < _probe_bounds[p + 1]; ++i) {
                    const Tuple &tuple = _probe_out[i];
                    table.probe(tuple.key, [&](const Tuple &match) noexcept {
                        ++local.matches;
                        local.checksum += match_checksum(match.payload, tuple.payload);
                    });
                }
            }
            matches.fetch_add(local.matches, std::memory_order_relaxed);
            checksum.fetch_add(local.checksum, std::memory_order_relaxed);
        });
        return JoinResult{matches.load(), checksum.load()};
    }

    std::span<const Tuple> _build;
    std::span<const Tuple> _probe;
    ClassicJoinConfig _config;
    std::size_t _partitions;
    TupleBuffer _build_out;
    TupleBuffer _probe_out;
    TupleBuffer _build_tmp;
    TupleBuffer _probe_tmp;
    std::vector<std::size_t> _build_bounds;
    std::vector<std::size_t> _probe_bounds;
};

} // namespace mx::join
