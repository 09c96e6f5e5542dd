#pragma once

// Internals shared by the table builder (INSERT) and the loader: rows are first staged in
// column-wise chunks (one per parse task, or one for INSERT), then a FragmentStream turns them,
// in row order and while later chunks are still being staged, into fragments of the table's
// capacity (one task per fragment on the fragment's NUMA region) and frees each chunk as soon as
// its rows are in fragments.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <mx/db/table.h>

namespace mx::tasking {
class TaskGroup;
}

namespace mx::db::detail {

/// 64-bit hashes of values, for sketches and the distinct sets.
[[nodiscard]] std::uint64_t hash_string(std::string_view text) noexcept;
[[nodiscard]] constexpr std::uint64_t hash_word(std::uint64_t word) noexcept {
    // splitmix64 finalizer: every input bit moves about half the output bits.
    word += 0x9E3779B97F4A7C15ULL;
    word = (word ^ (word >> 30U)) * 0xBF58476D1CE4E5B9ULL;
    word = (word ^ (word >> 27U)) * 0x94D049BB133111EBULL;
    return word ^ (word >> 31U);
}

/// HyperLogLog with 2^12 one-byte registers (standard error about 1.6 %).
class Sketch {
public:
    static constexpr std::uint32_t bits = 12;
    static constexpr std::uint32_t registers = 1U << bits;

    void add(std::uint64_t hash) noexcept {
        const auto index = static_cast<std::uint32_t>(hash >> (64U - bits));
        const std::uint64_t rest = (hash << bits) | (std::uint64_t{1} << (bits - 1U)); // never 0
        const auto rank = static_cast<std::uint8_t>(__builtin_clzll(rest) + 1);
        if (rank > _registers[index]) {
            _registers[index] = rank;
        }
    }
    void merge(const std::vector<std::uint8_t> &other) noexcept;
    [[nodiscard]] std::uint64_t estimate() const noexcept;
    [[nodiscard]] const std::vector<std::uint8_t> &data() const noexcept { return _registers; }

private:
    std::vector<std::uint8_t> _registers = std::vector<std::uint8_t>(registers, 0);
};

/// Distinct strings in insertion order (the index is the local code), with a hash index.
class DistinctStrings {
public:
    /// The local code of `text`, inserting it if new; nullopt when it is new and the set holds
    /// `limit` strings already.
    std::optional<std::uint32_t> insert(StringRef text, std::uint64_t hash, std::uint32_t limit);
    [[nodiscard]] std::optional<std::uint32_t> find(std::string_view text, std::uint64_t hash) const noexcept;
    [[nodiscard]] const std::vector<StringRef> &entries() const noexcept { return _entries; }
    [[nodiscard]] const std::vector<std::uint64_t> &hashes() const noexcept { return _hashes; }
    /// Takes the entries of a dictionary as they are (no index: find() is not used on them).
    void adopt(std::span<const StringRef> entries);
    void release() noexcept;

private:
    void grow();

    std::vector<std::uint32_t> _slots; // code + 1, 0 = empty; power-of-two size
    std::vector<StringRef> _entries;
    std::vector<std::uint64_t> _hashes;
};

/// One column of a staged chunk. Exactly one of the value vectors is used, by physical type; a
/// string column is staged as local codes into `distinct` while the distinct values of the chunk
/// stay few enough for a dictionary, and as StringRefs once they do not.
struct ColumnStaging {
    Type type{};
    std::vector<std::int64_t> i64{};
    std::vector<double> f64{};
    std::vector<Int128> i128{};
    std::vector<std::uint8_t> u8{};
    std::vector<StringRef> strings{};
    std::vector<std::uint32_t> codes{}; // while `tracking`; null_code for NULL rows
    DistinctStrings distinct{};
    bool tracking{false};
    std::vector<std::uint8_t> nulls{}; // empty until the first NULL, then one byte per row
    std::uint64_t null_count{0};
    Sketch sketch{}; // of non-NULL values; for tracked strings filled from `distinct` at the end

    static constexpr std::uint32_t null_code = 0xFFFFFFFFU;

    void mark_null(std::size_t row) {
        if (nulls.empty()) {
            nulls.assign(row, 0);
        }
        nulls.push_back(1);
        ++null_count;
    }
    void mark_not_null() {
        if (!nulls.empty()) {
            nulls.push_back(0);
        }
    }
    /// Turns the codes staged so far into StringRefs (the chunk got too many distinct values).
    void stop_tracking();
};

/// Rows staged column-wise: one parse task's chunk of a file, the rows of an INSERT, or a base
/// fragment that is rebuilt.
struct StagedChunk {
    std::vector<ColumnStaging> columns;
    std::size_t rows{0};
    StringHeap heap{}; // strings that do not live in the source (unescaped, copied from Values)
};

/// State of one table build: the base version, the staged chunks and the per-column decisions
/// every chunk shares.
class TableBuild {
public:
    static constexpr std::size_t early_decision_rows = 4096;

    explicit TableBuild(std::shared_ptr<const Table> base);

    [[nodiscard]] const Table &base() const noexcept { return *_base; }
    [[nodiscard]] const std::shared_ptr<const Table> &base_ptr() const noexcept { return _base; }
    [[nodiscard]] const Schema &schema() const noexcept { return _base->schema(); }
    [[nodiscard]] const TableOptions &options() const noexcept { return _base->options(); }

    /// A chunk with its columns set up (which string columns track their distinct values).
    [[nodiscard]] std::unique_ptr<StagedChunk> new_chunk() const;
    /// Stages one string value (not NULL) in column `index` of a chunk: a local code while the
    /// chunk tracks the column's distinct values, else a StringRef, and adds it to the sketch.
    /// A chunk that finds too many distinct values (more than max_dictionary_size, or for an
    /// `automatic` decision, fewer than min_rows_per_distinct / 2 rows per value after
    /// early_decision_rows rows of the chunk) stops tracking and tells the other chunks.
    /// `text` must outlive the build. Any thread, each chunk on one thread at a time.
    void stage_string(ColumnStaging &column, std::size_t index, StringRef text);
    /// Stages a NULL in every representation of column `index` of a chunk.
    static void stage_null(ColumnStaging &column, std::size_t row);
    /// Finishes a chunk once all rows are in (sketches of tracked columns).
    static void seal(StagedChunk &chunk);

    /// Chunks in row order; appended by the owner of the build (not thread-safe).
    std::vector<std::unique_ptr<StagedChunk>> chunks;
    /// INSERT rows go here (created on first use, kept last in `chunks`).
    StagedChunk *insert_chunk{nullptr};

    [[nodiscard]] std::uint64_t staged_rows() const noexcept;

private:
    std::shared_ptr<const Table> _base;
    std::vector<bool> _track; // per column: may become a dictionary
    // Per column: `automatic` decides afresh, so a chunk may give up on a dictionary as soon as
    // its own rows show too many distinct values (see stage_string).
    std::vector<bool> _give_up_early;
    // Per column: some chunk had more distinct values than a dictionary may hold. Set by any
    // parse task and by the FragmentStream (a dictionary that would grow too large), read by
    // the parse tasks (relaxed: only a hint to stop tracking early) and by the stream (after it
    // took the chunk that set it, or after the tasks are joined).
    std::unique_ptr<std::atomic<bool>[]> _too_many;

    friend class TableAssembler;
    friend class FragmentStream;
};

class TableAssembler;

/// The producer of a FragmentStream's chunks (the loader's parse tasks).
class ChunkFeed {
public:
    ChunkFeed() = default;
    ChunkFeed(const ChunkFeed &) = delete;
    ChunkFeed &operator=(const ChunkFeed &) = delete;
    virtual ~ChunkFeed() = default;
    /// Starts staging chunk `index` (spawns its task), which comes back through
    /// FragmentStream::add(). Called without the stream's lock, from any thread.
    virtual void start(std::size_t index) noexcept = 0;
    /// Chunk `index` is freed: nothing staged refers to its source bytes any more. Called
    /// without the stream's lock, from any thread.
    virtual void released(std::size_t index) noexcept = 0;
};

/// Turns staged chunks into the fragments of a new table version while they arrive.
///
/// Chunks are numbered in row order and may arrive in any order from any thread; the stream
/// takes them in row order, cuts fragments of the table's capacity from the rows taken, and
/// writes each fragment as soon as its rows are all there, by a task of `group` on the
/// fragment's region (or at once on the calling thread without a group). A chunk is freed when
/// the last fragment with rows of it is written. With a feed, the stream also decides when the
/// next chunk starts: at most `window` chunks are alive (started and not freed) besides those
/// whose rows wait for the current, unfinished fragment, so a load holds a bounded number of
/// chunks whatever the file's size.
///
/// Dictionary columns: the final dictionary (sorted distinct values) is only known once every
/// chunk is in, so fragments are written with provisional codes (the order in which the stream
/// met the values) and finish() maps them to the final codes in place. A column that turns plain
/// for good (a chunk gave up tracking it, or it has more distinct values than a dictionary may
/// hold) is written plain from then on; fragments written with provisional codes of a column
/// that turns out plain in finish() are rewritten there (rare: it takes a column with many
/// distinct values that no chunk gave up on early).
class FragmentStream {
public:
    /// `group` (nullptr: write on the calling thread) must outlive the stream.
    FragmentStream(TableBuild &build, tasking::TaskGroup *group);
    ~FragmentStream();
    FragmentStream(const FragmentStream &) = delete;
    FragmentStream &operator=(const FragmentStream &) = delete;

    /// Lets `feed` produce `chunks` chunks, at most `window` (>= 1) alive at a time, and starts
    /// the first ones. Once, before any add(); the feed must outlive the stream.
    void start_feed(ChunkFeed &feed, std::size_t chunks, std::size_t window);
    /// Hands over chunk `index` (sealed); nullptr means it failed: the stream stops taking
    /// chunks, starts no more, and must not be finished. Any thread.
    void add(std::size_t index, std::unique_ptr<StagedChunk> chunk) noexcept;
    /// The new table version, once every chunk was added and the group's tasks finished (after
    /// its wait()). Throws std::bad_alloc when memory for a fragment cannot be had. Blocks; call
    /// it from outside the runtime's workers.
    std::shared_ptr<const Table> finish();

    /// Rows of the chunks added (not those of the base).
    [[nodiscard]] std::uint64_t rows() const noexcept;
    /// The most chunks alive at one time (started, or added without a feed, and not freed).
    [[nodiscard]] std::size_t peak_chunks() const noexcept;

private:
    friend class TableAssembler;
    struct State;
    std::unique_ptr<State> _state;
};

/// Turns a build into a table version.
class TableAssembler {
public:
    /// Streams the build's chunks through a FragmentStream. Throws std::bad_alloc when memory
    /// for a fragment cannot be had.
    static std::shared_ptr<const Table> assemble(TableBuild &build, tasking::Runtime *runtime);
    static std::shared_ptr<const Table> empty(std::string name, Schema schema, TableOptions options);

private:
    friend class FragmentStream;
    // The stream's finish(): Table's internals are open to the assembler only.
    static std::shared_ptr<const Table> finish(FragmentStream &stream);
};

/// Converts a Value for storage in a column (INSERT and tests); the error is "" on success.
struct Converted {
    Value value{};
    std::string error{};
};
[[nodiscard]] Converted convert_for_column(const Value &value, const ColumnDef &column);

/// The number of UTF-8 characters of `text` (bytes that do not continue a sequence).
[[nodiscard]] std::size_t utf8_length(std::string_view text) noexcept;

} // namespace mx::db::detail
