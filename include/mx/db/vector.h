#pragma once

// Columnar batches, the unit of vectorized execution. A Vector is one column of a batch: either a
// view of memory owned elsewhere (a table fragment's column block: scans copy nothing) or the
// owner of its values (an expression's result). A Batch is a set of equally long vectors plus an
// optional selection vector naming the live rows, so a filter does not copy.

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include <mx/db/types.h>
#include <mx/util/assert.h>

namespace mx::db {

/// Arena for strings a vector or an operator creates (SUBSTRING results, copied keys). Blocks
/// never move, so StringRefs into it stay valid for the arena's lifetime.
class StringHeap {
public:
    StringRef add(std::string_view text) {
        if (text.empty()) {
            return {};
        }
        if (_blocks.empty() || _used + text.size() > _capacity) {
            _capacity = text.size() > block_size ? text.size() : block_size;
            _blocks.push_back(std::make_unique<char[]>(_capacity));
            _reserved += _capacity;
            _used = 0;
        }
        char *target = _blocks.back().get() + _used;
        std::memcpy(target, text.data(), text.size());
        _used += text.size();
        return {target, static_cast<std::uint32_t>(text.size())};
    }
    [[nodiscard]] bool empty() const noexcept { return _blocks.empty(); }
    /// Bytes of its blocks.
    [[nodiscard]] std::size_t bytes() const noexcept { return _reserved; }

private:
    static constexpr std::size_t block_size = 64 * 1024;
    std::vector<std::unique_ptr<char[]>> _blocks;
    std::size_t _used{0};
    std::size_t _capacity{0};
    std::size_t _reserved{0};
};

class Vector {
public:
    Vector() = default;
    /// An owning vector of `size` values (contents uninitialized) and no NULLs.
    Vector(Type type, std::uint32_t size) : _type(type), _size(size) {
        _owned.reset(new std::byte[std::size_t{size} * physical_size(type.physical()) + 16]);
        _data = _owned.get();
    }
    /// A view of `size` values at `data` (and NULL bytes at `nulls`, or none) owned elsewhere.
    static Vector view(Type type, const void *data, const std::uint8_t *nulls, std::uint32_t size) noexcept {
        Vector v;
        v._type = type;
        v._size = size;
        v._data = const_cast<void *>(data); // views are never written through (asserted below)
        v._nulls = const_cast<std::uint8_t *>(nulls);
        v._is_view = true;
        return v;
    }
    /// A view of another vector's rows [offset, offset + size).
    [[nodiscard]] Vector slice(std::uint32_t offset, std::uint32_t size) const noexcept {
        MX_ASSERT(offset + size <= _size, "slice out of range");
        const std::size_t width = physical_size(_type.physical());
        return view(_type, static_cast<const std::byte *>(_data) + std::size_t{offset} * width,
                    _nulls != nullptr ? _nulls + offset : nullptr, size);
    }

    Vector(Vector &&) noexcept = default;
    Vector &operator=(Vector &&) noexcept = default;
    Vector(const Vector &) = delete;
    Vector &operator=(const Vector &) = delete;

    [[nodiscard]] Type type() const noexcept { return _type; }
    [[nodiscard]] std::uint32_t size() const noexcept { return _size; }
    [[nodiscard]] bool is_view() const noexcept { return _is_view; }
    /// Whether dropping this vector may free memory that views of it point into: it owns its
    /// values or strings, or keeps other vectors' memory alive.
    [[nodiscard]] bool holds_memory() const noexcept {
        return !_is_view || _heap != nullptr || !_keep_alive.empty();
    }

    template <class T>
    [[nodiscard]] const T *data() const noexcept {
        MX_ASSERT(sizeof(T) == physical_size(_type.physical()), "vector read with the wrong physical type");
        return static_cast<const T *>(_data);
    }
    template <class T>
    [[nodiscard]] T *mutable_data() noexcept {
        MX_ASSERT(!_is_view, "writing through a view");
        MX_ASSERT(sizeof(T) == physical_size(_type.physical()),
                  "vector written with the wrong physical type");
        return static_cast<T *>(_data);
    }

    /// nullptr when no row is NULL; otherwise one byte per row, 1 = NULL.
    [[nodiscard]] const std::uint8_t *nulls() const noexcept { return _nulls; }
    [[nodiscard]] bool is_null(std::uint32_t row) const noexcept {
        return _nulls != nullptr && _nulls[row] != 0;
    }
    /// The NULL bytes for writing, allocated (all "not NULL") on first use.
    std::uint8_t *mutable_nulls() {
        MX_ASSERT(!_is_view, "writing through a view");
        if (_owned_nulls == nullptr) {
            _owned_nulls = std::make_unique<std::uint8_t[]>(_size + 16);
            std::memset(_owned_nulls.get(), 0, _size + 16);
            _nulls = _owned_nulls.get();
        }
        return _owned_nulls.get();
    }
    void set_null(std::uint32_t row) { mutable_nulls()[row] = 1; }

    /// Strings produced by this vector live here.
    StringHeap &heap() {
        if (_heap == nullptr) {
            _heap = std::make_unique<StringHeap>();
        }
        return *_heap;
    }
    /// Keeps another vector's string memory alive as long as this one (for gathered strings).
    void keep_alive(std::shared_ptr<const void> owner) { _keep_alive.push_back(std::move(owner)); }

    /// The value at `row` as a Value (slow path: results, constants, tests).
    [[nodiscard]] Value value(std::uint32_t row) const {
        if (is_null(row)) {
            return Value::null_of(_type);
        }
        Value v;
        v.type = _type;
        v.null = false;
        switch (_type.physical()) {
        case PhysicalType::u8:
            v.i64 = data<std::uint8_t>()[row];
            break;
        case PhysicalType::i64:
            v.i64 = data<std::int64_t>()[row];
            break;
        case PhysicalType::i128:
            std::memcpy(&v.i128, static_cast<const std::byte *>(_data) + std::size_t{row} * 16, 16);
            break;
        case PhysicalType::f64:
            v.f64 = data<double>()[row];
            break;
        case PhysicalType::string:
            v.str = std::string(data<StringRef>()[row].view());
            break;
        }
        return v;
    }

private:
    Type _type{};
    std::uint32_t _size{0};
    void *_data{nullptr};
    std::uint8_t *_nulls{nullptr};
    bool _is_view{false};
    std::unique_ptr<std::byte[]> _owned;
    std::unique_ptr<std::uint8_t[]> _owned_nulls;
    std::unique_ptr<StringHeap> _heap;
    std::vector<std::shared_ptr<const void>> _keep_alive;
};

/// Equally long columns plus the rows that are live. `selection` empty and `all_selected`
/// true: every row in [0, rows) is live; otherwise exactly the ascending indices in `selection`.
struct Batch {
    std::vector<Vector> columns;
    std::uint32_t rows{0};
    bool all_selected{true};
    std::vector<std::uint32_t> selection;
    /// Position of the batch in an ordered stream (a sort's output, 0, 1, ...), which consume
    /// tasks may run in any order and on any worker; 0 in unordered streams.
    std::uint64_t sequence{0};

    [[nodiscard]] std::uint32_t count() const noexcept {
        return all_selected ? rows : static_cast<std::uint32_t>(selection.size());
    }
    /// Row index of the i-th live row.
    [[nodiscard]] std::uint32_t row(std::uint32_t i) const noexcept {
        return all_selected ? i : selection[i];
    }
};

} // namespace mx::db
