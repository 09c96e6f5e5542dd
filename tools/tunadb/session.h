#pragma once

// A tunadb session: runs SQL text (from -c, a script file or the shell) statement by statement,
// prints the results, reports errors as one line `tunadb: <where>: <message>`, and implements the
// shell's dot commands and the TPC-H loader.

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include <mx/sql/database.h>

#include "monitor.h"
#include "splitter.h"

namespace tunadb {

struct SessionOptions {
    bool csv{false};
    /// --null TEXT: how NULL prints (unset: NULL in tables, an empty field in CSV).
    std::optional<std::string> null_text{};
    bool timer{false};
    /// Overrides the TPC-H cache directory (otherwise tpch_cache_dir()).
    std::string data_dir{};
};

/// $XDG_CACHE_HOME/tunadb/tpch/sf<SF>, else ~/.cache/tunadb/tpch/sf<SF>.
[[nodiscard]] std::string tpch_cache_dir(std::string_view scale_factor);

/// Prints `tunadb: <where>: <message>` (or `tunadb: <message>` without a place) on stderr.
void report_error(std::string_view where, std::string_view message);

class Session {
public:
    Session(mx::sql::Database &database, Monitor &monitor, SessionOptions options)
        : _database(database), _monitor(monitor), _options(std::move(options)) {}

    /// Runs every statement of `text` in order and stops at the first error. `origin` is the file
    /// name for error messages ("" for -c text); `first_line` is the line `text` starts at.
    bool run_text(std::string_view text, std::string_view origin, std::uint32_t first_line = 1);
    /// One statement; `origin` as above.
    bool run_piece(const Piece &piece, std::string_view origin);
    /// A line starting with '.'; `where` names its place for errors ("" in the interactive shell).
    bool run_dot_command(std::string_view line, std::string_view where);
    /// Starts recording a task trace (Runtime::start_trace) to be written to `path` (Chrome
    /// JSON, CSV for *.csv) by stop_trace(); a trace being recorded is written first. A path that
    /// cannot be written is reported at once (`where` names the place) and nothing is recorded.
    bool start_trace(const std::string &path, std::string_view where);
    /// Writes the trace being recorded, if any; false (reported) when it cannot be written.
    bool stop_trace(std::string_view where);
    /// Generates (once, cached) and loads TPC-H at `scale_factor`.
    bool load_tpch(std::string_view scale_factor);
    /// The shell: readline with history when `interactive`, else plain lines from stdin without
    /// prompts. Returns the process exit code (non-interactive: 1 if any statement failed).
    int run_shell(bool interactive);

private:
    void handle_shell_line(std::string line, bool interactive);
    bool flush_pending(bool final);

    mx::sql::Database &_database;
    Monitor &_monitor;
    SessionOptions _options;
    // Shell state: statement text typed so far, its first line number in the input, and the
    // input line counter (stdin mode reports errors by input line).
    std::string _pending;
    std::uint32_t _pending_line{1};
    std::uint32_t _pending_column{1};
    std::uint32_t _input_line{0};
    bool _failed{false};
    bool _quit{false};
    // The file of the trace being recorded (.trace, --trace); main thread only.
    std::optional<std::string> _trace_path;
    // Set while loading TPC-H: command tags (CREATE TABLE, COPY n) are not printed.
    bool _quiet{false};
};

} // namespace tunadb
