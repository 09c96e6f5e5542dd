// Stream processing with the dataflow layer: sensor readings arrive in batches, a filter drops
// faulty readings, a windowed aggregation keeps per-(sensor, second) statistics in worker-local
// tables that a merge tree of tasks combines, and the ten hottest windows are printed. The result
// is checked against a plain sequential computation.
//
//   sensors (source) -> filter -> window aggregate (worker-local, merge tree) -> top 10 (sink)

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <mx/dataflow/graph.h>
#include <mx/system/cpu.h>
#include <mx/tasking/runtime.h>

namespace {

using mx::dataflow::DispatchTarget;
using mx::dataflow::FlowContext;
using mx::dataflow::Node;
using mx::dataflow::Token;

struct Reading {
    std::uint32_t sensor;
    std::uint32_t millisecond;
    std::int32_t celsius_tenths; // faulty sensors report values out of range
};

/// One batch of the stream: the readings and which of them passed the filter. Only the tasks of
/// one token touch a batch, one after the other.
struct Batch {
    std::vector<Reading> readings;
    std::vector<std::uint32_t> selected;
};

struct Window {
    std::uint64_t count{0};
    std::int64_t sum{0};
    std::int32_t max{std::numeric_limits<std::int32_t>::min()};
};
using WindowKey = std::pair<std::uint32_t, std::uint32_t>; // (sensor, second)
using WindowTable = std::map<WindowKey, Window>;

void add(Window &window, std::int32_t value) {
    ++window.count;
    window.sum += value;
    window.max = std::max(window.max, value);
}

/// Source: sends every batch to a NUMA region in turn (its memory would live there).
class Sensors final : public Node {
public:
    explicit Sensors(std::vector<Batch> &batches) : Node("sensors"), _batches(batches) {}
    void start(FlowContext &context) noexcept override {
        for (std::size_t i = 0; i < _batches.size(); ++i) {
            const auto region = static_cast<std::uint8_t>(i % context.region_count());
            context.dispatch(Token{&_batches[i], i}, DispatchTarget::region(region));
        }
    }
    void consume(FlowContext &context, Token token) noexcept override { context.emit(token); }

private:
    std::vector<Batch> &_batches;
};

class Filter final : public Node {
public:
    Filter() : Node("filter") {}
    void consume(FlowContext &context, Token token) noexcept override {
        auto &batch = *static_cast<Batch *>(token.data);
        batch.selected.clear();
        for (std::uint32_t i = 0; i < batch.readings.size(); ++i) {
            const std::int32_t value = batch.readings[i].celsius_tenths;
            if (value > -400 && value < 1000) {
                batch.selected.push_back(i);
            }
        }
        context.emit(token);
    }
    // The prefetch callback brings the head of the batch into the cache before the task runs.
    void prefetch(const Token &token) const noexcept override {
        const auto &batch = *static_cast<const Batch *>(token.data);
        mx::system::prefetch(batch.readings.data());
        mx::system::prefetch(reinterpret_cast<const char *>(batch.readings.data()) +
                             mx::system::cache_line_size);
    }
    [[nodiscard]] bool has_prefetch() const noexcept override { return true; }
};

/// Tumbling one-second windows per sensor. Consume tasks update their worker's table; the merge
/// tree folds the tables pairwise; finalize sends the ten hottest windows on.
class WindowAggregate final : public Node {
public:
    WindowAggregate() : Node("window_aggregate") {}
    void prepare(std::uint16_t workers, std::uint16_t /*regions*/) override {
        _tables.assign(workers, {});
        _top.clear();
    }
    void consume(FlowContext &context, Token token) noexcept override {
        const auto &batch = *static_cast<const Batch *>(token.data);
        WindowTable &table = _tables[context.worker_id()];
        for (const std::uint32_t i : batch.selected) {
            const Reading &reading = batch.readings[i];
            add(table[{reading.sensor, reading.millisecond / 1000}], reading.celsius_tenths);
        }
    }
    [[nodiscard]] std::uint32_t merge_inputs(std::uint16_t workers) const noexcept override {
        return workers;
    }
    void merge(FlowContext & /*context*/, std::uint32_t into, std::uint32_t from) noexcept override {
        for (const auto &[key, window] : _tables[from]) {
            Window &target = _tables[into][key];
            target.count += window.count;
            target.sum += window.sum;
            target.max = std::max(target.max, window.max);
        }
        _tables[from].clear();
    }
    void finalize(FlowContext &context) noexcept override {
        // After the merge tree every window is in table 0.
        for (const auto &[key, window] : _tables[0]) {
            _top.push_back({key, window});
        }
        std::sort(_top.begin(), _top.end(), hotter);
        _top.resize(std::min<std::size_t>(_top.size(), 10));
        for (std::size_t i = 0; i < _top.size(); ++i) {
            context.emit(Token{&_top[i], i});
        }
    }
    using Entry = std::pair<WindowKey, Window>;
    static bool hotter(const Entry &a, const Entry &b) {
        // Average first (cross-multiplied, exact: sums and counts stay far below 2^31), then the
        // key for a stable order.
        const std::int64_t left = a.second.sum * static_cast<std::int64_t>(b.second.count);
        const std::int64_t right = b.second.sum * static_cast<std::int64_t>(a.second.count);
        return left != right ? left > right : a.first < b.first;
    }

private:
    std::vector<WindowTable> _tables; // one per worker, then merged into [0]
    std::vector<Entry> _top;          // written by finalize, read by the sink's consume tasks
};

/// Sink: collects the top windows (one task each) and keeps them in rank order.
class TopWindows final : public Node {
public:
    TopWindows() : Node("top_windows") {}
    void prepare(std::uint16_t workers, std::uint16_t /*regions*/) override { _received.assign(workers, {}); }
    void consume(FlowContext &context, Token token) noexcept override {
        _received[context.worker_id()].emplace_back(token.value,
                                                    *static_cast<const WindowAggregate::Entry *>(token.data));
    }
    void finalize(FlowContext & /*context*/) noexcept override {
        std::vector<std::pair<std::uint64_t, WindowAggregate::Entry>> all;
        for (const auto &part : _received) {
            all.insert(all.end(), part.begin(), part.end());
        }
        std::sort(all.begin(), all.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
        result.clear();
        for (const auto &[rank, entry] : all) {
            result.push_back(entry);
        }
    }
    std::vector<WindowAggregate::Entry> result; // written by finalize, read after the run

private:
    std::vector<std::vector<std::pair<std::uint64_t, WindowAggregate::Entry>>> _received; // per worker
};

std::vector<Batch> generate(std::uint32_t batches, std::uint32_t per_batch) {
    std::mt19937 random{42};
    std::vector<Batch> stream(batches);
    std::uint32_t millisecond = 0;
    for (Batch &batch : stream) {
        for (std::uint32_t i = 0; i < per_batch; ++i) {
            const auto sensor = static_cast<std::uint32_t>(random() % 64);
            // Sensor 13 is faulty now and then; sensor 7 runs hot.
            std::int32_t value = 150 + static_cast<std::int32_t>(random() % 200) + (sensor == 7 ? 300 : 0);
            if (sensor == 13 && random() % 10 == 0) {
                value = 32767;
            }
            batch.readings.push_back(Reading{sensor, millisecond, value});
            millisecond += static_cast<std::uint32_t>(random() % 3);
        }
    }
    return stream;
}

std::vector<WindowAggregate::Entry> sequential(const std::vector<Batch> &stream) {
    WindowTable table;
    for (const Batch &batch : stream) {
        for (const Reading &reading : batch.readings) {
            if (reading.celsius_tenths > -400 && reading.celsius_tenths < 1000) {
                add(table[{reading.sensor, reading.millisecond / 1000}], reading.celsius_tenths);
            }
        }
    }
    std::vector<WindowAggregate::Entry> top(table.begin(), table.end());
    std::sort(top.begin(), top.end(), WindowAggregate::hotter);
    top.resize(std::min<std::size_t>(top.size(), 10));
    return top;
}

} // namespace

int main() {
    mx::tasking::Runtime runtime{};
    std::vector<Batch> stream = generate(400, 512);

    mx::dataflow::Graph graph;
    auto &sensors = graph.add<Sensors>(stream);
    auto &filter = graph.add<Filter>();
    auto &aggregate = graph.add<WindowAggregate>();
    auto &top = graph.add<TopWindows>();
    graph.connect(sensors, filter);
    graph.connect(filter, aggregate);
    graph.connect(aggregate, top);
    std::printf("%s", graph.describe().c_str());

    const mx::dataflow::RunResult result = mx::dataflow::run(runtime, graph);
    if (!result.ok) {
        std::fprintf(stderr, "stream processing failed: %s\n", result.error.c_str());
        return 1;
    }
    std::printf("%zu readings on %u workers in %.2f ms; hottest one-second windows:\n",
                stream.size() * stream.front().readings.size(), unsigned{runtime.worker_count()},
                static_cast<double>(result.elapsed.count()) / 1e6);
    for (const auto &[key, window] : top.result) {
        std::printf("  sensor %2u  second %3u  avg %5.1f C  max %5.1f C  (%llu readings)\n", key.first,
                    key.second, static_cast<double>(window.sum) / static_cast<double>(window.count) / 10.0,
                    static_cast<double>(window.max) / 10.0, static_cast<unsigned long long>(window.count));
    }

    const auto expected = sequential(stream);
    bool same = expected.size() == top.result.size();
    for (std::size_t i = 0; same && i < expected.size(); ++i) {
        const auto &a = expected[i];
        const auto &b = top.result[i];
        same = a.first == b.first && a.second.count == b.second.count && a.second.sum == b.second.sum &&
               a.second.max == b.second.max;
    }
    std::printf("%s\n",
                same ? "matches the sequential computation" : "MISMATCH with the sequential computation");
    return same ? 0 : 1;
}
