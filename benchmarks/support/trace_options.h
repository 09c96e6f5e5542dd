#pragma once

// --trace FILE and --profile for the benchmark drivers (docs/tracing.md): record the runtime's
// task timeline around a measured run, write it, and print the per-task-type profile (tasks,
// cycles, queue time, optimistic retries, prefetch distance per task type and worker).

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

#include "mx/tasking/runtime.h"
#include "mx/tasking/trace.h"

namespace mx::bench {

struct TraceOptions {
    std::string path;    ///< --trace FILE ("" = write no file)
    bool profile{false}; ///< --profile: print the profile of the traced run
    [[nodiscard]] bool wanted() const noexcept { return !path.empty() || profile; }
};

inline void add_trace_options(CLI::App &app, TraceOptions &options, const char *what) {
    app.add_option(
        "--trace", options.path,
        std::string{"Record "} + what +
            " and write the task timeline here (Chrome Trace Event JSON for ui.perfetto.dev, or CSV for "
            "*.csv; the last recorded run stays; $MX_TRACE_EVENTS sets the events kept per worker)");
    app.add_flag(
        "--profile", options.profile,
        std::string{"Record "} + what +
            " and print tasks, cycles, queue time, optimistic retries and prefetch distance per task type "
            "and worker");
}

/// Drivers whose runtimes live inside library code record each runtime's whole life instead,
/// through $MX_TRACE and $MX_TRACE_PROFILE (mx/tasking/runtime.h): call before any runtime exists.
inline void trace_through_environment(const TraceOptions &options) {
    if (!options.path.empty()) {
        setenv("MX_TRACE", options.path.c_str(), 1);
    }
    if (options.profile) {
        setenv("MX_TRACE_PROFILE", "1", 1);
    }
}

/// Starts recording when asked. Throws std::invalid_argument saying why not.
inline void start_trace(tasking::Runtime &runtime, const TraceOptions &options) {
    if (!options.wanted()) {
        return;
    }
    // The profile shows where tasks waited (queue times); a timeline alone stays cheap.
    if (const std::string error = runtime.start_trace(tasking::TraceConfig{.queue_times = options.profile});
        !error.empty()) {
        throw std::invalid_argument{"--trace / --profile: " + error};
    }
}

/// Stops recording: writes the file (a line on stderr says where) and prints the profile,
/// under `title`, to stderr (stdout may carry CSV).
inline void finish_trace(tasking::Runtime &runtime, const TraceOptions &options, const char *program,
                         const std::string &title) {
    if (!options.wanted()) {
        return;
    }
    const std::optional<tasking::Trace> trace = runtime.stop_trace();
    if (!trace) {
        std::fprintf(stderr, "%s: --trace: no trace was being recorded\n", program);
        return;
    }
    if (!options.path.empty()) {
        const tasking::TraceWriteResult written = trace->write(options.path);
        if (written.ok()) {
            std::fprintf(stderr, "%s: trace of %s written to %s (%llu events, %llu dropped)\n", program,
                         title.c_str(), options.path.c_str(), static_cast<unsigned long long>(written.events),
                         static_cast<unsigned long long>(written.dropped));
        } else {
            std::fprintf(stderr, "%s: --trace: %s\n", program, written.error.c_str());
        }
    }
    if (options.profile) {
        std::fprintf(stderr, "profile of %s:\n%s", title.c_str(), trace->profile_table().c_str());
    }
}

} // namespace mx::bench
