// Staging and fragment assembly, shared by TableBuilder (INSERT) and the loader.

#include "storage_build.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <optional>
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

/// A staged chunk on its way into fragments, with the codes its dictionary columns are written
/// with.
struct Source {
    std::unique_ptr<StagedChunk> chunk{};
    /// The chunk's number in the stream (npos: a base fragment that is rebuilt).
    std::size_t index{0};
    /// Per column: local code -> the code written, for the columns written as codes (storage
    /// for `codes`).
    std::vector<std::vector<std::uint32_t>> remap{};
    /// Per column: the map applied to the staged codes, nullptr = they are written as they are.
    std::vector<const std::vector<std::uint32_t> *> codes{};
    /// Fragment jobs with rows of this source that are not written yet, plus one while some of
    /// its rows wait for a fragment. Guarded by the stream's lock.
    std::uint32_t refs{0};
    std::size_t slot{0}; // where the stream keeps it
};

/// Rows [begin, begin + count) of one source.
struct Segment {
    Source *source;
    std::size_t begin;
    std::uint32_t count;
};

/// How one column is stored in the new fragments.
struct ColumnPlan {
    Type type{};
    /// The final dictionary; nullptr for plain columns and while the codes are provisional.
    std::shared_ptr<const Dictionary> dictionary{};
    std::uint32_t max_length{0}; // dictionary columns: longest entry
};

struct FragmentJob {
    std::vector<Segment> segments;
    std::uint32_t rows{0};
    std::uint32_t capacity{0};
    std::uint8_t region{0};
    int memory_node{-1}; // -1 = ordinary memory
    /// Per column: written as dictionary codes (1) or plain (0).
    std::vector<std::uint8_t> coded{};
    // Results, written by the task that builds the fragment, read after the group's wait().
    std::shared_ptr<Fragment> fragment{};
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
            const bool coded = job.coded[c] != 0;
            const std::size_t width = coded ? sizeof(std::uint32_t) : physical_size(plan.type.physical());
            data_offsets[c] = bytes;
            bytes = align_up(bytes + width * rows);
            for (const Segment &segment : job.segments) {
                const ColumnStaging &column = segment.source->chunk->columns[c];
                if (!column.nulls.empty() &&
                    std::memchr(column.nulls.data() + segment.begin, 1, segment.count) != nullptr) {
                    has_nulls[c] = true;
                }
                if (!coded && plan.type.physical() == PhysicalType::string) {
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
            const bool coded = job.coded[c] != 0;
            Fragment::Column &out = fragment->_columns[c];
            out.type = plan.type;
            out.dictionary = coded ? plan.dictionary : nullptr;
            std::byte *block = memory + data_offsets[c];
            std::uint8_t *nulls =
                has_nulls[c] ? reinterpret_cast<std::uint8_t *>(memory + null_offsets[c]) : nullptr;
            out.data = block;
            out.nulls = nulls;
            std::uint32_t at = 0;
            std::uint32_t longest = 0;
            for (const Segment &segment : job.segments) {
                const ColumnStaging &column = segment.source->chunk->columns[c];
                if (nulls != nullptr) {
                    if (column.nulls.empty()) {
                        std::memset(nulls + at, 0, segment.count);
                    } else {
                        std::memcpy(nulls + at, column.nulls.data() + segment.begin, segment.count);
                    }
                }
                if (coded) {
                    MX_ASSERT(column.tracking, "dictionary column staged without codes");
                    auto *codes = reinterpret_cast<std::uint32_t *>(block) + at;
                    const std::uint32_t *staged = column.codes.data() + segment.begin;
                    if (const std::vector<std::uint32_t> *remap = segment.source->codes[c];
                        remap != nullptr) {
                        for (std::uint32_t r = 0; r < segment.count; ++r) {
                            codes[r] = staged[r] == ColumnStaging::null_code ? 0U : (*remap)[staged[r]];
                        }
                    } else {
                        for (std::uint32_t r = 0; r < segment.count; ++r) {
                            codes[r] = staged[r] == ColumnStaging::null_code ? 0U : staged[r];
                        }
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
            if (!coded || plan.dictionary != nullptr) {
                job.max_length[c] = coded ? plan.max_length : longest;
                out.zone = zone_of(out, rows);
            } // else: provisional codes, see finalize()
        }
        job.fragment = std::move(fragment);
        return true;
    }

public:
    /// Maps the provisional codes of the job's fragment to the final dictionaries in place
    /// (`ranks`: provisional -> final code per column, nullptr = the same) and completes the
    /// columns' zone maps and lengths. Only for columns whose final plan is a dictionary.
    static void finalize(FragmentJob &job, const std::vector<ColumnPlan> &plans,
                         const std::vector<const std::vector<std::uint32_t> *> &ranks) noexcept {
        Fragment &fragment = *job.fragment;
        const std::uint32_t rows = fragment._size;
        for (std::size_t c = 0; c < plans.size(); ++c) {
            if (job.coded[c] == 0) {
                continue;
            }
            Fragment::Column &out = fragment._columns[c];
            MX_ASSERT(plans[c].dictionary != nullptr,
                      "provisional codes of a column that is not a dictionary");
            if (ranks[c] != nullptr) {
                // The block lies in the fragment's own allocation, which nobody else sees yet.
                auto *codes = reinterpret_cast<std::uint32_t *>(
                    fragment._memory + (static_cast<const std::byte *>(out.data) - fragment._memory));
                const std::vector<std::uint32_t> &rank = *ranks[c];
                for (std::uint32_t r = 0; r < rows; ++r) {
                    codes[r] = out.nulls != nullptr && out.nulls[r] != 0 ? 0U : rank[codes[r]];
                }
            }
            out.dictionary = plans[c].dictionary;
            out.zone = zone_of(out, rows);
            job.max_length[c] = plans[c].max_length;
        }
    }

private:
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
// FragmentStream and TableAssembler

namespace {

/// The rows of a fragment as a staged chunk (for fragments that have to be rebuilt). Columns
/// marked in `provisional` hold codes into `unions` (a fragment of a stream, written before its
/// dictionaries were final): they keep their codes where `keep_codes` is set, and turn into the
/// strings the codes stand for otherwise.
std::unique_ptr<StagedChunk> stage_fragment(const Fragment &fragment,
                                            const std::vector<std::uint8_t> *provisional = nullptr,
                                            const std::vector<std::uint8_t> *keep_codes = nullptr,
                                            const std::vector<DistinctStrings> *unions = nullptr) {
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
        if (provisional != nullptr && (*provisional)[c] != 0) {
            const auto *codes = static_cast<const std::uint32_t *>(data);
            if ((*keep_codes)[c] != 0) {
                column.tracking = true;
                column.codes.assign(codes, codes + rows);
                for (std::uint32_t r = 0; nulls != nullptr && r < rows; ++r) {
                    if (nulls[r] != 0) {
                        column.codes[r] = ColumnStaging::null_code;
                    }
                }
            } else {
                const std::vector<StringRef> &entries = (*unions)[c].entries();
                column.strings.reserve(rows);
                for (std::uint32_t r = 0; r < rows; ++r) {
                    column.strings.push_back(nulls != nullptr && nulls[r] != 0 ? StringRef{}
                                                                               : entries[codes[r]]);
                }
            }
            continue;
        }
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

constexpr std::size_t base_source = std::numeric_limits<std::size_t>::max();

/// What a stream does after it let go of its lock: free memory, tell the feed, spawn tasks.
struct Outbox {
    std::vector<FragmentJob *> jobs{};
    std::vector<std::size_t> starts{};
    std::vector<std::size_t> released{};
    std::vector<std::unique_ptr<Source>> garbage{};
    std::unique_ptr<StagedChunk> dropped{};
};

} // namespace

struct FragmentStream::State {
    // Set up by the constructor and start_feed(), read-only afterwards.
    TableBuild *build{nullptr};
    tasking::TaskGroup *group{nullptr};
    std::size_t columns{0};
    std::uint32_t capacity{0};
    Placement placement{};
    std::vector<bool> track{};             // the build's per-column decision to try a dictionary
    std::atomic<bool> *too_many{nullptr};  // the build's flags (see TableBuild)
    std::size_t kept{0};                   // base fragments before the first new one
    std::vector<ColumnPlan> provisional{}; // types only: how fragments are written while streaming
    ChunkFeed *feed{nullptr};
    std::size_t total{0};  // chunks the feed produces
    std::size_t window{0}; // chunks alive besides those waiting for the unfinished fragment

    std::mutex mutex;
    // Everything below is guarded by `mutex`: written and read by add() (any thread), the
    // fragment writer tasks and finish() (after the tasks are joined).
    std::size_t started{0}; // chunks the feed was asked for
    std::size_t alive{0};   // chunks started (or added without a feed) and not freed
    std::size_t peak{0};
    std::size_t pending_chunks{0}; // chunks (not base fragments) in `pending`
    bool stopped{false};
    bool failed{false};                                            // out of memory
    std::size_t next{0};                                           // the chunk taken next (row order)
    std::map<std::size_t, std::unique_ptr<StagedChunk>> arrived{}; // added before their turn
    std::vector<std::unique_ptr<Source>> sources{};                // by slot; nullptr once freed
    std::deque<Source *> pending{}; // sources with rows not yet in a fragment, in row order
    std::size_t pending_offset{0};  // first such row of pending.front()
    std::uint64_t pending_rows{0};
    std::deque<FragmentJob> jobs{}; // new fragments in table order (addresses stay put)
    std::vector<bool> plain{};      // per column: written plain from now on (for good)
    // Per tracked column: the distinct values met so far, in the order met (the provisional
    // codes), starting with the base's dictionary; values copied to `strings`.
    std::vector<DistinctStrings> unions{};
    StringHeap strings{};
    std::vector<Sketch> sketches{}; // per column, of the chunks taken
    std::uint64_t rows{0};          // of the chunks taken

    void take(std::unique_ptr<StagedChunk> chunk, std::size_t index, Outbox &out);
    void map_codes(Source &source, std::size_t column);
    FragmentJob &cut(std::uint64_t rows_wanted, const std::vector<std::uint8_t> *coded, Outbox &out);
    void release(Source *source, Outbox &out) noexcept;
    void issue(Outbox &out) noexcept;
    void deliver(Outbox &out) noexcept;
    void write(FragmentJob &job) noexcept;
};

void FragmentStream::State::take(std::unique_ptr<StagedChunk> chunk, std::size_t index, Outbox &out) {
    auto owned = std::make_unique<Source>();
    Source *source = owned.get();
    source->chunk = std::move(chunk);
    source->index = index;
    source->slot = sources.size();
    source->remap.resize(columns);
    source->codes.assign(columns, nullptr);
    sources.push_back(std::move(owned));
    const StagedChunk &staged = *source->chunk;
    if (index != base_source) {
        rows += staged.rows;
        for (std::size_t c = 0; c < columns; ++c) {
            sketches[c].merge(staged.columns[c].sketch.data());
        }
    }
    for (std::size_t c = 0; c < columns; ++c) {
        if (track[c] && !plain[c]) {
            map_codes(*source, c);
        }
    }
    source->refs = 1;
    if (staged.rows == 0) {
        release(source, out);
        return;
    }
    pending.push_back(source);
    pending_rows += staged.rows;
    pending_chunks += index != base_source ? 1U : 0U;
    while (pending_rows >= capacity) {
        out.jobs.push_back(&cut(capacity, nullptr, out));
    }
}

void FragmentStream::State::map_codes(Source &source, std::size_t c) {
    const ColumnStaging &column = source.chunk->columns[c];
    if (!column.tracking || too_many[c].load(std::memory_order_relaxed)) {
        MX_ASSERT(too_many[c].load(std::memory_order_relaxed),
                  "a chunk stopped tracking without telling the build");
        plain[c] = true;
        return;
    }
    const std::vector<StringRef> &entries = column.distinct.entries();
    const std::vector<std::uint64_t> &hashes = column.distinct.hashes();
    std::vector<std::uint32_t> &remap = source.remap[c];
    remap.resize(entries.size());
    DistinctStrings &all = unions[c];
    for (std::size_t i = 0; i < entries.size(); ++i) {
        std::optional<std::uint32_t> code = all.find(entries[i].view(), hashes[i]);
        if (!code) {
            // A copy: the chunk's strings go with the chunk.
            code =
                all.insert(strings.add(entries[i].view()), hashes[i], build->options().max_dictionary_size);
            if (!code) {
                // More distinct values than a dictionary may hold: plain for good. The values
                // met stay, for fragments written with their codes (see finish()).
                plain[c] = true;
                too_many[c].store(true, std::memory_order_relaxed);
                std::vector<std::uint32_t>().swap(remap);
                return;
            }
        }
        remap[i] = *code;
    }
    source.codes[c] = &remap;
}

FragmentJob &FragmentStream::State::cut(std::uint64_t rows_wanted, const std::vector<std::uint8_t> *coded,
                                        Outbox &out) {
    FragmentJob &job = jobs.emplace_back();
    const std::size_t fragment_index = kept + jobs.size() - 1;
    job.rows = static_cast<std::uint32_t>(rows_wanted);
    job.capacity = capacity;
    job.region = static_cast<std::uint8_t>(fragment_index % placement.regions());
    job.memory_node = placement.use_numa ? placement.memory_nodes[job.region] : -1;
    if (coded != nullptr) {
        job.coded = *coded;
    } else {
        job.coded.resize(columns);
        for (std::size_t c = 0; c < columns; ++c) {
            job.coded[c] = track[c] && !plain[c] ? 1U : 0U;
        }
    }
    std::uint32_t needed = job.rows;
    while (needed > 0) {
        MX_ASSERT(!pending.empty(), "fewer staged rows than counted");
        Source *source = pending.front();
        const std::size_t available = source->chunk->rows - pending_offset;
        const auto take = static_cast<std::uint32_t>(std::min<std::size_t>(available, needed));
        job.segments.push_back(Segment{source, pending_offset, take});
        ++source->refs;
        pending_offset += take;
        pending_rows -= take;
        needed -= take;
        if (pending_offset == source->chunk->rows) {
            pending.pop_front();
            pending_offset = 0;
            pending_chunks -= source->index != base_source ? 1U : 0U;
            release(source, out);
        }
    }
    return job;
}

void FragmentStream::State::release(Source *source, Outbox &out) noexcept {
    MX_ASSERT(source->refs > 0, "a source released more often than held");
    if (--source->refs > 0) {
        return;
    }
    if (source->index != base_source) {
        --alive;
        out.released.push_back(source->index);
    }
    out.garbage.push_back(std::move(sources[source->slot]));
}

void FragmentStream::State::issue(Outbox &out) noexcept {
    while (feed != nullptr && !stopped && started < total && alive - pending_chunks < window) {
        out.starts.push_back(started++);
        ++alive;
        peak = std::max(peak, alive);
    }
}

void FragmentStream::State::deliver(Outbox &out) noexcept {
    // Freed here, outside the lock: the chunks' vectors are large.
    out.garbage.clear();
    out.dropped.reset();
    if (feed != nullptr) {
        for (const std::size_t index : out.released) {
            feed->released(index);
        }
    }
    for (FragmentJob *job : out.jobs) {
        if (group != nullptr) {
            group->spawn([this, job]() noexcept { write(*job); },
                         tasking::Annotation{.target_region = job->region});
        } else {
            write(*job);
        }
    }
    for (const std::size_t index : out.starts) {
        feed->start(index);
    }
}

void FragmentStream::State::write(FragmentJob &job) noexcept {
    const bool written = FragmentWriter::write(job, provisional);
    if (!written && group != nullptr) {
        // The load fails as a whole: the fragments not yet written are skipped.
        group->fail("out of memory for a fragment");
    }
    Outbox out;
    {
        const std::lock_guard lock(mutex);
        failed = failed || !written;
        for (const Segment &segment : job.segments) {
            release(segment.source, out);
        }
        issue(out);
    }
    deliver(out);
}

FragmentStream::FragmentStream(TableBuild &build, tasking::TaskGroup *group)
    : _state(std::make_unique<State>()) {
    State &state = *_state;
    const Table &base = build.base();
    state.build = &build;
    state.group = group;
    state.columns = base.schema().size();
    state.capacity = base.options().fragment_capacity;
    state.placement = group != nullptr ? Placement::of(group->runtime()) : Placement{};
    state.track = build._track;
    state.too_many = build._too_many.get();
    state.plain.assign(state.columns, false);
    state.unions.resize(state.columns);
    state.sketches.resize(state.columns);
    state.provisional.resize(state.columns);
    for (std::size_t c = 0; c < state.columns; ++c) {
        state.provisional[c].type = base.schema()[c].type;
        if (const Dictionary *dictionary = base.dictionary(c); state.track[c] && dictionary != nullptr) {
            // The base's codes stay the provisional codes of its values.
            for (const StringRef &entry : dictionary->entries()) {
                static_cast<void>(
                    state.unions[c].insert(entry, hash_string(entry.view()), ~std::uint32_t{0}));
            }
        }
    }
    // A partial last base fragment takes the first new rows: its rows go first.
    const bool partial = base.row_count() % state.capacity != 0;
    state.kept = base.fragment_count() - (partial ? 1U : 0U);
    if (partial) {
        Outbox out;
        state.take(stage_fragment(base.fragment(state.kept)), base_source, out);
        MX_ASSERT(out.jobs.empty(), "a partial fragment filled a fragment");
    }
}

FragmentStream::~FragmentStream() = default;

void FragmentStream::start_feed(ChunkFeed &feed, std::size_t chunks, std::size_t window) {
    MX_ASSERT(window >= 1, "a stream needs room for one chunk");
    State &state = *_state;
    Outbox out;
    {
        const std::lock_guard lock(state.mutex);
        MX_ASSERT(state.feed == nullptr && state.next == 0, "start_feed() after chunks were added");
        state.feed = &feed;
        state.total = chunks;
        state.window = window;
        state.issue(out);
    }
    state.deliver(out);
}

void FragmentStream::add(std::size_t index, std::unique_ptr<StagedChunk> chunk) noexcept {
    State &state = *_state;
    Outbox out;
    bool out_of_memory = false;
    {
        const std::lock_guard lock(state.mutex);
        if (state.feed == nullptr) {
            ++state.alive;
            state.peak = std::max(state.peak, state.alive);
        }
        if (chunk == nullptr || state.stopped) {
            state.stopped = true;
            --state.alive;
            out.released.push_back(index);
            out.dropped = std::move(chunk);
        } else {
            try {
                state.arrived.emplace(index, std::move(chunk));
                for (auto next = state.arrived.find(state.next); next != state.arrived.end();
                     next = state.arrived.find(state.next)) {
                    std::unique_ptr<StagedChunk> taken = std::move(next->second);
                    state.arrived.erase(next);
                    state.take(std::move(taken), state.next++, out);
                }
            } catch (const std::bad_alloc &) {
                state.stopped = true;
                state.failed = true;
                out_of_memory = true;
            }
        }
        state.issue(out);
    }
    if (out_of_memory && state.group != nullptr) {
        state.group->fail("out of memory while building fragments");
    }
    state.deliver(out);
}

std::uint64_t FragmentStream::rows() const noexcept {
    const std::lock_guard lock(_state->mutex);
    return _state->rows;
}

std::size_t FragmentStream::peak_chunks() const noexcept {
    const std::lock_guard lock(_state->mutex);
    return _state->peak;
}

std::shared_ptr<const Table> FragmentStream::finish() { return TableAssembler::finish(*this); }

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
    std::optional<tasking::TaskGroup> group;
    if (runtime != nullptr) {
        MX_ASSERT(!runtime->on_worker(),
                  "building a table with a runtime blocks: call it from outside the runtime's workers");
        group.emplace(*runtime);
    }
    FragmentStream stream(build, group ? &*group : nullptr);
    for (std::size_t i = 0; i < build.chunks.size(); ++i) {
        stream.add(i, std::move(build.chunks[i]));
    }
    build.chunks.clear();
    build.insert_chunk = nullptr;
    if (group) {
        const tasking::GroupResult outcome = group->wait();
        if (outcome.cancelled && !outcome.failed) {
            // Cancelled without an error: the runtime stopped and dropped fragment writers.
            throw std::runtime_error("building the table was interrupted: the runtime stopped");
        }
    }
    return stream.finish();
}

std::shared_ptr<const Table> TableAssembler::finish(FragmentStream &stream) {
    FragmentStream::State &state = *stream._state;
    const std::lock_guard lock(state.mutex); // the writer tasks are done; for the analysis only
    MX_ASSERT(!state.stopped || state.failed, "finish() on a stream that was stopped");
    MX_ASSERT(state.arrived.empty() && (state.feed == nullptr || state.next == state.total),
              "finish() before every chunk was added");
    if (state.failed) {
        throw std::bad_alloc();
    }
    const Table &base = state.build->base();
    const Schema &schema = base.schema();
    const TableOptions &options = base.options();
    const std::size_t columns = state.columns;
    const std::uint64_t base_rows = base.row_count();
    const std::uint64_t new_rows = state.rows;
    const std::uint64_t total_rows = base_rows + new_rows;

    // 1. Encoding of every string column: a dictionary over the distinct values of the base and
    //    every chunk if they are few enough, plain otherwise. `ranks`: provisional code -> final
    //    code (nullptr where they are the same).
    std::vector<ColumnPlan> plans(columns);
    std::vector<std::vector<std::uint32_t>> rank_storage(columns);
    std::vector<const std::vector<std::uint32_t> *> ranks(columns, nullptr);
    std::vector<std::uint8_t> coded(columns, 0);
    bool rebuild_all = false;
    for (std::size_t c = 0; c < columns; ++c) {
        ColumnPlan &plan = plans[c];
        plan.type = schema[c].type;
        const Dictionary *base_dictionary = base.dictionary(c);
        const DistinctStrings &all = state.unions[c];
        bool dictionary =
            state.track[c] && !state.plain[c] && !state.too_many[c].load(std::memory_order_relaxed);
        if (dictionary) {
            const std::uint64_t distinct = all.entries().size();
            if (distinct == 0) {
                dictionary = false;
            } else if (base_dictionary == nullptr && options.string_encoding == StringEncoding::automatic &&
                       total_rows < distinct * options.min_rows_per_distinct) {
                dictionary = false;
            }
        }
        if (dictionary) {
            if (base_dictionary != nullptr && all.entries().size() == base_dictionary->size()) {
                // Nothing new: the base's dictionary stays, and so do the codes in its fragments.
                plan.dictionary = base._dictionaries[c];
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
                std::vector<std::uint32_t> &rank = rank_storage[c];
                rank.resize(order.size());
                bool same = true;
                for (std::uint32_t k = 0; k < order.size(); ++k) {
                    sorted.push_back(entries[order[k]].view());
                    rank[order[k]] = k;
                    same = same && order[k] == k;
                }
                ranks[c] = same ? nullptr : &rank;
                plan.dictionary = Dictionary::make(std::move(sorted));
            }
            for (const StringRef &entry : plan.dictionary->entries()) {
                plan.max_length = std::max(plan.max_length, entry.size);
            }
            coded[c] = 1;
        }
        if (base_rows > 0 && base_dictionary != nullptr && plan.dictionary.get() != base_dictionary) {
            rebuild_all = true; // codes of the base's fragments change (or the column goes plain)
        }
    }

    // 2. The last new fragment, and which base fragments stay: all of them when nothing was
    //    appended and no dictionary changed; none when a dictionary changed (codes of the base's
    //    values change); otherwise those before a partial last one, whose rows went first into
    //    the new fragments.
    Outbox out;
    std::size_t kept = state.kept;
    if (new_rows == 0 && !rebuild_all) {
        MX_ASSERT(state.jobs.empty(), "fragments without new rows");
        kept = base.fragment_count();
    } else if (state.pending_rows > 0) {
        state.cut(state.pending_rows, &coded, out);
    }
    std::deque<FragmentJob> rebuilt; // base fragments [0, state.kept) when rebuilt
    if (rebuild_all) {
        for (std::size_t f = 0; f < state.kept; ++f) {
            FragmentJob &job = rebuilt.emplace_back();
            job.rows = base.fragment(f).size();
            job.capacity = state.capacity;
            job.region = static_cast<std::uint8_t>(f % state.placement.regions());
            job.memory_node = state.placement.use_numa ? state.placement.memory_nodes[job.region] : -1;
            job.coded = coded;
        }
        kept = 0;
    }

    // 3. Final codes. New fragments map their provisional codes in place (or are written again
    //    when a column they hold as codes turned out plain); base fragments are staged again
    //    and rewritten. A base fragment's codes are its provisional codes.
    const auto finalize = [&state, &plans, &ranks, &coded, &base](FragmentJob &job,
                                                                  std::size_t rebuild) -> bool {
        try {
            Source source;
            if (rebuild != base_source) {
                source.chunk = stage_fragment(base.fragment(rebuild));
                source.codes = ranks;
            } else {
                if (job.fragment == nullptr && !FragmentWriter::write(job, state.provisional)) {
                    return false;
                }
                bool rewrite = false;
                for (std::size_t c = 0; c < coded.size(); ++c) {
                    MX_ASSERT(job.coded[c] != 0 || coded[c] == 0, "a plain column became a dictionary");
                    rewrite = rewrite || (job.coded[c] != 0 && coded[c] == 0);
                }
                if (!rewrite) {
                    FragmentWriter::finalize(job, plans, ranks);
                    return true;
                }
                source.chunk = stage_fragment(*job.fragment, &job.coded, &coded, &state.unions);
                source.codes.assign(coded.size(), nullptr);
                for (std::size_t c = 0; c < coded.size(); ++c) {
                    source.codes[c] = job.coded[c] != 0 && coded[c] != 0 ? ranks[c] : nullptr;
                }
                job.fragment.reset();
                job.coded = coded;
            }
            job.segments.assign(1, Segment{&source, 0, job.rows});
            const bool written = FragmentWriter::write(job, plans);
            job.segments.clear();
            return written;
        } catch (const std::bad_alloc &) {
            return false;
        }
    };
    std::vector<std::pair<FragmentJob *, std::size_t>> work;
    for (std::size_t f = 0; f < rebuilt.size(); ++f) {
        work.emplace_back(&rebuilt[f], f);
    }
    for (FragmentJob &job : state.jobs) {
        if (job.fragment == nullptr || std::find(job.coded.begin(), job.coded.end(), 1U) != job.coded.end()) {
            work.emplace_back(&job, base_source);
        }
    }
    bool failed = false;
    if (state.group != nullptr && !work.empty()) {
        tasking::TaskGroup &group = *state.group;
        MX_ASSERT(!group.runtime().on_worker(),
                  "building a table with a runtime blocks: call it from outside the runtime's workers");
        for (const auto &[job, rebuild] : work) {
            group.spawn(
                [&group, &finalize, job = job, rebuild = rebuild]() noexcept {
                    if (!finalize(*job, rebuild)) {
                        group.fail("out of memory for a fragment");
                    }
                },
                tasking::Annotation{.target_region = job->region});
        }
        const tasking::GroupResult outcome = group.wait();
        if (outcome.cancelled && !outcome.failed) {
            throw std::runtime_error("building the table was interrupted: the runtime stopped");
        }
        failed = outcome.failed;
    } else {
        for (const auto &[job, rebuild] : work) {
            failed = !finalize(*job, rebuild) || failed;
        }
    }
    if (failed) {
        throw std::bad_alloc();
    }

    // 4. The new version.
    auto table = std::shared_ptr<Table>(new Table());
    table->_name = base.name();
    table->_schema = schema;
    table->_options = options;
    table->_row_count = total_rows;
    table->_version = base.version() + 1;
    table->_fragments.assign(base.fragments().begin(),
                             base.fragments().begin() + static_cast<std::ptrdiff_t>(kept));
    std::vector<const FragmentJob *> written;
    for (const FragmentJob &job : rebuilt) {
        written.push_back(&job);
    }
    for (const FragmentJob &job : state.jobs) {
        written.push_back(&job);
    }
    for (const FragmentJob *job : written) {
        table->_fragments.push_back(job->fragment);
    }
    MX_ASSERT(table->_fragments.size() == (total_rows + state.capacity - 1) / state.capacity,
              "fragments do not add up to the table's rows");
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
        for (const FragmentJob *job : written) {
            statistics.max_length = std::max(statistics.max_length, job->max_length[c]);
        }
        for (std::size_t f = kept; f < table->_fragments.size(); ++f) {
            const ZoneMap &zone = table->_fragments[f]->zone_map(c);
            merge_min_max(statistics, zone.min, zone.max);
        }
        Sketch sketch;
        sketch.merge(*base._sketches[c]);
        sketch.merge(state.sketches[c].data());
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
