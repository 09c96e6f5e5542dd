#pragma once

// Zeroed memory for the big arrays of the engine's operators (aggregation tables, hash join
// bucket heads). Buffers from about 2 MiB on are whole 2 MiB pages that ask for transparent huge
// pages, and they are recycled within the process: a query run that builds a table of a million
// groups would otherwise take hundreds of MiB of fresh memory from the kernel, and the first
// touch of fresh memory (a page fault, the kernel zeroing the page, in a VM also the host backing
// it) cost as much as the rest of TPC-H Q18 on the 2-core guest. A recycled buffer costs one
// memset. See docs/design/query-engine.md, "Working memory".

#include <cstddef>
#include <cstdint>

#include "mx/system/aligned_mapping.h"

namespace mx::db::detail {

class LargeBuffer {
public:
    static constexpr std::size_t huge_page_bytes = system::huge_page_bytes;

    LargeBuffer() noexcept = default;
    /// `bytes` zeroed bytes; throws std::bad_alloc when the memory is exhausted.
    explicit LargeBuffer(std::size_t bytes);
    /// The same without throwing: an empty buffer (data() == nullptr) when out of memory.
    [[nodiscard]] static LargeBuffer try_zeroed(std::size_t bytes) noexcept;

    LargeBuffer(LargeBuffer &&other) noexcept { take_from(other); }
    LargeBuffer &operator=(LargeBuffer &&other) noexcept {
        if (this != &other) {
            release();
            take_from(other);
        }
        return *this;
    }
    LargeBuffer(const LargeBuffer &) = delete;
    LargeBuffer &operator=(const LargeBuffer &) = delete;
    ~LargeBuffer() { release(); }

    [[nodiscard]] std::byte *data() const noexcept { return _data; }
    [[nodiscard]] std::size_t bytes() const noexcept { return _bytes; }

private:
    bool allocate(std::size_t bytes) noexcept;
    void release() noexcept;
    void take_from(LargeBuffer &other) noexcept {
        _data = other._data;
        _bytes = other._bytes;
        _mapped = other._mapped;
        other._data = nullptr;
        other._bytes = 0;
        other._mapped = 0;
    }

    std::byte *_data{nullptr};
    std::size_t _bytes{0};
    // Bytes of the 2 MiB-aligned mapping behind _data (it goes back to the recycler); 0 when the
    // buffer is small and came from operator new.
    std::size_t _mapped{0};
};

/// Bytes of freed large buffers the process keeps for reuse, and the most it keeps: 1/16 of
/// the physical memory, at most 2 GiB.
[[nodiscard]] std::size_t recycled_buffer_bytes() noexcept;
[[nodiscard]] std::size_t recycled_buffer_limit() noexcept;
/// Returns every kept buffer to the kernel (e.g. after a big query, before a long idle time).
void release_recycled_buffers() noexcept;

} // namespace mx::db::detail
