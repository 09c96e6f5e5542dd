// mx_bench_tpch: TunaDB on TPC-H, timed the way scripts/tpch.py times DuckDB so that both systems
// can be put side by side (scripts/demo.py, suite tpch; docs/benchmarks/tpch-notes.md).
//
//   mx_bench_tpch --data build/tpch/sf1 --threads 2 --queries 1,3,6,14 --reps 5 --warmup 1
//                 --answers build/tpch/sf1-answers --csv results/tpch_tunadb.csv
//
// Starts a runtime with --threads workers, runs DATA/schema.sql and one COPY per table through
// the SQL front end (the load time is reported on its own), then per query: the warm-up run(s),
// then --reps timed runs of the query text through Database::query. A time is the whole call:
// parse, plan, execute and convert the result rows, as DuckDB's time in tpch.py covers executing
// and fetching. The first run's rows are compared with DuckDB's answer (--answers) by
// tools/tpch_check, the check of the TPC-H tests.
//
// --csv gets tpch.py's columns (system,threads,query,median_s,min_s,max_s,reps) for the queries
// that ran and, where checked, matched; a query that failed or answered wrongly is not a
// measurement and only appears in the printed table and in --json. Exit code: 0 when every query
// ran (and matched), 1 when one failed or answered wrongly, 2 on bad options or a failed load.

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include <mx/dataflow/graph.h>
#include <mx/db/executor.h>
#include <mx/db/types.h>
#include <mx/sql/database.h>
#include <mx/tasking/config.h>
#include <mx/tasking/runtime.h>

#include "../support/load_meter.h"
#include "tpch_check.h"

#ifndef MX_TPCH_QUERY_DIR
#define MX_TPCH_QUERY_DIR "tests/db/queries"
#endif

namespace {

namespace fs = std::filesystem;
using mx::bench::LoadMeter;

struct Options {
    std::string data;
    unsigned threads{2};
    std::string queries{"1,3,5,6,7,8,9,10,12,14,19"};
    unsigned reps{5};
    unsigned warmup{1};
    std::string csv;
    bool append{false};
    std::string json;
    std::string queries_dir{MX_TPCH_QUERY_DIR};
    std::string answers;
    std::uint32_t morsel_rows{mx::db::ExecutionOptions::default_morsel_rows};
    bool quiet{false};
    bool explain{false};
    double timeout_seconds{0.0};
    double cancel_grace_seconds{10.0};
    bool pin{true};
    bool magic_sets{true};
    bool right_semi_joins{true};
    bool right_outer_joins{true};
    mx::sql::JoinOrder join_order{mx::sql::JoinOrder::dynamic_programming};
    // --disable-pass: optimizer passes that do not run
    std::vector<std::string> disabled_passes;
    std::string trace;           // --trace: record the timed runs, write the last one here
    bool trace_alternate{false}; // --trace-alternate: only every second timed run is recorded
    bool profile{false};         // --profile: record the timed runs, print the last one's profile
};

enum class Status : std::uint8_t {
    pending,   ///< not run (yet)
    ok,        ///< ran, matched DuckDB's answer
    unchecked, ///< ran, no answer to compare with
    wrong,     ///< ran, answer differs: not a valid time
    failed,    ///< threw or timed out: no time
    skipped,   ///< not run: an earlier query's cancelled run did not stop (see --cancel-grace)
};

const char *status_name(Status status) noexcept {
    switch (status) {
    case Status::pending:
        return "pending";
    case Status::ok:
        return "ok";
    case Status::unchecked:
        return "unchecked";
    case Status::wrong:
        return "wrong";
    case Status::failed:
        return "failed";
    case Status::skipped:
        return "skipped";
    }
    return "?";
}

struct QueryRun {
    std::string name; // as in tpch.py: "6", "6_2"
    std::string path;
    Status status{Status::pending};
    std::string detail;           // error text or first mismatch
    std::vector<double> seconds;  // timed runs, whole Database::query call
    std::vector<double> executes; // the same runs, dataflow execution only
    std::vector<double> traced;   // --trace-alternate: the recorded runs (`seconds`: the others)
    std::size_t rows{0};
};

using mx::tpch::read_file;

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// ---- queries and DuckDB's answers ----------------------------------------------------------------

std::vector<std::string> split(const std::string &text, char separator) {
    std::vector<std::string> parts;
    std::string part;
    std::istringstream in(text);
    while (std::getline(in, part, separator)) {
        parts.push_back(part);
    }
    return parts;
}

std::string trim(std::string_view text) {
    const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
    while (!text.empty() && space(text.front())) {
        text.remove_prefix(1);
    }
    while (!text.empty() && space(text.back())) {
        text.remove_suffix(1);
    }
    return std::string(text);
}

/// "6" -> DIR/q6.sql, "6_2" -> DIR/params/q6_2.sql (tpch.py's names).
QueryRun resolve_query(const std::string &directory, std::string name) {
    name = trim(name);
    if (!name.empty() && (name.front() == 'q' || name.front() == 'Q')) {
        name.erase(0, 1);
    }
    if (name.empty()) {
        throw std::runtime_error("--queries: empty query name");
    }
    const std::string file = std::string("q").append(name).append(".sql");
    for (const fs::path &candidate : {fs::path(directory) / file, fs::path(directory) / "params" / file}) {
        if (fs::is_regular_file(candidate)) {
            QueryRun run;
            run.name = name;
            run.path = candidate.string();
            return run;
        }
    }
    throw std::runtime_error(std::string("no query ").append(file).append(" under ").append(directory));
}

// ---- loading -----------------------------------------------------------------------------------

/// rows.<table>=N of DATA/.complete (tpch.py gen), to check the loaded row counts.
std::map<std::string, std::uint64_t> expected_rows(const std::string &data) {
    std::map<std::string, std::uint64_t> rows;
    std::ifstream in(fs::path(data) / ".complete");
    std::string line;
    while (std::getline(in, line)) {
        const std::size_t equals = line.find('=');
        if (line.rfind("rows.", 0) == 0 && equals != std::string::npos) {
            rows[line.substr(5, equals - 5)] = std::strtoull(line.c_str() + equals + 1, nullptr, 10);
        }
    }
    return rows;
}

/// Creates and fills the tables; returns the seconds it took. Throws on any problem.
double load_tables(mx::sql::Database &db, const std::string &data, bool quiet) {
    const fs::path schema = fs::path(data) / "schema.sql";
    if (!fs::is_regular_file(schema)) {
        throw std::runtime_error(std::string(schema.string())
                                     .append(" is missing: generate the data with `build/venv/bin/python "
                                             "scripts/tpch.py gen --sf SF --out ")
                                     .append(data)
                                     .append("`"));
    }
    const auto expected = expected_rows(data);
    const auto start = std::chrono::steady_clock::now();
    db.execute(read_file(schema.string()));
    for (const char *table : mx::tpch::tables) {
        const std::string path = (fs::path(data) / std::string(table).append(".tbl")).string();
        const auto table_start = std::chrono::steady_clock::now();
        std::string copy{"COPY "};
        copy.append(table).append(" FROM ").append(mx::sql::quote_literal(path)).append(" (DELIMITER '|')");
        const mx::sql::Result result = db.execute(copy);
        const std::string &tag = result.last().tag; // "COPY <rows>"
        const std::uint64_t rows =
            std::strtoull(tag.c_str() + std::min<std::size_t>(tag.size(), 5), nullptr, 10);
        const auto wanted = expected.find(table);
        if (wanted != expected.end() && wanted->second != rows) {
            std::ostringstream why;
            why << path << ": loaded " << rows << " rows, .complete says " << wanted->second;
            throw std::runtime_error(why.str());
        }
        if (!quiet) {
            std::printf("  %-9s %9llu rows  %7.3f s\n", table, static_cast<unsigned long long>(rows),
                        seconds_since(table_start));
        }
    }
    return seconds_since(start);
}

// ---- output ------------------------------------------------------------------------------------

std::string json_string(const std::string &text) {
    std::string out{"\""};
    for (const char c : text) {
        switch (c) {
        case '"':
            out.append("\\\"");
            break;
        case '\\':
            out.append("\\\\");
            break;
        case '\n':
            out.append("\\n");
            break;
        case '\t':
            out.append("\\t");
            break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char escaped[8];
                std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
                out.append(escaped);
            } else {
                out.push_back(c);
            }
        }
    }
    out.push_back('"');
    return out;
}

std::string number(double value) {
    char text[64];
    std::snprintf(text, sizeof(text), "%.6f", value);
    return text;
}

/// Geometric mean of the median times of the queries that count (ran, answer not wrong).
double geometric_mean(const std::vector<QueryRun> &runs, std::size_t &counted) {
    double log_sum = 0.0;
    counted = 0;
    for (const QueryRun &run : runs) {
        if ((run.status == Status::ok || run.status == Status::unchecked) && !run.seconds.empty()) {
            log_sum += std::log(median(run.seconds));
            ++counted;
        }
    }
    return counted == 0 ? 0.0 : std::exp(log_sum / static_cast<double>(counted));
}

/// The whole state as JSON (rewritten after every query, so a killed run leaves what it had).
void write_json(const Options &options, double load_seconds, const std::vector<QueryRun> &runs,
                const LoadMeter::Reading &load_meter, const LoadMeter::Reading &query_meter, bool finished) {
    if (options.json.empty()) {
        return;
    }
    std::size_t counted = 0;
    const double geomean = geometric_mean(runs, counted);
    std::ostringstream out;
    out << "{\n  \"system\": \"tunadb\",\n  \"threads\": " << options.threads
        << ",\n  \"data\": " << json_string(options.data) << ",\n  \"morsel_rows\": " << options.morsel_rows
        << ",\n  \"reps\": " << options.reps << ",\n  \"warmup\": " << options.warmup
        << ",\n  \"finished\": " << (finished ? "true" : "false")
        << ",\n  \"load_s\": " << number(load_seconds)
        << ",\n  \"load_other_cpu_s\": " << number(load_meter.other_cpu_seconds)
        << ",\n  \"other_cpu_s\": " << number(query_meter.other_cpu_seconds)
        << ",\n  \"own_cpu_s\": " << number(query_meter.own_cpu_seconds)
        << ",\n  \"wall_s\": " << number(query_meter.wall_seconds)
        << ",\n  \"geomean_s\": " << number(geomean) << ",\n  \"geomean_queries\": " << counted
        << ",\n  \"queries\": [";
    for (std::size_t i = 0; i < runs.size(); ++i) {
        const QueryRun &run = runs[i];
        out << (i == 0 ? "\n" : ",\n") << "    {\"query\": " << json_string(run.name)
            << ", \"status\": " << json_string(status_name(run.status))
            << ", \"detail\": " << json_string(run.detail) << ", \"rows\": " << run.rows
            << ", \"reps\": " << run.seconds.size();
        if (!run.seconds.empty()) {
            out << ", \"median_s\": " << number(median(run.seconds))
                << ", \"min_s\": " << number(*std::min_element(run.seconds.begin(), run.seconds.end()))
                << ", \"max_s\": " << number(*std::max_element(run.seconds.begin(), run.seconds.end()))
                << ", \"execute_median_s\": " << number(median(run.executes));
        }
        out << "}";
    }
    out << "\n  ]\n}\n";
    const std::string temporary = std::string(options.json).append(".tmp");
    {
        std::ofstream file(temporary, std::ios::trunc);
        if (!file) {
            throw std::runtime_error(std::string("cannot write ").append(temporary));
        }
        file << out.str();
    }
    fs::rename(temporary, options.json);
}

/// tpch.py time's CSV, one row per query as soon as it is done.
class TimeCsv {
public:
    explicit TimeCsv(const Options &options) {
        if (options.csv.empty()) {
            return;
        }
        const fs::path file{options.csv};
        if (file.has_parent_path()) {
            fs::create_directories(file.parent_path());
        }
        const bool header = !options.append || !fs::exists(file) || fs::file_size(file) == 0;
        _out.open(options.csv, options.append ? std::ios::app : std::ios::trunc);
        if (!_out) {
            throw std::runtime_error(std::string("cannot write ").append(options.csv));
        }
        if (header) {
            _out << "system,threads,query,median_s,min_s,max_s,reps\n";
        }
        _out.flush();
    }

    void row(unsigned threads, const QueryRun &run) {
        if (!_out.is_open()) {
            return;
        }
        _out << "tunadb," << threads << ',' << run.name << ',' << number(median(run.seconds)) << ','
             << number(*std::min_element(run.seconds.begin(), run.seconds.end())) << ','
             << number(*std::max_element(run.seconds.begin(), run.seconds.end())) << ',' << run.seconds.size()
             << '\n';
        _out.flush();
    }

private:
    std::ofstream _out;
};

// ---- one query -----------------------------------------------------------------------------------

/// Database::query split into its two steps, plan (parse, bind, optimize) and execute, so that a
/// watchdog can cancel a run that exceeds --timeout (0 = no limit): one runaway plan must not
/// cost the whole benchmark. Same work as Database::query. Cancelling only stops new tasks; when
/// the tasks in flight do not finish within --cancel-grace either (a cross product can keep a
/// worker busy for minutes), `abandon` records the state and the process exits with code 1.
mx::db::QueryResult timed_query(mx::sql::Database &db, const std::string &text, const Options &options,
                                const std::function<void()> &abandon) {
    const double timeout_seconds = options.timeout_seconds;
    const mx::db::PlanPtr plan = db.plan(text);
    mx::db::ExecutionOptions execution = db.options().execution;
    execution.cancel = mx::dataflow::CancelToken{};
    if (timeout_seconds <= 0.0) {
        return mx::db::execute(db.runtime(), *plan, execution);
    }
    // `finished` is written by this thread when the run is over and read by the watchdog, both
    // under `mutex`; the watchdog abandons while holding it, so the run cannot end meanwhile.
    std::mutex mutex;
    std::condition_variable finished_signal;
    bool finished = false;
    const mx::dataflow::CancelToken token = execution.cancel;
    std::thread watchdog([&] {
        std::unique_lock lock(mutex);
        if (!finished_signal.wait_for(lock, std::chrono::duration<double>(timeout_seconds),
                                      [&] { return finished; })) {
            char reason[96];
            std::snprintf(reason, sizeof(reason), "timed out after %g s (--timeout)", timeout_seconds);
            token.cancel(reason);
            const auto grace = std::chrono::duration<double>(options.cancel_grace_seconds);
            if (!finished_signal.wait_for(lock, grace, [&] { return finished; })) {
                abandon();
                std::fflush(nullptr);
                std::_Exit(1);
            }
        }
    });
    const auto stop_watchdog = [&] {
        {
            const std::lock_guard lock(mutex);
            finished = true;
        }
        finished_signal.notify_one();
        watchdog.join();
    };
    try {
        mx::db::QueryResult result = mx::db::execute(db.runtime(), *plan, execution);
        stop_watchdog();
        return result;
    } catch (...) {
        stop_watchdog();
        throw;
    }
}

void run_query(mx::sql::Database &db, const Options &options, QueryRun &run,
               const std::function<void()> &abandon) {
    const std::string text = read_file(run.path);
    std::optional<mx::tpch::Answer> answer;
    if (!options.answers.empty()) {
        answer = mx::tpch::read_answer(options.answers, std::string("q").append(run.name));
        if (!answer) {
            run.detail =
                std::string("no answer q").append(run.name).append(".csv in ").append(options.answers);
        }
    }
    if (options.explain) {
        try {
            std::printf("%s\n", db.explain(text).c_str());
        } catch (const std::exception &error) {
            std::printf("EXPLAIN failed: %s\n", error.what());
        }
        std::fflush(stdout);
    }
    run.status = Status::unchecked;
    bool checked = false;
    const unsigned total = options.warmup + options.reps;
    for (unsigned i = 0; i < total; ++i) {
        // Recording starts and stops outside the timed call: the time shows what recording
        // costs the query, not start_trace's wait for every worker.
        const bool traced = (!options.trace.empty() || options.profile) && i >= options.warmup &&
                            (!options.trace_alternate || (i - options.warmup) % 2 == 1);
        if (traced) {
            if (const std::string error = db.runtime().start_trace(); !error.empty()) {
                run.status = Status::failed;
                run.detail = "--trace: " + error;
                return;
            }
        }
        const auto start = std::chrono::steady_clock::now();
        mx::db::QueryResult result;
        try {
            result = timed_query(db, text, options, abandon);
        } catch (const std::exception &error) {
            run.status = Status::failed;
            run.detail = error.what();
            run.seconds.clear();
            run.executes.clear();
            return;
        }
        const double seconds = seconds_since(start);
        if (traced) {
            const std::optional<mx::tasking::Trace> trace = db.runtime().stop_trace();
            const mx::tasking::TraceWriteResult written =
                !trace                  ? mx::tasking::TraceWriteResult{.error = "no trace was recorded"}
                : options.trace.empty() ? mx::tasking::TraceWriteResult{}
                                        : trace->write(options.trace);
            if (!written.ok()) {
                run.status = Status::failed;
                run.detail = "--trace: " + written.error;
                return;
            }
            if (options.profile && i + 1 >= total - (options.trace_alternate ? 1U : 0U)) {
                std::fprintf(stderr, "profile of Q%s (last recorded run):\n%s", run.name.c_str(),
                             trace->profile_table().c_str());
            }
            if (options.trace_alternate) {
                run.traced.push_back(seconds);
                continue;
            }
        }
        if (!checked) {
            checked = true;
            run.rows = result.row_count();
            if (answer) {
                // Any order: ties of an ORDER BY may come in any order at other scale factors and
                // thread counts.
                run.detail = mx::tpch::compare_result(result, *answer, mx::tpch::Order::any);
                run.status = run.detail.empty() ? Status::ok : Status::wrong;
            }
        }
        if (i >= options.warmup) {
            run.seconds.push_back(seconds);
            run.executes.push_back(std::chrono::duration<double>(result.elapsed).count());
        }
    }
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            return trim(line.substr(line.find(':') + 1));
        }
    }
    return "unknown CPU";
}

void print_query(const QueryRun &query) {
    if (query.seconds.empty()) {
        std::printf("%6s %-9s %10s %10s %10s %10s %6s %4s\n", query.name.c_str(), status_name(query.status),
                    "-", "-", "-", "-", "-", "0");
    } else {
        std::printf("%6s %-9s %10.6f %10.6f %10.6f %10.6f %6zu %4zu\n", query.name.c_str(),
                    status_name(query.status), median(query.seconds),
                    *std::min_element(query.seconds.begin(), query.seconds.end()),
                    *std::max_element(query.seconds.begin(), query.seconds.end()), median(query.executes),
                    query.rows, query.seconds.size());
    }
    if (!query.detail.empty()) {
        std::printf("       %s\n", query.detail.c_str());
    }
    if (!query.traced.empty() && !query.seconds.empty()) {
        const double off = median(query.seconds);
        const double on = median(query.traced);
        std::printf("       traced: median %.6f s over %zu runs, untraced %.6f s over %zu: %+.2f %%\n", on,
                    query.traced.size(), off, query.seconds.size(), 100.0 * (on - off) / off);
    }
    std::fflush(stdout);
}

/// Prints the geometric mean and the load of other processes; returns how many queries failed,
/// answered wrongly or were skipped.
std::size_t print_summary(const std::vector<QueryRun> &runs, const LoadMeter::Reading &reading,
                          const Options &options) {
    std::size_t counted = 0;
    const double geomean = geometric_mean(runs, counted);
    std::size_t bad = 0;
    std::string bad_names;
    for (const QueryRun &query : runs) {
        if (query.status == Status::failed || query.status == Status::wrong ||
            query.status == Status::skipped) {
            ++bad;
            bad_names.append(bad_names.empty() ? "" : ",").append(query.name);
        }
    }
    std::printf("geometric mean of medians: %.6f s over %zu of %zu queries%s%s\n", geomean, counted,
                runs.size(), bad == 0 ? "" : "; failed, wrong or skipped (excluded): ", bad_names.c_str());
    std::printf("other processes used %.2f CPU-s during the %.1f s of queries (this process: %.2f CPU-s)\n",
                reading.other_cpu_seconds, reading.wall_seconds, reading.own_cpu_seconds);
    if (!options.csv.empty()) {
        std::printf("wrote %s\n", options.csv.c_str());
    }
    std::fflush(stdout);
    return bad;
}

int run(const Options &options, const std::string &command) {
    std::vector<QueryRun> runs;
    for (const std::string &name : split(options.queries, ',')) {
        runs.push_back(resolve_query(options.queries_dir, name));
    }
    if (!fs::is_directory(options.data)) {
        throw std::runtime_error(std::string("--data ").append(options.data).append(" is not a directory"));
    }
    if (!options.answers.empty() && !fs::is_directory(options.answers)) {
        throw std::runtime_error(
            std::string("--answers ").append(options.answers).append(" is not a directory"));
    }
    TimeCsv csv(options);

    mx::tasking::RuntimeConfig config;
    config.workers = static_cast<std::uint16_t>(options.threads);
    config.pin_workers = options.pin;
    mx::tasking::Runtime runtime(config);
    mx::sql::DatabaseOptions database_options;
    database_options.execution.morsel_rows = options.morsel_rows;
    database_options.optimizer.magic_sets = options.magic_sets;
    database_options.optimizer.right_semi_joins = options.right_semi_joins;
    database_options.optimizer.right_outer_joins = options.right_outer_joins;
    database_options.optimizer.join_order = options.join_order;
    database_options.optimizer.disabled_passes.insert(options.disabled_passes.begin(),
                                                      options.disabled_passes.end());
    mx::sql::Database db(runtime, database_options);

    std::printf("tunadb, threads=%u%s, morsel_rows=%u, %s (%u CPUs online)\n%s\n", options.threads,
                options.pin ? "" : " (unpinned)", options.morsel_rows, cpu_model().c_str(),
                static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN)), command.c_str());
    std::printf("load %s:\n", options.data.c_str());
    std::fflush(stdout);
    const LoadMeter load_meter;
    double load_seconds = 0.0;
    try {
        load_seconds = load_tables(db, options.data, options.quiet);
    } catch (const std::exception &error) {
        std::fprintf(stderr, "mx_bench_tpch: load failed: %s\n", error.what());
        return 2;
    }
    const LoadMeter::Reading load_reading = load_meter.read();
    std::printf("load %.3f s (other processes: %.2f CPU-s)\n", load_seconds, load_reading.other_cpu_seconds);
    std::printf("%6s %-9s %10s %10s %10s %10s %6s %4s\n", "query", "status", "median_s", "min_s", "max_s",
                "exec_med_s", "rows", "reps");
    std::fflush(stdout);

    const LoadMeter query_meter;
    write_json(options, load_seconds, runs, load_reading, query_meter.read(), false);
    for (std::size_t index = 0; index < runs.size(); ++index) {
        QueryRun &query = runs[index];
        // Runs on the watchdog thread while this thread is blocked in the runaway query.
        const auto abandon = [&] {
            char detail[160];
            std::snprintf(detail, sizeof(detail),
                          "timed out after %g s; the cancelled run did not stop within %g s, so the process "
                          "gave up",
                          options.timeout_seconds, options.cancel_grace_seconds);
            query.status = Status::failed;
            query.detail = detail;
            query.seconds.clear();
            query.executes.clear();
            print_query(query);
            for (std::size_t later = index + 1; later < runs.size(); ++later) {
                runs[later].status = Status::skipped;
                runs[later].detail =
                    std::string("not run: q").append(query.name).append(" could not be stopped");
                print_query(runs[later]);
            }
            write_json(options, load_seconds, runs, load_reading, query_meter.read(), true);
            print_summary(runs, query_meter.read(), options);
        };
        run_query(db, options, query, abandon);
        print_query(query);
        if (query.status == Status::ok || query.status == Status::unchecked) {
            csv.row(options.threads, query);
        }
        write_json(options, load_seconds, runs, load_reading, query_meter.read(), false);
    }
    const LoadMeter::Reading reading = query_meter.read();
    write_json(options, load_seconds, runs, load_reading, reading, true);
    return print_summary(runs, reading, options) == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
    Options options;
    CLI::App app{"TPC-H on TunaDB (SQL front end), timed like scripts/tpch.py times DuckDB"};
    app.add_option("--data", options.data, "directory from `scripts/tpch.py gen` (schema.sql, <table>.tbl)")
        ->required();
    app.add_option("--threads", options.threads, "runtime workers")->check(CLI::Range(1U, 1024U));
    app.add_option("--queries", options.queries, "comma-separated query names: 1,3,6 or 6_2 (params/)");
    app.add_option("--reps", options.reps, "timed runs per query")->check(CLI::Range(1U, 1000U));
    app.add_option("--warmup", options.warmup, "untimed runs per query before the timed ones")
        ->check(CLI::Range(0U, 100U));
    app.add_option("--csv", options.csv,
                   "write tpch.py's CSV (system,threads,query,median_s,min_s,max_s,reps)");
    app.add_flag("--append", options.append, "append to --csv instead of replacing it");
    app.add_option("--json", options.json, "write every query's status, times and the load figures as JSON");
    app.add_option("--queries-dir", options.queries_dir, "directory of q<N>.sql (and params/)");
    app.add_option("--answers", options.answers,
                   "DuckDB's answers (`scripts/tpch.py answers`) to check against");
    app.add_option("--morsel-rows", options.morsel_rows, "rows per scan task")
        ->check(CLI::Range(1U, 1U << 20U));
    app.add_flag("--quiet", options.quiet, "no per-table load lines");
    app.add_flag("!--no-pin", options.pin, "leave the workers unpinned (the OS may move them between cores)");
    app.add_option("--timeout", options.timeout_seconds,
                   "cancel a query run after this many seconds and report the query as failed (0 = never)")
        ->check(CLI::Range(0.0, 1e6));
    app.add_option("--cancel-grace", options.cancel_grace_seconds,
                   "after a timeout, give up and exit (remaining queries skipped) when the cancelled run "
                   "has not stopped within this many seconds")
        ->check(CLI::Range(0.0, 1e6));
    app.add_flag("!--no-right-semi-joins", options.right_semi_joins,
                 "switch the optimizer's right semi/anti joins off (semi and anti joins always hash the "
                 "subquery side)");
    app.add_flag("!--no-right-outer-joins", options.right_outer_joins,
                 "switch the optimizer's right outer joins off (left outer joins always hash the "
                 "nullable side)");
    app.add_option("--join-order", options.join_order,
                   "join ordering: dp (dynamic programming, the default) or greedy (smallest join first)")
        ->transform(CLI::CheckedTransformer(std::map<std::string, mx::sql::JoinOrder>{
            {"dp", mx::sql::JoinOrder::dynamic_programming}, {"greedy", mx::sql::JoinOrder::greedy}}));
    app.add_flag("!--no-magic-sets", options.magic_sets,
                 "switch the optimizer's magic sets off (correlated subqueries aggregate their whole input)");
    std::vector<std::string> optional_passes;
    for (const mx::sql::OptimizerPass &pass : mx::sql::optimizer_passes()) {
        if (pass.optional) {
            optional_passes.emplace_back(pass.name);
        }
    }
    app.add_option("--disable-pass", options.disabled_passes,
                   "switch an optimizer pass off (repeatable; EXPLAIN lists the passes)")
        ->check(CLI::IsMember(optional_passes))
        ->take_all()
        ->allow_extra_args(false);
    app.add_option("--trace", options.trace,
                   "record the timed runs' task trace; the last one goes to FILE (JSON, CSV for *.csv)");
    app.add_flag(
        "--profile", options.profile,
        "record the timed runs and print the last one's tasks, cycles, queue time, optimistic retries "
        "and prefetch distance per task type and worker");
    app.add_flag("--trace-alternate", options.trace_alternate,
                 "record only every second timed run and print both medians (tracing overhead)");
    app.add_flag("--explain", options.explain, "print each query's plan (EXPLAIN) before running it");
    CLI11_PARSE(app, argc, argv);

    std::string command;
    for (int i = 0; i < argc; ++i) {
        command.append(i == 0 ? "" : " ").append(argv[i]);
    }
    try {
        return run(options, command);
    } catch (const std::exception &error) {
        std::fprintf(stderr, "mx_bench_tpch: %s\n", error.what());
        return 2;
    }
}
