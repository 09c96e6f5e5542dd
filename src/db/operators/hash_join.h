#pragma once

// TunaDB's hash join operators (internal). A hash_join plan node becomes three dataflow nodes:
//
//   build child -> HashJoinBuildNode -> HashJoinTableNode      (build pipeline)
//   probe child -> HashJoinProbeNode -> parent                 (probe pipeline, waits for the
//                                                               table node: Graph::depend)
//
// The build node copies key and column values of the build rows into worker-local row stores,
// already micro-partitioned by the top hash bits. Its finalize looks at the actual row count,
// chooses the strategy (unless the plan forces one), lays out the tables and hands ranges of
// partitions to the table node, whose tasks build the tables and the Bloom filter in parallel.
// The probe node either probes each batch as it arrives (non-partitioned) or, for the radix
// join, scatters the probe rows into micro partitions as well and probes partition by partition
// in its finalize parts, so every table it touches stays in the cache. See
// docs/design/query-engine.md ("Hash joins").

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bloom_filter.h"
#include "hash_join_rows.h"
#include "large_buffer.h"
#include "operator.h"

namespace mx::db::detail {

/// Knobs of the hash join; the defaults suit the machine this runs on (2 MiB L2 per core, a
/// large shared L3).
struct HashJoinTuning {
    /// Output batches hold at most this many rows (big match sets are split).
    std::uint32_t max_output_rows{2048};
    /// JoinStrategy::automatic picks the radix join when the build rows and their bucket heads
    /// take more than this many bytes (they would not stay in the cache while probing). The
    /// only radix-or-not threshold: the SQL optimizer leaves the choice to the executor, which
    /// knows the actual build rows. Partitioning copies every probe row once, which on this
    /// machine costs more than the cache misses it saves for tables of tens of MiB (TPC-H SF 1:
    /// Q3 and Q5, whose 5 to 7 MiB tables a 6 M-row lineitem probes, ran about twice as long at
    /// 4 MiB; Q9, whose table of 320 k wide rows takes about 35 MiB, 15 % longer at 32 MiB).
    std::uint64_t radix_threshold_bytes{64ULL << 20U};
    /// Micro partition bits (2^bits partitions per side). Empty: from the build child's
    /// estimated rows (partitions of about 128 KiB), 7 when unknown.
    std::optional<unsigned> partition_bits;
    /// Overrides PlanNode::join_strategy unless automatic (ExecutionOptions::join).
    JoinStrategy strategy{JoinStrategy::automatic};
    /// Overrides PlanNode::bloom_filter when set.
    std::optional<bool> bloom_filter;
};

namespace join {

/// Joins whose probe marks the build rows it matched (output after the probe from the marks).
[[nodiscard]] constexpr bool marks_build_rows(JoinKind kind) noexcept {
    return kind == JoinKind::full_outer || kind == JoinKind::right_outer || outputs_build_only(kind);
}
/// Joins that output the build rows with a NULL key (they have no partner).
[[nodiscard]] constexpr bool outputs_null_key_build_rows(JoinKind kind) noexcept {
    return kind == JoinKind::full_outer || kind == JoinKind::right_outer || kind == JoinKind::right_anti;
}

/// Exact membership of a single integer key (physical i64) whose build values span a range of
/// at most key_bitmap_max_bits: bit v - min is set iff a build row has key v. A probe row whose
/// key misses it is dropped before its key is hashed (TPC-H Q17: 200 parts against 6 M lineitem
/// rows), which a Bloom filter cannot do since it tests hashes. Laid out by the build node's
/// finalize, filled by the table node's tasks (atomic ORs: a word holds keys of several
/// partitions), read-only for the probe.
struct KeyBitmap {
    std::int64_t min{0};
    std::uint64_t bits{0}; ///< max - min + 1; 0 when there is no bitmap
    std::vector<std::uint64_t> words;

    /// The fields by value: a loop that also stores into memory keeps them in registers (its
    /// stores could alias the bitmap's own fields).
    struct View {
        std::uint64_t min;
        std::uint64_t bits;
        const std::uint64_t *words;

        [[nodiscard]] bool contains(std::int64_t key) const noexcept {
            // Unsigned wrap-around sends keys below min past `bits` too.
            const std::uint64_t offset = static_cast<std::uint64_t>(key) - min;
            return offset < bits && ((words[offset >> 6U] >> (offset & 63U)) & 1U) != 0;
        }
    };

    [[nodiscard]] bool empty() const noexcept { return bits == 0; }
    void insert(std::int64_t key) noexcept {
        const std::uint64_t offset = static_cast<std::uint64_t>(key) - static_cast<std::uint64_t>(min);
        std::atomic_ref<std::uint64_t>(words[offset >> 6U])
            .fetch_or(std::uint64_t{1} << (offset & 63U), std::memory_order_relaxed);
    }
    [[nodiscard]] View view() const noexcept {
        return View{static_cast<std::uint64_t>(min), bits, words.data()};
    }
    [[nodiscard]] bool contains(std::int64_t key) const noexcept { return view().contains(key); }
};
/// A key bitmap is built when the range has at most this many bits (32 KiB: it stays in the L1)
inline constexpr std::uint64_t key_bitmap_small_bits = std::uint64_t{1} << 18U;
/// or at most this many bits per build row (128 bytes, about what the row takes in the table)
inline constexpr std::uint64_t key_bitmap_bits_per_row = 1024;
/// and never more than this many bits (1 MiB: it stays in the L2 while probing).
inline constexpr std::uint64_t key_bitmap_max_bits = std::uint64_t{1} << 23U;

/// The smallest and largest key of the build rows one worker stored (single i64 key only).
struct KeyBounds {
    std::int64_t min{std::numeric_limits<std::int64_t>::max()};
    std::int64_t max{std::numeric_limits<std::int64_t>::min()};
};

/// The hash tables of one run. Laid out by the build node's finalize (one task), filled by the
/// table node's tasks (each its own partitions), read-only for the probe (which starts after the
/// table node completed: the dataflow layer's completion orders these phases).
struct HashTables {
    JoinStrategy strategy{JoinStrategy::non_partitioned};
    std::uint64_t rows{0};
    unsigned partition_bits{0};
    // Bucket heads (zeroed). non_partitioned: one table, bucket = hash & mask, filled with
    // atomic exchanges. radix_partitioned: partition p owns heads[offsets[p] .. offsets[p+1])
    // with bucket = hash & masks[p], filled by exactly one task (plain stores).
    const Row **heads{nullptr};
    std::uint64_t head_slots{0}; ///< entries of `heads`
    std::uint64_t mask{0};
    std::vector<std::uint64_t> offsets;
    std::vector<std::uint64_t> masks;
    BloomFilter bloom;
    KeyBitmap key_bitmap;
    /// Partition ranges of the table tasks: range i is [build_ranges[i], build_ranges[i+1]).
    std::vector<std::uint32_t> build_ranges;

    LargeBuffer heads_memory; // the memory behind `heads`

    [[nodiscard]] std::uint32_t partition(std::uint64_t hash) const noexcept {
        return static_cast<std::uint32_t>(hash >> (64U - partition_bits));
    }
    /// Where the first row of the hash's chain is stored.
    [[nodiscard]] const Row *const *head_slot(std::uint64_t hash) const noexcept {
        if (strategy == JoinStrategy::radix_partitioned) {
            const std::uint32_t p = partition(hash);
            return heads + offsets[p] + (hash & masks[p]);
        }
        return heads + (hash & mask);
    }
    /// First row of the hash's chain (nullptr when the bucket is empty).
    [[nodiscard]] const Row *head(std::uint64_t hash) const noexcept { return *head_slot(hash); }
};

/// What compile_hash_join derived from the plan node; immutable while the graph runs.
struct JoinSpec {
    JoinKind kind{JoinKind::inner};
    JoinStrategy strategy{JoinStrategy::automatic};
    bool bloom_filter{true};
    /// A single key of physical type i64: the build node tracks its bounds and may build a
    /// KeyBitmap.
    bool key_bitmap{false};
    std::vector<ExprPtr> probe_keys;
    std::vector<ExprPtr> build_keys;
    ExprPtr residual;
    std::vector<Type> probe_types; // the probe child's output
    std::vector<Type> build_types; // the build child's output
    /// Build rows: key slots, then the stored build columns (all for inner/left outer, those the
    /// residual reads for semi/anti).
    RowLayout build_layout;
    std::vector<std::uint32_t> build_stored; // stored column slot -> build column
    std::vector<std::int32_t> build_slot_of; // build column -> stored slot, -1 = not stored
    RowLayout probe_layout;                  // radix probe rows: every probe column
    std::vector<bool> residual_columns;      // probe ++ build columns the residual reads
    /// marks_build_rows(kind): byte offset in a build row of its matched flag (0 until a probe row
    /// met it through keys and residual; set by the probe tasks of any worker, atomically).
    std::uint32_t matched_offset{0};
    /// PlanNode::count_matches: at matched_offset a build row holds a u64 count of its matches
    /// instead of the flag, and every build row is output with it (no probe row is).
    bool count_matches{false};
    unsigned partition_bits{7};
    HashJoinTuning tuning;
    std::string description; // for details()
};

/// Build side of one run.
struct BuildSide {
    /// One store per worker, written by the build node's consume tasks on that worker only.
    std::vector<std::unique_ptr<RowStore>> stores;
    /// outputs_null_key_build_rows(kind): the build rows with a NULL key (they match nothing but
    /// are output), one store per worker (one partition), written like `stores`.
    std::vector<std::unique_ptr<RowStore>> null_key_stores;
    /// JoinSpec::key_bitmap: one per worker, written like `stores`, read by the finalize.
    std::vector<KeyBounds> key_bounds;
    HashTables tables;
};

/// Probe side of one run (radix join only): one store per worker, written by the probe node's
/// consume tasks on that worker, read by its finalize parts.
struct ProbeSide {
    std::vector<std::unique_ptr<RowStore>> stores;
};

/// Shared by the three nodes of one join.
struct JoinState {
    JoinSpec spec;
    // Replaced by the build node's / probe node's prepare() on the thread that starts a run,
    // before any task of it; read by the run's tasks. Output batches keep them alive
    // (Vector::keep_alive) as long as they point into their string arenas.
    std::shared_ptr<BuildSide> build;
    std::shared_ptr<ProbeSide> probe;
};

/// The strategy for a build of `rows` rows of `row_size` bytes: `requested` unless automatic;
/// then the radix join when rows and bucket heads exceed tuning.radix_threshold_bytes.
JoinStrategy choose_strategy(JoinStrategy requested, std::uint64_t rows, std::uint32_t row_size,
                             const HashJoinTuning &tuning) noexcept;

/// Splits partitions [0, counts.size()) into `groups` consecutive ranges of about equal row
/// counts; returns groups + 1 boundaries.
std::vector<std::uint32_t> split_partitions(const std::vector<std::uint64_t> &counts, std::uint32_t groups);

} // namespace join

class HashJoinBuildNode final : public BatchNode {
public:
    explicit HashJoinBuildNode(std::shared_ptr<join::JoinState> state);

    void prepare(std::uint16_t worker_count, std::uint16_t region_count) override;
    void consume_batch(dataflow::FlowContext &context, std::unique_ptr<Batch> batch) noexcept override;
    void finalize(dataflow::FlowContext &context) noexcept override;
    [[nodiscard]] std::string details() const override;

private:
    std::shared_ptr<join::JoinState> _state;
};

/// Builds the tables of a range of partitions per token (token value = range index).
class HashJoinTableNode final : public dataflow::Node {
public:
    explicit HashJoinTableNode(std::shared_ptr<join::JoinState> state);

    void consume(dataflow::FlowContext &context, dataflow::Token token) noexcept override;
    [[nodiscard]] std::string details() const override;
    /// The build rows (stores with their strings), bucket heads and Bloom filter of the last run.
    [[nodiscard]] std::uint64_t memory_bytes() const override;
    /// The strategy the last run's build took ("strategy=non-partitioned" or "...radix-...").
    [[nodiscard]] std::string run_notes() const override;

private:
    std::shared_ptr<join::JoinState> _state;
};

class HashJoinProbeNode final : public BatchNode {
public:
    explicit HashJoinProbeNode(std::shared_ptr<join::JoinState> state);
    ~HashJoinProbeNode() override;

    void prepare(std::uint16_t worker_count, std::uint16_t region_count) override;
    void consume_batch(dataflow::FlowContext &context, std::unique_ptr<Batch> batch) noexcept override;
    [[nodiscard]] std::uint32_t finalize_parts(std::uint16_t worker_count) const noexcept override;
    void finalize_part(dataflow::FlowContext &context, std::uint32_t part) noexcept override;
    [[nodiscard]] std::string details() const override;

    struct Scratch;

private:
    [[nodiscard]] bool radix_mode() const noexcept;
    [[nodiscard]] Scratch &scratch(const dataflow::FlowContext &context) noexcept;
    bool prepare_candidates(dataflow::FlowContext &context, const Batch &batch, Scratch &scratch) noexcept;
    void join_batch(dataflow::FlowContext &context, std::unique_ptr<Batch> batch, Scratch &scratch) noexcept;
    void materialize(dataflow::FlowContext &context, std::unique_ptr<Batch> batch, Scratch &scratch) noexcept;
    void emit_without_matches(dataflow::FlowContext &context, std::unique_ptr<Batch> batch,
                              const std::vector<std::uint32_t> *rows) noexcept;
    void probe_rows(dataflow::FlowContext &context, const std::vector<const join::Row *> &rows,
                    Scratch &scratch) noexcept;
    /// marks_build_rows(kind), finalize part `part`: the build rows no probe row matched
    /// (full and right outer, NULL-padded; right anti) or those one matched (right semi).
    void emit_marked_build(dataflow::FlowContext &context, std::uint32_t part) noexcept;
    void emit_build_rows(dataflow::FlowContext &context, const std::vector<const join::Row *> &rows) noexcept;

    std::shared_ptr<join::JoinState> _state;
    // One per worker, used only by this node's tasks on that worker (consume and finalize parts
    // of one node never run at the same time on one worker).
    std::vector<std::unique_ptr<Scratch>> _scratch;
};

/// The three nodes of one join, connected to the given inputs (compile_hash_join calls this
/// after compiling the children).
struct HashJoinNodes {
    HashJoinBuildNode *build{nullptr};
    HashJoinTableNode *table{nullptr};
    HashJoinProbeNode *probe{nullptr};
};
HashJoinNodes add_hash_join(dataflow::Graph &graph, const PlanNode &node, dataflow::NodeId probe_input,
                            dataflow::NodeId build_input, const HashJoinTuning &tuning);

} // namespace mx::db::detail
