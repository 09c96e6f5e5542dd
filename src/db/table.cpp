#include <mx/db/table.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>

#include <numa.h>

#include <mx/system/topology.h>
#include <mx/tasking/runtime.h>

#include "storage_build.h"

namespace mx::db {

namespace {
bool equal_ignoring_case(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(a[i])) !=
            std::tolower(static_cast<unsigned char>(b[i]))) {
            return false;
        }
    }
    return true;
}
} // namespace

// ---------------------------------------------------------------------------------------------
// Schema

std::optional<std::size_t> Schema::find(std::string_view name) const noexcept {
    for (std::size_t i = 0; i < _columns.size(); ++i) {
        if (equal_ignoring_case(_columns[i].name, name)) {
            return i;
        }
    }
    return std::nullopt;
}

std::string Schema::validate() const {
    if (_columns.empty()) {
        return "a table needs at least one column";
    }
    for (std::size_t i = 0; i < _columns.size(); ++i) {
        const ColumnDef &column = _columns[i];
        if (column.name.empty()) {
            return std::string("column ").append(std::to_string(i + 1)).append(" has no name");
        }
        for (std::size_t j = 0; j < i; ++j) {
            if (equal_ignoring_case(_columns[j].name, column.name)) {
                return std::string("column name \"").append(column.name).append("\" is used twice");
            }
        }
        if (column.type.id == TypeId::decimal &&
            (column.type.precision < 1 || column.type.precision > decimal::max_precision ||
             column.type.scale > column.type.precision)) {
            return std::string("column ")
                .append(column.name)
                .append(": DECIMAL(")
                .append(std::to_string(column.type.precision))
                .append(",")
                .append(std::to_string(column.type.scale))
                .append(") needs a precision of 1 to 38 and a scale of at most the precision");
        }
    }
    return {};
}

// ---------------------------------------------------------------------------------------------
// Dictionary

std::optional<std::uint32_t> Dictionary::find(std::string_view text) const noexcept {
    const std::uint32_t code = lower_bound(text);
    if (code < size() && _entries[code].view() == text) {
        return code;
    }
    return std::nullopt;
}

std::uint32_t Dictionary::lower_bound(std::string_view text) const noexcept {
    const auto it =
        std::lower_bound(_entries.begin(), _entries.end(), text,
                         [](const StringRef &entry, std::string_view key) { return entry.view() < key; });
    return static_cast<std::uint32_t>(it - _entries.begin());
}

std::uint32_t Dictionary::upper_bound(std::string_view text) const noexcept {
    const auto it =
        std::upper_bound(_entries.begin(), _entries.end(), text,
                         [](std::string_view key, const StringRef &entry) { return key < entry.view(); });
    return static_cast<std::uint32_t>(it - _entries.begin());
}

std::shared_ptr<const Dictionary> Dictionary::make(std::vector<std::string_view> distinct) {
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    MX_ASSERT(distinct.size() <= std::numeric_limits<std::uint32_t>::max(), "dictionary too large");
    std::size_t bytes = 0;
    for (const std::string_view text : distinct) {
        bytes += text.size();
    }
    auto dictionary = std::shared_ptr<Dictionary>(new Dictionary());
    dictionary->_bytes = std::make_unique<char[]>(bytes + 1);
    dictionary->_entries.reserve(distinct.size());
    char *next = dictionary->_bytes.get();
    for (const std::string_view text : distinct) {
        if (!text.empty()) {
            std::memcpy(next, text.data(), text.size());
        }
        dictionary->_entries.emplace_back(next, static_cast<std::uint32_t>(text.size()));
        next += text.size();
    }
    return dictionary;
}

// ---------------------------------------------------------------------------------------------
// Placement

Placement Placement::of(const tasking::Runtime &runtime) {
    Placement placement;
    const std::uint16_t regions = runtime.region_count();
    if (regions <= 1) {
        return placement;
    }
    const system::Topology &topology = runtime.topology();
    placement.memory_nodes.assign(regions, 0);
    // The runtime numbers regions densely; a worker's statistics name its region and CPU. For a
    // simulated shape, worker i runs on simulated core i (mod cores), whose node the topology
    // assigned; otherwise the CPU's real node is the region's node.
    for (const tasking::WorkerStatistics &worker : runtime.statistics()) {
        std::uint8_t node = topology.memory_node_of_cpu(worker.cpu);
        if (topology.is_simulated() && !topology.cores().empty()) {
            node = topology.cores()[worker.worker % topology.cores().size()].memory_node;
        }
        placement.memory_nodes.at(worker.numa_region) = node;
    }
    placement.use_numa = numa_available() >= 0;
    return placement;
}

// ---------------------------------------------------------------------------------------------
// Fragment

Fragment::~Fragment() {
    if (_memory == nullptr) {
        return;
    }
    if (_numa) {
        numa_free(_memory, _bytes);
    } else {
        ::operator delete(_memory, std::align_val_t{system::cache_line_size});
    }
}

Vector Fragment::column(std::size_t column, std::uint32_t begin, std::uint32_t end) const {
    MX_ASSERT(column < _columns.size(), "column out of range");
    MX_ASSERT(begin <= end && end <= _size, "rows out of range");
    const Column &block = _columns[column];
    const std::uint32_t rows = end - begin;
    const std::uint8_t *nulls = block.nulls != nullptr ? block.nulls + begin : nullptr;
    if (block.dictionary == nullptr) {
        const std::size_t width = physical_size(block.type.physical());
        return Vector::view(
            block.type, static_cast<const std::byte *>(block.data) + std::size_t{begin} * width, nulls, rows);
    }
    Vector decoded(block.type, rows);
    auto *out = decoded.mutable_data<StringRef>();
    const auto *in = static_cast<const std::uint32_t *>(block.data) + begin;
    const StringRef *entries = block.dictionary->entries().data();
    for (std::uint32_t i = 0; i < rows; ++i) {
        out[i] = entries[in[i]];
    }
    if (nulls != nullptr) {
        std::uint8_t *target = decoded.mutable_nulls();
        std::memcpy(target, nulls, rows);
        for (std::uint32_t i = 0; i < rows; ++i) {
            if (nulls[i] != 0) {
                out[i] = StringRef{};
            }
        }
    }
    return decoded;
}

const std::uint32_t *Fragment::codes(std::size_t column) const noexcept {
    MX_ASSERT(_columns[column].dictionary != nullptr, "codes() of a column that is not dictionary encoded");
    return static_cast<const std::uint32_t *>(_columns[column].data);
}

std::span<const StringRef> Fragment::dictionary(std::size_t column) const noexcept {
    if (_columns[column].dictionary == nullptr) {
        return {};
    }
    return _columns[column].dictionary->entries();
}

Value Fragment::value(std::size_t column, std::uint32_t row) const {
    MX_ASSERT(row < _size, "row out of range");
    const Column &block = _columns[column];
    if (block.nulls != nullptr && block.nulls[row] != 0) {
        return Value::null_of(block.type);
    }
    Value v;
    v.type = block.type;
    v.null = false;
    if (block.dictionary != nullptr) {
        v.str = std::string((*block.dictionary)[static_cast<const std::uint32_t *>(block.data)[row]].view());
        return v;
    }
    switch (block.type.physical()) {
    case PhysicalType::u8:
        v.i64 = static_cast<const std::uint8_t *>(block.data)[row];
        break;
    case PhysicalType::i64:
        v.i64 = static_cast<const std::int64_t *>(block.data)[row];
        break;
    case PhysicalType::i128:
        v.i128 = static_cast<const Int128 *>(block.data)[row];
        break;
    case PhysicalType::f64:
        v.f64 = static_cast<const double *>(block.data)[row];
        break;
    case PhysicalType::string:
        v.str = std::string(static_cast<const StringRef *>(block.data)[row].view());
        break;
    }
    return v;
}

// ---------------------------------------------------------------------------------------------
// Table

Value Table::value(std::uint64_t row, std::size_t column) const {
    MX_ASSERT(row < _row_count, "row out of range");
    const std::uint64_t capacity = _options.fragment_capacity;
    return _fragments[static_cast<std::size_t>(row / capacity)]->value(
        column, static_cast<std::uint32_t>(row % capacity));
}

std::size_t Table::memory_bytes() const noexcept {
    std::size_t bytes = 0;
    for (const auto &fragment : _fragments) {
        bytes += fragment->memory_bytes();
    }
    for (const auto &dictionary : _dictionaries) {
        if (dictionary != nullptr) {
            for (const StringRef &entry : dictionary->entries()) {
                bytes += entry.size + sizeof(StringRef);
            }
        }
    }
    return bytes;
}

std::shared_ptr<const Table> Table::empty(std::string name, Schema schema, TableOptions options) {
    return detail::TableAssembler::empty(std::move(name), std::move(schema), options);
}

// ---------------------------------------------------------------------------------------------
// TableBuilder

TableBuilder::TableBuilder(std::string name, Schema schema, TableOptions options)
    : TableBuilder(Table::empty(std::move(name), std::move(schema), options)) {}

TableBuilder::TableBuilder(std::shared_ptr<const Table> base)
    : _build(std::make_unique<detail::TableBuild>(std::move(base))) {}

TableBuilder::~TableBuilder() = default;
TableBuilder::TableBuilder(TableBuilder &&) noexcept = default;
TableBuilder &TableBuilder::operator=(TableBuilder &&) noexcept = default;

std::string TableBuilder::append_row(std::span<const Value> row) {
    detail::TableBuild &build = *_build;
    const Schema &schema = build.schema();
    if (row.size() != schema.size()) {
        return std::string("expected ")
            .append(std::to_string(schema.size()))
            .append(" values, got ")
            .append(std::to_string(row.size()));
    }
    std::vector<Value> converted;
    converted.reserve(row.size());
    for (std::size_t c = 0; c < row.size(); ++c) {
        detail::Converted result = detail::convert_for_column(row[c], schema[c]);
        if (!result.error.empty()) {
            return std::string("column ").append(schema[c].name).append(": ").append(result.error);
        }
        converted.push_back(std::move(result.value));
    }
    if (build.insert_chunk == nullptr) {
        build.chunks.push_back(build.new_chunk());
        build.insert_chunk = build.chunks.back().get();
    }
    detail::StagedChunk &chunk = *build.insert_chunk;
    for (std::size_t c = 0; c < converted.size(); ++c) {
        detail::ColumnStaging &column = chunk.columns[c];
        const Value &v = converted[c];
        if (v.null) {
            detail::TableBuild::stage_null(column, chunk.rows);
            continue;
        }
        column.mark_not_null();
        switch (column.type.physical()) {
        case PhysicalType::u8:
            column.u8.push_back(static_cast<std::uint8_t>(v.i64));
            column.sketch.add(detail::hash_word(static_cast<std::uint64_t>(v.i64)));
            break;
        case PhysicalType::i64:
            column.i64.push_back(v.i64);
            column.sketch.add(detail::hash_word(static_cast<std::uint64_t>(v.i64)));
            break;
        case PhysicalType::i128:
            column.i128.push_back(v.i128);
            column.sketch.add(detail::hash_word(static_cast<std::uint64_t>(v.i128) ^
                                                detail::hash_word(static_cast<std::uint64_t>(v.i128 >> 64))));
            break;
        case PhysicalType::f64: {
            column.f64.push_back(v.f64);
            const double normalized = v.f64 == 0.0 ? 0.0 : v.f64;
            std::uint64_t bits = 0;
            std::memcpy(&bits, &normalized, sizeof(bits));
            column.sketch.add(detail::hash_word(bits));
            break;
        }
        case PhysicalType::string:
            build.stage_string(column, c, chunk.heap.add(v.str));
            break;
        }
    }
    ++chunk.rows;
    return {};
}

std::uint64_t TableBuilder::appended_rows() const noexcept { return _build->staged_rows(); }

std::shared_ptr<const Table> TableBuilder::finish(tasking::Runtime *runtime) {
    for (auto &chunk : _build->chunks) {
        detail::TableBuild::seal(*chunk);
    }
    std::shared_ptr<const Table> table = detail::TableAssembler::assemble(*_build, runtime);
    _build = std::make_unique<detail::TableBuild>(table);
    return table;
}

// ---------------------------------------------------------------------------------------------
// Value conversion for INSERT

namespace detail {

std::size_t utf8_length(std::string_view text) noexcept {
    std::size_t characters = 0;
    for (const char c : text) {
        characters += (static_cast<unsigned char>(c) & 0xC0U) != 0x80U ? 1U : 0U;
    }
    return characters;
}

namespace {
std::string cannot_convert(const Value &value, const Type &target) {
    std::string text = "cannot store ";
    if (value.type.id == TypeId::varchar) {
        text.append("\"").append(value.str).append("\"");
    } else {
        text.append(value.to_string());
    }
    return text.append(" (")
        .append(value.type.to_string())
        .append(") in a ")
        .append(target.to_string())
        .append(" column");
}

std::optional<bool> parse_boolean(std::string_view text) noexcept {
    std::string lower;
    for (const char c : text) {
        lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
    if (lower == "true" || lower == "t" || lower == "1") {
        return true;
    }
    if (lower == "false" || lower == "f" || lower == "0") {
        return false;
    }
    return std::nullopt;
}
} // namespace

Converted convert_for_column(const Value &value, const ColumnDef &column) {
    const Type target = column.type;
    Converted out;
    if (value.null) {
        if (!column.nullable) {
            out.error = "NULL in a NOT NULL column";
            return out;
        }
        out.value = Value::null_of(target);
        return out;
    }
    out.value.type = target;
    out.value.null = false;
    const TypeId from = value.type.id;
    const bool integral = from == TypeId::integer || from == TypeId::bigint;
    switch (target.id) {
    case TypeId::boolean:
        if (from == TypeId::boolean) {
            out.value.i64 = value.i64 != 0 ? 1 : 0;
        } else if (from == TypeId::varchar && parse_boolean(value.str)) {
            out.value.i64 = *parse_boolean(value.str) ? 1 : 0;
        } else {
            out.error = cannot_convert(value, target);
        }
        return out;
    case TypeId::integer:
    case TypeId::bigint: {
        std::optional<Int128> wide;
        if (integral) {
            wide = value.i64;
        } else if (from == TypeId::decimal && value.type.scale == 0) {
            wide = value.wide();
        } else if (from == TypeId::varchar) {
            std::int64_t parsed = 0;
            const char *begin = value.str.data();
            const char *end = begin + value.str.size();
            if (begin != end && *begin == '+') {
                ++begin;
            }
            const auto [ptr, ec] = std::from_chars(begin, end, parsed);
            if (ec == std::errc{} && ptr == end && begin != end) {
                wide = parsed;
            }
        }
        if (!wide) {
            out.error = cannot_convert(value, target);
            return out;
        }
        const Int128 low = target.id == TypeId::integer ? Int128{std::numeric_limits<std::int32_t>::min()}
                                                        : Int128{std::numeric_limits<std::int64_t>::min()};
        const Int128 high = target.id == TypeId::integer ? Int128{std::numeric_limits<std::int32_t>::max()}
                                                         : Int128{std::numeric_limits<std::int64_t>::max()};
        if (*wide < low || *wide > high) {
            out.error = std::string("value ")
                            .append(value.to_string())
                            .append(" out of range for ")
                            .append(target.to_string());
            return out;
        }
        out.value.i64 = static_cast<std::int64_t>(*wide);
        return out;
    }
    case TypeId::decimal: {
        std::optional<Int128> unscaled;
        if (integral) {
            unscaled = decimal::rescale(value.i64, 0, target.scale);
            if (!decimal::fits(*unscaled, target.precision)) {
                unscaled.reset();
            }
        } else if (from == TypeId::decimal) {
            unscaled = decimal::rescale(value.wide(), value.type.scale, target.scale);
            if (!decimal::fits(*unscaled, target.precision)) {
                unscaled.reset();
            }
        } else if (from == TypeId::varchar) {
            unscaled = decimal::parse(value.str, target.precision, target.scale);
        } else if (from == TypeId::float64 && std::isfinite(value.f64)) {
            char buffer[64];
            const auto [ptr, ec] =
                std::to_chars(buffer, buffer + sizeof(buffer), value.f64, std::chars_format::fixed);
            if (ec == std::errc{}) {
                unscaled = decimal::parse(std::string_view(buffer, static_cast<std::size_t>(ptr - buffer)),
                                          target.precision, target.scale);
            }
        }
        if (!unscaled) {
            out.error = cannot_convert(value, target);
            return out;
        }
        out.value = Value::decimal(*unscaled, target.precision, target.scale);
        return out;
    }
    case TypeId::float64:
        if (from == TypeId::float64) {
            out.value.f64 = value.f64;
        } else if (integral) {
            out.value.f64 = static_cast<double>(value.i64);
        } else if (from == TypeId::decimal) {
            out.value.f64 =
                static_cast<double>(value.wide()) / static_cast<double>(decimal::pow10(value.type.scale));
        } else if (from == TypeId::varchar) {
            const char *begin = value.str.data();
            const char *end = begin + value.str.size();
            if (begin != end && *begin == '+') {
                ++begin;
            }
            const auto [ptr, ec] = std::from_chars(begin, end, out.value.f64);
            if (ec != std::errc{} || ptr != end || begin == end) {
                out.error = cannot_convert(value, target);
            }
        } else {
            out.error = cannot_convert(value, target);
        }
        return out;
    case TypeId::date:
        if (from == TypeId::date) {
            out.value.i64 = value.i64;
        } else if (from == TypeId::varchar && date::parse(value.str)) {
            out.value.i64 = *date::parse(value.str);
        } else {
            out.error = cannot_convert(value, target);
        }
        return out;
    case TypeId::varchar:
        if (from != TypeId::varchar) {
            out.error = cannot_convert(value, target);
            return out;
        }
        if (target.length != 0 && value.str.size() > target.length &&
            utf8_length(value.str) > target.length) {
            out.error = std::string("value too long for ")
                            .append(target.to_string())
                            .append(" (")
                            .append(std::to_string(utf8_length(value.str)))
                            .append(" characters)");
            return out;
        }
        out.value.str = value.str;
        return out;
    }
    out.error = cannot_convert(value, target);
    return out;
}

} // namespace detail

} // namespace mx::db
