#pragma once

// Large anonymous memory for latency experiments: 2 MiB-aligned mmap, transparent huge pages
// requested (MADV_HUGEPAGE) or refused (MADV_NOHUGEPAGE), pre-faulted so first-touch costs stay
// out of measurements, and a way to check how much of it the kernel really backs with huge pages
// (a request is only a request). Set-up code: errors are exceptions.

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include "mx/system/aligned_mapping.h"

namespace mx::coro {

enum class PageMode : std::uint8_t { small, huge };

class MappedBuffer {
public:
    static constexpr std::size_t huge_page_bytes = system::huge_page_bytes;

    MappedBuffer() noexcept = default;
    MappedBuffer(std::size_t bytes, PageMode mode) : _mode(mode) {
        _bytes = (bytes + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
        if (_bytes == 0) {
            return;
        }
        _data = system::map_huge_aligned(_bytes);
        if (_data == nullptr) {
            throw std::system_error(errno, std::generic_category(),
                                    "mmap of " + std::to_string(_bytes + huge_page_bytes) + " bytes");
        }
        // Failure is not fatal (e.g. THP compiled out); huge_page_backed_bytes() tells the truth.
        static_cast<void>(::madvise(_data, _bytes, mode == PageMode::huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE));
        for (std::size_t offset = 0; offset < _bytes; offset += 4096) {
            _data[offset] = std::byte{0};
        }
    }
    MappedBuffer(MappedBuffer &&other) noexcept
        : _data(std::exchange(other._data, nullptr)), _bytes(std::exchange(other._bytes, 0)),
          _mode(other._mode) {}
    MappedBuffer &operator=(MappedBuffer &&other) noexcept {
        if (this != &other) {
            release();
            _data = std::exchange(other._data, nullptr);
            _bytes = std::exchange(other._bytes, 0);
            _mode = other._mode;
        }
        return *this;
    }
    MappedBuffer(const MappedBuffer &) = delete;
    MappedBuffer &operator=(const MappedBuffer &) = delete;
    ~MappedBuffer() { release(); }

    [[nodiscard]] std::byte *data() const noexcept { return _data; }
    [[nodiscard]] std::size_t size() const noexcept { return _bytes; }
    [[nodiscard]] PageMode mode() const noexcept { return _mode; }
    template <class T>
    [[nodiscard]] T *as() const noexcept {
        return reinterpret_cast<T *>(_data);
    }

    /// Bytes of this range backed by transparent huge pages, from /proc/self/smaps
    /// (AnonHugePages of every mapping that lies inside the range); 0 if smaps is unreadable.
    [[nodiscard]] std::size_t huge_page_backed_bytes() const {
        std::ifstream smaps("/proc/self/smaps");
        const auto lo = reinterpret_cast<std::uintptr_t>(_data);
        const std::uintptr_t hi = lo + _bytes;
        std::size_t total = 0;
        bool inside = false;
        std::string line;
        while (std::getline(smaps, line)) {
            std::uintptr_t start = 0;
            std::uintptr_t stop = 0;
            char dash = 0;
            std::istringstream header(line);
            if (line.find('-') != std::string::npos && (header >> std::hex >> start >> dash >> stop) &&
                dash == '-' && line.find(':') > line.find(' ')) {
                inside = start >= lo && stop <= hi;
                continue;
            }
            if (inside && line.rfind("AnonHugePages:", 0) == 0) {
                std::istringstream field(line.substr(14));
                std::size_t kib = 0;
                field >> kib;
                total += kib * 1024;
            }
        }
        return total;
    }

private:
    void release() noexcept {
        if (_data != nullptr) {
            ::munmap(_data, _bytes);
            _data = nullptr;
        }
    }

    std::byte *_data{nullptr};
    std::size_t _bytes{0};
    PageMode _mode{PageMode::small};
};

} // namespace mx::coro
