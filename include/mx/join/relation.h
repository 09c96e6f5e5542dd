#pragma once

// Relations for the radix join demonstrator (dissertation ch. 6, workload A of Balkesen et al.):
// 16-byte tuples of an 8-byte key and an 8-byte payload, generated from a seed, plus the result
// every join variant must produce and a simple reference join to check it against.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <span>
#include <sys/mman.h>
#include <unordered_map>
#include <vector>

#include "mx/system/cpu.h"

namespace mx::join {

struct Tuple {
    std::uint64_t key;
    std::uint64_t payload;
};
static_assert(sizeof(Tuple) == 16, "workload A uses 16-byte tuples");

/// Cache-line-aligned, uninitialised tuple storage (radix partitioning writes whole lines).
/// Buffers of 2 MiB and more are aligned to 2 MiB and asked to use transparent huge pages: the
/// join touches every fragment and partition once per pass, and with 4 KiB pages each of those
/// first touches is a TLB miss with a nested page walk in a virtual machine.
class TupleBuffer {
public:
    static constexpr std::size_t huge_page_size = std::size_t{2} << 20U;

    TupleBuffer() noexcept = default;
    explicit TupleBuffer(std::size_t size) : _size(size) {
        if (size == 0) {
            return;
        }
        const std::size_t bytes = size * sizeof(Tuple);
        _tuples = std::unique_ptr<Tuple[], Free>{
            static_cast<Tuple *>(::operator new(bytes, std::align_val_t{alignment_for(size)})), Free{size}};
#if defined(MADV_HUGEPAGE)
        if (bytes >= huge_page_size) {
            // Only a hint: without transparent huge pages the buffer works on 4 KiB pages.
            static_cast<void>(::madvise(_tuples.get(),
                                        (bytes + huge_page_size - 1) / huge_page_size * huge_page_size,
                                        MADV_HUGEPAGE));
        }
#endif
    }

    /// Writes every page once, so first-touch page faults stay out of timed phases.
    void prefault() noexcept {
        if (_size != 0) {
            std::memset(static_cast<void *>(_tuples.get()), 0, _size * sizeof(Tuple));
        }
    }

    [[nodiscard]] Tuple *data() noexcept { return _tuples.get(); }
    [[nodiscard]] const Tuple *data() const noexcept { return _tuples.get(); }
    [[nodiscard]] std::size_t size() const noexcept { return _size; }
    [[nodiscard]] std::span<Tuple> span() noexcept { return {_tuples.get(), _size}; }
    [[nodiscard]] std::span<const Tuple> span() const noexcept { return {_tuples.get(), _size}; }
    Tuple &operator[](std::size_t index) noexcept { return _tuples[index]; }
    const Tuple &operator[](std::size_t index) const noexcept { return _tuples[index]; }

private:
    static std::size_t alignment_for(std::size_t size) noexcept {
        return size * sizeof(Tuple) >= huge_page_size ? huge_page_size : system::cache_line_size;
    }
    struct Free {
        std::size_t size;
        void operator()(Tuple *tuples) const noexcept {
            ::operator delete(tuples, std::align_val_t{alignment_for(size)});
        }
    };
    std::unique_ptr<Tuple[], Free> _tuples{nullptr, Free{0}};
    std::size_t _size{0};
};

/// What every join variant returns: the number of matching pairs and an order-independent
/// checksum over the payloads of each matched pair.
struct JoinResult {
    std::uint64_t matches{0};
    std::uint64_t checksum{0};
    friend bool operator==(const JoinResult &, const JoinResult &) noexcept = default;
};

/// The contribution of one matched pair to JoinResult::checksum. Mixes the two payloads
/// asymmetrically so that swapping build and probe payloads changes the sum.
inline std::uint64_t match_checksum(std::uint64_t build_payload, std::uint64_t probe_payload) noexcept {
    return build_payload * 0x9E3779B97F4A7C15ULL + probe_payload;
}

/// Wall-clock phases of one join run, in nanoseconds, and the TSC cycles of the whole run.
struct JoinTimings {
    std::uint64_t partition_ns{0};
    std::uint64_t build_ns{0}; // classic join: 0, build and probe run fused (see build_probe_ns)
    std::uint64_t probe_ns{0};
    std::uint64_t build_probe_ns{0};
    std::uint64_t total_ns{0};
    std::uint64_t total_cycles{0};
};

/// Build side of workload A: the keys 1..size, each once, in random order; random payloads.
inline TupleBuffer make_build_relation(std::size_t size, std::uint64_t seed) {
    TupleBuffer relation{size};
    std::mt19937_64 random{seed};
    for (std::size_t i = 0; i < size; ++i) {
        relation[i] = Tuple{i + 1, random()};
    }
    for (std::size_t i = size; i > 1; --i) { // Fisher-Yates over the keys only
        const std::size_t j = random() % i;
        std::swap(relation[i - 1].key, relation[j].key);
    }
    return relation;
}

/// Draws ranks 0..n-1 with P(rank k) proportional to 1 / (k+1)^theta, theta in [0, 1), with the
/// closed-form approximation of Gray et al. ("Quickly generating billion-record synthetic
/// databases"): O(n) set-up for the zeta constant, O(1) per draw.
class ZipfGenerator {
public:
    ZipfGenerator(std::uint64_t n, double theta) : _n(n), _theta(theta) {
        double zeta_n = 0.0;
        for (std::uint64_t i = 1; i <= n; ++i) {
            zeta_n += 1.0 / std::pow(static_cast<double>(i), theta);
        }
        const double zeta_2 = 1.0 + 1.0 / std::pow(2.0, theta);
        _zeta_n = zeta_n;
        _alpha = 1.0 / (1.0 - theta);
        _eta = (1.0 - std::pow(2.0 / static_cast<double>(n), 1.0 - theta)) / (1.0 - zeta_2 / zeta_n);
    }

    template <class Random>
    std::uint64_t operator()(Random &random) {
        const double u = std::uniform_real_distribution<double>{0.0, 1.0}(random);
        const double uz = u * _zeta_n;
        if (uz < 1.0) {
            return 0;
        }
        if (uz < 1.0 + std::pow(0.5, _theta)) {
            return std::min<std::uint64_t>(1, _n - 1);
        }
        const auto rank =
            static_cast<std::uint64_t>(static_cast<double>(_n) * std::pow(_eta * u - _eta + 1.0, _alpha));
        return std::min(rank, _n - 1);
    }

private:
    std::uint64_t _n;
    double _theta;
    double _zeta_n{0.0};
    double _alpha{0.0};
    double _eta{0.0};
};

/// Probe side: keys drawn from 1..build_size (every probe tuple finds exactly one partner in a
/// workload-A build side), uniformly when zipf_theta is 0, else Zipf-skewed towards small keys.
inline TupleBuffer make_probe_relation(std::size_t size, std::size_t build_size, std::uint64_t seed,
                                       double zipf_theta = 0.0) {
    TupleBuffer relation{size};
    std::mt19937_64 random{seed ^ 0x5DEECE66DULL};
    if (build_size == 0) {
        for (std::size_t i = 0; i < size; ++i) {
            relation[i] = Tuple{random() | 1U, random()};
        }
        return relation;
    }
    if (zipf_theta > 0.0) {
        ZipfGenerator zipf{build_size, zipf_theta};
        for (std::size_t i = 0; i < size; ++i) {
            relation[i] = Tuple{zipf(random) + 1, random()};
        }
    } else {
        for (std::size_t i = 0; i < size; ++i) {
            relation[i] = Tuple{random() % build_size + 1, random()};
        }
    }
    return relation;
}

/// The reference: a textbook hash join over std::unordered_multimap, single-threaded.
inline JoinResult reference_join(std::span<const Tuple> build, std::span<const Tuple> probe) {
    std::unordered_multimap<std::uint64_t, std::uint64_t> table;
    table.reserve(build.size());
    for (const Tuple &tuple : build) {
        table.emplace(tuple.key, tuple.payload);
    }
    JoinResult result;
    for (const Tuple &tuple : probe) {
        const auto [first, last] = table.equal_range(tuple.key);
        for (auto it = first; it != last; ++it) {
            ++result.matches;
            result.checksum += match_checksum(it->second, tuple.payload);
        }
    }
    return result;
}

} // namespace mx::join
