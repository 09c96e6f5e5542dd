// Staging and fragment assembly, shared by TableBuilder (INSERT) and the loader.

#include "storage_build.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <stdexcept>

#include <numa.h>

#include <mx/system/cpu.h>
#include <mx/tasking/runtime.h>
#include <mx/tasking/task_group.h>

namespace mx::db::detail {

std::uint64_t hash_string(std::string_view text) noexcept {
    return hash_word(std::hash<std::string_view>{}(text));
}

// ---------------------------------------------------------------------------------------------
// Sketch

void Sketch::merge(const std::vector<std::uint8_t> &other) noexcept {
    MX_ASSERT(other.size() == _registers.size(), "sketches of different sizes");
    for (std::size_t i = 0; i < _registers.size(); ++i) {
        _registers[i] = std::max(_registers[i], other[i]);
    }
}

std::uint64_t Sketch::estimate() const noexcept {
    constexpr double m = registers;
    const double alpha = 0.7213 / (1.0 + 1.079 / m);
    double sum = 0.0;
    std::uint32_t zeros = 0;
    for (const std::uint8_t rank : _registers) {
        sum += std::ldexp(1.0, -static_cast<int>(rank));
        zeros += rank == 0 ? 1U : 0U;
    }
    double estimate = alpha * m * m / sum;
    // Small cardinalities: linear counting over the empty registers is far more precise.
    if (estimate <= 2.5 * m && zeros > 0) {
        estimate = m * std::log(m / static_cast<double>(zeros));
    }
    return static_cast<std::uint64_t>(std::llround(estimate));
}

// ---------------------------------------------------------------------------------------------
// DistinctStrings

std::optional<std::uint32_t> DistinctStrings::insert(StringRef text, std::uint64_t hash,
                                                     std::uint32_t limit) {
    if (_slots.empty() || (_entries.size() + 1) * 2 > _slots.size()) {
        grow();
    }
    const std::size_t mask = _slots.size() - 1;
    std::size_t slot = static_cast<std::size_t>(hash) & mask;
    while (_slots[slot] != 0) {
        const std::uint32_t code = _slots[slot] - 1;
        if (_hashes[code] == hash && _entries[code].view() == text.view()) {
            return code;
        }
        slot = (slot + 1) & mask;
    }
    if (_entries.size() >= limit) {
        return std::nullopt;
    }
    const auto code = static_cast<std::uint32_t>(_entries.size());
    _entries.push_back(text);
    _hashes.push_back(hash);
    _slots[slot] = code + 1;
    return code;
}

std::optional<std::uint32_t> DistinctStrings::find(std::string_view text, std::uint64_t hash) const noexcept {
    if (_slots.empty()) {
        return std::nullopt;
    }
    const std::size_t mask = _slots.size() - 1;
    std::size_t slot = static_cast<std::size_t>(hash) & mask;
    while (_slots[slot] != 0) {
        const std::uint32_t code = _slots[slot] - 1;
        if (_hashes[code] == hash && _entries[code].view() == text) {
            return code;
        }
        slot = (slot + 1) & mask;
    }
    return std::nullopt;
}

void DistinctStrings::grow() {
    const std::size_t size = _slots.empty() ? 64 : _slots.size() * 2;
    _slots.assign(size, 0);
    const std::size_t mask = size - 1;
    for (std::uint32_t code = 0; code < _entries.size(); ++code) {
        std::size_t slot = static_cast<std::size_t>(_hashes[code]) & mask;
        while (_slots[slot] != 0) {
            slot = (slot + 1) & mask;
        }
        _slots[slot] = code + 1;
    }
}

void DistinctStrings::adopt(std::span<const StringRef> entries) {
    release();
    _entries.assign(entries.begin(), entries.end());
    _hashes.reserve(entries.size());
    for (const StringRef &entry : entries) {
        _hashes.push_back(hash_string(entry.view()));
    }
}

void DistinctStrings::release() noexcept {
    std::vector<std::uint32_t>().swap(_slots);
    std::vector<StringRef>().swap(_entries);
    std::vector<std::uint64_t>().swap(_hashes);
}

void ColumnStaging::stop_tracking() {
    if (!tracking) {
        return;
    }
    strings.reserve(codes.capacity());
    const std::vector<StringRef> &entries = distinct.entries();
    for (const std::uint32_t code : codes) {
        strings.push_back(code == null_code ? StringRef{} : entries[code]);
    }
    for (const std::uint64_t hash : distinct.hashes()) {
        sketch.add(hash);
    }
    std::vector<std::uint32_t>().swap(codes);
    distinct.release();
    tracking = false;
}

// ---------------------------------------------------------------------------------------------
// TableBuild

TableBuild::TableBuild(std::shared_ptr<const Table> base)
    : _base(std::move(base)), _too_many(std::make_unique<std::atomic<bool>[]>(_base->schema().size())) {
    const Schema &columns = _base->schema();
    _track.resize(columns.size(), false);
    _give_up_early.resize(columns.size(), false);
    for (std::size_t c = 0; c < columns.size(); ++c) {
        _too_many[c].store(false, std::memory_order_relaxed);
        _track[c] = columns[c].type.id == TypeId::varchar &&
                    _base->options().string_encoding != StringEncoding::plain &&
                    (_base->row_count() == 0 || _base->dictionary_encoded(c));
        _give_up_early[c] = _track[c] && _base->options().string_encoding == StringEncoding::automatic &&
                            !_base->dictionary_encoded(c);
    }
}

std::unique_ptr<StagedChunk> TableBuild::new_chunk() const {
    auto chunk = std::make_unique<StagedChunk>();
    const Schema &columns = schema();
    chunk->columns.resize(columns.size());
    for (std::size_t c = 0; c < columns.size(); ++c) {
        chunk->columns[c].type = columns[c].type;
        chunk->columns[c].tracking = _track[c] && !_too_many[c].load(std::memory_order_relaxed);
    }
    return chunk;
}

void TableBuild::stage_string(ColumnStaging &column, std::size_t index, StringRef text) {
    const std::uint64_t hash = hash_string(text.view());
    if (column.tracking) {
        if (!_too_many[index].load(std::memory_order_relaxed)) {
            const auto code = column.distinct.insert(text, hash, options().max_dictionary_size);
            // A new value after enough rows with far too few repeats (twice the distinct values
            // the rule allows): the column would hardly pay off as a dictionary, and tracking a
            // set of mostly unique strings is the most expensive part of parsing them.
            const bool hopeless =
                code && *code + 1 == column.distinct.entries().size() && _give_up_early[index] &&
                column.codes.size() >= early_decision_rows &&
                std::uint64_t{*code + 1} * options().min_rows_per_distinct > 2 * column.codes.size();
            if (code && !hopeless) {
                column.codes.push_back(*code);
                return;
            }
            _too_many[index].store(true, std::memory_order_relaxed);
        }
        column.stop_tracking();
    }
    column.strings.push_back(text);
    column.sketch.add(hash);
}

void TableBuild::stage_null(ColumnStaging &column, std::size_t row) {
    column.mark_null(row);
    switch (column.type.physical()) {
    case PhysicalType::u8:
        column.u8.push_back(0);
        break;
    case PhysicalType::i64:
        column.i64.push_back(0);
        break;
    case PhysicalType::i128:
        column.i128.push_back(0);
        break;
    case PhysicalType::f64:
        column.f64.push_back(0.0);
        break;
    case PhysicalType::string:
        if (column.tracking) {
            column.codes.push_back(ColumnStaging::null_code);
        } else {
            column.strings.emplace_back();
        }
        break;
    }
}

void TableBuild::seal(StagedChunk &chunk) {
    for (ColumnStaging &column : chunk.columns) {
        if (column.tracking) {
            for (const std::uint64_t hash : column.distinct.hashes()) {
                column.sketch.add(hash);
            }
        }
    }
}

std::uint64_t TableBuild::staged_rows() const noexcept {
    std::uint64_t rows = 0;
    for (const auto &chunk : chunks) {
        rows += chunk->rows;
    }
    return rows;
}

// ---------------------------------------------------------------------------------------------
// Fragment writing

namespace {

constexpr std::size_t align_up(std::size_t bytes) noexcept {
    return (bytes + system::cache_line_size - 1) & ~(system::cache_line_size - 1);
}

/// Rows [begin, begin + count) of one source chunk.
struct Segment {
    const StagedChunk *chunk;
    std::size_t source; // index into the assembler's sources (for the dictionary remap)
    std::size_t begin;
    std::uint32_t count;
};

/// How one column is stored in the new fragments.
struct ColumnPlan {
    Type type{};
    std::shared_ptr<const Dictionary> dictionary{};  // nullptr = plain
    std::vector<std::vector<std::uint32_t>> remap{}; // per source: local code -> dictionary code
    std::uint32_t max_length{0};                     // dictionary columns: longest entry
};

struct FragmentJob {
    std::vector<Segment> segments;
    std::uint32_t rows{0};
    std::uint32_t capacity{0};
    std::uint8_t region{0};
    int memory_node{-1}; // -1 = ordinary memory
    // Results, written by the task that builds the fragment, read after the group's wait().
    std::shared_ptr<const Fragment> fragment{};
    std::vector<std::uint32_t> max_length{};
};

StringRef staged_string(const ColumnStaging &column, std::size_t row) noexcept {
    if (column.tracking) {
        const std::uint32_t code = column.codes[row];
        return code == ColumnStaging::null_code ? StringRef{} : column.distinct.entries()[code];
    }
    return column.strings[row];
}

template <class T>
void copy_values(std::byte *target, const std::vector<T> &source, const Segment &segment) noexcept {
    std::memcpy(target, source.data() + segment.begin, std::size_t{segment.count} * sizeof(T));
}

bool value_less(const Value &a, const Value &b) noexcept {
    switch (a.type.physical()) {
    case PhysicalType::u8:
    case PhysicalType::i64:
        return a.i64 < b.i64;
    case PhysicalType::i128:
        return a.i128 < b.i128;
    case PhysicalType::f64:
        return a.f64 < b.f64;
    case PhysicalType::string:
        return a.str < b.str;
    }
    return false;
}

Value make_value(Type type) {
    Value v;
    v.type = type;
    v.null = false;
    return v;
}

template <class T>
ZoneMap zone_of_numbers(Type type, const T *values, const std::uint8_t *nulls, std::uint32_t rows) {
    ZoneMap zone;
    bool any = false;
    T low{};
    T high{};
    for (std::uint32_t i = 0; i < rows; ++i) {
        if (nulls != nullptr && nulls[i] != 0) {
            ++zone.null_count;
            continue;
        }
        const T v = values[i];
        if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(v)) {
                continue;
            }
        }
        if (!any) {
            low = v;
            high = v;
            any = true;
        } else {
            low = v < low ? v : low;
            high = high < v ? v : high;
        }
    }
    if (!any) {
        zone.min = Value::null_of(type);
        zone.max = Value::null_of(type);
        return zone;
    }
    zone.min = make_value(type);
    zone.max = make_value(type);
    if constexpr (std::is_same_v<T, double>) {
        zone.min.f64 = low;
        zone.max.f64 = high;
    } else if constexpr (std::is_same_v<T, Int128>) {
        zone.min.i128 = low;
        zone.max.i128 = high;
    } else {
        zone.min.i64 = static_cast<std::int64_t>(low);
        zone.max.i64 = static_cast<std::int64_t>(high);
    }
    return zone;
}

} // namespace

/// Builds one fragment from staged rows (friend of Fragment).
class FragmentWriter {
public:
    static bool write(FragmentJob &job, const std::vector<ColumnPlan> &plans) noexcept {
        try {
            return write_fragment(job, plans);
        } catch (const std::bad_alloc &) {
            return false;
        }
    }

private:
    static bool write_fragment(FragmentJob &job, const std::vector<ColumnPlan> &plans) {
        const std::size_t columns = plans.size();
        const std::uint32_t rows = job.rows;
        // Layout: [block c][nulls c (if any)]... [string heap], every part on its own cache lines.
        std::vector<std::size_t> data_offsets(columns);
        std::vector<std::size_t> null_offsets(columns, 0);
        std::vector<bool> has_nulls(columns, false);
        std::size_t bytes = 0;
        std::size_t heap_bytes = 0;
        for (std::size_t c = 0; c < columns; ++c) {
            const ColumnPlan &plan = plans[c];
            const std::size_t width =
                plan.dictionary != nullptr ? sizeof(std::uint32_t) : physical_size(plan.type.physical());
            data_offsets[c] = bytes;
            bytes = align_up(bytes + width * rows);
            for (const Segment &segment : job.segments) {
                const ColumnStaging &column = segment.chunk->columns[c];
                if (!column.nulls.empty() &&
                    std::memchr(column.nulls.data() + segment.begin, 1, segment.count) != nullptr) {
                    has_nulls[c] = true;
                }
                if (plan.dictionary == nullptr && plan.type.physical() == PhysicalType::string) {
                    for (std::uint32_t r = 0; r < segment.count; ++r) {
                        heap_bytes += staged_string(column, segment.begin + r).size;
                    }
                }
            }
            if (has_nulls[c]) {
                null_offsets[c] = bytes;
                bytes = align_up(bytes + rows);
            }
        }
        const std::size_t heap_offset = bytes;
        bytes = align_up(bytes + heap_bytes);
        if (bytes == 0) {
            bytes = system::cache_line_size;
        }

        auto fragment = std::shared_ptr<Fragment>(new Fragment());
        fragment->_bytes = bytes;
        if (job.memory_node >= 0 && job.memory_node <= numa_max_node()) {
            fragment->_memory = static_cast<std::byte *>(numa_alloc_onnode(bytes, job.memory_node));
            fragment->_numa = fragment->_memory != nullptr;
        }
        if (fragment->_memory == nullptr) {
            fragment->_memory = static_cast<std::byte *>(
                ::operator new(bytes, std::align_val_t{system::cache_line_size}, std::nothrow));
            if (fragment->_memory == nullptr) {
                return false;
            }
        }
        std::byte *memory = fragment->_memory;
        fragment->_size = rows;
        fragment->_capacity = job.capacity;
        fragment->_region = job.region;
        fragment->_columns.resize(columns);
        job.max_length.assign(columns, 0);
        char *heap = reinterpret_cast<char *>(memory + heap_offset);

        for (std::size_t c = 0; c < columns; ++c) {
            const ColumnPlan &plan = plans[c];
            Fragment::Column &out = fragment->_columns[c];
            out.type = plan.type;
            out.dictionary = plan.dictionary;
            std::byte *block = memory + data_offsets[c];
            std::uint8_t *nulls =
                has_nulls[c] ? reinterpret_cast<std::uint8_t *>(memory + null_offsets[c]) : nullptr;
            out.data = block;
            out.nulls = nulls;
            std::uint32_t at = 0;
            std::uint32_t longest = 0;
            for (const Segment &segment : job.segments) {
                const ColumnStaging &column = segment.chunk->columns[c];
                if (nulls != nullptr) {
                    if (column.nulls.empty()) {
                        std::memset(nulls + at, 0, segment.count);
                    } else {
                        std::memcpy(nulls + at, column.nulls.data() + segment.begin, segment.count);
                    }
                }
                if (plan.dictionary != nullptr) {
                    MX_ASSERT(column.tracking, "dictionary column staged without codes");
                    auto *codes = reinterpret_cast<std::uint32_t *>(block) + at;
                    const std::vector<std::uint32_t> &remap = plan.remap[segment.source];
                    const std::uint32_t *staged = column.codes.data() + segment.begin;
                    for (std::uint32_t r = 0; r < segment.count; ++r) {
                        codes[r] = staged[r] == ColumnStaging::null_code ? 0U : remap[staged[r]];
                    }
                } else {
                    switch (plan.type.physical()) {
                    case PhysicalType::u8:
                        copy_values(block + at, column.u8, segment);
                        break;
                    case PhysicalType::i64:
                        copy_values(block + std::size_t{at} * 8, column.i64, segment);
                        break;
                    case PhysicalType::i128:
                        copy_values(block + std::size_t{at} * 16, column.i128, segment);
                        break;
                    case PhysicalType::f64:
                        copy_values(block + std::size_t{at} * 8, column.f64, segment);
                        break;
                    case PhysicalType::string: {
                        auto *refs = reinterpret_cast<StringRef *>(block) + at;
                        for (std::uint32_t r = 0; r < segment.count; ++r) {
                            const StringRef text = staged_string(column, segment.begin + r);
                            if (text.size == 0) {
                                refs[r] = StringRef{};
                                continue;
                            }
                            std::memcpy(heap, text.data, text.size);
                            refs[r] = StringRef{heap, text.size};
                            heap += text.size;
                            longest = std::max(longest, text.size);
                        }
                        break;
                    }
                    }
                }
                at += segment.count;
            }
            MX_ASSERT(at == rows, "segments do not add up to the fragment's rows");
            job.max_length[c] = plan.dictionary != nullptr ? plan.max_length : longest;
            out.zone = zone_of(out, rows);
        }
        job.fragment = std::move(fragment);
        return true;
    }

    static ZoneMap zone_of(const Fragment::Column &column, std::uint32_t rows) {
        const Type type = column.type;
        if (column.dictionary != nullptr) {
            const auto *codes = static_cast<const std::uint32_t *>(column.data);
            const ZoneMap coded = zone_of_numbers(Type::bigint(), codes, column.nulls, rows);
            ZoneMap zone;
            zone.null_count = coded.null_count;
            zone.min = Value::null_of(type);
            zone.max = Value::null_of(type);
            if (!coded.min.null) {
                zone.min = make_value(type);
                zone.max = make_value(type);
                zone.min.str =
                    std::string((*column.dictionary)[static_cast<std::uint32_t>(coded.min.i64)].view());
                zone.max.str =
                    std::string((*column.dictionary)[static_cast<std::uint32_t>(coded.max.i64)].view());
            }
            return zone;
        }
        switch (type.physical()) {
        case PhysicalType::u8:
            return zone_of_numbers(type, static_cast<const std::uint8_t *>(column.data), column.nulls, rows);
        case PhysicalType::i64:
            return zone_of_numbers(type, static_cast<const std::int64_t *>(column.data), column.nulls, rows);
        case PhysicalType::i128:
            return zone_of_numbers(type, static_cast<const Int128 *>(column.data), column.nulls, rows);
        case PhysicalType::f64:
            return zone_of_numbers(type, static_cast<const double *>(column.data), column.nulls, rows);
        case PhysicalType::string:
            break;
        }
        ZoneMap zone;
        const auto *refs = static_cast<const StringRef *>(column.data);
        std::string_view low;
        std::string_view high;
        bool any = false;
        for (std::uint32_t i = 0; i < rows; ++i) {
            if (column.nulls != nullptr && column.nulls[i] != 0) {
                ++zone.null_count;
                continue;
            }
            const std::string_view text = refs[i].view();
            if (!any) {
                low = text;
                high = text;
                any = true;
            } else {
                low = text < low ? text : low;
                high = high < text ? text : high;
            }
        }
        zone.min = Value::null_of(type);
        zone.max = Value::null_of(type);
        if (any) {
            zone.min = make_value(type);
            zone.max = make_value(type);
            zone.min.str = std::string(low);
            zone.max.str = std::string(high);
        }
        return zone;
    }
};

// ---------------------------------------------------------------------------------------------
// TableAssembler

namespace {

/// The rows of a fragment as a staged chunk (for fragments that have to be rebuilt).
std::unique_ptr<StagedChunk> stage_fragment(const Fragment &fragment) {
    auto chunk = std::make_unique<StagedChunk>();
    const std::uint32_t rows = fragment.size();
    chunk->rows = rows;
    chunk->columns.resize(fragment.column_count());
    for (std::size_t c = 0; c < fragment.column_count(); ++c) {
        ColumnStaging &column = chunk->columns[c];
        column.type = fragment.type(c);
        const std::uint8_t *nulls = fragment.nulls(c);
        if (nulls != nullptr) {
            column.nulls.assign(nulls, nulls + rows);
            column.null_count = static_cast<std::uint64_t>(std::count(nulls, nulls + rows, std::uint8_t{1}));
        }
        const void *data = fragment.data(c);
        if (fragment.dictionary_encoded(c)) {
            column.tracking = true;
            const std::uint32_t *codes = fragment.codes(c);
            column.codes.assign(codes, codes + rows);
            if (nulls != nullptr) {
                for (std::uint32_t r = 0; r < rows; ++r) {
                    if (nulls[r] != 0) {
                        column.codes[r] = ColumnStaging::null_code;
                    }
                }
            }
            column.distinct.adopt(fragment.dictionary(c));
            continue;
        }
        switch (column.type.physical()) {
        case PhysicalType::u8:
            column.u8.assign(static_cast<const std::uint8_t *>(data),
                             static_cast<const std::uint8_t *>(data) + rows);
            break;
        case PhysicalType::i64:
            column.i64.assign(static_cast<const std::int64_t *>(data),
                              static_cast<const std::int64_t *>(data) + rows);
            break;
        case PhysicalType::i128:
            column.i128.assign(static_cast<const Int128 *>(data), static_cast<const Int128 *>(data) + rows);
            break;
        case PhysicalType::f64:
            column.f64.assign(static_cast<const double *>(data), static_cast<const double *>(data) + rows);
            break;
        case PhysicalType::string:
            column.strings.assign(static_cast<const StringRef *>(data),
                                  static_cast<const StringRef *>(data) + rows);
            break;
        }
    }
    return chunk;
}

void merge_min_max(ColumnStatistics &statistics, const Value &min, const Value &max) {
    if (!min.null && (statistics.min.null || value_less(min, statistics.min))) {
        statistics.min = min;
    }
    if (!max.null && (statistics.max.null || value_less(statistics.max, max))) {
        statistics.max = max;
    }
}

std::shared_ptr<const std::vector<std::uint8_t>> empty_sketch() {
    static const auto sketch = std::make_shared<const std::vector<std::uint8_t>>(Sketch::registers, 0);
    return sketch;
}

} // namespace

std::shared_ptr<const Table> TableAssembler::empty(std::string name, Schema schema, TableOptions options) {
    MX_ASSERT(schema.validate().empty(), "Table::empty with an invalid schema");
    MX_ASSERT(options.fragment_capacity >= 1 &&
                  options.fragment_capacity <= TableOptions::max_fragment_capacity,
              "fragment capacity out of range");
    auto table = std::shared_ptr<Table>(new Table());
    table->_name = std::move(name);
    table->_options = options;
    const std::size_t columns = schema.size();
    table->_statistics.resize(columns);
    for (std::size_t c = 0; c < columns; ++c) {
        table->_statistics[c].min = Value::null_of(schema[c].type);
        table->_statistics[c].max = Value::null_of(schema[c].type);
        table->_statistics[c].distinct_exact = true;
    }
    table->_schema = std::move(schema);
    table->_dictionaries.resize(columns);
    table->_sketches.assign(columns, empty_sketch());
    return table;
}

std::shared_ptr<const Table> TableAssembler::assemble(TableBuild &build, tasking::Runtime *runtime) {
    const Table &base = build.base();
    const Schema &schema = base.schema();
    const TableOptions &options = base.options();
    const std::size_t columns = schema.size();
    const std::uint64_t capacity = options.fragment_capacity;
    const std::uint64_t base_rows = base.row_count();
    const std::uint64_t new_rows = build.staged_rows();
    const std::uint64_t total_rows = base_rows + new_rows;

    // 1. Encoding of every string column: a dictionary over the distinct values of the base and
    //    every chunk if they are few enough, plain otherwise.
    std::vector<ColumnPlan> plans(columns);
    std::vector<DistinctStrings> unions(columns);
    std::vector<std::vector<std::uint32_t>> ranks(columns); // union code -> dictionary code
    bool rebuild_all = false;
    for (std::size_t c = 0; c < columns; ++c) {
        ColumnPlan &plan = plans[c];
        plan.type = schema[c].type;
        const Dictionary *base_dictionary = base.dictionary(c);
        bool dictionary = build._track[c] && !build._too_many[c].load(std::memory_order_relaxed);
        if (dictionary) {
            DistinctStrings &all = unions[c];
            if (base_dictionary != nullptr) {
                for (const StringRef &entry : base_dictionary->entries()) {
                    static_cast<void>(all.insert(entry, hash_string(entry.view()), ~std::uint32_t{0}));
                }
            }
            for (const auto &chunk : build.chunks) {
                const ColumnStaging &column = chunk->columns[c];
                MX_ASSERT(column.tracking, "a chunk stopped tracking without telling the build");
                for (std::size_t i = 0; i < column.distinct.entries().size() && dictionary; ++i) {
                    if (!all.insert(column.distinct.entries()[i], column.distinct.hashes()[i],
                                    options.max_dictionary_size)) {
                        dictionary = false;
                    }
                }
            }
            const std::uint64_t distinct = all.entries().size();
            if (distinct == 0) {
                dictionary = false;
            } else if (base_dictionary == nullptr && options.string_encoding == StringEncoding::automatic &&
                       total_rows < distinct * options.min_rows_per_distinct) {
                dictionary = false;
            }
        }
        if (dictionary) {
            DistinctStrings &all = unions[c];
            if (base_dictionary != nullptr && all.entries().size() == base_dictionary->size()) {
                // Nothing new: the base's dictionary stays, and so do the codes in its fragments.
                plan.dictionary = base._dictionaries[c];
                ranks[c].resize(all.entries().size());
                for (std::uint32_t i = 0; i < ranks[c].size(); ++i) {
                    ranks[c][i] = i;
                }
            } else {
                std::vector<std::uint32_t> order(all.entries().size());
                for (std::uint32_t i = 0; i < order.size(); ++i) {
                    order[i] = i;
                }
                const std::vector<StringRef> &entries = all.entries();
                std::sort(order.begin(), order.end(), [&entries](std::uint32_t a, std::uint32_t b) {
                    return entries[a].view() < entries[b].view();
                });
                std::vector<std::string_view> sorted;
                sorted.reserve(order.size());
                ranks[c].resize(order.size());
                for (std::uint32_t k = 0; k < order.size(); ++k) {
                    sorted.push_back(entries[order[k]].view());
                    ranks[c][order[k]] = k;
                }
                plan.dictionary = Dictionary::make(std::move(sorted));
            }
            for (const StringRef &entry : plan.dictionary->entries()) {
                plan.max_length = std::max(plan.max_length, entry.size);
            }
        }
        if (base_rows > 0 && base_dictionary != nullptr && plan.dictionary.get() != base_dictionary) {
            rebuild_all = true; // codes of the base's fragments change (or the column goes plain)
        }
    }

    // 2. Sources in row order: base fragments that are rebuilt (all of them when a dictionary
    //    changed, else a partial last one), then the staged chunks.
    std::size_t kept = base.fragment_count();
    if (rebuild_all) {
        kept = 0;
    } else if (new_rows > 0 && base_rows % capacity != 0) {
        kept = base.fragment_count() - 1;
    }
    std::vector<std::unique_ptr<StagedChunk>> restaged;
    for (std::size_t f = kept; f < base.fragment_count(); ++f) {
        restaged.push_back(stage_fragment(base.fragment(f)));
    }
    std::vector<const StagedChunk *> sources;
    for (const auto &chunk : restaged) {
        sources.push_back(chunk.get());
    }
    for (const auto &chunk : build.chunks) {
        sources.push_back(chunk.get());
    }

    // 3. Per source and dictionary column: local code -> dictionary code.
    for (std::size_t c = 0; c < columns; ++c) {
        ColumnPlan &plan = plans[c];
        if (plan.dictionary == nullptr) {
            continue;
        }
        plan.remap.resize(sources.size());
        for (std::size_t s = 0; s < sources.size(); ++s) {
            const DistinctStrings &local = sources[s]->columns[c].distinct;
            std::vector<std::uint32_t> &remap = plan.remap[s];
            remap.resize(local.entries().size());
            for (std::size_t i = 0; i < remap.size(); ++i) {
                const auto code = unions[c].find(local.entries()[i].view(), local.hashes()[i]);
                MX_ASSERT(code.has_value(), "a staged string is missing from the dictionary");
                remap[i] = ranks[c][*code];
            }
        }
    }

    // 4. One job per new fragment; fragment i of the table goes to region i mod regions.
    const Placement placement = runtime != nullptr ? Placement::of(*runtime) : Placement{};
    std::vector<FragmentJob> jobs;
    {
        std::size_t source = 0;
        std::size_t offset = 0; // first unplaced row of sources[source]
        std::size_t fragment_index = kept;
        std::uint64_t remaining = total_rows - std::min(std::uint64_t{kept} * capacity, base_rows);
        while (remaining > 0) {
            FragmentJob job;
            job.rows = static_cast<std::uint32_t>(std::min<std::uint64_t>(capacity, remaining));
            job.capacity = static_cast<std::uint32_t>(capacity);
            job.region = static_cast<std::uint8_t>(fragment_index % placement.regions());
            job.memory_node = placement.use_numa ? placement.memory_nodes[job.region] : -1;
            std::uint32_t needed = job.rows;
            while (needed > 0) {
                MX_ASSERT(source < sources.size(), "fewer staged rows than counted");
                const std::size_t available = sources[source]->rows - offset;
                if (available == 0) {
                    ++source;
                    offset = 0;
                    continue;
                }
                const auto take = static_cast<std::uint32_t>(std::min<std::size_t>(available, needed));
                job.segments.push_back(Segment{sources[source], source, offset, take});
                offset += take;
                needed -= take;
            }
            remaining -= job.rows;
            ++fragment_index;
            jobs.push_back(std::move(job));
        }
    }

    bool failed = false;
    if (runtime != nullptr && !jobs.empty()) {
        MX_ASSERT(!runtime->on_worker(),
                  "building a table with a runtime blocks: call it from outside the runtime's workers");
        tasking::TaskGroup group{*runtime};
        for (std::size_t i = 0; i < jobs.size(); ++i) {
            group.spawn(
                [&group, &jobs, &plans, i]() noexcept {
                    if (!FragmentWriter::write(jobs[i], plans)) {
                        // The build fails as a whole: the fragments not yet written are skipped.
                        group.fail("out of memory for a fragment");
                    }
                },
                tasking::Annotation{.target_region = jobs[i].region});
        }
        const tasking::GroupResult outcome = group.wait();
        if (outcome.cancelled && !outcome.failed) {
            // Cancelled without an error: the runtime stopped and dropped fragment writers.
            throw std::runtime_error("building the table was interrupted: the runtime stopped");
        }
        failed = outcome.failed;
    } else {
        for (FragmentJob &job : jobs) {
            failed = !FragmentWriter::write(job, plans) || failed;
        }
    }
    if (failed) {
        throw std::bad_alloc();
    }

    // 5. The new version.
    auto table = std::shared_ptr<Table>(new Table());
    table->_name = base.name();
    table->_schema = schema;
    table->_options = options;
    table->_row_count = total_rows;
    table->_version = base.version() + 1;
    table->_fragments.assign(base.fragments().begin(),
                             base.fragments().begin() + static_cast<std::ptrdiff_t>(kept));
    for (FragmentJob &job : jobs) {
        table->_fragments.push_back(std::move(job.fragment));
    }
    table->_dictionaries.resize(columns);
    table->_statistics.resize(columns);
    table->_sketches.resize(columns);
    for (std::size_t c = 0; c < columns; ++c) {
        table->_dictionaries[c] = plans[c].dictionary;
        ColumnStatistics &statistics = table->_statistics[c];
        const ColumnStatistics &old = base.statistics(c);
        statistics.min = old.min;
        statistics.max = old.max;
        statistics.max_length = old.max_length;
        for (const auto &fragment : table->_fragments) {
            statistics.null_count += fragment->zone_map(c).null_count;
        }
        for (const FragmentJob &job : jobs) {
            statistics.max_length = std::max(statistics.max_length, job.max_length[c]);
        }
        for (std::size_t f = kept; f < table->_fragments.size(); ++f) {
            const ZoneMap &zone = table->_fragments[f]->zone_map(c);
            merge_min_max(statistics, zone.min, zone.max);
        }
        Sketch sketch;
        sketch.merge(*base._sketches[c]);
        for (const auto &chunk : build.chunks) {
            sketch.merge(chunk->columns[c].sketch.data());
        }
        const std::uint64_t non_null = total_rows - statistics.null_count;
        if (plans[c].dictionary != nullptr) {
            statistics.distinct_count = plans[c].dictionary->size();
            statistics.distinct_exact = true;
        } else {
            statistics.distinct_count = std::min(sketch.estimate(), non_null);
            if (non_null > 0 && statistics.distinct_count == 0) {
                statistics.distinct_count = 1;
            }
            statistics.distinct_exact = non_null == 0;
        }
        table->_sketches[c] = std::make_shared<const std::vector<std::uint8_t>>(sketch.data());
    }
    return table;
}

} // namespace mx::db::detail
