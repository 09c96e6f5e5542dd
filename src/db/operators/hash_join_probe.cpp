// Hash join: the probe node. Design: docs/design/query-engine.md, "Hash joins".
//
// A probe batch goes through: key evaluation, hashing, the Bloom filter, a vectorized chain walk
// (all pending (probe row, chain entry) pairs advance one step per round, keys are compared
// column at a time), then one of two ways to build the output:
//   - selection mode: when every probe row found at most one match (the usual foreign-key join)
//     the probe columns are passed on untouched and only the build columns are gathered, into
//     vectors as long as the batch, with the selection narrowed to the matched rows;
//   - gather mode: otherwise (duplicates) both sides are gathered along the match list, in output
//     batches of at most max_output_rows rows.
// Semi and anti joins only narrow the probe batch's selection; a mark join passes the probe batch
// on whole with one BOOLEAN column appended (matched or not). The residual predicate is filtered
// on the joined batch; for left outer, full outer, semi, anti and mark joins the rows it keeps
// mark their probe rows as matched. Full and right outer joins also mark the build rows they
// matched (a flag in the row, set atomically: probe tasks of all workers share the table), and
// their finalize parts then scan the build rows in parallel, partitions split among the parts,
// and emit those never marked with NULLs on the probe side. A right outer join outputs matches
// like an inner join: its probe rows without a match are dropped.

#include <algorithm>
#include <atomic>
#include <cstring>

#include <mx/db/expression.h>
#include <mx/system/cpu.h>

#include "hash_join.h"

namespace mx::db::detail {

using join::Row;

struct HashJoinProbeNode::Scratch {
    std::vector<Vector> keys;              // evaluated probe keys of the current batch
    std::vector<std::uint64_t> hashes;     // per batch row (valid for candidates)
    std::vector<std::uint32_t> candidates; // live rows with non-NULL keys that passed the filter
    std::vector<std::uint32_t> others;     // live rows that cannot match (joins that keep them)
    std::vector<std::uint32_t> rejected;   // rows a filter (key bitmap, Bloom) rejected, before the merge
    std::vector<std::uint32_t> merged;     // others and rejected, merged
    std::vector<std::uint32_t> pair_row;   // chain walk: probe row ...
    std::vector<const Row *> pair_entry;   // ... and its current chain entry
    std::vector<std::uint8_t> pair_ok;
    std::vector<std::uint32_t> match_row; // matches not yet turned into output
    std::vector<const Row *> match_entry;
    std::vector<std::uint8_t> match_count; // per batch row, saturating at 2
    std::vector<std::uint8_t> passed;      // per batch row: a match survived the residual
    std::vector<const Row *> entry_of;     // per batch row: its single match (selection mode)
    std::vector<Row *> targets;            // radix: rows being materialized
    std::vector<const Row *> chunk;        // radix: rows of the batch being rebuilt
};

HashJoinProbeNode::HashJoinProbeNode(std::shared_ptr<join::JoinState> state)
    : BatchNode("hash join probe"), _state(std::move(state)) {}

HashJoinProbeNode::~HashJoinProbeNode() = default;

void HashJoinProbeNode::prepare(std::uint16_t worker_count, std::uint16_t /*region_count*/) {
    const join::JoinSpec &spec = _state->spec;
    auto probe = std::make_shared<join::ProbeSide>();
    probe->stores.reserve(worker_count);
    for (std::uint16_t w = 0; w < worker_count; ++w) {
        probe->stores.push_back(
            std::make_unique<join::RowStore>(spec.probe_layout.size, 1U << spec.partition_bits));
    }
    _state->probe = std::move(probe);
    _scratch.clear();
    for (std::uint16_t w = 0; w < worker_count; ++w) {
        _scratch.push_back(std::make_unique<Scratch>());
    }
}

std::string HashJoinProbeNode::details() const { return _state->spec.description; }

bool HashJoinProbeNode::radix_mode() const noexcept {
    const join::HashTables &tables = _state->build->tables;
    return tables.rows > 0 && tables.strategy == JoinStrategy::radix_partitioned;
}

HashJoinProbeNode::Scratch &HashJoinProbeNode::scratch(const dataflow::FlowContext &context) noexcept {
    return *_scratch[context.worker_id()];
}

namespace {

/// Left and full outer joins keep every probe row.
bool preserves_probe(JoinKind kind) noexcept {
    return kind == JoinKind::left_outer || kind == JoinKind::full_outer;
}

/// Inner and right outer joins output the joined rows of the matches and nothing else per probe
/// row (a right outer join adds its unmatched build rows after the probe).
bool outputs_matches_only(JoinKind kind) noexcept {
    return kind == JoinKind::inner || kind == JoinKind::right_outer;
}

/// The matched flag of a build row (marks_build_rows; probe tasks on any worker set it).
std::atomic_ref<std::byte> matched_flag(const Row *row, std::uint32_t offset) noexcept {
    return std::atomic_ref<std::byte>(*const_cast<Row *>(row + offset)); // NOLINT: the stores are mutable
}

/// The mark column of a mark join: 1 where `matched` (per batch row, may be null: none) is set.
Vector mark_vector(const std::vector<std::uint8_t> *matched, std::uint32_t rows) {
    Vector out(Type::boolean(), rows);
    auto *values = out.mutable_data<std::uint8_t>();
    if (matched == nullptr) {
        std::fill(values, values + rows, std::uint8_t{0});
    } else {
        for (std::uint32_t i = 0; i < rows; ++i) {
            values[i] = (*matched)[i] != 0 ? 1 : 0;
        }
    }
    return out;
}

void mark_matched(const Row *row, std::uint32_t offset) noexcept {
    std::atomic_ref<std::byte> flag = matched_flag(row, offset);
    if (flag.load(std::memory_order_relaxed) == std::byte{0}) { // most rows match often: read first
        flag.store(std::byte{1}, std::memory_order_relaxed);
    }
}

/// Notes that a probe row met build row `row` through keys and residual: sets its matched flag,
/// or (count_matches) adds one to its count, atomically when probe tasks of several workers may
/// meet the row.
void note_match(const join::JoinSpec &spec, const Row *row, bool shared) noexcept {
    if (!spec.count_matches) {
        mark_matched(row, spec.matched_offset);
        return;
    }
    auto &count = *reinterpret_cast<std::uint64_t *>(const_cast<Row *>(row + spec.matched_offset)); // NOLINT
    if (shared) {
        std::atomic_ref<std::uint64_t>(count).fetch_add(1, std::memory_order_relaxed);
    } else {
        ++count;
    }
}

/// Candidates ahead whose Bloom filter block is prefetched: enough to cover an L2 miss with the
/// checks of the rows in between (a few ns each).
constexpr std::size_t bloom_prefetch_distance = 16;
/// Bloom filters up to this size are checked without prefetching (they stay in the L1).
constexpr std::size_t bloom_prefetch_min_bytes = 32 * 1024;

/// Bucket heads of a non-radix probe: candidates ahead whose head is prefetched (its row is
/// prefetched once the head is read), and the candidates whose chains one walk handles, so the
/// rows prefetched for them are still in the L1/L2 when the walk compares their keys.
constexpr std::size_t head_prefetch_distance = 16;
constexpr std::size_t probe_chunk_rows = 512;
/// Tables whose bucket heads take up to this many bytes are probed without prefetching (the
/// heads and rows stay in the L2).
constexpr std::size_t head_prefetch_min_bytes = 256 * 1024;

/// Narrows a batch's selection to `rows` (ascending, a subset of the live rows).
void select_rows(Batch &batch, const std::vector<std::uint32_t> &rows) {
    if (rows.size() == batch.rows) {
        batch.all_selected = true;
        batch.selection.clear();
        return;
    }
    batch.all_selected = false;
    batch.selection.assign(rows.begin(), rows.end());
}

/// ok[j] &= (probe key value of row[j] == key slot of entry[j]), for one key column.
void compare_key(const Vector &key, join::Slot slot, const std::vector<std::uint32_t> &rows,
                 const std::vector<const Row *> &entries, std::vector<std::uint8_t> &ok) {
    join::visit_physical(slot.physical, [&](auto tag) {
        using T = decltype(tag);
        const T *values = key.data<T>();
        for (std::size_t j = 0; j < rows.size(); ++j) {
            if (ok[j] != 0) {
                ok[j] =
                    join::keys_equal(values[rows[j]], join::load_slot<T>(entries[j], slot.offset)) ? 1 : 0;
            }
        }
    });
}

} // namespace

namespace {

/// Adds the rows a filter rejected (ascending) to the rows without a partner, keeping those
/// ascending too (output selections must be).
void merge_rejected(HashJoinProbeNode::Scratch &s) {
    if (!s.rejected.empty()) {
        s.merged.resize(s.others.size() + s.rejected.size());
        std::merge(s.others.begin(), s.others.end(), s.rejected.begin(), s.rejected.end(), s.merged.begin());
        s.others.swap(s.merged);
    }
}

} // namespace

bool HashJoinProbeNode::prepare_candidates(dataflow::FlowContext &context, const Batch &batch,
                                           Scratch &s) noexcept {
    const join::JoinSpec &spec = _state->spec;
    const join::HashTables &tables = _state->build->tables;
    s.keys.resize(spec.probe_keys.size());
    for (std::size_t k = 0; k < s.keys.size(); ++k) {
        if (const EvalStatus status = evaluate(*spec.probe_keys[k], batch, s.keys[k]); !status) {
            context.fail(status.message());
            return false;
        }
    }
    const std::uint32_t live = batch.count();
    s.candidates.clear();
    s.others.clear();
    // Inner, semi and right joins drop the probe rows without a match: no need to collect them.
    const bool keep_others =
        !outputs_matches_only(spec.kind) && spec.kind != JoinKind::semi && !outputs_build_only(spec.kind);
    bool nullable = false;
    for (const Vector &key : s.keys) {
        nullable |= key.nulls() != nullptr;
    }
    s.candidates.resize(live);
    if (!nullable) {
        for (std::uint32_t i = 0; i < live; ++i) {
            s.candidates[i] = batch.row(i);
        }
    } else {
        std::size_t kept = 0;
        for (std::uint32_t i = 0; i < live; ++i) {
            const std::uint32_t row = batch.row(i);
            bool null_key = false;
            for (const Vector &key : s.keys) {
                null_key |= key.is_null(row);
            }
            // A NULL key equals nothing, not even a NULL build key: the row has no match.
            if (!null_key) {
                s.candidates[kept++] = row;
            } else if (keep_others) {
                s.others.push_back(row);
            }
        }
        s.candidates.resize(kept);
    }
    if (!tables.key_bitmap.empty() && !s.candidates.empty()) {
        // Only the rows whose key is in the bitmap are hashed: they all have a partner.
        MX_ASSERT(s.keys.size() == 1 && s.keys[0].type().physical() == PhysicalType::i64,
                  "a key bitmap needs one i64 key");
        const std::int64_t *values = s.keys[0].data<std::int64_t>();
        const join::KeyBitmap::View bitmap = tables.key_bitmap.view();
        std::size_t kept = 0;
        s.rejected.clear();
        for (const std::uint32_t row : s.candidates) {
            if (bitmap.contains(values[row])) {
                s.candidates[kept++] = row;
            } else if (keep_others) {
                s.rejected.push_back(row);
            }
        }
        s.candidates.resize(kept);
        merge_rejected(s);
    }
    s.hashes.resize(batch.rows);
    join::hash_rows(s.keys, s.candidates, s.hashes.data());
    if (!tables.bloom.empty() && !s.candidates.empty()) {
        // Rows the filter rejects cannot match; when they are kept, they go to `others` (kept
        // ascending by a merge, since output selections must be ascending).
        std::size_t kept = 0;
        s.rejected.clear();
        const std::size_t candidates = s.candidates.size();
        // A filter of a few hundred keys (Q17's parts) stays in the L1: prefetching only costs.
        const std::size_t ahead =
            tables.bloom.bytes() > bloom_prefetch_min_bytes ? bloom_prefetch_distance : 0;
        for (std::size_t j = 0; j < std::min(candidates, ahead); ++j) {
            tables.bloom.prefetch(s.hashes[s.candidates[j]]);
        }
        for (std::size_t j = 0; j < candidates; ++j) {
            if (ahead != 0 && j + ahead < candidates) {
                tables.bloom.prefetch(s.hashes[s.candidates[j + ahead]]);
            }
            const std::uint32_t row = s.candidates[j];
            if (tables.bloom.maybe_contains(s.hashes[row])) {
                s.candidates[kept++] = row;
            } else if (keep_others) {
                s.rejected.push_back(row);
            }
        }
        s.candidates.resize(kept);
        merge_rejected(s);
    }
    return true;
}

void HashJoinProbeNode::emit_without_matches(dataflow::FlowContext &context, std::unique_ptr<Batch> batch,
                                             const std::vector<std::uint32_t> *rows) noexcept {
    const join::JoinSpec &spec = _state->spec;
    if (outputs_matches_only(spec.kind) || spec.kind == JoinKind::semi || outputs_build_only(spec.kind)) {
        return;
    }
    if (rows != nullptr) {
        if (rows->empty()) {
            return;
        }
        select_rows(*batch, *rows);
    }
    if (preserves_probe(spec.kind)) {
        for (const Type &type : spec.build_types) {
            batch->columns.push_back(join::null_vector(type, batch->rows));
        }
    } else if (spec.kind == JoinKind::mark) {
        batch->columns.push_back(mark_vector(nullptr, batch->rows));
    }
    emit(context, std::move(batch));
}

void HashJoinProbeNode::consume_batch(dataflow::FlowContext &context, std::unique_ptr<Batch> batch) noexcept {
    if (batch->count() == 0) {
        return;
    }
    if (_state->build->tables.rows == 0) {
        emit_without_matches(context, std::move(batch), nullptr);
        return;
    }
    Scratch &s = scratch(context);
    if (!prepare_candidates(context, *batch, s)) {
        return;
    }
    if (radix_mode()) {
        materialize(context, std::move(batch), s);
        return;
    }
    join_batch(context, std::move(batch), s);
}

void HashJoinProbeNode::join_batch(dataflow::FlowContext &context, std::unique_ptr<Batch> owned,
                                   Scratch &s) noexcept {
    const join::JoinSpec &spec = _state->spec;
    const std::shared_ptr<join::BuildSide> &build = _state->build;
    const join::HashTables &tables = build->tables;
    const join::RowLayout &layout = spec.build_layout;
    const std::uint32_t rows = owned->rows;
    const std::uint32_t limit = std::max<std::uint32_t>(1, spec.tuning.max_output_rows);
    const auto probe_width = static_cast<std::uint32_t>(spec.probe_types.size());
    const bool marks_only =
        spec.kind == JoinKind::semi || spec.kind == JoinKind::anti || spec.kind == JoinKind::mark;
    const bool first_only = marks_only && !spec.residual;
    // Right semi/anti without a residual: every matching build row is marked during the chain
    // walk (all of a key's rows, not only the first), and no probe row is output.
    const bool right = outputs_build_only(spec.kind) || spec.count_matches;
    const bool mark_only = right && !spec.residual;
    const bool shared = context.worker_count() > 1;
    const bool need_passed = spec.kind != JoinKind::inner;

    // Shared from here on: gathered string columns keep the input batch alive.
    std::shared_ptr<Batch> input(std::move(owned));
    s.match_count.assign(rows, 0);
    if (need_passed) {
        s.passed.assign(rows, 0);
    }
    s.match_row.clear();
    s.match_entry.clear();

    // Gathers match list entries [0, count) into a joined batch (only the residual's columns
    // when `residual_only`); null entries become NULL build values.
    const auto gather = [&](std::uint32_t count, bool residual_only) {
        auto out = std::make_unique<Batch>();
        out->rows = count;
        out->columns.reserve(probe_width + spec.build_types.size());
        for (std::uint32_t c = 0; c < probe_width; ++c) {
            if (residual_only && !spec.residual_columns[c]) {
                out->columns.emplace_back();
                continue;
            }
            Vector column = join::gather_vector(input->columns[c], s.match_row.data(), count);
            if (spec.probe_types[c].physical() == PhysicalType::string) {
                column.keep_alive(input);
            }
            out->columns.push_back(std::move(column));
        }
        for (std::uint32_t b = 0; b < spec.build_types.size(); ++b) {
            const std::int32_t slot = spec.build_slot_of[b];
            if (slot < 0 || (residual_only && !spec.residual_columns[probe_width + b])) {
                out->columns.emplace_back();
                continue;
            }
            Vector column = join::gather_rows(spec.build_types[b], s.match_entry.data(), count,
                                              layout.columns[static_cast<std::size_t>(slot)],
                                              layout.null_offset + static_cast<std::uint32_t>(slot));
            if (spec.build_types[b].physical() == PhysicalType::string) {
                column.keep_alive(build);
            }
            out->columns.push_back(std::move(column));
        }
        return out;
    };

    // Turns the first `count` matches into output (inner, left, full and right outer) and into
    // passed marks (left outer, semi and anti with a residual) or build row marks (full and
    // right outer, right semi and anti with a residual). False when the query failed.
    const auto flush = [&](std::uint32_t count) {
        const bool residual_only = marks_only || right;
        std::unique_ptr<Batch> out = gather(count, residual_only);
        if (spec.residual) {
            if (const EvalStatus status = filter(*spec.residual, *out); !status) {
                context.fail(status.message());
                return false;
            }
        }
        if (need_passed) {
            const std::uint32_t survivors = out->count();
            for (std::uint32_t i = 0; i < survivors; ++i) {
                s.passed[s.match_row[out->row(i)]] = 1;
            }
            if (join::marks_build_rows(spec.kind)) {
                for (std::uint32_t i = 0; i < survivors; ++i) {
                    note_match(spec, s.match_entry[out->row(i)], shared);
                }
            }
        }
        if (!residual_only && out->count() > 0) {
            emit(context, std::move(out));
        }
        s.match_row.erase(s.match_row.begin(), s.match_row.begin() + count);
        s.match_entry.erase(s.match_entry.begin(), s.match_entry.begin() + count);
        return true;
    };

    // Vectorized chain walk, over chunks of the candidates.
    bool flushed = false;
    bool multiple = false;
    const bool prefetch = tables.head_slots * sizeof(const Row *) > head_prefetch_min_bytes;
    const std::size_t candidates = s.candidates.size();
    if (prefetch) {
        for (std::size_t j = 0; j < std::min(candidates, head_prefetch_distance); ++j) {
            __builtin_prefetch(tables.head_slot(s.hashes[s.candidates[j]]));
        }
    }
    for (std::size_t begin = 0; begin < candidates; begin += probe_chunk_rows) {
        const std::size_t end = std::min(candidates, begin + probe_chunk_rows);
        s.pair_row.clear();
        s.pair_entry.clear();
        for (std::size_t j = begin; j < end; ++j) {
            if (prefetch && j + head_prefetch_distance < candidates) {
                __builtin_prefetch(tables.head_slot(s.hashes[s.candidates[j + head_prefetch_distance]]));
            }
            const std::uint32_t row = s.candidates[j];
            if (const Row *head = tables.head(s.hashes[row]); head != nullptr) {
                if (prefetch) {
                    __builtin_prefetch(head);
                }
                s.pair_row.push_back(row);
                s.pair_entry.push_back(head);
            }
        }
        while (!s.pair_row.empty()) {
            // One round advances every pending pair by one chain step (at most a batch of pairs),
            // so a probe with a huge fan-out notices a cancel between rounds.
            if (context.cancelled()) {
                return;
            }
            const std::size_t pairs = s.pair_row.size();
            s.pair_ok.resize(pairs);
            for (std::size_t j = 0; j < pairs; ++j) {
                s.pair_ok[j] = join::row_hash(s.pair_entry[j]) == s.hashes[s.pair_row[j]] ? 1 : 0;
            }
            for (std::size_t k = 0; k < s.keys.size(); ++k) {
                compare_key(s.keys[k], layout.keys[k], s.pair_row, s.pair_entry, s.pair_ok);
            }
            std::size_t kept = 0;
            for (std::size_t j = 0; j < pairs; ++j) {
                const std::uint32_t row = s.pair_row[j];
                const Row *entry = s.pair_entry[j];
                if (s.pair_ok[j] != 0) {
                    if (s.match_count[row] != 0) {
                        multiple = true;
                    }
                    s.match_count[row] = static_cast<std::uint8_t>(std::min(s.match_count[row] + 1, 2));
                    if (mark_only) {
                        note_match(spec, entry, shared);
                    } else if (!first_only) {
                        s.match_row.push_back(row);
                        s.match_entry.push_back(entry);
                    } else {
                        continue; // existence is all a plain semi/anti join needs
                    }
                }
                if (const Row *next = join::row_next(entry); next != nullptr) {
                    s.pair_row[kept] = row;
                    s.pair_entry[kept] = next;
                    ++kept;
                }
            }
            s.pair_row.resize(kept);
            s.pair_entry.resize(kept);
            while (s.match_row.size() >= limit) {
                flushed = true;
                if (!flush(limit)) {
                    return;
                }
            }
        }
    }

    if (right) {
        // The marks are the output (emit_marked_build, after every probe task).
        while (!s.match_row.empty() && !context.cancelled()) {
            if (!flush(static_cast<std::uint32_t>(std::min<std::size_t>(s.match_row.size(), limit)))) {
                return;
            }
        }
        return;
    }
    const std::uint32_t live = input->count();
    if (spec.kind == JoinKind::mark && first_only) {
        // Every probe row, marked: a match or none.
        auto out = std::make_unique<Batch>(std::move(*input));
        out->columns.push_back(mark_vector(&s.match_count, rows));
        emit(context, std::move(out));
        return;
    }
    if (first_only) {
        std::vector<std::uint32_t> &selected = s.candidates; // reused: no longer needed
        selected.clear();
        const bool want = spec.kind == JoinKind::semi;
        for (std::uint32_t i = 0; i < live; ++i) {
            const std::uint32_t row = input->row(i);
            if ((s.match_count[row] != 0) == want) {
                selected.push_back(row);
            }
        }
        if (!selected.empty()) {
            auto out = std::make_unique<Batch>(std::move(*input));
            select_rows(*out, selected);
            emit(context, std::move(out));
        }
        return;
    }

    // Selection mode when most rows matched; a few matches are gathered instead, so a selective
    // join does not build full-length build columns for a handful of rows.
    const bool most_matched = s.match_row.size() * 4 >= live;
    const bool matches_only = outputs_matches_only(spec.kind);
    if ((matches_only || preserves_probe(spec.kind)) && !flushed && !multiple &&
        (most_matched || !matches_only)) {
        // Selection mode: the probe columns move over untouched.
        s.entry_of.assign(rows, nullptr);
        for (std::size_t j = 0; j < s.match_row.size(); ++j) {
            s.entry_of[s.match_row[j]] = s.match_entry[j];
        }
        std::vector<std::uint32_t> &matched = s.candidates; // reused
        matched.clear();
        for (std::uint32_t i = 0; i < live; ++i) {
            const std::uint32_t row = input->row(i);
            if (s.entry_of[row] != nullptr) {
                matched.push_back(row);
            }
        }
        if (matches_only && matched.empty()) {
            return;
        }
        auto out = std::make_unique<Batch>(std::move(*input));
        for (std::uint32_t b = 0; b < spec.build_types.size(); ++b) {
            const auto slot = static_cast<std::size_t>(spec.build_slot_of[b]);
            Vector column =
                join::gather_rows(spec.build_types[b], s.entry_of.data(), rows, layout.columns[slot],
                                  layout.null_offset + static_cast<std::uint32_t>(slot));
            if (spec.build_types[b].physical() == PhysicalType::string) {
                column.keep_alive(build);
            }
            out->columns.push_back(std::move(column));
        }
        if (matches_only) {
            select_rows(*out, matched);
            if (spec.residual) {
                if (const EvalStatus status = filter(*spec.residual, *out); !status) {
                    context.fail(status.message());
                    return;
                }
            }
            if (spec.kind == JoinKind::right_outer) {
                // Only the matches the residual kept mark their build rows.
                const std::uint32_t survivors = out->count();
                for (std::uint32_t i = 0; i < survivors; ++i) {
                    mark_matched(s.entry_of[out->row(i)], spec.matched_offset);
                }
            }
        } else if (spec.residual && !matched.empty()) {
            // Left outer: a match the residual rejects turns into the NULL-padded row.
            const bool all_selected = out->all_selected;
            std::vector<std::uint32_t> selection = std::move(out->selection);
            select_rows(*out, matched);
            if (const EvalStatus status = filter(*spec.residual, *out); !status) {
                context.fail(status.message());
                return;
            }
            const std::uint32_t survivors = out->count();
            for (std::uint32_t i = 0; i < survivors; ++i) {
                s.passed[out->row(i)] = 1;
            }
            for (const std::uint32_t row : matched) {
                if (s.passed[row] == 0) {
                    for (std::uint32_t b = 0; b < spec.build_types.size(); ++b) {
                        out->columns[probe_width + b].set_null(row);
                    }
                } else if (spec.kind == JoinKind::full_outer) {
                    mark_matched(s.entry_of[row], spec.matched_offset);
                }
            }
            out->all_selected = all_selected;
            out->selection = std::move(selection);
        } else if (spec.kind == JoinKind::full_outer) {
            for (const std::uint32_t row : matched) {
                mark_matched(s.entry_of[row], spec.matched_offset);
            }
        }
        if (out->count() > 0) {
            emit(context, std::move(out));
        }
        return;
    }

    // Gather mode (or a residual for semi/anti): the rest of the match list.
    while (!s.match_row.empty()) {
        if (context.cancelled()) {
            return;
        }
        if (!flush(static_cast<std::uint32_t>(std::min<std::size_t>(s.match_row.size(), limit)))) {
            return;
        }
    }
    if (matches_only) {
        return;
    }
    if (spec.kind == JoinKind::mark) {
        // Every probe row, marked: a match that passed the residual or none. The gathered
        // batches only marked `passed`, so moving the columns is safe.
        auto out = std::make_unique<Batch>(std::move(*input));
        out->columns.push_back(mark_vector(&s.passed, rows));
        emit(context, std::move(out));
        return;
    }
    std::vector<std::uint32_t> &selected = s.candidates; // reused
    selected.clear();
    const bool want = spec.kind == JoinKind::semi;
    for (std::uint32_t i = 0; i < live; ++i) {
        const std::uint32_t row = input->row(i);
        if ((s.passed[row] != 0) == want) {
            selected.push_back(row);
        }
    }
    if (preserves_probe(spec.kind)) {
        // The probe rows without a surviving match, NULL-padded. Gathered (not moved) because
        // earlier output batches may point into the input's strings.
        for (std::size_t from = 0; from < selected.size() && !context.cancelled(); from += limit) {
            const auto count =
                static_cast<std::uint32_t>(std::min<std::size_t>(selected.size() - from, limit));
            s.match_row.assign(selected.begin() + static_cast<std::ptrdiff_t>(from),
                               selected.begin() + static_cast<std::ptrdiff_t>(from + count));
            s.match_entry.assign(count, nullptr);
            emit(context, gather(count, false));
        }
        s.match_row.clear();
        s.match_entry.clear();
        return;
    }
    if (!selected.empty()) {
        // Semi/anti output is the probe batch itself: only its columns, narrowed. No gathered
        // batch survives (they only marked `passed`), so moving the columns is safe.
        auto out = std::make_unique<Batch>(std::move(*input));
        select_rows(*out, selected);
        emit(context, std::move(out));
    }
}

// ---------------------------------------------------------------------------------------------
// Radix join: the probe side is partitioned as well, then probed partition by partition.

void HashJoinProbeNode::materialize(dataflow::FlowContext &context, std::unique_ptr<Batch> batch,
                                    Scratch &s) noexcept {
    const join::JoinSpec &spec = _state->spec;
    const join::RowLayout &layout = spec.probe_layout;
    join::RowStore &store = *_state->probe->stores[context.worker_id()];
    const unsigned shift = 64U - spec.partition_bits;
    s.targets.resize(s.candidates.size());
    for (std::size_t j = 0; j < s.candidates.size(); ++j) {
        const std::uint64_t hash = s.hashes[s.candidates[j]];
        Row *row = store.append(static_cast<std::uint32_t>(hash >> shift));
        join::set_row_next(row, nullptr);
        std::memcpy(row + join::RowLayout::hash_offset, &hash, sizeof(hash));
        s.targets[j] = row;
    }
    for (std::size_t c = 0; c < spec.probe_types.size(); ++c) {
        join::store_column(batch->columns[c], s.candidates, s.targets.data(), layout.columns[c],
                           layout.null_offset + static_cast<std::uint32_t>(c), store.strings());
    }
    // Rows that cannot match are answered now (left outer, anti); their strings were not copied.
    emit_without_matches(context, std::move(batch), &s.others);
}

std::uint32_t HashJoinProbeNode::finalize_parts(std::uint16_t worker_count) const noexcept {
    if (!radix_mode() && !join::marks_build_rows(_state->spec.kind)) {
        return 0;
    }
    return std::min<std::uint32_t>(1U << _state->spec.partition_bits, std::uint32_t{worker_count} * 4U);
}

void HashJoinProbeNode::finalize_part(dataflow::FlowContext &context, std::uint32_t part) noexcept {
    const join::JoinSpec &spec = _state->spec;
    if (join::marks_build_rows(spec.kind)) {
        MX_ASSERT(!radix_mode(),
                  "a join that marks build rows probes its one table while the batches stream in");
        emit_marked_build(context, part);
        return;
    }
    const join::HashTables &tables = _state->build->tables;
    const join::ProbeSide &probe = *_state->probe;
    const std::uint32_t partitions = 1U << spec.partition_bits;

    // Every part computes the same split from the same counts (cheap: partitions x workers).
    std::vector<std::uint64_t> counts(partitions, 0);
    for (const auto &store : probe.stores) {
        for (std::uint32_t p = 0; p < partitions; ++p) {
            counts[p] += store->count(p);
        }
    }
    const std::vector<std::uint32_t> bounds =
        join::split_partitions(counts, finalize_parts(context.worker_count()));
    if (part + 1 >= bounds.size()) {
        return;
    }
    Scratch &s = scratch(context);
    const std::uint32_t limit = std::max<std::uint32_t>(1, spec.tuning.max_output_rows);
    s.chunk.clear();
    CancelPoll poll(context);
    for (std::uint32_t p = bounds[part]; p < bounds[part + 1] && !context.cancelled(); ++p) {
        if (counts[p] == 0) {
            continue;
        }
        // The partition's table went cold since it was built: load it at full memory
        // parallelism before the probes chase its chains.
        const auto *first = reinterpret_cast<const std::byte *>(tables.heads + tables.offsets[p]);
        const std::size_t bytes = (tables.offsets[p + 1] - tables.offsets[p]) * sizeof(const Row *);
        for (std::size_t offset = 0; offset < bytes; offset += system::cache_line_size) {
            system::prefetch(first + offset);
        }
        for (const auto &store : probe.stores) {
            store->for_each(p, [&](const Row *row) {
                if (poll()) {
                    return; // cancelled: skip the rest of the partition
                }
                s.chunk.push_back(row);
                if (s.chunk.size() == limit) {
                    probe_rows(context, s.chunk, s);
                    s.chunk.clear();
                }
            });
        }
    }
    if (!s.chunk.empty() && !context.cancelled()) {
        probe_rows(context, s.chunk, s);
    }
    s.chunk.clear();
}

void HashJoinProbeNode::probe_rows(dataflow::FlowContext &context, const std::vector<const Row *> &rows,
                                   Scratch &s) noexcept {
    const join::JoinSpec &spec = _state->spec;
    const join::RowLayout &layout = spec.probe_layout;
    const auto count = static_cast<std::uint32_t>(rows.size());
    auto batch = std::make_unique<Batch>();
    batch->rows = count;
    for (std::size_t c = 0; c < spec.probe_types.size(); ++c) {
        Vector column = join::gather_rows(spec.probe_types[c], rows.data(), count, layout.columns[c],
                                          layout.null_offset + static_cast<std::uint32_t>(c));
        if (spec.probe_types[c].physical() == PhysicalType::string) {
            column.keep_alive(_state->probe);
        }
        batch->columns.push_back(std::move(column));
    }
    s.keys.resize(spec.probe_keys.size());
    for (std::size_t k = 0; k < s.keys.size(); ++k) {
        if (const EvalStatus status = evaluate(*spec.probe_keys[k], *batch, s.keys[k]); !status) {
            context.fail(status.message());
            return;
        }
    }
    s.hashes.resize(count);
    s.candidates.resize(count);
    for (std::uint32_t j = 0; j < count; ++j) {
        s.hashes[j] = join::row_hash(rows[j]);
        s.candidates[j] = j;
    }
    s.others.clear();
    join_batch(context, std::move(batch), s);
}

// ---------------------------------------------------------------------------------------------
// Full outer, right outer and right semi/anti joins: the build rows by their marks, after every
// probe task.

void HashJoinProbeNode::emit_marked_build(dataflow::FlowContext &context, std::uint32_t part) noexcept {
    const join::JoinSpec &spec = _state->spec;
    const join::BuildSide &build = *_state->build;
    const std::uint32_t partitions = 1U << spec.partition_bits;
    const std::uint32_t parts = finalize_parts(context.worker_count());
    // Every part computes the same split from the same counts (cheap: partitions x workers).
    std::vector<std::uint64_t> counts(partitions, 0);
    for (const auto &store : build.stores) {
        for (std::uint32_t p = 0; p < partitions; ++p) {
            counts[p] += store->count(p);
        }
    }
    const std::vector<std::uint32_t> bounds = join::split_partitions(counts, parts);
    const std::uint32_t limit = std::max<std::uint32_t>(1, spec.tuning.max_output_rows);
    std::vector<const Row *> chunk;
    CancelPoll poll(context);
    // Right semi outputs the matched rows, full outer, right outer and right anti the others.
    const auto wanted = spec.kind == JoinKind::right_semi ? std::byte{1} : std::byte{0};
    const auto visit = [&](const Row *row, bool output) {
        if (poll()) {
            return;
        }
        if (output) {
            chunk.push_back(row);
        }
        if (chunk.size() == limit) {
            emit_build_rows(context, chunk);
            chunk.clear();
        }
    };
    if (part + 1 < bounds.size()) {
        for (std::uint32_t p = bounds[part]; p < bounds[part + 1] && !poll.stopped(); ++p) {
            for (const auto &store : build.stores) {
                store->for_each(p, [&](const Row *row) {
                    visit(row, spec.count_matches ||
                                   matched_flag(row, spec.matched_offset).load(std::memory_order_relaxed) ==
                                       wanted);
                });
            }
        }
    }
    // The rows with NULL keys: the stores of the workers w with w mod parts = part.
    for (std::size_t w = part; w < build.null_key_stores.size() && !poll.stopped(); w += parts) {
        build.null_key_stores[w]->for_each(0, [&](const Row *row) { visit(row, true); });
    }
    if (!chunk.empty() && !poll.stopped()) {
        emit_build_rows(context, chunk);
    }
}

void HashJoinProbeNode::emit_build_rows(dataflow::FlowContext &context,
                                        const std::vector<const Row *> &rows) noexcept {
    const join::JoinSpec &spec = _state->spec;
    const join::RowLayout &layout = spec.build_layout;
    const auto count = static_cast<std::uint32_t>(rows.size());
    auto batch = std::make_unique<Batch>();
    batch->rows = count;
    if (!outputs_build_only(spec.kind) && !spec.count_matches) {
        for (const Type &type : spec.probe_types) {
            batch->columns.push_back(join::null_vector(type, count));
        }
    }
    for (std::uint32_t b = 0; b < spec.build_types.size(); ++b) {
        const auto slot = static_cast<std::size_t>(spec.build_slot_of[b]);
        Vector column = join::gather_rows(spec.build_types[b], rows.data(), count, layout.columns[slot],
                                          layout.null_offset + static_cast<std::uint32_t>(slot));
        if (spec.build_types[b].physical() == PhysicalType::string) {
            column.keep_alive(_state->build);
        }
        batch->columns.push_back(std::move(column));
    }
    if (spec.count_matches) {
        // The probe tasks are done: the counts are final and plain loads see them.
        Vector counts(Type::bigint(), count);
        auto *values = counts.mutable_data<std::int64_t>();
        for (std::uint32_t i = 0; i < count; ++i) {
            values[i] =
                static_cast<std::int64_t>(join::load_slot<std::uint64_t>(rows[i], spec.matched_offset));
        }
        batch->columns.push_back(std::move(counts));
    }
    emit(context, std::move(batch));
}

} // namespace mx::db::detail
