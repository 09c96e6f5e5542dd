// tunadb: TunaDB's SQL shell (docs/tunadb.md).
//
//   tunadb [--tpch SF] [--data-dir DIR] [--threads N] [--morsel-rows N] [--csv] [--null TEXT]
//          [--trace FILE] [-c SQL | FILE]
//
// Exit codes: 0 success, 1 an error (one line on stderr), 2 bad command line, 130 Ctrl-C in
// -c/FILE mode.

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <mx/sql/database.h>
#include <mx/tasking/config.h>
#include <mx/tasking/runtime.h>

#include "monitor.h"
#include "session.h"

namespace {

struct Arguments {
    std::string tpch;
    std::string data_dir;
    std::uint16_t threads{0};
    std::uint32_t morsel_rows{mx::db::ExecutionOptions::default_morsel_rows};
    bool csv{false};
    std::optional<std::string> null_text;
    std::optional<std::string> command;
    std::string file;
    std::string trace;
};

int run_session(const Arguments &arguments, tunadb::Session &session);

int run(const Arguments &arguments) {
    mx::tasking::RuntimeConfig config;
    if (arguments.threads > 0) {
        config.workers = arguments.threads;
    }
    mx::tasking::Runtime runtime{config};
    mx::sql::DatabaseOptions database_options;
    const bool tty = ::isatty(STDERR_FILENO) != 0;
    database_options.copy_progress = tty;
    database_options.execution.morsel_rows = arguments.morsel_rows;
    mx::sql::Database database{runtime, database_options};
    tunadb::install_interrupt_handler();
    tunadb::Monitor monitor{database, tty};
    tunadb::Session session{
        database, monitor,
        tunadb::SessionOptions{arguments.csv, arguments.null_text, false, arguments.data_dir}};
    if (!arguments.trace.empty() && !session.start_trace(arguments.trace, "--trace")) {
        return 1;
    }
    const int code = run_session(arguments, session);
    // The trace (--trace, or a .trace left on) covers everything the session ran.
    if (!session.stop_trace(arguments.trace.empty() ? "" : "--trace")) {
        return code == 0 ? 1 : code;
    }
    return code;
}

int run_session(const Arguments &arguments, tunadb::Session &session) {
    if (!arguments.tpch.empty() && !session.load_tpch(arguments.tpch)) {
        return tunadb::interrupted() ? 130 : 1;
    }
    if (arguments.command.has_value()) {
        const bool ok = session.run_text(*arguments.command, "");
        return ok ? 0 : (tunadb::interrupted() ? 130 : 1);
    }
    if (!arguments.file.empty()) {
        std::error_code ignored;
        if (std::filesystem::is_directory(arguments.file, ignored)) {
            tunadb::report_error(arguments.file,
                                 "cannot run a directory (expected a file of SQL statements)");
            return 1;
        }
        std::ifstream file{arguments.file};
        if (!file) {
            tunadb::report_error(arguments.file, std::string{"cannot open: "} + std::strerror(errno));
            return 1;
        }
        std::ostringstream text;
        text << file.rdbuf();
        const bool ok = session.run_text(text.str(), arguments.file);
        return ok ? 0 : (tunadb::interrupted() ? 130 : 1);
    }
    return session.run_shell(::isatty(STDIN_FILENO) != 0);
}

} // namespace

int main(int argc, char **argv) {
    CLI::App app{"tunadb: SQL on the mxtasking runtime (see docs/tunadb.md)", "tunadb"};
    Arguments arguments;
    app.add_option("--tpch", arguments.tpch,
                   "Generate TPC-H at this scale factor (cached on disk) and load it first");
    app.add_option("--data-dir", arguments.data_dir,
                   "Directory of the TPC-H data (default: $XDG_CACHE_HOME/tunadb/tpch/sf<SF>)");
    app.add_option("--threads", arguments.threads, "Runtime worker threads (default: all cores)")
        ->check(CLI::Range(1, 4096));
    app.add_option("--morsel-rows", arguments.morsel_rows,
                   "Rows per scan task (tuning; smaller makes Ctrl-C take effect sooner)")
        ->check(CLI::Range(1, 1 << 20));
    app.add_flag("--csv", arguments.csv, "Print results as CSV (RFC 4180) with a header row");
    app.add_option("--trace", arguments.trace,
                   "Record a task trace of the session into FILE (Chrome JSON, CSV for *.csv)");
    app.add_option("--null", arguments.null_text,
                   "Print NULL as this text (default: NULL in tables, an empty field in CSV)");
    auto *command = app.add_option("-c", arguments.command, "Run the statements in SQL and exit");
    app.add_option("FILE", arguments.file, "Run the statements in FILE and exit")->excludes(command);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &error) {
        if (error.get_exit_code() == 0) {
            return app.exit(error);
        }
        std::cerr << "tunadb: " << error.what() << " (see tunadb --help)\n";
        return 2;
    }
    try {
        return run(arguments);
    } catch (const std::exception &error) {
        tunadb::report_error("", error.what());
        return 1;
    }
}
