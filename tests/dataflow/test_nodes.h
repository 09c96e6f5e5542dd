#pragma once

// Synthetic operators for the dataflow tests. Each keeps its counters worker-local in plain
// (non-atomic) fields that only the layer's ordering makes safe to read in finalize: under TSan a
// missing happens-before edge in the counting protocol shows up as a race, and a consume task that
// ran after finalize shows up as a "late" count.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <mx/dataflow/graph.h>
#include <mx/system/cpu.h>

namespace mx::test::dataflow {

using mx::dataflow::DispatchTarget;
using mx::dataflow::FlowContext;
using mx::dataflow::Node;
using mx::dataflow::Token;

/// A global order of events (finalize, start) across every node, to check that something
/// happened before something else.
inline std::atomic<std::uint64_t> &event_clock() {
    static std::atomic<std::uint64_t> clock{1};
    return clock;
}
inline std::uint64_t tick() { return event_clock().fetch_add(1, std::memory_order_acq_rel); }

/// Busy work so that tasks of different nodes overlap and queues fill up.
inline void spin(std::uint32_t rounds) noexcept {
    volatile std::uint64_t sink = 0;
    for (std::uint32_t i = 0; i < rounds; ++i) {
        sink = sink + i;
    }
}

struct alignas(system::cache_line_size) Partial {
    std::uint64_t count{0};
    std::uint64_t sum{0};
};

/// How a node sends tokens: where start() puts a source's tokens, and where finalize() emits.
enum class Send : std::uint8_t {
    none,         ///< nothing (finalize) / not used for sources
    dispatch_any, ///< source: dispatch(any)
    dispatch_worker,
    dispatch_region,
    emit_local,  ///< start()/finalize(): emit(token) straight to the successors on this worker
    emit_worker, ///< start()/finalize(): emit(token, worker i % workers)
    emit_region,
    emit_any,
};

struct OpConfig {
    std::uint64_t source_tokens{0}; ///< a source's tokens carry values 1..n
    Send source_send{Send::dispatch_any};
    std::uint64_t add{0};  ///< every consumed token v is forwarded as v + add
    bool forward{true};    ///< forward consumed tokens at all
    std::uint32_t spin{0}; ///< busy work per consumed token
    std::uint32_t finalize_tokens{0};
    Send finalize_send{Send::none};
    std::uint64_t finalize_value{1000};
    bool use_parts{false}; ///< aggregate through finalize parts and a merge tree
};

/// The universal test operator: counts and sums what it consumes (worker-local), forwards
/// tokens, emits in finalize, optionally aggregates through parts + merge tree, and records
/// ordering violations.
class Op final : public Node {
public:
    Op(std::string name, OpConfig config) : Node(std::move(name)), _config(config) {}

    void prepare(std::uint16_t workers, std::uint16_t regions) override {
        _workers = workers;
        _regions = regions;
        _slots = std::make_unique<Partial[]>(workers);
        _partials = std::make_unique<Partial[]>(workers);
        _merged_into = std::vector<std::uint32_t>(workers, 0);
        _merged_away = std::vector<std::uint32_t>(workers, 0);
        _finalized.store(false, std::memory_order_relaxed);
        late.store(0, std::memory_order_relaxed);
        bad_merges.store(0, std::memory_order_relaxed);
        finalize_calls = 0;
        started_at = 0;
        finalized_at = 0;
        final_count = 0;
        final_sum = 0;
    }

    void start(FlowContext &context) noexcept override {
        started_at = tick();
        for (std::uint64_t value = 1; value <= _config.source_tokens; ++value) {
            send(context, _config.source_send, Token{nullptr, value}, value);
        }
    }

    void consume(FlowContext &context, Token token) noexcept override {
        if (_finalized.load(std::memory_order_relaxed)) {
            late.fetch_add(1, std::memory_order_relaxed);
        }
        spin(_config.spin);
        Partial &slot = _slots[context.worker_id()];
        ++slot.count;
        slot.sum += token.value;
        if (_config.forward) {
            context.emit(Token{token.data, token.value + _config.add});
        }
    }

    [[nodiscard]] std::uint32_t finalize_parts(std::uint16_t workers) const noexcept override {
        return _config.use_parts ? workers : 0U;
    }
    void finalize_part(FlowContext &context, std::uint32_t part) noexcept override {
        if (context.worker_id() != part % context.worker_count()) {
            bad_merges.fetch_add(1, std::memory_order_relaxed);
        }
        _partials[part] = _slots[part];
    }
    [[nodiscard]] std::uint32_t merge_inputs(std::uint16_t workers) const noexcept override {
        return _config.use_parts ? workers : 0U;
    }
    void merge(FlowContext & /*context*/, std::uint32_t into, std::uint32_t from) noexcept override {
        // `from` must be final: every merge into it happened, and it was not merged before.
        if (_merged_into[from] != expected_merges_into(from, _workers) || _merged_away[from] != 0 ||
            _merged_away[into] != 0) {
            bad_merges.fetch_add(1, std::memory_order_relaxed);
        }
        _partials[into].count += _partials[from].count;
        _partials[into].sum += _partials[from].sum;
        ++_merged_into[into];
        ++_merged_away[from];
    }

    void finalize(FlowContext &context) noexcept override {
        ++finalize_calls;
        Partial total;
        if (_config.use_parts) {
            for (std::uint32_t i = 0; i < _workers; ++i) {
                const std::uint32_t expected_away = i == 0 ? 0U : 1U;
                if (_merged_into[i] != expected_merges_into(i, _workers) ||
                    _merged_away[i] != expected_away) {
                    bad_merges.fetch_add(1, std::memory_order_relaxed);
                }
            }
            total = _partials[0];
        } else {
            for (std::uint32_t i = 0; i < _workers; ++i) {
                total.count += _slots[i].count;
                total.sum += _slots[i].sum;
            }
        }
        final_count = total.count;
        final_sum = total.sum;
        _finalized.store(true, std::memory_order_relaxed);
        finalized_at = tick();
        for (std::uint32_t i = 0; i < _config.finalize_tokens; ++i) {
            send(context, _config.finalize_send, Token{nullptr, _config.finalize_value}, i);
        }
    }

    /// Merges into `index` in the layer's binary tree over n inputs.
    static std::uint32_t expected_merges_into(std::uint32_t index, std::uint32_t n) noexcept {
        std::uint32_t merges = 0;
        for (std::uint32_t level = 1; (1U << (level - 1U)) < n; ++level) {
            if (index % (1U << level) == 0 && index + (1U << (level - 1U)) < n) {
                ++merges;
            }
        }
        return merges;
    }

    [[nodiscard]] const OpConfig &config() const noexcept { return _config; }

    // Results, read by the test thread after the run (run() orders them).
    std::atomic<std::uint64_t> late{0};
    std::atomic<std::uint64_t> bad_merges{0};
    std::uint32_t finalize_calls{0};
    std::uint64_t started_at{0};
    std::uint64_t finalized_at{0};
    std::uint64_t final_count{0};
    std::uint64_t final_sum{0};

private:
    void send(FlowContext &context, Send how, Token token, std::uint64_t index) const noexcept {
        const auto worker = static_cast<std::uint16_t>(index % _workers);
        const auto region = static_cast<std::uint8_t>(index % _regions);
        switch (how) {
        case Send::none:
            return;
        case Send::dispatch_any:
            context.dispatch(token, DispatchTarget::any());
            return;
        case Send::dispatch_worker:
            context.dispatch(token, DispatchTarget::worker(worker));
            return;
        case Send::dispatch_region:
            context.dispatch(token, DispatchTarget::region(region));
            return;
        case Send::emit_local:
            context.emit(token);
            return;
        case Send::emit_worker:
            context.emit(token, DispatchTarget::worker(worker));
            return;
        case Send::emit_region:
            context.emit(token, DispatchTarget::region(region));
            return;
        case Send::emit_any:
            context.emit(token, DispatchTarget::any());
            return;
        }
    }

    OpConfig _config;
    std::uint16_t _workers{1};
    std::uint16_t _regions{1};
    // Per worker, written by consume tasks on that worker only; read by finalize parts/finalize.
    std::unique_ptr<Partial[]> _slots;
    // Per finalize part, written by the part, then by merges; read by finalize.
    std::unique_ptr<Partial[]> _partials;
    std::vector<std::uint32_t> _merged_into; // written by merges into the index
    std::vector<std::uint32_t> _merged_away; // written by the merge folding the index away
    // Set by finalize, read by consume tasks (a set flag there means the node ended too early).
    std::atomic<bool> _finalized{false};
};

} // namespace mx::test::dataflow
