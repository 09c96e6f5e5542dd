// Hash join: plan compilation, the build node and the table node. The probe
// node is in hash_join_probe.cpp. Design: docs/design/query-engine.md, "Hash
// joins".

#include "hash_join.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <new>
#include <sstream>
#include <stdexcept>

#include <mx/db/executor.h>
#include <mx/db/expression.h>

namespace mx::db::detail {

namespace join {

std::vector<std::uint32_t> split_partitions(const std::vector<std::uint64_t> &counts, std::uint32_t groups) {
    const auto partitions = static_cast<std::uint32_t>(counts.size());
    groups = std::max<std::uint32_t>(1, std::min(groups, partitions));
    std::uint64_t total = 0;
    for (const std::uint64_t count : counts) {
        total += count;
    }
    std::vector<std::uint32_t> bounds;
    bounds.reserve(groups + 1);
    bounds.push_back(0);
    std::uint64_t prefix = 0;
    std::uint32_t p = 0;
    for (std::uint32_t g = 1; g < groups; ++g) {
        // Each range takes at least one partition, and leaves at least one for
        // every later range.
        const std::uint64_t target = total * g / groups;
        const std::uint32_t last_allowed = partitions - (groups - g);
        do {
            prefix += counts[p];
            ++p;
        } while (p < last_allowed && prefix + counts[p] / 2 < target);
        bounds.push_back(p);
    }
    bounds.push_back(partitions);
    return bounds;
}

JoinStrategy choose_strategy(JoinStrategy requested, std::uint64_t rows, std::uint32_t row_size,
                             const HashJoinTuning &tuning) noexcept {
    if (requested != JoinStrategy::automatic) {
        return requested;
    }
    const std::uint64_t bytes = rows * (std::uint64_t{row_size} + sizeof(void *));
    return bytes > tuning.radix_threshold_bytes ? JoinStrategy::radix_partitioned
                                                : JoinStrategy::non_partitioned;
}

namespace {

bool same_key_type(const Type &a, const Type &b) noexcept {
    if (a.physical() != b.physical()) {
        return false;
    }
    if (a.id == TypeId::decimal || b.id == TypeId::decimal) {
        return a.id == b.id && a.scale == b.scale;
    }
    // INTEGER/BIGINT/DATE share int64 but a DATE never equals a number: the
    // planner casts.
    const bool a_date = a.id == TypeId::date;
    const bool b_date = b.id == TypeId::date;
    return a_date == b_date;
}

const char *strategy_name(JoinStrategy strategy) noexcept {
    switch (strategy) {
    case JoinStrategy::automatic:
        return "automatic";
    case JoinStrategy::non_partitioned:
        return "non-partitioned";
    case JoinStrategy::radix_partitioned:
        return "radix-partitioned";
    }
    return "?";
}

unsigned choose_partition_bits(const PlanNode &build, std::uint32_t row_size, const HashJoinTuning &tuning) {
    if (tuning.partition_bits) {
        return std::clamp(*tuning.partition_bits, 1U, 14U);
    }
    if (build.estimated_rows <= 0) {
        return 7;
    }
    const double bytes = build.estimated_rows * (row_size + 8.0);
    const auto partitions = static_cast<std::uint64_t>(bytes / (128.0 * 1024.0)) + 1;
    return std::clamp(static_cast<unsigned>(std::bit_width(partitions)), 4U, 11U);
}

} // namespace
} // namespace join

using join::Row;

// ---------------------------------------------------------------------------------------------
// Build node

HashJoinBuildNode::HashJoinBuildNode(std::shared_ptr<join::JoinState> state)
    : BatchNode("hash join build"), _state(std::move(state)) {}

void HashJoinBuildNode::prepare(std::uint16_t worker_count, std::uint16_t /*region_count*/) {
    const join::JoinSpec &spec = _state->spec;
    auto build = std::make_shared<join::BuildSide>();
    build->stores.reserve(worker_count);
    for (std::uint16_t w = 0; w < worker_count; ++w) {
        build->stores.push_back(
            std::make_unique<join::RowStore>(spec.build_layout.size, 1U << spec.partition_bits));
        if (join::outputs_null_key_build_rows(spec.kind)) {
            build->null_key_stores.push_back(std::make_unique<join::RowStore>(spec.build_layout.size, 1));
        }
    }
    if (spec.key_bitmap) {
        build->key_bounds.assign(worker_count, join::KeyBounds{});
    }
    _state->build = std::move(build);
}

namespace {
/// Zeroes the matched flags (or match counts) of fresh build rows.
void clear_marks(const join::JoinSpec &spec, const std::vector<Row *> &rows) noexcept {
    if (join::marks_build_rows(spec.kind)) {
        const std::size_t width = spec.count_matches ? sizeof(std::uint64_t) : 1;
        for (Row *row : rows) {
            std::memset(row + spec.matched_offset, 0, width);
        }
    }
}
} // namespace

void HashJoinBuildNode::consume_batch(dataflow::FlowContext &context, std::unique_ptr<Batch> batch) noexcept {
    const join::JoinSpec &spec = _state->spec;
    const std::uint32_t live = batch->count();
    if (live == 0) {
        return;
    }
    std::vector<Vector> keys(spec.build_keys.size());
    for (std::size_t k = 0; k < keys.size(); ++k) {
        if (const EvalStatus status = evaluate(*spec.build_keys[k], *batch, keys[k]); !status) {
            context.fail(status.message());
            return;
        }
    }
    // NULL keys never match: such build rows are not in the tables. Only full and right outer
    // and right anti joins output them (unmatched), from a store of their own.
    std::vector<std::uint32_t> rows;
    std::vector<std::uint32_t> null_rows;
    rows.reserve(live);
    for (std::uint32_t i = 0; i < live; ++i) {
        const std::uint32_t row = batch->row(i);
        bool null_key = false;
        for (const Vector &key : keys) {
            null_key |= key.is_null(row);
        }
        if (!null_key) {
            rows.push_back(row);
        } else if (join::outputs_null_key_build_rows(spec.kind)) {
            null_rows.push_back(row);
        }
    }
    if (!null_rows.empty()) {
        join::RowStore &store = *_state->build->null_key_stores[context.worker_id()];
        std::vector<Row *> targets(null_rows.size());
        for (Row *&target : targets) {
            target = store.append(0);
        }
        for (std::size_t slot = 0; slot < spec.build_stored.size(); ++slot) {
            join::store_column(batch->columns[spec.build_stored[slot]], null_rows, targets.data(),
                               spec.build_layout.columns[slot],
                               spec.build_layout.null_offset + static_cast<std::uint32_t>(slot),
                               store.strings());
        }
        clear_marks(spec, targets);
    }
    if (rows.empty()) {
        return;
    }
    std::vector<std::uint64_t> hashes(batch->rows);
    join::hash_rows(keys, rows, hashes.data());
    if (spec.key_bitmap) {
        join::KeyBounds &bounds = _state->build->key_bounds[context.worker_id()];
        const std::int64_t *values = keys[0].data<std::int64_t>();
        for (const std::uint32_t row : rows) {
            bounds.min = std::min(bounds.min, values[row]);
            bounds.max = std::max(bounds.max, values[row]);
        }
    }

    join::RowStore &store = *_state->build->stores[context.worker_id()];
    const unsigned shift = 64U - spec.partition_bits;
    std::vector<Row *> targets(rows.size());
    for (std::size_t j = 0; j < rows.size(); ++j) {
        const std::uint64_t hash = hashes[rows[j]];
        Row *row = store.append(static_cast<std::uint32_t>(hash >> shift));
        join::set_row_next(row, nullptr);
        std::memcpy(row + join::RowLayout::hash_offset, &hash, sizeof(hash));
        targets[j] = row;
    }
    const join::RowLayout &layout = spec.build_layout;
    for (std::size_t k = 0; k < keys.size(); ++k) {
        join::store_column(keys[k], rows, targets.data(), layout.keys[k], std::nullopt, store.strings());
    }
    for (std::size_t slot = 0; slot < spec.build_stored.size(); ++slot) {
        join::store_column(batch->columns[spec.build_stored[slot]], rows, targets.data(),
                           layout.columns[slot], layout.null_offset + static_cast<std::uint32_t>(slot),
                           store.strings());
    }
    clear_marks(spec, targets);
}

void HashJoinBuildNode::finalize(dataflow::FlowContext &context) noexcept {
    const join::JoinSpec &spec = _state->spec;
    join::BuildSide &build = *_state->build;
    join::HashTables &tables = build.tables;
    const std::uint32_t partitions = 1U << spec.partition_bits;

    std::vector<std::uint64_t> counts(partitions, 0);
    std::uint64_t total = 0;
    for (const auto &store : build.stores) {
        for (std::uint32_t p = 0; p < partitions; ++p) {
            counts[p] += store->count(p);
        }
        total += store->rows();
    }
    tables.rows = total;
    tables.partition_bits = spec.partition_bits;
    if (total == 0) {
        return; // the probe knows every probe row is unmatched
    }

    // The strategy is chosen from the actual row count, not from an estimate: a
    // build that turned out small gets one table and a streaming probe, a big one
    // the radix join.
    const JoinStrategy strategy =
        join::choose_strategy(spec.strategy, total, spec.build_layout.size, spec.tuning);
    tables.strategy = strategy;

    // Bucket heads are a LargeBuffer: a recycled array is zeroed by one memset
    // here instead of being faulted in fresh by the table tasks
    // (docs/design/query-engine.md, "Working memory").
    std::uint64_t slots = 0;
    if (strategy == JoinStrategy::radix_partitioned) {
        tables.offsets.resize(partitions + 1);
        tables.masks.resize(partitions);
        for (std::uint32_t p = 0; p < partitions; ++p) {
            const std::uint64_t buckets = std::bit_ceil(std::max<std::uint64_t>(1, counts[p]));
            tables.offsets[p] = slots;
            tables.masks[p] = buckets - 1;
            slots += buckets;
        }
        tables.offsets[partitions] = slots;
    } else {
        slots = std::bit_ceil(total);
        tables.mask = slots - 1;
    }
    tables.heads_memory = LargeBuffer::try_zeroed(slots * sizeof(const Row *));
    if (tables.heads_memory.data() == nullptr) {
        context.fail("hash join: out of memory for the hash table");
        return;
    }
    tables.heads = reinterpret_cast<const Row **>(tables.heads_memory.data());
    tables.head_slots = slots;

    if (spec.key_bitmap) {
        join::KeyBounds bounds;
        for (const join::KeyBounds &worker : build.key_bounds) {
            bounds.min = std::min(bounds.min, worker.min);
            bounds.max = std::max(bounds.max, worker.max);
        }
        // max - min + 1 in unsigned arithmetic: the span of any two int64 values fits.
        const std::uint64_t span =
            static_cast<std::uint64_t>(bounds.max) - static_cast<std::uint64_t>(bounds.min) + 1U;
        if (span != 0 && span <= join::key_bitmap_max_bits &&
            (span <= join::key_bitmap_small_bits || span / join::key_bitmap_bits_per_row <= total)) {
            try {
                tables.key_bitmap.words.assign((span + 63U) / 64U, 0);
                tables.key_bitmap.min = bounds.min;
                tables.key_bitmap.bits = span;
            } catch (const std::bad_alloc &) {
                tables.key_bitmap = join::KeyBitmap{}; // the Bloom filter and the table suffice
            }
        }
    }

    // Small builds too: a cache-resident table still sends most probe rows down a chain (its
    // buckets are mostly full), where the filter rejects them with one block lookup. A key
    // bitmap rejects them exactly and sooner.
    if (spec.bloom_filter && tables.key_bitmap.empty()) {
        try {
            tables.bloom.allocate(total, spec.partition_bits);
        } catch (const std::bad_alloc &) {
            context.fail("hash join: out of memory for the Bloom filter");
            return;
        }
    }

    const std::uint16_t workers = context.worker_count();
    tables.build_ranges = join::split_partitions(counts, std::uint32_t{workers} * 4U);
    const auto ranges = static_cast<std::uint32_t>(tables.build_ranges.size() - 1);
    for (std::uint32_t range = 0; range < ranges; ++range) {
        context.emit(dataflow::Token{nullptr, range},
                     dataflow::DispatchTarget::worker(static_cast<std::uint16_t>(range % workers)));
    }
}

std::string HashJoinBuildNode::details() const { return _state->spec.description; }

// ---------------------------------------------------------------------------------------------
// Table node

HashJoinTableNode::HashJoinTableNode(std::shared_ptr<join::JoinState> state)
    : dataflow::Node("hash join table"), _state(std::move(state)) {}

void HashJoinTableNode::consume(dataflow::FlowContext &context, dataflow::Token token) noexcept {
    if (context.cancelled()) {
        return;
    }
    join::BuildSide &build = *_state->build;
    join::HashTables &tables = build.tables;
    const auto range = static_cast<std::uint32_t>(token.value);
    const std::uint32_t begin = tables.build_ranges[range];
    const std::uint32_t end = tables.build_ranges[range + 1];
    const bool bloom = !tables.bloom.empty();
    const bool bitmap = !tables.key_bitmap.empty();
    const std::uint32_t key_offset = _state->spec.build_layout.keys[0].offset;
    const Row **heads = tables.heads;

    for (std::uint32_t p = begin; p < end; ++p) {
        // An unfinished table is never probed: a cancelled run skips the probe pipeline.
        if (context.cancelled()) {
            return;
        }
        if (tables.strategy == JoinStrategy::radix_partitioned) {
            // This task owns partition p's table: plain stores, the table stays in
            // this core's cache while it is built.
            const Row **table = heads + tables.offsets[p];
            const std::uint64_t mask = tables.masks[p];
            for (const auto &store : build.stores) {
                store->for_each_mutable(p, [&](Row *row) {
                    const std::uint64_t hash = join::row_hash(row);
                    const Row **bucket = table + (hash & mask);
                    join::set_row_next(row, *bucket);
                    *bucket = row;
                    if (bloom) {
                        tables.bloom.insert(hash);
                    }
                    if (bitmap) {
                        tables.key_bitmap.insert(join::load_slot<std::int64_t>(row, key_offset));
                    }
                });
            }
        } else {
            // One table shared by all tasks: a wait-free exchange per row links it in
            // (nobody reads the chains before the node completed, so `next` may be
            // set afterwards).
            const std::uint64_t mask = tables.mask;
            for (const auto &store : build.stores) {
                store->for_each_mutable(p, [&](Row *row) {
                    const std::uint64_t hash = join::row_hash(row);
                    std::atomic_ref<const Row *> bucket(heads[hash & mask]);
                    join::set_row_next(row, bucket.exchange(row, std::memory_order_relaxed));
                    if (bloom) {
                        tables.bloom.insert(hash);
                    }
                    if (bitmap) {
                        tables.key_bitmap.insert(join::load_slot<std::int64_t>(row, key_offset));
                    }
                });
            }
        }
    }
}

std::string HashJoinTableNode::run_notes() const {
    const std::shared_ptr<join::BuildSide> build = _state->build;
    if (!build) {
        return {};
    }
    return std::string("strategy=") + join::strategy_name(build->tables.strategy) +
           (build->tables.key_bitmap.empty() ? "" : " key_bitmap");
}

std::uint64_t HashJoinTableNode::memory_bytes() const {
    const std::shared_ptr<join::BuildSide> build = _state->build;
    if (!build) {
        return 0;
    }
    std::uint64_t total = build->tables.head_slots * sizeof(const Row *) + build->tables.bloom.bytes() +
                          build->tables.key_bitmap.words.size() * sizeof(std::uint64_t);
    for (const auto &store : build->stores) {
        total += store->bytes();
    }
    for (const auto &store : build->null_key_stores) {
        total += store->bytes();
    }
    return total;
}

std::string HashJoinTableNode::details() const { return _state->spec.description; }

// ---------------------------------------------------------------------------------------------
// Compilation

HashJoinNodes add_hash_join(dataflow::Graph &graph, const PlanNode &node, dataflow::NodeId probe_input,
                            dataflow::NodeId build_input, const HashJoinTuning &tuning) {
    if (node.kind != PlanKind::hash_join || node.children.size() != 2 || !node.children[0] ||
        !node.children[1]) {
        throw std::invalid_argument("hash join: needs a probe and a build child");
    }
    if (node.probe_keys.empty() || node.probe_keys.size() != node.build_keys.size()) {
        throw std::invalid_argument("hash join: needs as many probe keys as build keys, at least one");
    }
    const PlanNode &probe = *node.children[0];
    const PlanNode &build = *node.children[1];

    auto state = std::make_shared<join::JoinState>();
    join::JoinSpec &spec = state->spec;
    spec.kind = node.join_kind;
    spec.strategy = tuning.strategy != JoinStrategy::automatic ? tuning.strategy : node.join_strategy;
    spec.bloom_filter = tuning.bloom_filter.value_or(node.bloom_filter);
    spec.probe_keys = node.probe_keys;
    spec.build_keys = node.build_keys;
    spec.residual = node.residual;
    spec.count_matches = node.count_matches;
    if (spec.count_matches && spec.kind != JoinKind::right_outer) {
        throw std::invalid_argument("hash join: only a right outer join counts its matches");
    }
    spec.tuning = tuning;
    for (const OutputColumn &column : probe.output) {
        spec.probe_types.push_back(column.type);
    }
    for (const OutputColumn &column : build.output) {
        spec.build_types.push_back(column.type);
    }

    std::vector<PhysicalType> key_types;
    for (std::size_t k = 0; k < node.probe_keys.size(); ++k) {
        const Type probe_type = node.probe_keys[k]->type();
        const Type build_type = node.build_keys[k]->type();
        if (!join::same_key_type(probe_type, build_type)) {
            // The planner normally casts key pairs to one type; a plan that did not
            // gets the casts here (equal values must have equal bytes, or they would
            // hash apart).
            Type common;
            try {
                common = expr::common_type(probe_type, build_type, "join on");
            } catch (const TypeError &error) {
                throw std::invalid_argument(std::string("hash join: ").append(error.what()));
            }
            spec.probe_keys[k] = expr::cast(spec.probe_keys[k], common);
            spec.build_keys[k] = expr::cast(spec.build_keys[k], common);
        }
        MX_ASSERT(join::same_key_type(spec.probe_keys[k]->type(), spec.build_keys[k]->type()),
                  "join keys of one pair must have one physical type");
        key_types.push_back(spec.build_keys[k]->type().physical());
    }
    // The bitmap is a cheaper, exact filter in front of the Bloom filter: wanted where that is.
    spec.key_bitmap = spec.bloom_filter && key_types.size() == 1 && key_types[0] == PhysicalType::i64;

    const auto probe_width = static_cast<std::uint32_t>(spec.probe_types.size());
    spec.residual_columns.assign(probe_width + spec.build_types.size(), false);
    if (spec.residual) {
        std::vector<std::uint32_t> used;
        expr::collect_columns(*spec.residual, used);
        for (const std::uint32_t column : used) {
            if (column >= spec.residual_columns.size()) {
                throw std::invalid_argument("hash join: the residual refers to a "
                                            "column the join does not have");
            }
            spec.residual_columns[column] = true;
        }
    }
    const bool keep_all = spec.kind == JoinKind::inner || spec.kind == JoinKind::left_outer ||
                          spec.kind == JoinKind::full_outer || spec.kind == JoinKind::right_outer ||
                          outputs_build_only(spec.kind);
    spec.build_slot_of.assign(spec.build_types.size(), -1);
    std::vector<PhysicalType> column_types;
    for (std::uint32_t b = 0; b < spec.build_types.size(); ++b) {
        if (keep_all || spec.residual_columns[probe_width + b]) {
            spec.build_slot_of[b] = static_cast<std::int32_t>(spec.build_stored.size());
            spec.build_stored.push_back(b);
            column_types.push_back(spec.build_types[b].physical());
        }
    }
    if (join::marks_build_rows(spec.kind)) {
        // The matched flag (or count), a slot behind the stored columns.
        column_types.push_back(spec.count_matches ? PhysicalType::i64 : PhysicalType::u8);
        // The (un)matched build rows are found by scanning the stores after the probe; the radix
        // join probes in its finalize parts, so there would be no phase left to scan in.
        spec.strategy = JoinStrategy::non_partitioned;
    }
    spec.build_layout = join::RowLayout::make(key_types, column_types);
    if (join::marks_build_rows(spec.kind)) {
        spec.matched_offset = spec.build_layout.columns.back().offset;
    }
    std::vector<PhysicalType> probe_column_types;
    for (const Type &type : spec.probe_types) {
        probe_column_types.push_back(type.physical());
    }
    spec.probe_layout = join::RowLayout::make({}, probe_column_types);
    spec.partition_bits = join::choose_partition_bits(build, spec.build_layout.size, tuning);

    std::ostringstream text;
    text << join_kind_name(spec.kind) << (spec.count_matches ? " counting matches" : "") << ", keys=";
    for (std::size_t k = 0; k < spec.probe_keys.size(); ++k) {
        text << (k == 0 ? "" : ", ") << to_string(*spec.probe_keys[k]) << " = "
             << to_string(*spec.build_keys[k]);
    }
    if (spec.residual) {
        text << ", residual=" << to_string(*spec.residual);
    }
    text << ", strategy=" << join::strategy_name(spec.strategy);
    if (spec.strategy == JoinStrategy::automatic) {
        // Decided when the build side is complete (choose_strategy), from its actual rows.
        const std::uint64_t threshold = tuning.radix_threshold_bytes;
        text << " (radix-partitioned above ";
        if (threshold % (1ULL << 20U) == 0) {
            text << (threshold >> 20U) << " MiB";
        } else {
            text << threshold << " bytes";
        }
        text << " of build rows and bucket heads)";
    }
    text << ", partitions=" << (1U << spec.partition_bits) << (spec.bloom_filter ? ", bloom" : "");
    spec.description = text.str();

    HashJoinNodes nodes;
    nodes.build = &graph.add<HashJoinBuildNode>(state);
    nodes.table = &graph.add<HashJoinTableNode>(state);
    nodes.probe = &graph.add<HashJoinProbeNode>(state);
    graph.connect(build_input, nodes.build->id());
    graph.connect(*nodes.build, *nodes.table);
    graph.connect(probe_input, nodes.probe->id());
    // The probe pipeline (the probe child's scans included) starts once every
    // table is built.
    graph.depend(*nodes.table, *nodes.probe);
    return nodes;
}

Compiled compile_hash_join(Compiler &compiler, const PlanNode &node) {
    if (node.children.size() != 2 || !node.children[0] || !node.children[1]) {
        throw std::invalid_argument("hash join: needs a probe and a build child");
    }
    const Compiled build = compile(compiler, *node.children[1]);
    const Compiled probe = compile(compiler, *node.children[0]);
    const ExecutionOptions &options = compiler.options;
    HashJoinTuning tuning{};
    tuning.max_output_rows = options.morsel_rows;
    tuning.strategy = options.join.strategy;
    tuning.bloom_filter = options.join.bloom_filter;
    if (options.join.radix_bits != 0) {
        tuning.partition_bits = options.join.radix_bits;
    }
    const HashJoinNodes nodes = add_hash_join(compiler.graph, node, probe.output, build.output, tuning);
    return Compiled{nodes.probe->id()};
}

} // namespace mx::db::detail
