// Task timeline traces: starting and stopping the recording (the hand-shake with the workers),
// and writing a recorded trace as Chrome Trace Event JSON or CSV. The recording itself is in the
// worker loop (worker.cpp, idle.cpp, stealing.cpp); docs/design/tracing.md explains the design.

#include "mx/tasking/trace.h"

#include "mx/tasking/runtime.h"

#include <cxxabi.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <thread>
#include <typeinfo>
#include <unordered_map>

namespace mx::tasking {

namespace {

constexpr std::uint32_t default_events_per_worker = 1U << 18U;

std::int64_t steady_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

const char *primitive_name(std::uint16_t primitive) noexcept {
    switch (static_cast<sync::Primitive>(primitive)) {
    case sync::Primitive::none:
        return "none";
    case sync::Primitive::spinlock:
        return "spinlock";
    case sync::Primitive::rw_latch:
        return "rw_latch";
    case sync::Primitive::optimistic_latched:
        return "optimistic_latched";
    case sync::Primitive::optimistic_scheduled:
        return "optimistic_scheduled";
    case sync::Primitive::scheduling:
        return "scheduling";
    case sync::Primitive::htm:
        return "htm";
    }
    return "unknown";
}

const char *kind_name(TraceEventKind kind) noexcept {
    switch (kind) {
    case TraceEventKind::task:
        return "task";
    case TraceEventKind::idle:
        return "idle";
    case TraceEventKind::sleep:
        return "sleep";
    case TraceEventKind::steal_tasks:
        return "steal_tasks";
    case TraceEventKind::steal_domain:
        return "steal_domain";
    case TraceEventKind::span:
        return "span";
    }
    return "unknown";
}

std::string demangle(const char *mangled) {
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> text{abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                                     &std::free};
    return status == 0 && text ? std::string{text.get()} : std::string{mangled};
}

/// Names of events, each type demangled once per file.
class Names {
public:
    explicit Names(const Trace &trace) : _trace(&trace) {}
    const std::string &operator()(const TraceEvent &event) {
        const void *key =
            event.kind == TraceEventKind::task || event.kind == TraceEventKind::span ? event.what : nullptr;
        if (key == nullptr) {
            return _kinds[static_cast<std::size_t>(event.kind)] = _trace->name(event);
        }
        auto [it, inserted] = _cache.try_emplace(key);
        if (inserted) {
            it->second = _trace->name(event);
        }
        return it->second;
    }

private:
    const Trace *_trace;
    std::unordered_map<const void *, std::string> _cache;
    std::string _kinds[8];
};

/// Output that goes to a string or a file, through the same formatting code.
class Sink {
public:
    explicit Sink(std::FILE *file) noexcept : _file(file) {}
    explicit Sink(std::string &text) noexcept : _text(&text) {}
    void put(std::string_view text) {
        if (_file != nullptr) {
            _failed = _failed || std::fwrite(text.data(), 1, text.size(), _file) != text.size();
        } else {
            _text->append(text);
        }
    }
    template <class... Args>
    void printf(const char *format, Args... args) {
        char line[256];
        const int length = std::snprintf(line, sizeof(line), format, args...);
        put(std::string_view{line, static_cast<std::size_t>(std::clamp(length, 0, int{sizeof(line) - 1}))});
    }
    [[nodiscard]] bool failed() const noexcept { return _failed; }

private:
    std::FILE *_file{nullptr};
    std::string *_text{nullptr};
    bool _failed{false};
};

void put_json_string(Sink &out, std::string_view text) {
    out.put("\"");
    std::size_t begin = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == '"' || c == '\\' || c < 0x20) {
            out.put(text.substr(begin, i - begin));
            if (c == '"' || c == '\\') {
                const char escaped[2] = {'\\', static_cast<char>(c)};
                out.put(std::string_view{escaped, 2});
            } else {
                out.printf("\\u%04x", unsigned{c});
            }
            begin = i + 1;
        }
    }
    out.put(text.substr(begin));
    out.put("\"");
}

/// `"ts":...,"dur":...` in microseconds with three decimals, written from whole nanoseconds so
/// that start plus duration is the end exactly.
void put_json_interval(Sink &out, const Trace &trace, std::uint64_t start_tsc, std::uint64_t end_tsc) {
    const std::int64_t start = trace.nanoseconds(start_tsc);
    const std::int64_t duration = std::max<std::int64_t>(trace.nanoseconds(end_tsc) - start, 0);
    const auto magnitude = static_cast<std::uint64_t>(start < 0 ? -start : start);
    out.printf("\"ts\":%s%" PRIu64 ".%03" PRIu64 ",\"dur\":%" PRId64 ".%03" PRId64, start < 0 ? "-" : "",
               magnitude / 1000, magnitude % 1000, duration / 1000, duration % 1000);
}

void put_csv_string(Sink &out, std::string_view text) {
    out.put("\"");
    std::size_t begin = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '"') {
            out.put(text.substr(begin, i + 1 - begin));
            out.put("\"");
            begin = i + 1;
        }
    }
    out.put(text.substr(begin));
    out.put("\"");
}

/// Per span (sorted by start), the track it goes on: the first whose last span ended by its start.
std::vector<std::size_t> span_lanes(const std::vector<TraceEvent> &spans) {
    std::vector<std::size_t> lanes(spans.size(), 0);
    std::vector<std::uint64_t> lane_end;
    for (std::size_t i = 0; i < spans.size(); ++i) {
        std::size_t lane = 0;
        while (lane < lane_end.size() && static_cast<std::int64_t>(spans[i].start - lane_end[lane]) < 0) {
            ++lane;
        }
        if (lane == lane_end.size()) {
            lane_end.push_back(0);
        }
        lane_end[lane] = spans[i].end;
        lanes[i] = lane;
    }
    return lanes;
}

void write_json(const Trace &trace, Sink &out) {
    Names names{trace};
    out.printf("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"mxtasking\",\"workers\":%zu,"
               "\"events\":%" PRIu64 ",\"dropped\":%" PRIu64
               ",\"cycles_per_us\":%.3f,\"dropped_per_worker\":[",
               trace.workers.size(), trace.events(), trace.dropped(), trace.cycles_per_us);
    for (std::size_t w = 0; w < trace.workers.size(); ++w) {
        out.printf(w == 0 ? "%" PRIu64 : ",%" PRIu64, trace.workers[w].dropped);
    }
    out.put("]},\n\"traceEvents\":[\n");
    out.put("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"mxtasking\"}}");
    for (std::size_t w = 0; w < trace.workers.size(); ++w) {
        out.printf(",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%zu,\"args\":{\"name\":"
                   "\"worker %zu\"}}",
                   trace_first_tid + w, w);
        out.printf(",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%zu,\"args\":{\"sort_"
                   "index\":%zu}}",
                   trace_first_tid + w, w);
    }
    for (std::size_t w = 0; w < trace.workers.size(); ++w) {
        for (const TraceEvent &event : trace.workers[w].events) {
            out.put(",\n{\"name\":");
            put_json_string(out, names(event));
            out.printf(",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%zu,", kind_name(event.kind),
                       trace_first_tid + w);
            put_json_interval(out, trace, event.start, event.end);
            out.put(",\"args\":{");
            switch (event.kind) {
            case TraceEventKind::task:
                out.printf("\"tasks\":%u,\"resource\":\"0x%" PRIx64
                           "\",\"primitive\":\"%s\",\"stolen\":%s,\"bypassed\":%s,"
                           "\"squad\":%s,\"cycles\":%" PRIu64,
                           event.count, event.resource, primitive_name(event.other),
                           (event.flags & trace_stolen) != 0 ? "true" : "false",
                           (event.flags & trace_bypassed) != 0 ? "true" : "false",
                           (event.flags & trace_squad) != 0 ? "true" : "false", event.end - event.start);
                if ((event.flags & trace_queued) != 0) {
                    out.printf(",\"queue_us\":%.3f", static_cast<double>(event.queue_cycles) /
                                                         trace.cycles_per_us /
                                                         static_cast<double>(std::max(event.count, 1U)));
                }
                out.printf(",\"retries\":%u,\"prefetch_distance\":%.2f}}", event.retries,
                           static_cast<double>(event.prefetch_distance) /
                               static_cast<double>(std::max(event.count, 1U)));
                break;
            case TraceEventKind::steal_tasks:
                out.printf("\"tasks\":%u,\"victim\":%u}}", event.count, unsigned{event.other});
                break;
            case TraceEventKind::steal_domain:
                out.printf("\"domain\":%u}}", unsigned{event.other});
                break;
            default:
                out.put("}}");
                break;
            }
        }
    }
    // Spans on tracks of their own ("pipelines"): a track holds spans that do not overlap, so
    // viewers draw each as a slice (overlapping slices on one track would have to nest).
    const std::vector<std::size_t> lanes = span_lanes(trace.spans);
    const std::size_t first_tid = trace_first_tid + trace.workers.size();
    const std::size_t lane_count = lanes.empty() ? 0 : *std::max_element(lanes.begin(), lanes.end()) + 1;
    for (std::size_t lane = 0; lane < lane_count; ++lane) {
        out.printf(",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%zu,\"args\":{\"name\":"
                   "\"%s\"}}",
                   first_tid + lane,
                   lane == 0 ? "pipelines" : ("pipelines " + std::to_string(lane + 1)).c_str());
        out.printf(",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%zu,\"args\":{\"sort_"
                   "index\":%zu}}",
                   first_tid + lane, trace.workers.size() + lane);
    }
    for (std::size_t i = 0; i < trace.spans.size(); ++i) {
        const TraceEvent &span = trace.spans[i];
        out.put(",\n{\"name\":");
        put_json_string(out, names(span));
        out.printf(",\"cat\":\"span\",\"ph\":\"X\",\"pid\":1,\"tid\":%zu,", first_tid + lanes[i]);
        put_json_interval(out, trace, span.start, span.end);
        out.put(",\"args\":{}}");
    }
    out.put("\n]}\n");
}

void write_csv(const Trace &trace, Sink &out) {
    Names names{trace};
    out.printf("# mxtasking trace: workers=%zu events=%" PRIu64 " dropped=%" PRIu64 " cycles_per_us=%.3f\n",
               trace.workers.size(), trace.events(), trace.dropped(), trace.cycles_per_us);
    out.put(
        "worker,kind,name,start_us,duration_us,start_tsc,end_tsc,resource,primitive,stolen,bypassed,squad,"
        "count,other,queued,queue_cycles,retries,prefetch_distance\n");
    const auto line = [&](const std::string &worker, const TraceEvent &event) {
        const double start = trace.microseconds(event.start);
        out.put(worker);
        out.printf(",%s,", kind_name(event.kind));
        put_csv_string(out, names(event));
        const bool task = event.kind == TraceEventKind::task;
        out.printf(",%.3f,%.3f,%" PRIu64 ",%" PRIu64 ",0x%" PRIx64 ",%s,%d,%d,%d,%u,%u,%d,%" PRIu64
                   ",%u,%u\n",
                   start, trace.microseconds(event.end) - start, event.start, event.end, event.resource,
                   task ? primitive_name(event.other) : "", (event.flags & trace_stolen) != 0 ? 1 : 0,
                   (event.flags & trace_bypassed) != 0 ? 1 : 0, (event.flags & trace_squad) != 0 ? 1 : 0,
                   event.count, task ? 0U : unsigned{event.other}, (event.flags & trace_queued) != 0 ? 1 : 0,
                   event.queue_cycles, event.retries, event.prefetch_distance);
    };
    for (std::size_t w = 0; w < trace.workers.size(); ++w) {
        const std::string worker = std::to_string(w);
        for (const TraceEvent &event : trace.workers[w].events) {
            line(worker, event);
        }
    }
    for (const TraceEvent &span : trace.spans) {
        line("", span);
    }
}

bool ends_with(std::string_view text, std::string_view suffix) noexcept {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

} // namespace

// ---- Trace ---------------------------------------------------------------------------------

std::uint64_t Trace::events() const noexcept {
    std::uint64_t sum = spans.size();
    for (const auto &worker : workers) {
        sum += worker.events.size();
    }
    return sum;
}

std::uint64_t Trace::dropped() const noexcept {
    std::uint64_t sum = 0;
    for (const auto &worker : workers) {
        sum += worker.dropped;
    }
    return sum;
}

std::string Trace::name(const TraceEvent &event) const {
    if (event.kind != TraceEventKind::task && event.kind != TraceEventKind::span) {
        return kind_name(event.kind);
    }
    if (event.what == nullptr) {
        return "task";
    }
    if ((event.flags & trace_label) != 0) {
        return static_cast<const char *>(event.what);
    }
    return demangle(static_cast<const std::type_info *>(event.what)->name());
}

double Trace::microseconds(std::uint64_t tsc) const noexcept {
    // Signed: an interval that began just before the origin (on another core's counter) stays
    // in place instead of wrapping around.
    return static_cast<double>(static_cast<std::int64_t>(tsc - origin_tsc)) / cycles_per_us;
}

std::int64_t Trace::nanoseconds(std::uint64_t tsc) const noexcept {
    return std::llround(static_cast<double>(static_cast<std::int64_t>(tsc - origin_tsc)) * 1000.0 /
                        cycles_per_us);
}

std::vector<TaskProfile> Trace::profile() const {
    std::vector<TaskProfile> rows;
    Names names{*this};
    for (std::size_t w = 0; w < workers.size(); ++w) {
        std::unordered_map<std::string, std::size_t> index;
        for (const TraceEvent &event : workers[w].events) {
            if (event.kind != TraceEventKind::task) {
                continue;
            }
            const std::string &name = names(event);
            auto [it, inserted] = index.try_emplace(name, rows.size());
            if (inserted) {
                rows.push_back(TaskProfile{.name = name, .worker = static_cast<std::uint16_t>(w)});
            }
            TaskProfile &row = rows[it->second];
            row.tasks += event.count;
            row.total_cycles += event.end - event.start;
            row.stolen += (event.flags & trace_stolen) != 0 ? event.count : 0U;
            row.bypassed += (event.flags & trace_bypassed) != 0 ? event.count : 0U;
            if ((event.flags & trace_queued) != 0) {
                row.queued += event.count;
                row.queue_cycles += event.queue_cycles;
            }
            row.retries += event.retries;
            row.prefetch_distance += event.prefetch_distance;
        }
    }
    std::sort(rows.begin(), rows.end(), [](const TaskProfile &a, const TaskProfile &b) {
        return a.total_cycles != b.total_cycles ? a.total_cycles > b.total_cycles : a.worker < b.worker;
    });
    return rows;
}

std::string Trace::profile_table() const {
    const std::vector<TaskProfile> rows = profile();
    std::vector<TaskProfile> totals;
    std::unordered_map<std::string, std::size_t> index;
    for (const TaskProfile &row : rows) {
        auto [it, inserted] = index.try_emplace(row.name, totals.size());
        if (inserted) {
            totals.push_back(TaskProfile{.name = row.name});
        }
        TaskProfile &total = totals[it->second];
        total.tasks += row.tasks;
        total.total_cycles += row.total_cycles;
        total.stolen += row.stolen;
        total.bypassed += row.bypassed;
        total.queued += row.queued;
        total.queue_cycles += row.queue_cycles;
        total.retries += row.retries;
        total.prefetch_distance += row.prefetch_distance;
    }
    std::string text;
    Sink out{text};
    out.printf("%-8s %12s %16s %12s %12s %10s %8s %10s %10s  %s\n", "worker", "tasks", "total_cycles",
               "mean_cycles", "mean_queue", "retries", "prefetch", "stolen", "bypassed", "task");
    const auto line = [&out](const TaskProfile &row, const char *worker) {
        out.printf("%-8s %12" PRIu64 " %16" PRIu64 " %12.1f %12.1f %10" PRIu64 " %8.2f %10" PRIu64
                   " %10" PRIu64 "  ",
                   worker, row.tasks, row.total_cycles, row.mean_cycles(), row.mean_queue_cycles(),
                   row.retries, row.mean_prefetch_distance(), row.stolen, row.bypassed);
        out.put(row.name);
        out.put("\n");
    };
    for (const TaskProfile &total : totals) {
        line(total, "all");
        for (const TaskProfile &row : rows) {
            if (row.name == total.name) {
                line(row, std::to_string(row.worker).c_str());
            }
        }
    }
    out.put("(cycles of the time-stamp counter; mean_queue: spawn to start, over the tasks spawned while "
            "recording; prefetch: mean prefetch distance in tasks)\n");
    if (dropped() > 0) {
        out.printf("(%" PRIu64 " events dropped: the buffers were full; counts are lower bounds)\n",
                   dropped());
    }
    return text;
}

std::string Trace::to_json() const {
    std::string text;
    Sink out{text};
    write_json(*this, out);
    return text;
}

std::string Trace::to_csv() const {
    std::string text;
    Sink out{text};
    write_csv(*this, out);
    return text;
}

TraceWriteResult Trace::write(const std::string &path) const {
    TraceWriteResult result;
    result.events = events();
    result.dropped = dropped();
    std::FILE *file = std::fopen(path.c_str(), "w");
    if (file == nullptr) {
        result.error = "cannot write trace to '" + path + "': " + std::strerror(errno);
        return result;
    }
    Sink out{file};
    if (ends_with(path, ".csv")) {
        write_csv(*this, out);
    } else {
        write_json(*this, out);
    }
    const bool closed = std::fclose(file) == 0;
    if (out.failed() || !closed) {
        result.error = "cannot write trace to '" + path + "': " + std::strerror(errno);
    }
    return result;
}

// ---- Runtime -------------------------------------------------------------------------------

std::string Runtime::start_trace(const TraceConfig &config) { return _core->start_trace(config); }

std::optional<Trace> Runtime::stop_trace() {
    Trace trace;
    std::string error;
    if (!_core->stop_trace(trace, error)) {
        return std::nullopt;
    }
    return trace;
}

TraceWriteResult Runtime::stop_trace(const std::string &path) {
    Trace trace;
    std::string error;
    if (!_core->stop_trace(trace, error)) {
        TraceWriteResult result;
        result.error = error;
        return result;
    }
    return trace.write(path);
}

bool Runtime::tracing() const noexcept { return _core->tracing(); }

void Runtime::trace_span(const char *label, std::uint64_t start_tsc, std::uint64_t end_tsc) {
    if (detail::Worker *worker = detail::current_worker();
        worker != nullptr && &worker->core() == _core.get()) {
        worker->trace_span(label, start_tsc, end_tsc);
    } else {
        _core->trace_span_external(label, start_tsc, end_tsc);
    }
}

void Runtime::start_env_trace() {
    const char *path = std::getenv("MX_TRACE");
    const char *profile = std::getenv("MX_TRACE_PROFILE");
    const bool wants_profile = profile != nullptr && *profile != '\0' && std::string_view{profile} != "0";
    if ((path == nullptr || *path == '\0') && !wants_profile) {
        return;
    }
    // A profile is asked for to see where time went: with queue times.
    if (const std::string error = start_trace(TraceConfig{.queue_times = wants_profile}); !error.empty()) {
        std::fprintf(stderr, "mxtasking: MX_TRACE: %s\n", error.c_str());
        return;
    }
    _core->env_trace_path = path != nullptr ? path : "";
    _core->env_trace_profile = wants_profile;
    _core->env_tracing = true;
}

void Runtime::stop_env_trace() noexcept {
    if (!_core->env_tracing || !_core->tracing()) {
        return;
    }
    _core->env_tracing = false;
    try {
        const std::optional<Trace> trace = stop_trace();
        if (!trace) {
            return;
        }
        if (!_core->env_trace_path.empty()) {
            const TraceWriteResult result = trace->write(_core->env_trace_path);
            if (result.ok()) {
                std::fprintf(stderr,
                             "mxtasking: trace written to %s (%" PRIu64 " events, %" PRIu64 " dropped)\n",
                             _core->env_trace_path.c_str(), result.events, result.dropped);
            } else {
                std::fprintf(stderr, "mxtasking: MX_TRACE: %s\n", result.error.c_str());
            }
        }
        if (_core->env_trace_profile) {
            std::fprintf(stderr, "mxtasking: profile of this runtime's life (MX_TRACE_PROFILE):\n%s",
                         trace->profile_table().c_str());
        }
    } catch (const std::exception &error) {
        std::fprintf(stderr, "mxtasking: MX_TRACE: %s\n", error.what());
    }
}

namespace detail {

// ---- the hand-shake with the workers -------------------------------------------------------

void Worker::prepare_trace(const TraceConfig &config, std::uint32_t capacity, std::uint64_t origin) {
    _trace.storage.assign(capacity, TraceEvent{}); // touched now, not on the first events
    _trace.run_limit = config.merge_equal_tasks ? Worker::max_traced_run : 1U;
    _trace.queue_times = config.queue_times;
    _trace.origin = origin;
    _trace.pending_spans.clear();
    _trace.pending_spans.reserve(64); // spans come at pipeline granularity: rarely grows
    _trace.open = TraceEvent{};
    _trace.size = 0;
    _trace.dropped = 0;
    _trace.stolen_until = 0;
}

Trace::Worker Worker::take_trace() {
    Trace::Worker result;
    // A span still waiting for its task's slice (a task that never closed one) ends where it began.
    for (const std::uint32_t index : _trace.pending_spans) {
        _trace.storage[index].end = _trace.storage[index].start;
    }
    _trace.pending_spans.clear();
    _trace.storage.resize(_trace.size);
    result.events = std::move(_trace.storage);
    result.dropped = _trace.dropped;
    _trace.storage = {};
    _trace.size = 0;
    _trace.dropped = 0;
    return result;
}

std::string RuntimeCore::start_trace(const TraceConfig &config) {
#if MX_TRACING
    if (const Worker *worker = current_worker(); worker != nullptr && &worker->core() == this) {
        return "start_trace cannot be called from a task of the same runtime";
    }
    std::lock_guard lock{_trace_mutex};
    const std::uint32_t generation = _trace_generation.load(std::memory_order_relaxed);
    if ((generation & 1U) != 0) {
        return "a trace is already being recorded (stop_trace first)";
    }
    std::uint32_t capacity = config.events_per_worker;
    if (capacity == 0) {
        capacity = default_events_per_worker;
        if (const char *text = std::getenv("MX_TRACE_EVENTS"); text != nullptr && *text != '\0') {
            char *end = nullptr;
            const unsigned long long value = std::strtoull(text, &end, 10);
            if (*end != '\0' || value == 0 || value > 0xFFFFFFFFULL) {
                return std::string{"MX_TRACE_EVENTS: '"} + text +
                       "' is not a number of events from 1 to 4294967295";
            }
            capacity = static_cast<std::uint32_t>(value);
        }
    }
    // Every worker acknowledged the last stop (or never traced): nobody touches the buffers.
    _trace_origin_ns = steady_ns();
    _trace_origin_tsc = system::cycles();
    for (auto &worker : _workers) {
        worker->prepare_trace(config, capacity, _trace_origin_tsc);
    }
    _trace_queue_times.store(config.queue_times, std::memory_order_relaxed);
    {
        const std::lock_guard spans{_external_spans_mutex};
        _external_spans.clear();
    }
    _trace_generation.store(generation + 1, std::memory_order_seq_cst);
    // Every task spawned after this returns is recorded: wait until each worker took the
    // generation on (at its next round; a sleeping one is woken for it) or has left its loop.
    await_workers(generation + 1);
    return {};
#else
    static_cast<void>(config);
    return "tracing is compiled out of this build (CMake option MX_TRACING=OFF)";
#endif
}

void RuntimeCore::await_workers(std::uint32_t generation) noexcept {
    // A sleeping worker would not come round to its loop: wake it (Dekker with sleep()).
    for (auto &worker : _workers) {
        worker->wake();
    }
    // Each worker notices at its next round (after the task it runs now) or has left its loop.
    for (auto &worker : _workers) {
        while (!worker->acknowledged(generation)) {
            std::this_thread::sleep_for(std::chrono::microseconds{50});
        }
    }
}

void RuntimeCore::trace_span_external(const char *label, std::uint64_t start, std::uint64_t end) {
    if (!tracing()) {
        return;
    }
    const std::lock_guard lock{_external_spans_mutex};
    _external_spans.push_back(TraceEvent{.start = start,
                                         .end = end == trace_until_task_end ? system::cycles() : end,
                                         .what = label,
                                         .kind = TraceEventKind::span,
                                         .flags = trace_label});
}

bool RuntimeCore::stop_trace(Trace &trace, std::string &error) {
    if (const Worker *worker = current_worker(); worker != nullptr && &worker->core() == this) {
        error = "stop_trace cannot be called from a task of the same runtime";
        return false;
    }
    std::lock_guard lock{_trace_mutex};
    const std::uint32_t generation = _trace_generation.load(std::memory_order_relaxed);
    if ((generation & 1U) == 0) {
        error = "no trace is being recorded (start_trace first)";
        return false;
    }
    std::uint64_t end_tsc = system::cycles();
    std::int64_t end_ns = steady_ns();
    const std::uint32_t stopped = generation + 1;
    _trace_generation.store(stopped, std::memory_order_seq_cst);
    await_workers(stopped);
    // The counter rate, from the recorded interval; a very short one is stretched to 2 ms.
    if (end_ns - _trace_origin_ns < 2'000'000) {
        const std::int64_t until = _trace_origin_ns + 2'000'000;
        while (steady_ns() < until) {
            std::this_thread::yield();
        }
        end_tsc = system::cycles();
        end_ns = steady_ns();
    }
    trace.origin_tsc = _trace_origin_tsc;
    trace.cycles_per_us = static_cast<double>(end_tsc - _trace_origin_tsc) /
                          (static_cast<double>(end_ns - _trace_origin_ns) / 1000.0);
    trace.workers.clear();
    trace.spans.clear();
    for (auto &worker : _workers) {
        trace.workers.push_back(worker->take_trace());
        // Spans go to their own track: out of the worker's events.
        auto &events = trace.workers.back().events;
        const auto spans = std::stable_partition(events.begin(), events.end(), [](const TraceEvent &event) {
            return event.kind != TraceEventKind::span;
        });
        trace.spans.insert(trace.spans.end(), spans, events.end());
        events.erase(spans, events.end());
    }
    {
        const std::lock_guard spans{_external_spans_mutex};
        trace.spans.insert(trace.spans.end(), _external_spans.begin(), _external_spans.end());
        _external_spans.clear();
    }
    std::stable_sort(trace.spans.begin(), trace.spans.end(),
                     [](const TraceEvent &a, const TraceEvent &b) { return a.start < b.start; });
    return true;
}

} // namespace detail

} // namespace mx::tasking
