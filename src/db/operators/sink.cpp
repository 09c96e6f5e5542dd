#include "sink.h"

#include <cstring>

#include <mx/tasking/runtime.h>
#include <mx/tasking/task_group.h>

namespace mx::db::detail {

namespace {

/// Where one batch's rows go in the result: its first row and, per VARCHAR column, its first
/// byte in the column's chars.
struct BatchPlace {
    const Batch *batch{nullptr};
    std::size_t first_row{0};
    std::vector<std::size_t> first_char; // indexed by column; unused for non-strings
};

/// Bytes of the live strings of `column` in `batch` (NULL rows count as empty).
std::size_t string_bytes(const Batch &batch, const Vector &column) noexcept {
    const StringRef *strings = column.data<StringRef>();
    std::size_t bytes = 0;
    const std::uint32_t count = batch.count();
    for (std::uint32_t i = 0; i < count; ++i) {
        const std::uint32_t row = batch.row(i);
        if (!column.is_null(row)) {
            bytes += strings[row].size;
        }
    }
    return bytes;
}

/// The values of a non-string vector as bytes.
const std::byte *raw_values(const Vector &column) noexcept {
    switch (column.type().physical()) {
    case PhysicalType::u8:
        return reinterpret_cast<const std::byte *>(column.data<std::uint8_t>());
    case PhysicalType::i64:
        return reinterpret_cast<const std::byte *>(column.data<std::int64_t>());
    case PhysicalType::i128:
        return reinterpret_cast<const std::byte *>(column.data<Int128>());
    case PhysicalType::f64:
        return reinterpret_cast<const std::byte *>(column.data<double>());
    case PhysicalType::string:
        break;
    }
    return nullptr;
}

/// INTEGER and DATE: the live rows' 64-bit values as 32 bits (they fit: the types' ranges).
void narrow(const Batch &batch, const std::int64_t *source, std::int32_t *out) noexcept {
    const std::uint32_t count = batch.count();
    if (batch.all_selected) {
        for (std::uint32_t i = 0; i < count; ++i) {
            out[i] = static_cast<std::int32_t>(source[i]);
        }
    } else {
        for (std::uint32_t i = 0; i < count; ++i) {
            out[i] = static_cast<std::int32_t>(source[batch.row(i)]);
        }
    }
}

/// DECIMAL of up to 18 digits: the live rows' unscaled values as Int128 (unaligned target).
void widen(const Batch &batch, const std::int64_t *source, std::byte *out) noexcept {
    const std::uint32_t count = batch.count();
    for (std::uint32_t i = 0; i < count; ++i) {
        const Int128 value = source[batch.row(i)];
        std::memcpy(out + std::size_t{i} * sizeof(Int128), &value, sizeof(Int128));
    }
}

/// Copies the live rows of one batch into the result columns at `place`.
void copy_batch(const BatchPlace &place, ColumnarResult &result) noexcept {
    const Batch &batch = *place.batch;
    const std::uint32_t count = batch.count();
    for (std::size_t c = 0; c < result.columns.size(); ++c) {
        const Vector &column = batch.columns[c];
        ResultColumn &target = result.columns[c];
        const PhysicalType physical = column.type().physical();
        if (target.nulls != nullptr) {
            std::uint8_t *nulls = target.nulls.get() + place.first_row;
            for (std::uint32_t i = 0; i < count; ++i) {
                nulls[i] = column.is_null(batch.row(i)) ? 1 : 0;
            }
        }
        if (physical == PhysicalType::string) {
            auto *offsets = reinterpret_cast<std::int64_t *>(target.values.get()) + place.first_row;
            const StringRef *strings = column.data<StringRef>();
            std::size_t at = place.first_char[c];
            for (std::uint32_t i = 0; i < count; ++i) {
                const std::uint32_t row = batch.row(i);
                offsets[i] = static_cast<std::int64_t>(at);
                if (!column.is_null(row) && strings[row].size > 0) {
                    std::memcpy(target.chars.get() + at, strings[row].data, strings[row].size);
                    at += strings[row].size;
                }
            }
            continue;
        }
        const std::size_t width = ResultColumn::result_width(column.type());
        std::byte *out = target.values.get() + place.first_row * width;
        const TypeId id = column.type().id;
        if (id == TypeId::integer || id == TypeId::date) {
            narrow(batch, column.data<std::int64_t>(), reinterpret_cast<std::int32_t *>(out));
        } else if (id == TypeId::decimal && physical == PhysicalType::i64) {
            widen(batch, column.data<std::int64_t>(), out);
        } else if (batch.all_selected) {
            std::memcpy(out, raw_values(column), std::size_t{count} * width);
        } else {
            const std::byte *source = raw_values(column);
            for (std::uint32_t i = 0; i < count; ++i) {
                std::memcpy(out + std::size_t{i} * width, source + std::size_t{batch.row(i)} * width, width);
            }
        }
        if (column.nulls() != nullptr) {
            for (std::uint32_t i = 0; i < count; ++i) {
                if (column.is_null(batch.row(i))) {
                    std::memset(out + std::size_t{i} * width, 0, width);
                }
            }
        }
    }
}

/// Waits for the copy tasks; a runtime that stops drops them unrun, which leaves no result.
void wait_for(tasking::TaskGroup &group) {
    if (group.wait().cancelled) {
        throw ExecutionError("the runtime stopped while the result was copied");
    }
}

} // namespace

std::shared_ptr<ColumnarResult> SinkNode::columns(tasking::Runtime &runtime,
                                                  const std::vector<OutputColumn> &types) const {
    auto result = std::make_shared<ColumnarResult>();
    const std::vector<const Batch *> batches = _batches.in_sequence();
    const std::size_t column_count = types.size();
    result->columns.resize(column_count);

    std::vector<BatchPlace> places(batches.size());
    std::vector<bool> has_nulls(column_count, false);
    bool has_strings = false;
    for (std::size_t c = 0; c < column_count; ++c) {
        has_strings = has_strings || types[c].type.physical() == PhysicalType::string;
    }
    for (std::size_t b = 0; b < batches.size(); ++b) {
        places[b].batch = batches[b];
        places[b].first_row = result->rows;
        places[b].first_char.assign(column_count, 0);
        result->rows += batches[b]->count();
        for (std::size_t c = 0; c < column_count; ++c) {
            has_nulls[c] = has_nulls[c] || batches[b]->columns[c].nulls() != nullptr;
        }
    }

    // String sizes per batch first (in parallel), so that every batch knows where its bytes go.
    if (has_strings && !batches.empty()) {
        tasking::TaskGroup group{runtime};
        for (BatchPlace &place : places) {
            BatchPlace *target = &place;
            group.spawn([target, &types]() noexcept {
                for (std::size_t c = 0; c < types.size(); ++c) {
                    if (types[c].type.physical() == PhysicalType::string) {
                        target->first_char[c] = string_bytes(*target->batch, target->batch->columns[c]);
                    }
                }
            });
        }
        wait_for(group);
    }

    for (std::size_t c = 0; c < column_count; ++c) {
        ResultColumn &column = result->columns[c];
        const PhysicalType physical = types[c].type.physical();
        if (physical == PhysicalType::string) {
            std::size_t total = 0;
            for (BatchPlace &place : places) {
                const std::size_t bytes = place.first_char[c];
                place.first_char[c] = total;
                total += bytes;
            }
            column.values.reset(new std::byte[(result->rows + 1) * sizeof(std::int64_t)]);
            const auto end = static_cast<std::int64_t>(total);
            std::memcpy(column.values.get() + result->rows * sizeof(std::int64_t), &end, sizeof(end));
            column.chars.reset(new char[total + 1]);
            column.chars_size = total;
        } else {
            column.values.reset(new std::byte[result->rows * ResultColumn::result_width(types[c].type) + 1]);
        }
        if (has_nulls[c]) {
            column.nulls.reset(new std::uint8_t[result->rows + 1]);
        }
    }

    if (!batches.empty()) {
        tasking::TaskGroup group{runtime};
        ColumnarResult *target = result.get();
        for (const BatchPlace &place : places) {
            const BatchPlace *source = &place;
            group.spawn([source, target]() noexcept { copy_batch(*source, *target); });
        }
        wait_for(group);
    }
    return result;
}

} // namespace mx::db::detail
