#pragma once

// The task-based radix join (dissertation ch. 6, "micro partitioning and task squads"). There is
// no histogram pass: one producer task per worker and relation takes morsels of the relation from
// a shared cursor and scatters them into fixed-capacity fragments, one open fragment per
// partition, taking fresh fragments from a per-partition chunk of adjacent slots and chunks from
// the relation's arena. Adjacent full fragments form a run, and a run becomes a build or probe
// task, constructed in the header in front of its first fragment, for its partition's squad and
// with that fragment as the data to prefetch; each producer hands a partition's tasks to the
// squad in one SquadBatch at the end. The last producer publishes the build squads: the workers
// pull them one at a time, each squad's tasks run back to back on one worker and fill the
// partition's hash table (no latch: one worker owns the table while its squad runs). The last
// build task of a partition publishes the partition's probe squad onto its own worker, so the
// probes find the table in that core's cache (`fuse_probe`; without it all probe squads are
// published after the whole build phase). docs/design/radix-join.md has the reasons and figures.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <vector>

#include "mx/join/classic_radix_join.h"
#include "mx/join/hash_table.h"
#include "mx/join/relation.h"
#include "mx/system/cpu.h"
#include "mx/tasking/runtime.h"
#include "mx/util/assert.h"

namespace mx::join {

struct MicroJoinConfig {
    unsigned radix_bits{11};
    std::uint32_t fragment_capacity{256}; // tuples per fragment, 1 to max_fragment_capacity
    /// Scatter through one cache-line buffer per partition and write fragments with full-line
    /// non-temporal stores (needs a capacity that is a multiple of 4 tuples; ignored otherwise).
    bool write_combining{true};
    /// Each partition's last build task publishes its probe squad (probe right after build, same
    /// core); false: a build phase for all partitions, then a probe phase.
    bool fuse_probe{true};
    /// Squad-ordered layout: a producer takes fragments for a partition from a chunk of this many
    /// adjacent fragments, so a squad reads runs of contiguous memory as the classic join reads
    /// its partitions (1 = every fragment from the producer's counter, scattered among all
    /// partitions). Costs up to one chunk of slack per partition and producer.
    std::uint32_t fragments_per_chunk{8};
    /// Fused schedule: hash-table slots per worker, reused from partition to partition while
    /// still in the core's cache (0 = every table in its own slice of a cold arena).
    std::uint32_t table_slots_per_worker{64};
    /// Adjacent full fragments of one partition (a chunk holds fragments_per_chunk of them) that
    /// one build or probe task covers; the task prefetches each next fragment, a line per four
    /// tuples it processes. 1 = a task per fragment (the dissertation's granularity).
    std::uint32_t fragments_per_task{8};
    /// Input tuples a producer takes from its relation at a time (from a cursor shared by the
    /// producers): small enough that the workers end the partition phase within microseconds of
    /// each other, large enough that the cursor is touched rarely.
    std::uint32_t morsel_tuples{65536};
};

class MicroRadixJoin {
public:
    /// Largest MicroJoinConfig::fragment_capacity: a fragment's free slots are counted in 16 bits.
    static constexpr std::uint32_t max_fragment_capacity = 0xFFFF;

    /// Allocates and pre-faults fragments and hash-table memory (std::bad_alloc when that fails;
    /// std::runtime_error on the practically unseen fragment memory above 2^48). The runtime
    /// must outlive the join, and nobody else may use the runtime while run() waits on it.
    MicroRadixJoin(tasking::Runtime &runtime, std::span<const Tuple> build, std::span<const Tuple> probe,
                   const MicroJoinConfig &config)
        : _runtime(runtime), _config(config), _partitions(std::size_t{1} << config.radix_bits),
          _build_squads(std::make_unique<tasking::Squad[]>(_partitions)),
          _probe_squads(std::make_unique<tasking::Squad[]>(_partitions)), _table_tuples(build.size()),
          _table_next(build.size()), _table_heads(2 * build.size() + _partitions), _tables(_partitions),
          _table_ready(_partitions), _builds_left(_partitions), _probes_left(_partitions),
          _table_slot(_partitions, no_slot), _partition_offsets(_partitions + 1), _head_offsets(_partitions),
          _slot_pools(runtime.worker_count()), _accumulators(runtime.worker_count()) {
        MX_ASSERT(config.fragment_capacity >= 1 && config.fragment_capacity <= max_fragment_capacity,
                  "fragments hold 1 to max_fragment_capacity tuples");
        MX_ASSERT(config.radix_bits >= 1 && config.radix_bits <= 20, "radix bits out of range");
        _config.write_combining =
            config.write_combining && config.fragment_capacity % detail::tuples_per_line == 0;
        _config.fragments_per_chunk = std::max<std::uint32_t>(1, config.fragments_per_chunk);
        _config.fragments_per_task = std::max<std::uint32_t>(1, config.fragments_per_task);
        _config.morsel_tuples = std::max<std::uint32_t>(1, config.morsel_tuples);
        // Slot of a fragment: the task header, then the capacity rounded up to whole lines (so
        // every header and every fragment starts on a line).
        const std::size_t line = detail::tuples_per_line;
        _fragment_stride = header_tuples + (config.fragment_capacity + line - 1) / line * line;
        _chunk_tuples = _config.fragments_per_chunk * _fragment_stride;
        const std::size_t producers = runtime.worker_count();
        prepare(_build_side, build, producers);
        prepare(_probe_side, probe, producers);
        _build_producers.resize(producers);
        _probe_producers.resize(producers);
        for (std::size_t w = 0; w < producers; ++w) {
            prepare(_build_producers[w]);
            prepare(_probe_producers[w]);
        }
        for (std::size_t p = 0; p < _partitions; ++p) {
            _build_squad_list.push_back(&_build_squads[p]);
            _probe_squad_list.push_back(&_probe_squads[p]);
        }
        _join_squads.reserve(2 * _partitions); // filled inside a task: no allocation there
        _table_tuples.prefault();
        if (_config.fuse_probe && _config.table_slots_per_worker > 0) {
            prepare_slots(build.size());
        }
    }

    JoinResult run(JoinTimings *timings = nullptr) {
        const auto start = std::chrono::steady_clock::now();
        const std::uint64_t start_cycles = system::cycles();
        std::fill(_accumulators.begin(), _accumulators.end(), Accumulator{});
        reset_slot_pools();

        // Partition phase: one producer task per worker and relation; full fragments queue in
        // the squads, which do not count for wait() until published.
        const auto producers = static_cast<std::uint16_t>(_build_producers.size());
        _start = start;
        for (Side *side : {&_build_side, &_probe_side}) {
            side->next_chunk.store(0, std::memory_order_relaxed);
            side->next_tuple.store(0, std::memory_order_relaxed);
        }
        _producers_left.store(2U * producers, std::memory_order_relaxed);
        for (std::uint16_t w = 0; w < producers; ++w) {
            for (const bool probe : {false, true}) {
                _runtime.spawn(
                    [this, w, probe](tasking::TaskContext &context) noexcept {
                        partition(probe, w);
                        // Acq_rel: the last producer sees every producer's counts and squads.
                        if (_producers_left.fetch_sub(1, std::memory_order_acq_rel) == 1 &&
                            _config.fuse_probe) {
                            start_join(context);
                        }
                    },
                    tasking::Annotation{.target_worker = w});
            }
        }
        // Fused: the last producer lays out the tables and publishes the build squads itself, so
        // the join phase starts on the workers without a round trip through this thread, and this
        // wait covers the whole join.
        _runtime.wait();
        std::uint64_t partition_ns = _partition_ns;
        std::uint64_t build_ns = 0;
        std::uint64_t probe_ns = 0;
        if (!_config.fuse_probe) {
            lay_out_tables();
            partition_ns = detail::elapsed_ns(start);
            const auto build_start = std::chrono::steady_clock::now();
            _runtime.publish(_build_squad_list);
            _runtime.wait();
            build_ns = detail::elapsed_ns(build_start);
            const auto probe_start = std::chrono::steady_clock::now();
            _runtime.publish(_probe_squad_list);
            _runtime.wait();
            probe_ns = detail::elapsed_ns(probe_start);
        }
        const std::uint64_t total_ns = detail::elapsed_ns(start);
        JoinResult result;
        for (Accumulator &accumulator : _accumulators) {
            result.matches += accumulator.result.matches;
            result.checksum += accumulator.result.checksum;
        }
        if (timings != nullptr) {
            timings->partition_ns = partition_ns;
            timings->build_ns = build_ns;
            timings->probe_ns = probe_ns;
            timings->build_probe_ns = total_ns - partition_ns;
            timings->total_ns = total_ns;
            timings->total_cycles = system::cycles() - start_cycles;
        }
        return result;
    }

private:
    /// One relation's input and fragment arena, shared by its producers. The counters are reset
    /// by run() before the producers start and bumped by them (any worker). They sit on lines of
    /// their own: the producers read `input` and `fragments` on every morsel and fragment, and
    /// must not miss on them whenever another producer bumps.
    struct Side {
        std::span<const Tuple> input;
        TupleBuffer fragments; // the arena of fixed-capacity fragments
        alignas(system::cache_line_size) std::atomic<std::size_t> next_chunk{0}; // in chunks
        alignas(system::cache_line_size) std::atomic<std::size_t> next_tuple{0}; // next morsel
    };
    /// Chunks a producer reserves with one add on its relation's chunk counter.
    static constexpr std::size_t chunks_per_reserve = 16;
    static constexpr unsigned cursor_shift = 48; // see pack_cursor

    /// One producer's scatter state. Written only by the producer task of its worker during the
    /// partition phase; its counts are read by the last producer (start_join(), after the
    /// acq_rel countdown) or, in the phased schedule, by the thread calling run() after wait().
    struct Producer {
        std::vector<Tuple *> open;           // the open fragment of each partition
        std::vector<Tuple *> chunk_next;     // next free slot of each partition's chunk (nullptr: none)
        Tuple *reserved{nullptr};            // the next of this producer's reserved chunks
        std::size_t reserved_left{0};        // reserved chunks not yet handed to a partition
        std::vector<Tuple *> run_first;      // first fragment of the partition's pending run
        std::vector<std::uint32_t> run_full; // full fragments in the pending run (0: none)
        // Tuples in the open fragment: kept by the write-combining scatter; the plain one keeps
        // `cursors` instead and derives this at the end of its morsels.
        std::vector<std::uint32_t> fill;
        // Plain scatter: the open fragment's next slot and the slots left in it, in one word per
        // partition (see pack_cursor): one state array per tuple like the classic scatter's
        // cursors, instead of the fragment start and fill count read from two.
        std::vector<std::uint64_t> cursors;
        std::vector<std::uint32_t> counts;            // tuples per partition
        std::vector<std::uint32_t> emitted;           // fragment tasks per partition
        std::unique_ptr<detail::CombineLine[]> lines; // write-combining line per partition
        std::vector<tasking::SquadBatch> batches;     // fragment tasks per partition, to its squad
        std::vector<std::vector<const void *>> tasks; // the tasks emitted per partition (probe side)
    };

    /// A run of adjacent fragments of one partition: all full but the last, which holds `last`
    /// tuples. Consecutive fragments are _fragment_stride tuples apart (a header line between).
    struct Run {
        const Tuple *first;
        std::uint32_t fragments;
        std::uint32_t last;
    };

    /// A build or probe task over a run of fragments of one partition. It lives in the line(s)
    /// right before the run's first fragment (the join owns it, no allocation): the worker that
    /// adopts a squad walks its tasks, and each step then lands next to data the task reads
    /// anyway instead of on a descriptor allocated elsewhere during the partition phase.
    class FragmentTask final : public tasking::Task {
    public:
        FragmentTask(MicroRadixJoin &join, const Run &run, std::uint32_t partition, bool probe) noexcept
            : _join(&join), _run(run), _partition(partition), _probe(probe) {}

        tasking::TaskResult execute(tasking::TaskContext &context) noexcept override {
            if (_probe) {
                _join->probe_run(context.worker_id(), _partition, _run);
            } else {
                _join->build_run(context, _partition, _run);
            }
            return tasking::TaskResult::done();
        }

    private:
        MicroRadixJoin *_join;
        Run _run;
        std::uint32_t _partition;
        bool _probe;
    };

    static_assert(sizeof(FragmentTask) % system::cache_line_size == 0 &&
                  sizeof(FragmentTask) % sizeof(Tuple) == 0);
    static constexpr std::size_t header_tuples = sizeof(FragmentTask) / sizeof(Tuple);

    /// Matches found by the probe tasks of one worker: written only by that worker, read by
    /// run() after wait(). A line each, so workers do not share one.
    struct alignas(system::cache_line_size) Accumulator {
        JoinResult result;
    };

    /// Fused schedule, run by the last producer task: ends the partition phase and publishes the
    /// build squads (and the probe squads of partitions without build tuples: no build task will
    /// publish those, and their tasks find no table).
    void start_join(tasking::TaskContext &context) noexcept {
        lay_out_tables();
        _partition_ns = detail::elapsed_ns(_start);
        _join_squads = _build_squad_list;
        for (std::size_t p = 0; p < _partitions; ++p) {
            if (_builds_left[p] == 0) {
                _join_squads.push_back(&_probe_squads[p]);
            }
        }
        context.publish(_join_squads);
    }

    void prepare(Side &side, std::span<const Tuple> input, std::size_t producers) {
        side.input = input;
        const std::size_t capacity = _config.fragment_capacity;
        const std::size_t chunk = _config.fragments_per_chunk;
        // Full fragments plus one partly filled fragment per partition and producer at most, in
        // chunks of which each producer leaves at most one partly used per partition.
        const std::size_t fragments = (input.size() + capacity - 1) / capacity + producers * _partitions;
        // Plus up to one reserve per producer left unused at the end.
        const std::size_t chunks =
            (fragments + chunk - 1) / chunk + producers * (_partitions + chunks_per_reserve);
        side.fragments = TupleBuffer{chunks * _chunk_tuples};
        // The plain scatter packs slot addresses into 48 bits (pack_cursor). Every user-space
        // address on x86-64 Linux fits unless a program maps memory above 2^47 on purpose (5-level
        // paging); checked once per buffer rather than assumed.
        const auto end = reinterpret_cast<std::uintptr_t>(side.fragments.data() + side.fragments.size());
        if ((end >> cursor_shift) != 0) {
            throw std::runtime_error{"MicroRadixJoin: fragment memory lies above 2^48, which the "
                                     "plain scatter's packed cursors cannot address"};
        }
        side.fragments.prefault();
    }

    void prepare(Producer &producer) {
        producer.open.resize(_partitions);
        producer.chunk_next.resize(_partitions);
        producer.run_first.resize(_partitions);
        producer.run_full.resize(_partitions);
        producer.fill.resize(_partitions);
        producer.cursors.resize(_partitions);
        producer.counts.resize(_partitions);
        producer.emitted.resize(_partitions);
        producer.batches.resize(_partitions);
        producer.tasks.resize(_partitions);
        if (_config.write_combining) {
            producer.lines = std::make_unique<detail::CombineLine[]>(_partitions);
        }
    }

    Tuple *take_fragment(Side &side, Producer &producer, std::size_t p) noexcept {
        Tuple *&next = producer.chunk_next[p];
        // A fresh chunk always gives up its first slot at once, so a next slot on a chunk
        // boundary means the partition's chunk is used up.
        if (next == nullptr || static_cast<std::size_t>(next - side.fragments.data()) % _chunk_tuples == 0) {
            if (producer.reserved_left == 0) {
                const std::size_t chunk =
                    side.next_chunk.fetch_add(chunks_per_reserve, std::memory_order_relaxed);
                MX_ASSERT((chunk + chunks_per_reserve) * _chunk_tuples <= side.fragments.size(),
                          "fragment arena exhausted");
                producer.reserved = side.fragments.data() + chunk * _chunk_tuples;
                producer.reserved_left = chunks_per_reserve;
            }
            next = producer.reserved;
            producer.reserved += _chunk_tuples;
            --producer.reserved_left;
        }
        Tuple *fragment = next + header_tuples;
        next += _fragment_stride;
        return fragment;
    }

    void emit(Producer &producer, bool probe, std::size_t partition, const Run &run) noexcept {
        producer.counts[partition] += (run.fragments - 1) * _config.fragment_capacity + run.last;
        ++producer.emitted[partition];
        // The header lines in front of the run's first fragment (take_fragment() left them free).
        // A task of the previous run() in the same place has run; it owns nothing, so its storage
        // is reused without running its destructor.
        void *header = const_cast<Tuple *>(run.first) - header_tuples;
        auto *task = new (header) FragmentTask(*this, run, static_cast<std::uint32_t>(partition), probe);
        // The runtime prefetches the first fragment; the task itself fetches the others.
        const std::uint32_t first_count = run.fragments == 1 ? run.last : _config.fragment_capacity;
        task->annotate(
            tasking::PrefetchHint::bytes(run.first, static_cast<std::uint32_t>(first_count * sizeof(Tuple))));
        // Collected per partition and handed to the squad at the end of the phase: two atomic
        // operations per squad and producer instead of two per fragment.
        producer.batches[partition].add(*task);
        if (probe) {
            producer.tasks[partition].push_back(task);
        }
    }

    /// The producer task of one relation on worker w: takes morsels of the relation from a
    /// shared cursor until none is left, so a worker that is slower (or started later) simply
    /// scatters fewer of them; its open fragments, write-combining lines and pending runs carry
    /// over from one morsel to the next.
    void partition(bool probe, std::size_t w) noexcept {
        Side &side = probe ? _probe_side : _build_side;
        Producer &producer = probe ? _probe_producers[w] : _build_producers[w];
        producer.reserved_left = 0;
        // A chunk for every partition in one step: one atomic add instead of one per partition.
        const std::size_t first_chunk = side.next_chunk.fetch_add(_partitions, std::memory_order_relaxed);
        MX_ASSERT((first_chunk + _partitions) * _chunk_tuples <= side.fragments.size(),
                  "fragment arena exhausted");
        for (std::size_t p = 0; p < _partitions; ++p) {
            Tuple *chunk = side.fragments.data() + (first_chunk + p) * _chunk_tuples;
            producer.open[p] = chunk + header_tuples;
            producer.chunk_next[p] = chunk + _fragment_stride;
            producer.batches[p].assign(probe ? _probe_squads[p] : _build_squads[p]);
            producer.tasks[p].clear();
        }
        std::fill(producer.fill.begin(), producer.fill.end(), 0U);
        std::fill(producer.counts.begin(), producer.counts.end(), 0U);
        std::fill(producer.emitted.begin(), producer.emitted.end(), 0U);
        std::fill(producer.run_full.begin(), producer.run_full.end(), 0U);
        if (!_config.write_combining) {
            for (std::size_t p = 0; p < _partitions; ++p) {
                producer.cursors[p] = pack_cursor(producer.open[p], _config.fragment_capacity);
            }
        }
        while (true) {
            const std::size_t size = _config.morsel_tuples;
            const std::size_t begin = side.next_tuple.fetch_add(size, std::memory_order_relaxed);
            if (begin >= side.input.size()) {
                break;
            }
            const std::span<const Tuple> morsel =
                side.input.subspan(begin, std::min(size, side.input.size() - begin));
            if (_config.write_combining) {
                scatter_combining(side, producer, probe, morsel);
            } else {
                scatter_plain(side, producer, probe, morsel);
            }
        }
        if (_config.write_combining) {
            flush_combining(producer);
        } else {
            for (std::size_t p = 0; p < _partitions; ++p) {
                producer.fill[p] = _config.fragment_capacity - slots_left(producer.cursors[p]);
            }
        }
        for (std::size_t p = 0; p < _partitions; ++p) {
            // A pending run always ends right before the open fragment (fragment_full() emits a
            // run as soon as the next fragment is not adjacent), so a partly filled open
            // fragment completes it.
            const std::uint32_t fill = producer.fill[p];
            if (producer.run_full[p] != 0) {
                emit(producer, probe, p,
                     Run{producer.run_first[p], producer.run_full[p] + (fill != 0 ? 1U : 0U),
                         fill != 0 ? fill : _config.fragment_capacity});
            } else if (fill != 0) {
                emit(producer, probe, p, Run{producer.open[p], 1, fill});
            }
            producer.batches[p].submit();
        }
    }

    /// The open fragment of p is full: it joins p's pending run, which becomes a task when it
    /// has fragments_per_task fragments or the next fragment is not adjacent (a new chunk).
    void fragment_full(Side &side, Producer &producer, bool probe, std::size_t p) noexcept {
        Tuple *full = producer.open[p];
        if (producer.run_full[p]++ == 0) {
            producer.run_first[p] = full;
        }
        Tuple *next = take_fragment(side, producer, p);
        // The scatter prefetches each fragment's next line as it goes; the first line of a new
        // fragment is not next to the last one (a header line or another chunk lies between).
        system::prefetch(next, system::PrefetchMode::for_write);
        if (producer.run_full[p] == _config.fragments_per_task || next != full + _fragment_stride) {
            emit(producer, probe, p,
                 Run{producer.run_first[p], producer.run_full[p], _config.fragment_capacity});
            producer.run_full[p] = 0;
        }
        producer.open[p] = next;
        producer.fill[p] = 0;
    }

    /// A plain-scatter cursor: the next slot's address in the low 48 bits (user-space addresses
    /// on x86-64 fit in 47), the slots left in the fragment in the high 16.
    static std::uint64_t pack_cursor(Tuple *slot, std::uint32_t left) noexcept {
        const auto address = reinterpret_cast<std::uintptr_t>(slot);
        MX_ASSERT((address >> cursor_shift) == 0 && left < (1U << 16U), "cursor does not fit in a word");
        return address | (std::uint64_t{left} << cursor_shift);
    }
    static std::uint32_t slots_left(std::uint64_t cursor) noexcept {
        return static_cast<std::uint32_t>(cursor >> cursor_shift);
    }

    void scatter_plain(Side &side, Producer &producer, bool probe, std::span<const Tuple> morsel) noexcept {
        const std::size_t mask = _partitions - 1;
        constexpr std::uint64_t address_mask = (std::uint64_t{1} << cursor_shift) - 1U;
        // One slot further, one slot fewer left, in a single add.
        constexpr std::uint64_t step = sizeof(Tuple) - (std::uint64_t{1} << cursor_shift);
        std::uint64_t *cursors = producer.cursors.data();
        for (const Tuple &tuple : morsel) {
            const std::size_t p = tuple.key & mask;
            const std::uint64_t cursor = cursors[p];
            auto *slot = reinterpret_cast<Tuple *>(cursor & address_mask);
            *slot = tuple;
            // The fragment's next line, for writing: its read-for-ownership miss overlaps the
            // next tuples instead of stalling the store that first touches it.
            system::prefetch(detail::write_front(slot), system::PrefetchMode::for_write);
            const std::uint64_t next = cursor + step;
            cursors[p] = next;
            if (slots_left(next) == 0) [[unlikely]] {
                fragment_full(side, producer, probe, p);
                cursors[p] = pack_cursor(producer.open[p], _config.fragment_capacity);
            }
        }
    }

    // Tuples collect in a line per partition (128 KiB for 11 bits: L2-resident) and leave as one
    // full-line non-temporal store, so the scatter never reads the fragment lines it writes.
    // Fragments start on a line and hold a multiple of 4 tuples, so every store is a whole line.
    void scatter_combining(Side &side, Producer &producer, bool probe,
                           std::span<const Tuple> morsel) noexcept {
        const std::size_t mask = _partitions - 1;
        const std::uint32_t capacity = _config.fragment_capacity;
        Tuple **open = producer.open.data();
        std::uint32_t *fill = producer.fill.data();
        detail::CombineLine *lines = producer.lines.get();
        for (const Tuple &tuple : morsel) {
            const std::size_t p = tuple.key & mask;
            const std::uint32_t position = fill[p]++;
            lines[p].slots[position % detail::tuples_per_line] = tuple;
            if (position % detail::tuples_per_line == detail::tuples_per_line - 1) {
                detail::stream_line(open[p] + (position + 1 - detail::tuples_per_line), lines[p]);
                if (position + 1 == capacity) [[unlikely]] {
                    fragment_full(side, producer, probe, p);
                }
            }
        }
    }

    /// After the producer's last morsel: the partly filled lines go to their fragments.
    void flush_combining(Producer &producer) noexcept {
        Tuple **open = producer.open.data();
        std::uint32_t *fill = producer.fill.data();
        detail::CombineLine *lines = producer.lines.get();
        for (std::size_t p = 0; p < _partitions; ++p) {
            const std::uint32_t tail = fill[p] % detail::tuples_per_line;
            for (std::uint32_t i = fill[p] - tail; i < fill[p]; ++i) {
                open[p][i] = lines[p].slots[i % detail::tuples_per_line];
            }
        }
        // Non-temporal stores are weakly ordered. The fragment tasks cannot run before their
        // squads are published, which happens only after every producer has counted itself done
        // (or after wait(), phased); the fence drains the stores before this producer does.
        _mm_sfence();
    }

    /// Table slots for the fused schedule: a partition's table lives from its first build task to
    /// its last probe task, all on one worker, so each worker reuses a few slots (most recently
    /// freed first, still in its cache) instead of touching a fresh slice of the arena for every
    /// partition. A slot holds twice the average partition; larger partitions (skew) and
    /// partitions that find no free slot use their arena slice.
    void prepare_slots(std::size_t build_size) {
        _slot_capacity = std::max<std::size_t>(1, 2 * build_size / _partitions);
        _slot_buckets = PartitionHashTable::bucket_count_for(_slot_capacity);
        const std::size_t slots = _slot_pools.size() * _config.table_slots_per_worker;
        _slot_heads.resize(slots * _slot_buckets);
        _slot_next.resize(slots * _slot_capacity);
        _slot_tuples = TupleBuffer{slots * _slot_capacity};
        _slot_tuples.prefault();
    }

    void reset_slot_pools() noexcept {
        if (_slot_capacity == 0) {
            return; // no slots
        }
        const std::size_t slots = _config.table_slots_per_worker;
        for (std::size_t w = 0; w < _slot_pools.size(); ++w) {
            std::vector<std::uint32_t> &free = _slot_pools[w].free;
            free.clear();
            // Popped from the back: slot w * slots first.
            for (std::size_t i = slots; i-- > 0;) {
                free.push_back(static_cast<std::uint32_t>(w * slots + i));
            }
        }
    }

    /// The table of partition p in a free slot of `worker`, or in p's arena slice.
    PartitionHashTable make_table(std::uint16_t worker, std::size_t p, std::size_t size) noexcept {
        if (size <= _slot_capacity) { // 0 without slots (not fused, or none configured)
            if (std::vector<std::uint32_t> &free = _slot_pools[worker].free; !free.empty()) {
                const std::uint32_t slot = free.back();
                free.pop_back();
                _table_slot[p] = slot;
                return PartitionHashTable{
                    _slot_heads.data() + slot * _slot_buckets, _slot_next.data() + slot * _slot_capacity,
                    _slot_tuples.data() + slot * _slot_capacity, size, _config.radix_bits};
            }
        }
        _table_slot[p] = no_slot;
        return PartitionHashTable{_table_heads.data() + _head_offsets[p],
                                  _table_next.data() + _partition_offsets[p],
                                  _table_tuples.data() + _partition_offsets[p], size, _config.radix_bits};
    }

    /// After p's last probe task (or its last build task when p has nothing to probe).
    void release_table(std::uint16_t worker, std::size_t p) noexcept {
        if (_table_slot[p] != no_slot) {
            // The slot goes to the worker that ran the probes (the builder: fused squads run on
            // it); a pool is only ever touched by tasks on its own worker.
            _slot_pools[worker].free.push_back(_table_slot[p]);
            _table_slot[p] = no_slot;
        }
    }

    /// Gives each partition its slice of the table arena (exact size from the producers' counts).
    void lay_out_tables() noexcept {
        std::size_t offset = 0;
        std::size_t heads = 0;
        for (std::size_t p = 0; p < _partitions; ++p) {
            std::size_t size = 0;
            _builds_left[p] = 0;
            _probes_left[p] = 0;
            for (const Producer &producer : _build_producers) {
                size += producer.counts[p];
                _builds_left[p] += producer.emitted[p];
            }
            for (const Producer &producer : _probe_producers) {
                _probes_left[p] += producer.emitted[p];
            }
            _partition_offsets[p] = offset;
            _table_ready[p] = 0;
            _tables[p] = PartitionHashTable{};
            _head_offsets[p] = heads;
            offset += size;
            heads += size == 0 ? 0 : PartitionHashTable::bucket_count_for(size);
        }
        _partition_offsets[_partitions] = offset;
        MX_ASSERT(offset == _build_side.input.size(), "every build tuple lands in one partition");
        MX_ASSERT(heads <= _table_heads.size(), "bucket arena too small");
    }

    /// Calls body(tuple) for every tuple of the run, fragment by fragment. Each full fragment
    /// prefetches its successor a line per four tuples processed: the loads spread over the work
    /// instead of one burst that fills the core's miss buffers (the runtime fetched the first).
    /// A short last fragment gets a few lines more than it holds, all inside its slot.
    template <class Body>
    void for_each_tuple(const Run &run, Body &&body) const noexcept {
        const std::uint32_t capacity = _config.fragment_capacity;
        const Tuple *fragment = run.first;
        const std::size_t whole_lines = capacity / detail::tuples_per_line * detail::tuples_per_line;
        for (std::uint32_t f = 1; f < run.fragments; ++f, fragment += _fragment_stride) {
            // Four tuples per line, unrolled, over pointers: the loop keeps few values live, so
            // the body's state stays in registers.
            const Tuple *tuple = fragment;
            const Tuple *next = fragment + _fragment_stride;
            for (const Tuple *end = fragment + whole_lines; tuple != end;
                 tuple += detail::tuples_per_line, next += detail::tuples_per_line) {
                system::prefetch(next);
                body(tuple[0]);
                body(tuple[1]);
                body(tuple[2]);
                body(tuple[3]);
            }
            for (const Tuple *end = fragment + capacity; tuple != end; ++tuple) {
                body(*tuple);
            }
        }
        for (const Tuple *tuple = fragment, *end = fragment + run.last; tuple != end; ++tuple) {
            body(*tuple);
        }
    }

    // Build tasks of a partition run back to back on the worker its squad went to, so the first
    // one sets the table up (first touch on that core) and none of them needs a latch.
    void build_run(tasking::TaskContext &context, std::size_t p, const Run &run) noexcept {
        if (_table_ready[p] == 0) {
            if (_config.fuse_probe) {
                // The last build task of p adopts p's probe squad by walking its linked tasks,
                // one dependent miss each; fetch them now, all at once, while the build runs.
                for (const Producer &producer : _probe_producers) {
                    for (const void *task : producer.tasks[p]) {
                        system::prefetch(task, system::PrefetchMode::for_write);
                    }
                }
            }
            _tables[p] =
                make_table(context.worker_id(), p, _partition_offsets[p + 1] - _partition_offsets[p]);
            _table_ready[p] = 1;
        }
        // A local copy: its pointers stay in registers across the loop (the member could alias
        // the tuples the loop writes).
        PartitionHashTable table = _tables[p];
        for_each_tuple(run, [&table](const Tuple &tuple) noexcept { table.insert(tuple); });
        _tables[p] = table;
        if (--_builds_left[p] == 0 && _config.fuse_probe) {
            // The table is complete and in this core's cache: probe it here, now.
            context.publish(_probe_squads[p]);
            if (_probes_left[p] == 0) {
                release_table(context.worker_id(), p);
            }
        }
    }

    void probe_run(std::uint16_t worker, std::size_t p, const Run &run) noexcept {
        if (_table_ready[p] == 0) {
            return; // no build tuple in this partition
        }
        const PartitionHashTable table = _tables[p]; // local: pointers stay in registers
        if (_table_ready[p] == 1 && !_config.fuse_probe) {
            // First probe task of the squad: the table went cold since the build phase.
            _table_ready[p] = 2;
            table.prefetch();
        }
        JoinResult local;
        for_each_tuple(run, [&table, &local](const Tuple &tuple) noexcept {
            table.probe(tuple.key, [&](const Tuple &match) noexcept {
                ++local.matches;
                local.checksum += match_checksum(match.payload, tuple.payload);
            });
        });
        _accumulators[worker].result.matches += local.matches;
        _accumulators[worker].result.checksum += local.checksum;
        if (--_probes_left[p] == 0) {
            release_table(worker, p);
        }
    }

    tasking::Runtime &_runtime;
    MicroJoinConfig _config;
    std::size_t _fragment_stride{0}; // arena tuples per fragment slot (header + capacity)
    std::size_t _chunk_tuples{0};    // arena tuples per chunk of fragment slots
    std::size_t _partitions;
    Side _build_side;
    Side _probe_side;
    std::vector<Producer> _build_producers;
    std::vector<Producer> _probe_producers;
    std::unique_ptr<tasking::Squad[]> _build_squads;
    std::unique_ptr<tasking::Squad[]> _probe_squads;
    std::vector<tasking::Squad *> _build_squad_list;
    std::vector<tasking::Squad *> _probe_squad_list;
    // Table arena (and the slots below). Partition p's table is written by the worker running
    // p's build squad and read by the worker running p's probe squad: the same worker right after
    // the build (fused), or any worker after the build phase's wait() (phased).
    TupleBuffer _table_tuples;
    std::vector<std::uint32_t> _table_next;
    std::vector<std::uint32_t> _table_heads;
    std::vector<PartitionHashTable> _tables;
    // 0 = no build tuple yet, 1 = built, 2 = probing started. Per partition, written only by the
    // worker running that partition's squad in the current phase.
    std::vector<std::uint8_t> _table_ready;
    // Build tasks of the partition still to run; set by lay_out_tables() (the last producer, or
    // run() in the phased schedule) before the squads are published, counted down by the worker
    // running the partition's build squad.
    std::vector<std::uint32_t> _builds_left;
    // Probe tasks of the partition still to run (same writers as _builds_left, probe squads).
    std::vector<std::uint32_t> _probes_left;
    // Slot of the partition's table or no_slot (arena); written by the worker running the
    // partition's squads.
    std::vector<std::uint32_t> _table_slot;
    // Written by lay_out_tables() before the squads are published, read by the build and probe
    // tasks.
    std::vector<std::size_t> _partition_offsets;
    std::vector<std::size_t> _head_offsets;
    // Fused schedule only: table_slots_per_worker slots per worker. A pool (free slots, most
    // recently freed last) is reset by run() between phases and otherwise used only by tasks
    // running on its worker; a line each.
    static constexpr std::uint32_t no_slot = ~std::uint32_t{0};
    struct alignas(system::cache_line_size) SlotPool {
        std::vector<std::uint32_t> free;
    };
    std::size_t _slot_capacity{0}; // tuples per slot (0: no slots)
    std::size_t _slot_buckets{0};  // buckets per slot
    std::vector<std::uint32_t> _slot_heads;
    std::vector<std::uint32_t> _slot_next;
    TupleBuffer _slot_tuples;
    std::vector<SlotPool> _slot_pools;
    std::vector<Accumulator> _accumulators;
    // Partition phase: producer tasks still running (counted down by each); the last one writes
    // _partition_ns and _join_squads, read by run() after wait(). _start is set by run() before
    // the producers are spawned.
    std::atomic<std::uint32_t> _producers_left{0};
    std::chrono::steady_clock::time_point _start;
    std::uint64_t _partition_ns{0};
    std::vector<tasking::Squad *> _join_squads;
};

} // namespace mx::join
