// Task timeline traces: a trace of a known task graph holds exactly the tasks that ran, on the
// workers that ran them, as well-formed slices (ends after starts, no overlap on one worker,
// monotonic); the JSON parses and the CSV has its columns; recording starts and stops while
// tasks run; a full buffer drops and counts; an unwritable path is an error and the runtime goes
// on; the profile's queue times, optimistic retries and prefetch distances; user spans.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <mx/tasking/runtime.h>
#include <mx/tasking/trace.h>

#include "support/runtime_fixture.h"

namespace {

using mx::tasking::Task;
using mx::tasking::TaskContext;
using mx::tasking::TaskResult;
using mx::tasking::Trace;
using mx::tasking::TraceConfig;
using mx::tasking::TraceEvent;
using mx::tasking::TraceEventKind;
using mx::test::PaddedCounter;
using mx::test::scaled;

// ---- a small JSON reader, enough to check the file's structure ------------------------------

struct Json {
    enum class Type { null, boolean, number, string, array, object } type{Type::null};
    double number{0};
    bool boolean{false};
    std::string string;
    std::vector<Json> array;
    std::map<std::string, Json> object;

    [[nodiscard]] const Json *get(const std::string &key) const {
        const auto it = object.find(key);
        return it == object.end() ? nullptr : &it->second;
    }
    /// The member `key`, or a null value when it is missing (a failed check, not a crash).
    [[nodiscard]] const Json &at(const std::string &key) const {
        static const Json missing;
        const auto it = object.find(key);
        return it == object.end() ? missing : it->second;
    }
};

class JsonReader {
public:
    explicit JsonReader(std::string_view text) : _text(text) {}

    /// The document, or nullopt with error() saying where it is malformed.
    std::optional<Json> read() {
        Json value;
        if (!value_at(value)) {
            return std::nullopt;
        }
        skip_space();
        if (_at != _text.size()) {
            return fail("text after the document");
        }
        return value;
    }
    [[nodiscard]] const std::string &error() const { return _error; }

private:
    std::nullopt_t fail(const std::string &why) {
        if (_error.empty()) {
            _error = why + " at offset " + std::to_string(_at);
        }
        return std::nullopt;
    }
    void skip_space() {
        while (_at < _text.size() && std::isspace(static_cast<unsigned char>(_text[_at])) != 0) {
            ++_at;
        }
    }
    bool literal(std::string_view word) {
        if (_text.substr(_at, word.size()) != word) {
            return false;
        }
        _at += word.size();
        return true;
    }
    bool string_at(std::string &out) {
        if (_at >= _text.size() || _text[_at] != '"') {
            fail("expected a string");
            return false;
        }
        ++_at;
        while (_at < _text.size() && _text[_at] != '"') {
            char c = _text[_at++];
            if (static_cast<unsigned char>(c) < 0x20) {
                fail("control character in a string");
                return false;
            }
            if (c == '\\') {
                if (_at >= _text.size()) {
                    break;
                }
                const char escaped = _text[_at++];
                if (escaped == 'u') {
                    if (_at + 4 > _text.size()) {
                        break;
                    }
                    c = static_cast<char>(std::stoi(std::string{_text.substr(_at, 4)}, nullptr, 16));
                    _at += 4;
                } else if (std::string_view{"\"\\/bfnrt"}.find(escaped) == std::string_view::npos) {
                    fail("bad escape");
                    return false;
                } else {
                    c = escaped;
                }
            }
            out.push_back(c);
        }
        if (_at >= _text.size()) {
            fail("unterminated string");
            return false;
        }
        ++_at;
        return true;
    }
    bool value_at(Json &value) { // NOLINT(misc-no-recursion): nesting is shallow
        skip_space();
        if (_at >= _text.size()) {
            fail("unexpected end");
            return false;
        }
        const char c = _text[_at];
        if (c == '{') {
            value.type = Json::Type::object;
            ++_at;
            skip_space();
            if (_at < _text.size() && _text[_at] == '}') {
                ++_at;
                return true;
            }
            while (true) {
                skip_space();
                std::string key;
                if (!string_at(key)) {
                    return false;
                }
                skip_space();
                if (_at >= _text.size() || _text[_at] != ':') {
                    fail("expected ':'");
                    return false;
                }
                ++_at;
                Json member;
                if (!value_at(member)) {
                    return false;
                }
                value.object[key] = std::move(member);
                skip_space();
                if (_at < _text.size() && _text[_at] == ',') {
                    ++_at;
                    continue;
                }
                if (_at < _text.size() && _text[_at] == '}') {
                    ++_at;
                    return true;
                }
                fail("expected ',' or '}'");
                return false;
            }
        }
        if (c == '[') {
            value.type = Json::Type::array;
            ++_at;
            skip_space();
            if (_at < _text.size() && _text[_at] == ']') {
                ++_at;
                return true;
            }
            while (true) {
                Json element;
                if (!value_at(element)) {
                    return false;
                }
                value.array.push_back(std::move(element));
                skip_space();
                if (_at < _text.size() && _text[_at] == ',') {
                    ++_at;
                    continue;
                }
                if (_at < _text.size() && _text[_at] == ']') {
                    ++_at;
                    return true;
                }
                fail("expected ',' or ']'");
                return false;
            }
        }
        if (c == '"') {
            value.type = Json::Type::string;
            return string_at(value.string);
        }
        if (literal("true") || literal("false")) {
            value.type = Json::Type::boolean;
            value.boolean = _text[_at - 1] == 'e' && _text[_at - 2] == 'u';
            return true;
        }
        if (literal("null")) {
            return true;
        }
        const std::size_t begin = _at;
        while (_at < _text.size() &&
               std::string_view{"+-.eE0123456789"}.find(_text[_at]) != std::string_view::npos) {
            ++_at;
        }
        if (begin == _at) {
            fail("unexpected character");
            return false;
        }
        value.type = Json::Type::number;
        value.number = std::stod(std::string{_text.substr(begin, _at - begin)});
        return true;
    }

    std::string_view _text;
    std::size_t _at{0};
    std::string _error;
};

TEST(TraceJsonReader, RejectsMalformedDocuments) {
    // The checker must be able to fail, or the JSON tests below prove nothing.
    EXPECT_FALSE(JsonReader{"{\"a\":1,}"}.read());
    EXPECT_FALSE(JsonReader{"[1 2]"}.read());
    EXPECT_FALSE(JsonReader{"{\"a\":\"b}"}.read());
    EXPECT_FALSE(JsonReader{"{} x"}.read());
    const auto ok = JsonReader{R"({"a":[1,-2.5e3,"x\"y",true,null]})"}.read();
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->at("a").array.size(), 5U);
    EXPECT_EQ(ok->at("a").array[2].string, "x\"y");
}

// ---- tasks of the known graph ------------------------------------------------------------

/// Counts where it ran; shows up in the trace under its label.
class LeafTask final : public Task {
public:
    explicit LeafTask(std::vector<PaddedCounter> &ran) noexcept : _ran(&ran) {}
    TaskResult execute(TaskContext &context) noexcept override {
        (*_ran)[context.worker_id()].value.fetch_add(1, std::memory_order_relaxed);
        return TaskResult::remove();
    }
    [[nodiscard]] const char *trace_label() const noexcept override { return "leaf"; }

private:
    std::vector<PaddedCounter> *_ran;
};

/// Hands `remaining` successors of its own type over by bypass.
class ChainTask final : public Task {
public:
    ChainTask(std::uint32_t remaining, std::vector<PaddedCounter> &ran) noexcept
        : _remaining(remaining), _ran(&ran) {}
    TaskResult execute(TaskContext &context) noexcept override {
        (*_ran)[context.worker_id()].value.fetch_add(1, std::memory_order_relaxed);
        if (_remaining == 0) {
            return TaskResult::remove();
        }
        return TaskResult::bypass_and_remove(context.new_task<ChainTask>(_remaining - 1, *_ran));
    }

private:
    std::uint32_t _remaining;
    std::vector<PaddedCounter> *_ran;
};

class TraceTest : public mx::test::RuntimeFixture {
protected:
    void SetUp() override {
        if (!MX_TRACING) {
            GTEST_SKIP() << "tracing compiled out (MX_TRACING=OFF)";
        }
        RuntimeFixture::SetUp();
    }

    void check_known_graph(bool merge);

    std::vector<PaddedCounter> _leaves_ran = std::vector<PaddedCounter>(8);
    std::vector<PaddedCounter> _chain_ran = std::vector<PaddedCounter>(8);
};

/// Slices of one worker that must not overlap: everything but sleep (nested in its idle).
void expect_well_formed(const Trace &trace) {
    for (std::size_t w = 0; w < trace.workers.size(); ++w) {
        std::uint64_t last_end = 0;
        std::vector<const TraceEvent *> flat;
        for (const TraceEvent &event : trace.workers[w].events) {
            EXPECT_LE(event.start, event.end) << "worker " << w << ": a slice ends before it starts";
            if (event.kind == TraceEventKind::task) {
                // Tasks are recorded as they finish, one after another: monotonic.
                EXPECT_GE(event.start, last_end) << "worker " << w << ": tasks overlap or go back in time";
                last_end = event.end;
            }
            if (event.kind != TraceEventKind::sleep) {
                flat.push_back(&event);
            }
        }
        std::sort(flat.begin(), flat.end(), [](const auto *a, const auto *b) { return a->start < b->start; });
        for (std::size_t i = 1; i < flat.size(); ++i) {
            EXPECT_GE(flat[i]->start, flat[i - 1]->end)
                << "worker " << w << ": " << trace.name(*flat[i - 1]) << " overlaps " << trace.name(*flat[i]);
        }
        // An idle slice is recorded when the idle ends, after the sleeps inside it: a full buffer
        // may keep a sleep and drop its idle, so nesting holds only when nothing was dropped.
        for (const TraceEvent &event : trace.workers[w].events) {
            if (event.kind == TraceEventKind::sleep && trace.workers[w].dropped == 0) {
                const bool nested = std::any_of(flat.begin(), flat.end(), [&](const TraceEvent *idle) {
                    return idle->kind == TraceEventKind::idle && idle->start <= event.start &&
                           event.end <= idle->end;
                });
                EXPECT_TRUE(nested) << "worker " << w << ": a sleep outside any idle interval";
            }
        }
    }
}

/// The JSON's slices as a viewer reads them (microseconds to whole nanoseconds): on each track
/// a slice either starts at or after the end of the one around it or ends inside it. A slice that
/// ends a nanosecond late is dropped by ui.perfetto.dev as an overlapping event.
void expect_json_slices_nest(const Json &document) {
    struct Slice {
        std::int64_t start;
        std::int64_t end;
        std::string name;
    };
    std::map<double, std::vector<Slice>> tracks;
    for (const Json &event : document.at("traceEvents").array) {
        if (event.at("ph").string == "X") {
            const std::int64_t start = std::llround(event.at("ts").number * 1000.0);
            tracks[event.at("tid").number].push_back(
                Slice{start, start + std::llround(event.at("dur").number * 1000.0), event.at("name").string});
        }
    }
    for (auto &[tid, slices] : tracks) {
        std::sort(slices.begin(), slices.end(), [](const Slice &a, const Slice &b) {
            return a.start != b.start ? a.start < b.start : a.end > b.end;
        });
        std::vector<const Slice *> open;
        for (const Slice &slice : slices) {
            while (!open.empty() && open.back()->end <= slice.start) {
                open.pop_back();
            }
            if (!open.empty()) {
                EXPECT_LE(slice.end, open.back()->end)
                    << "track " << tid << ": " << slice.name << " overlaps " << open.back()->name
                    << " without nesting";
            }
            open.push_back(&slice);
        }
    }
}

/// Tasks of this name the worker's events hold (an event may stand for a run of equal tasks).
std::uint64_t count_named(const Trace &trace, std::size_t worker, const std::string &name) {
    std::uint64_t tasks = 0;
    for (const TraceEvent &event : trace.workers[worker].events) {
        if (event.kind == TraceEventKind::task && trace.name(event) == name) {
            EXPECT_GE(event.count, 1U);
            tasks += event.count;
        }
    }
    return tasks;
}

TEST_P(TraceTest, KnownGraphHoldsExactlyTheTasksThatRan) {
    for (const bool merge : {true, false}) {
        SCOPED_TRACE(merge ? "equal tasks merged" : "an event per task");
        check_known_graph(merge);
    }
}

void TraceTest::check_known_graph(bool merge) {
    for (auto &counter : _leaves_ran) {
        counter.value.store(0);
    }
    for (auto &counter : _chain_ran) {
        counter.value.store(0);
    }
    ASSERT_EQ(runtime().start_trace(TraceConfig{.merge_equal_tasks = merge}), "");
    EXPECT_TRUE(runtime().tracing());
    const std::uint32_t leaves = scaled(3000);
    const std::uint32_t chains = 20;
    const std::uint32_t chain_length = 5;
    runtime().spawn([&, leaves](TaskContext &context) {
        for (std::uint32_t i = 0; i < leaves; ++i) {
            context.spawn(*context.new_task<LeafTask>(_leaves_ran));
        }
        for (std::uint32_t i = 0; i < chains; ++i) {
            context.spawn(*context.new_task<ChainTask>(chain_length - 1, _chain_ran));
        }
    });
    runtime().wait();
    const std::optional<Trace> trace = runtime().stop_trace();
    ASSERT_TRUE(trace);
    EXPECT_FALSE(runtime().tracing());
    ASSERT_EQ(trace->workers.size(), workers());
    EXPECT_EQ(trace->dropped(), 0U);
    expect_well_formed(*trace);

    const std::string chain_name = trace->name(TraceEvent{.what = &typeid(ChainTask)});
    EXPECT_NE(chain_name.find("ChainTask"), std::string::npos) << chain_name;
    std::uint64_t leaf_events = 0;
    std::uint64_t chain_events = 0;
    std::uint64_t bypassed = 0;
    std::uint64_t other_tasks = 0;
    for (std::size_t w = 0; w < workers(); ++w) {
        // Exactly the tasks that ran, on the worker that ran them.
        EXPECT_EQ(count_named(*trace, w, "leaf"), _leaves_ran[w].value.load()) << "worker " << w;
        EXPECT_EQ(count_named(*trace, w, chain_name), _chain_ran[w].value.load()) << "worker " << w;
        for (const TraceEvent &event : trace->workers[w].events) {
            if (event.kind != TraceEventKind::task) {
                continue;
            }
            const std::string name = trace->name(event);
            if (!merge) {
                EXPECT_EQ(event.count, 1U);
            }
            if (name == "leaf") {
                leaf_events += event.count;
                EXPECT_EQ(event.flags & mx::tasking::trace_bypassed, 0U);
            } else if (name == chain_name) {
                chain_events += event.count;
                bypassed += (event.flags & mx::tasking::trace_bypassed) != 0 ? event.count : 0U;
            } else {
                other_tasks += event.count; // the root lambda
                EXPECT_NE(name.find("LambdaTask"), std::string::npos) << name;
            }
        }
    }
    EXPECT_EQ(leaf_events, leaves);
    EXPECT_EQ(chain_events, chains * chain_length);
    // Every chain link after the first ran as its predecessor's bypass successor.
    EXPECT_EQ(bypassed, chains * (chain_length - 1));
    EXPECT_EQ(other_tasks, 1U);

    // The profile counts the same tasks per name and worker.
    std::uint64_t profiled_leaves = 0;
    std::uint64_t profiled_bypasses = 0;
    for (const mx::tasking::TaskProfile &row : trace->profile()) {
        if (row.name == "leaf") {
            EXPECT_EQ(row.tasks, _leaves_ran[row.worker].value.load()) << "worker " << row.worker;
            profiled_leaves += row.tasks;
        } else if (row.name == chain_name) {
            EXPECT_EQ(row.tasks, _chain_ran[row.worker].value.load()) << "worker " << row.worker;
            profiled_bypasses += row.bypassed;
        }
    }
    EXPECT_EQ(profiled_leaves, leaves);
    EXPECT_EQ(profiled_bypasses, chains * (chain_length - 1));
    EXPECT_NE(trace->profile_table().find("leaf"), std::string::npos);
}

TEST_P(TraceTest, StolenTasksAreMarkedAndTheStealsRecorded) {
    if (workers() < 2) {
        GTEST_SKIP() << "nobody to steal";
    }
    ASSERT_EQ(runtime().start_trace(), "");
    // The root spawns for itself and then waits inside its task: only thieves run the leaves.
    const std::uint32_t leaves = scaled(1000);
    std::atomic<std::uint16_t> root_worker{0};
    runtime().spawn([&, leaves](TaskContext &context) {
        root_worker.store(context.worker_id());
        for (std::uint32_t i = 0; i < leaves; ++i) {
            context.spawn(*context.new_task<LeafTask>(_leaves_ran));
        }
        const auto done = [&] {
            std::uint64_t sum = 0;
            for (const auto &counter : _leaves_ran) {
                sum += counter.value.load(std::memory_order_acquire);
            }
            return sum >= leaves;
        };
        ASSERT_TRUE(mx::test::eventually(done));
    });
    runtime().wait();
    const std::optional<Trace> trace = runtime().stop_trace();
    ASSERT_TRUE(trace);
    expect_well_formed(*trace);
    std::uint64_t stolen_leaves = 0;
    std::uint64_t steal_count = 0;
    for (std::size_t w = 0; w < workers(); ++w) {
        for (const TraceEvent &event : trace->workers[w].events) {
            if (event.kind == TraceEventKind::steal_tasks) {
                EXPECT_NE(event.other, w) << "a worker stole from itself";
                steal_count += event.count;
            } else if (event.kind == TraceEventKind::task && trace->name(event) == "leaf") {
                EXPECT_NE(w, root_worker.load());
                EXPECT_NE(event.flags & mx::tasking::trace_stolen, 0U) << "a leaf ran on a thief unmarked";
                stolen_leaves += event.count;
            }
        }
    }
    EXPECT_EQ(stolen_leaves, leaves);
    EXPECT_GE(steal_count, stolen_leaves);
}

TEST_P(TraceTest, JsonParsesWithOneTrackPerWorkerAndCsvHasItsColumns) {
    ASSERT_EQ(runtime().start_trace(), "");
    const std::uint32_t leaves = scaled(500);
    for (std::uint32_t i = 0; i < leaves; ++i) {
        runtime().spawn(*runtime().new_task<LeafTask>(_leaves_ran));
        if (i % 50 == 0) {
            // Slices of another type that meet the leaves' slices end to end.
            runtime().spawn(*runtime().new_task<ChainTask>(3U, _chain_ran));
        }
    }
    runtime().wait();
    const std::optional<Trace> trace = runtime().stop_trace();
    ASSERT_TRUE(trace);

    const std::string json = trace->to_json();
    JsonReader reader{json};
    const std::optional<Json> document = reader.read();
    ASSERT_TRUE(document) << reader.error();
    const Json *events = document->get("traceEvents");
    ASSERT_NE(events, nullptr);
    ASSERT_EQ(events->type, Json::Type::array);
    std::vector<std::uint64_t> leaves_per_track(workers());
    std::vector<bool> named(workers());
    std::uint64_t slices = 0;
    for (const Json &event : events->array) {
        ASSERT_EQ(event.type, Json::Type::object);
        const Json *phase = event.get("ph");
        ASSERT_TRUE(phase != nullptr && event.get("name") != nullptr);
        if (event.at("name").string == "process_name") {
            continue;
        }
        const Json *tid = event.get("tid");
        ASSERT_NE(tid, nullptr);
        ASSERT_GE(tid->number, mx::tasking::trace_first_tid) << "tid 0 is dropped by viewers";
        ASSERT_LT(tid->number, mx::tasking::trace_first_tid + workers());
        const auto track = static_cast<std::size_t>(tid->number) - mx::tasking::trace_first_tid;
        if (phase->string == "M" && event.at("name").string == "thread_name") {
            named[track] = true;
            EXPECT_EQ(event.at("args").at("name").string, "worker " + std::to_string(track));
            continue;
        }
        if (phase->string != "X") {
            continue;
        }
        ++slices;
        ASSERT_TRUE(event.get("ts") != nullptr && event.get("dur") != nullptr);
        EXPECT_GE(event.at("dur").number, 0.0);
        if (event.at("name").string == "leaf") {
            leaves_per_track[track] += static_cast<std::uint64_t>(event.at("args").at("tasks").number);
            EXPECT_EQ(event.at("cat").string, "task");
            EXPECT_EQ(event.at("args").at("stolen").type, Json::Type::boolean);
        }
    }
    EXPECT_EQ(slices, trace->events());
    expect_json_slices_nest(*document);
    for (std::size_t w = 0; w < workers(); ++w) {
        EXPECT_TRUE(named[w]) << "no track name for worker " << w;
        EXPECT_EQ(leaves_per_track[w], _leaves_ran[w].value.load()) << "worker " << w;
    }
    const Json *other = document->get("otherData");
    ASSERT_NE(other, nullptr);
    EXPECT_EQ(other->at("dropped").number, 0.0);
    EXPECT_EQ(other->at("events").number, static_cast<double>(trace->events()));

    // CSV: a comment line, a header, one line per event with 18 fields (the name quoted).
    std::istringstream csv{trace->to_csv()};
    std::string line;
    ASSERT_TRUE(std::getline(csv, line));
    EXPECT_EQ(line.rfind("# mxtasking trace:", 0), 0U) << line;
    ASSERT_TRUE(std::getline(csv, line));
    EXPECT_EQ(line,
              "worker,kind,name,start_us,duration_us,start_tsc,end_tsc,resource,primitive,stolen,bypassed,"
              "squad,count,other,queued,queue_cycles,retries,prefetch_distance");
    std::uint64_t rows = 0;
    std::uint64_t leaf_rows = 0;
    while (std::getline(csv, line)) {
        ++rows;
        std::size_t fields = 1;
        bool quoted = false;
        for (const char c : line) {
            quoted = c == '"' ? !quoted : quoted;
            fields += (!quoted && c == ',') ? 1U : 0U;
        }
        EXPECT_EQ(fields, 18U) << line;
        if (line.find(",task,\"leaf\",") != std::string::npos) {
            // No commas inside this name: the 13th field is the task count.
            std::istringstream fields_of{line};
            std::string field;
            for (int f = 0; f < 13; ++f) {
                std::getline(fields_of, field, ',');
            }
            leaf_rows += std::stoull(field);
        }
    }
    EXPECT_EQ(rows, trace->events());
    EXPECT_EQ(leaf_rows, leaves);
}

TEST_P(TraceTest, StartAndStopWhileTasksRun) {
    // Tasks keep respawning themselves on every worker while the test thread starts and stops
    // traces; ThreadSanitizer checks the hand-over of the buffers.
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> ran{0};
    struct Respawn {
        std::atomic<bool> *stop;
        std::atomic<std::uint64_t> *ran;
        TaskResult operator()(TaskContext &context) const noexcept {
            ran->fetch_add(1, std::memory_order_relaxed);
            if (stop->load(std::memory_order_acquire)) {
                return TaskResult::remove();
            }
            return TaskResult::successor_and_remove(context.new_task(Respawn{*this}));
        }
    };
    for (std::uint16_t w = 0; w < workers(); ++w) {
        runtime().spawn(*runtime().new_task(Respawn{&stop, &ran}));
    }
    const int rounds = mx::test::tsan_build ? 4 : 10;
    std::uint64_t traced_tasks = 0;
    for (int round = 0; round < rounds; ++round) {
        ASSERT_EQ(runtime().start_trace(TraceConfig{.events_per_worker = 4096}), "");
        EXPECT_NE(runtime().start_trace(), "") << "a second start while recording must be refused";
        std::this_thread::sleep_for(std::chrono::milliseconds{2});
        const std::optional<Trace> trace = runtime().stop_trace();
        ASSERT_TRUE(trace);
        expect_well_formed(*trace);
        for (const auto &worker : trace->workers) {
            EXPECT_LE(worker.events.size(), 4096U);
            traced_tasks += static_cast<std::uint64_t>(
                std::count_if(worker.events.begin(), worker.events.end(),
                              [](const TraceEvent &event) { return event.kind == TraceEventKind::task; }));
        }
    }
    stop.store(true, std::memory_order_release);
    runtime().wait();
    EXPECT_GT(traced_tasks, 0U);
    EXPECT_LE(traced_tasks, ran.load());
    EXPECT_FALSE(runtime().stop_trace()) << "stop without a trace must be refused";
}

TEST_P(TraceTest, FullBufferDropsAndCounts) {
    constexpr std::uint32_t capacity = 16;
    ASSERT_EQ(runtime().start_trace(TraceConfig{.events_per_worker = capacity, .merge_equal_tasks = false}),
              "");
    const std::uint32_t leaves = scaled(2000);
    for (std::uint32_t i = 0; i < leaves; ++i) {
        runtime().spawn(*runtime().new_task<LeafTask>(_leaves_ran));
    }
    runtime().wait();
    const std::optional<Trace> trace = runtime().stop_trace();
    ASSERT_TRUE(trace);
    std::uint64_t leaf_events = 0;
    for (std::size_t w = 0; w < workers(); ++w) {
        EXPECT_LE(trace->workers[w].events.size(), capacity);
        leaf_events += count_named(*trace, w, "leaf");
    }
    // Every event was either kept or counted as dropped.
    EXPECT_GE(leaf_events + trace->dropped(), leaves);
    EXPECT_GE(trace->dropped(), leaves - capacity * workers());
    expect_well_formed(*trace);
    const std::string json = trace->to_json();
    JsonReader reader{json};
    const std::optional<Json> document = reader.read();
    ASSERT_TRUE(document) << reader.error();
    EXPECT_EQ(document->at("otherData").at("dropped").number, static_cast<double>(trace->dropped()));
}

/// A labelled task that does nothing (its queue time is what a test looks at).
class NamedTask final : public Task {
public:
    NamedTask(const char *label, const mx::tasking::Annotation &annotation) noexcept
        : Task(annotation), _label(label) {}
    TaskResult execute(TaskContext &) noexcept override { return TaskResult::remove(); }
    [[nodiscard]] const char *trace_label() const noexcept override { return _label; }

private:
    const char *_label;
};

/// The profile rows of `name` summed over the workers.
mx::tasking::TaskProfile profile_of(const Trace &trace, const std::string &name) {
    mx::tasking::TaskProfile sum{.name = name};
    for (const mx::tasking::TaskProfile &row : trace.profile()) {
        if (row.name == name) {
            sum.tasks += row.tasks;
            sum.queued += row.queued;
            sum.queue_cycles += row.queue_cycles;
            sum.retries += row.retries;
            sum.prefetch_distance += row.prefetch_distance;
        }
    }
    return sum;
}

void busy_for(std::chrono::microseconds duration) noexcept {
    const auto until = std::chrono::steady_clock::now() + duration;
    while (std::chrono::steady_clock::now() < until) {
    }
}

TEST_P(TraceTest, QueueTimeIsFromSpawnToStart) {
    constexpr std::chrono::microseconds delay{3000};
    ASSERT_EQ(runtime().start_trace(TraceConfig{.queue_times = true}), "");
    // From a task: the successor is pinned to the spawner's worker, which stays busy for `delay`
    // after the spawn, so the successor waits at least that long in the worker's queue.
    runtime().spawn(
        [delay](TaskContext &context) {
            context.spawn(
                *context.new_task<NamedTask>("delayed", mx::tasking::Annotation{.target_worker = 0}));
            busy_for(delay);
        },
        mx::tasking::Annotation{.target_worker = 0});
    runtime().wait();
    // From outside the runtime: queued behind a task that holds worker 0 until released.
    std::atomic<bool> release{false};
    runtime().spawn([&release] { mx::test::spin_until(release); },
                    mx::tasking::Annotation{.target_worker = 0});
    runtime().spawn(*runtime().new_task<NamedTask>("late", mx::tasking::Annotation{.target_worker = 0}));
    std::this_thread::sleep_for(delay);
    release.store(true, std::memory_order_release);
    // Not delayed: spawned and run right away on idle workers.
    for (int i = 0; i < 8; ++i) {
        runtime().spawn(*runtime().new_task<NamedTask>("prompt", mx::tasking::Annotation{}));
        runtime().wait();
    }
    runtime().wait();
    const std::optional<Trace> trace = runtime().stop_trace();
    ASSERT_TRUE(trace);
    const double at_least = static_cast<double>(delay.count()) * 0.9 * trace->cycles_per_us;
    for (const char *name : {"delayed", "late"}) {
        const mx::tasking::TaskProfile row = profile_of(*trace, name);
        EXPECT_EQ(row.tasks, 1U) << name;
        ASSERT_EQ(row.queued, 1U) << name << ": spawned while recording, so it has a queue time";
        EXPECT_GE(row.mean_queue_cycles(), at_least) << name;
    }
    const mx::tasking::TaskProfile prompt = profile_of(*trace, "prompt");
    EXPECT_EQ(prompt.queued, 8U);
    const std::string table = trace->profile_table();
    EXPECT_NE(table.find("mean_queue"), std::string::npos) << table;
    // The JSON carries each slice's mean queue time.
    const std::string json = trace->to_json();
    JsonReader reader{json};
    const std::optional<Json> document = reader.read();
    ASSERT_TRUE(document) << reader.error();
    bool seen = false;
    for (const Json &event : document->at("traceEvents").array) {
        if (event.at("name").string == "late") {
            seen = true;
            EXPECT_GE(event.at("args").at("queue_us").number, static_cast<double>(delay.count()) * 0.9);
        }
    }
    EXPECT_TRUE(seen);

    // Without queue times (the default): the same tasks carry none (their stale stamps from the
    // trace above are not taken for this one's).
    ASSERT_EQ(runtime().start_trace(), "");
    runtime().spawn(
        [delay](TaskContext &context) {
            context.spawn(
                *context.new_task<NamedTask>("delayed", mx::tasking::Annotation{.target_worker = 0}));
            busy_for(delay);
        },
        mx::tasking::Annotation{.target_worker = 0});
    runtime().wait();
    const std::optional<Trace> without = runtime().stop_trace();
    ASSERT_TRUE(without);
    EXPECT_EQ(profile_of(*without, "delayed").tasks, 1U);
    EXPECT_EQ(profile_of(*without, "delayed").queued, 0U);
}

/// Reads the resource optimistically; its first run waits inside the read until a writer changed
/// the resource, so that run's validation fails and the task runs again.
class ConflictedReader final : public Task {
public:
    ConflictedReader(const mx::tasking::Annotation &annotation, std::atomic<bool> &reading,
                     std::atomic<bool> &written) noexcept
        : Task(annotation), _reading(&reading), _written(&written) {}
    TaskResult execute(TaskContext &) noexcept override {
        if (!_reading->exchange(true, std::memory_order_acq_rel)) {
            mx::test::spin_until(*_written);
        }
        return TaskResult::remove();
    }
    [[nodiscard]] const char *trace_label() const noexcept override { return "conflicted reader"; }

private:
    std::atomic<bool> *_reading;
    std::atomic<bool> *_written;
};

std::uint64_t optimistic_retries(const mx::tasking::Runtime &runtime) {
    std::uint64_t sum = 0;
    for (const auto &stats : runtime.statistics()) {
        sum += stats.optimistic_retries;
    }
    return sum;
}

TEST_P(TraceTest, OptimisticRetriesAreCountedPerTaskType) {
    if (workers() < 2) {
        GTEST_SKIP() << "the conflicting writer needs a second worker";
    }
    const mx::tasking::ResourcePtr resource = runtime().new_resource<std::uint64_t>(
        mx::tasking::ResourceAnnotation{.primitive = mx::sync::Primitive::optimistic_latched}, 0U);
    std::atomic<bool> reading{false};
    std::atomic<bool> written{false};
    const std::uint64_t retries_before = optimistic_retries(runtime());
    ASSERT_EQ(runtime().start_trace(), "");
    runtime().spawn(*runtime().new_task<ConflictedReader>(
        mx::tasking::Annotation{
            .target_worker = 0, .resource = resource, .access = mx::tasking::AccessMode::read_only},
        reading, written));
    ASSERT_TRUE(mx::test::eventually([&] { return reading.load(); }));
    runtime().spawn(
        [resource, &written] {
            ++*resource.get<std::uint64_t>();
            written.store(true, std::memory_order_release);
        },
        mx::tasking::Annotation{
            .target_worker = 1, .resource = resource, .access = mx::tasking::AccessMode::write});
    runtime().wait();
    const std::optional<Trace> trace = runtime().stop_trace();
    ASSERT_TRUE(trace);
    const std::uint64_t retries = optimistic_retries(runtime()) - retries_before;
    EXPECT_GE(retries, 1U) << "the writer's change must fail the first read's validation";
    const mx::tasking::TaskProfile reader = profile_of(*trace, "conflicted reader");
    EXPECT_EQ(reader.retries, retries) << "every failed validation is the reader's";
    EXPECT_EQ(profile_of(*trace, "conflicted reader").tasks, reader.tasks);
    std::uint64_t all_retries = 0;
    for (const mx::tasking::TaskProfile &row : trace->profile()) {
        all_retries += row.retries;
    }
    EXPECT_EQ(all_retries, retries);
    runtime().delete_resource(resource);
}

TEST_P(TraceTest, PrefetchDistanceIsTheWorkersDistance) {
    for (const std::uint32_t distance : {0U, 3U}) {
        mx::tasking::RuntimeConfig config = shape_config();
        config.prefetch_distance = distance;
        config.dynamic_prefetch = false;
        start_runtime(config);
        ASSERT_EQ(runtime().start_trace(), "");
        const std::uint32_t leaves = scaled(200);
        for (std::uint32_t i = 0; i < leaves; ++i) {
            runtime().spawn(*runtime().new_task<LeafTask>(_leaves_ran));
        }
        runtime().wait();
        const std::optional<Trace> trace = runtime().stop_trace();
        ASSERT_TRUE(trace);
        const mx::tasking::TaskProfile leaf = profile_of(*trace, "leaf");
        EXPECT_EQ(leaf.tasks, leaves);
        EXPECT_DOUBLE_EQ(leaf.mean_prefetch_distance(), static_cast<double>(distance));
    }
}

TEST_P(TraceTest, SpansGoOnTheirOwnTrack) {
    ASSERT_EQ(runtime().start_trace(), "");
    // From a task: by default the span ends with the slice of the task that records it.
    std::atomic<std::uint64_t> begun{0};
    runtime().spawn([&begun](TaskContext &context) {
        begun.store(mx::system::cycles());
        EXPECT_TRUE(context.tracing());
        context.spawn(*context.new_task<NamedTask>("inside", mx::tasking::Annotation{}));
        context.trace_span("task span", begun.load());
    });
    runtime().wait();
    // From outside, with both ends given.
    const std::uint64_t start = mx::system::cycles();
    runtime().trace_span("outside span", start, start + 1000);
    runtime().trace_span("overlapping span", start + 500, start + 2000);
    const std::optional<Trace> trace = runtime().stop_trace();
    ASSERT_TRUE(trace);
    ASSERT_EQ(trace->spans.size(), 3U);
    for (std::size_t w = 0; w < trace->workers.size(); ++w) {
        for (const TraceEvent &event : trace->workers[w].events) {
            EXPECT_NE(event.kind, TraceEventKind::span) << "spans are moved out of the workers' events";
        }
    }
    const TraceEvent *task_span = nullptr;
    for (const TraceEvent &span : trace->spans) {
        EXPECT_LE(span.start, span.end);
        if (trace->name(span) == "task span") {
            task_span = &span;
        }
    }
    ASSERT_NE(task_span, nullptr);
    // Its end is the end of the recording task's slice, exactly.
    bool enclosed_slice = false;
    for (const auto &worker : trace->workers) {
        for (const TraceEvent &event : worker.events) {
            enclosed_slice =
                enclosed_slice || (event.kind == TraceEventKind::task && event.end == task_span->end &&
                                   event.start <= task_span->start);
        }
    }
    EXPECT_TRUE(enclosed_slice) << "the span ends with the slice of the task that recorded it";
    // JSON: the spans on tracks named "pipelines" after the workers' tracks; the two that overlap
    // on different ones.
    const std::string json = trace->to_json();
    JsonReader reader{json};
    const std::optional<Json> document = reader.read();
    ASSERT_TRUE(document) << reader.error();
    std::map<std::string, double> track_of;
    std::map<double, std::string> track_names;
    for (const Json &event : document->at("traceEvents").array) {
        if (event.at("ph").string == "M" && event.at("name").string == "thread_name") {
            track_names[event.at("tid").number] = event.at("args").at("name").string;
        } else if (event.at("cat").string == "span") {
            track_of[event.at("name").string] = event.at("tid").number;
        }
    }
    ASSERT_EQ(track_of.size(), 3U);
    for (const auto &[name, tid] : track_of) {
        EXPECT_GE(tid, static_cast<double>(mx::tasking::trace_first_tid + workers())) << name;
        EXPECT_EQ(track_names[tid].rfind("pipelines", 0), 0U) << name << " on " << track_names[tid];
    }
    EXPECT_NE(track_of["outside span"], track_of["overlapping span"]);
    expect_json_slices_nest(*document);
}

TEST_P(TraceTest, UnwritablePathIsAnErrorAndTheRuntimeGoesOn) {
    ASSERT_EQ(runtime().start_trace(), "");
    runtime().spawn(*runtime().new_task<LeafTask>(_leaves_ran));
    runtime().wait();
    const auto result = runtime().stop_trace("/nonexistent-directory/trace.json");
    EXPECT_FALSE(result.ok());
    EXPECT_NE(result.error.find("/nonexistent-directory/trace.json"), std::string::npos) << result.error;
    EXPECT_FALSE(runtime().tracing());
    // The runtime goes on, and a new trace can be recorded and written.
    const std::uint32_t leaves = 100;
    ASSERT_EQ(runtime().start_trace(), "");
    for (std::uint32_t i = 0; i < leaves; ++i) {
        runtime().spawn(*runtime().new_task<LeafTask>(_leaves_ran));
    }
    runtime().wait();
    const std::string path = ::testing::TempDir() + "mx_trace_test_" + GetParam().name + ".csv";
    const auto written = runtime().stop_trace(path);
    EXPECT_TRUE(written.ok()) << written.error;
    EXPECT_GE(written.events, 1U);
    std::FILE *file = std::fopen(path.c_str(), "r");
    ASSERT_NE(file, nullptr);
    char first[32] = {};
    EXPECT_NE(std::fgets(first, sizeof(first), file), nullptr);
    std::fclose(file);
    std::remove(path.c_str());
    EXPECT_EQ(std::string_view{first}.substr(0, 18), "# mxtasking trace:") << "not the CSV form";
    const auto again = runtime().stop_trace(path);
    EXPECT_FALSE(again.ok()) << "stop without a trace must be an error";
}

INSTANTIATE_TEST_SUITE_P(Workers, TraceTest,
                         ::testing::Values(mx::test::RuntimeShape{"workers1", 1, "", 1, 0},
                                           mx::test::RuntimeShape{"workers2", 2, "", 2, 0},
                                           mx::test::RuntimeShape{"workers4", 4, "", 4, 0}),
                         ::mx::test::shape_name);

TEST(TraceEnvironment, MxTraceRecordsTheRuntimesLifeAndWritesTheFile) {
    if (!MX_TRACING) {
        GTEST_SKIP() << "tracing compiled out (MX_TRACING=OFF)";
    }
    const std::string path = ::testing::TempDir() + "mx_trace_environment.json";
    std::remove(path.c_str());
    std::vector<PaddedCounter> ran(2);
    const std::uint32_t leaves = 200;
    ASSERT_EQ(setenv("MX_TRACE", path.c_str(), 1), 0);
    {
        mx::tasking::Runtime runtime{mx::tasking::RuntimeConfig{.workers = 2}};
        EXPECT_TRUE(runtime.tracing());
        for (std::uint32_t i = 0; i < leaves; ++i) {
            runtime.spawn(*runtime.new_task<LeafTask>(ran));
        }
        runtime.wait();
    }
    unsetenv("MX_TRACE");
    std::FILE *file = std::fopen(path.c_str(), "r");
    ASSERT_NE(file, nullptr) << "MX_TRACE wrote no file";
    std::string json;
    char chunk[4096];
    for (std::size_t n = 0; (n = std::fread(chunk, 1, sizeof(chunk), file)) > 0;) {
        json.append(chunk, n);
    }
    std::fclose(file);
    std::remove(path.c_str());
    JsonReader reader{json};
    const std::optional<Json> document = reader.read();
    ASSERT_TRUE(document) << reader.error();
    std::uint64_t recorded = 0;
    for (const Json &event : document->at("traceEvents").array) {
        if (event.at("name").string == "leaf") {
            recorded += static_cast<std::uint64_t>(event.at("args").at("tasks").number);
        }
    }
    EXPECT_EQ(recorded, leaves);
}

TEST(TraceEnvironment, BadEventCountIsAClearError) {
    if (!MX_TRACING) {
        GTEST_SKIP() << "tracing compiled out (MX_TRACING=OFF)";
    }
    mx::tasking::Runtime runtime{mx::tasking::RuntimeConfig{.workers = 1}};
    ASSERT_EQ(setenv("MX_TRACE_EVENTS", "lots", 1), 0);
    const std::string error = runtime.start_trace();
    unsetenv("MX_TRACE_EVENTS");
    EXPECT_NE(error.find("MX_TRACE_EVENTS"), std::string::npos) << error;
    EXPECT_FALSE(runtime.tracing());
}

TEST(TraceOff, StartTraceSaysWhyWhenCompiledOut) {
    if (MX_TRACING) {
        GTEST_SKIP() << "tracing compiled in";
    }
    mx::tasking::Runtime runtime{mx::tasking::RuntimeConfig{.workers = 1}};
    EXPECT_NE(runtime.start_trace().find("MX_TRACING=OFF"), std::string::npos);
    EXPECT_FALSE(runtime.stop_trace());
}

} // namespace
