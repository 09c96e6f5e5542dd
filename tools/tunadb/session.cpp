#include "session.h"

#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <poll.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include <mx/tasking/runtime.h>

#include "format.h"
#include "tpch_check.h"

#ifndef MX_SOURCE_DIR
#error "MX_SOURCE_DIR must name the source tree (scripts/tpch.py, build/venv)"
#endif

namespace tunadb {

namespace {
std::string_view trim(std::string_view text) noexcept {
    const auto begin = text.find_first_not_of(" \t\r\n");
    if (begin == std::string_view::npos) {
        return {};
    }
    const auto end = text.find_last_not_of(" \t\r\n");
    return text.substr(begin, end + 1 - begin);
}

std::string place(std::string_view origin, std::uint32_t line, std::uint32_t column) {
    std::ostringstream out;
    if (!origin.empty()) {
        out << origin << ": ";
    }
    out << "line " << line;
    if (column > 0) {
        out << ", column " << column;
    }
    return out.str();
}

/// Line and column just after `text`, which starts at (line, column).
std::pair<std::uint32_t, std::uint32_t> position_after(std::string_view text, std::uint32_t line,
                                                       std::uint32_t column) noexcept {
    for (const char c : text) {
        if (c == '\n') {
            ++line;
            column = 1;
        } else if ((static_cast<unsigned char>(c) & 0xC0U) != 0x80U) {
            ++column;
        }
    }
    return {line, column};
}

constexpr const char *help_text =
    "Statements end with ';' and may span lines. Dot commands (one line each):\n"
    "  .help                 this text\n"
    "  .tables               list the tables\n"
    "  .schema [TABLE]       CREATE TABLE text of one or all tables\n"
    "  .timer on|off         print the elapsed time of every statement\n"
    "  .tpch SF              generate (once, cached) and load TPC-H at scale factor SF\n"
    "  .trace FILE|off       record a task trace of the following statements into FILE\n"
    "                        (Chrome JSON, CSV for *.csv), written at .trace off or exit\n"
    "  .quit                 leave the shell (also Ctrl-D)\n"
    "Ctrl-C cancels the running query.\n";

// The shell's readline callback hands the line over through these (main thread only).
std::optional<std::string> g_line;
bool g_eof = false;

extern "C" void on_readline_line(char *line) {
    if (line == nullptr) {
        g_eof = true;
    } else {
        g_line = std::string{line};
        std::free(line); // NOLINT(cppcoreguidelines-no-malloc): readline allocates with malloc
    }
    rl_callback_handler_remove();
}
} // namespace

std::string tpch_cache_dir(std::string_view scale_factor) {
    std::filesystem::path base;
    if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
        base = xdg;
    } else if (const char *home = std::getenv("HOME"); home != nullptr && *home != '\0') {
        base = std::filesystem::path{home} / ".cache";
    } else {
        base = std::filesystem::temp_directory_path();
    }
    std::string leaf{"sf"};
    leaf.append(scale_factor);
    return (base / "tunadb" / "tpch" / leaf).string();
}

void report_error(std::string_view where, std::string_view message) {
    std::string line{"tunadb: "};
    if (!where.empty()) {
        line.append(where).append(": ");
    }
    // One line whatever the message quotes (the rest of an unterminated string, binary garbage):
    // control characters are written as C escapes.
    for (const char c : message) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '\n') {
            line.append("\\n");
        } else if (c == '\r') {
            line.append("\\r");
        } else if (c == '\t') {
            line.append("\\t");
        } else if (byte < 0x20U || byte == 0x7FU) {
            char escaped[8];
            std::snprintf(escaped, sizeof(escaped), "\\x%02x", byte);
            line.append(escaped);
        } else {
            line.push_back(c);
        }
    }
    line.push_back('\n');
    std::cout.flush();
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
}

bool Session::run_text(std::string_view text, std::string_view origin, std::uint32_t first_line) {
    const auto split = split_statements(text, true, first_line, 1);
    for (const auto &piece : split.pieces) {
        if (!run_piece(piece, origin)) {
            return false;
        }
        if (interrupted()) {
            report_error("", "interrupted");
            return false;
        }
    }
    return true;
}

bool Session::run_piece(const Piece &piece, std::string_view origin) {
    const auto start = std::chrono::steady_clock::now();
    _monitor.begin();
    try {
        const auto result = _database.execute(piece.sql);
        _monitor.end();
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        for (const auto &statement : result.statements) {
            if (!(_quiet && statement.kind == mx::sql::StatementKind::command)) {
                print_result(std::cout, statement, _options.csv, _options.null_text);
            }
        }
        if (_options.timer) {
            char text[64];
            std::snprintf(text, sizeof(text), "Run Time: %.3f s\n", seconds);
            std::cout << text;
        }
        std::cout.flush();
        return true;
    } catch (const mx::sql::SqlError &error) {
        _monitor.end();
        if (error.line() == 0) {
            const bool was_interrupt = interrupted() && error.message() == "interrupted";
            report_error(was_interrupt ? std::string{} : place(origin, piece.first_line, 0), error.message());
        } else {
            const std::uint32_t line = piece.line + error.line() - 1;
            const std::uint32_t column =
                error.line() == 1 ? piece.column + error.column() - 1 : error.column();
            report_error(place(origin, line, column), error.message());
        }
    } catch (const std::exception &error) {
        _monitor.end();
        report_error(place(origin, piece.first_line, 0), error.what());
    }
    return false;
}

bool Session::run_dot_command(std::string_view line, std::string_view where) {
    std::istringstream words{std::string{trim(line)}};
    std::string command;
    std::string argument;
    std::string extra;
    words >> command >> argument >> extra;
    const auto fail = [&](std::string_view message) {
        report_error(where, message);
        return false;
    };
    if (!extra.empty()) {
        return fail(command + ": too many arguments (see .help)");
    }
    if (command == ".help") {
        std::cout << help_text;
    } else if (command == ".quit" || command == ".exit") {
        _quit = true;
    } else if (command == ".tables") {
        for (const auto &name : _database.catalog().names()) {
            std::cout << name << '\n';
        }
    } else if (command == ".schema") {
        std::vector<std::string> names;
        if (argument.empty()) {
            names = _database.catalog().names();
        } else {
            names.push_back(argument);
        }
        for (const auto &name : names) {
            const auto table = _database.catalog().find(name);
            if (table == nullptr) {
                return fail("table \"" + name + "\" does not exist");
            }
            std::cout << "CREATE TABLE " << table->name() << " (\n";
            const auto &columns = table->schema().columns();
            for (std::size_t i = 0; i < columns.size(); ++i) {
                std::cout << "    " << columns[i].name << ' ' << columns[i].type.to_string()
                          << (columns[i].nullable ? "" : " NOT NULL")
                          << (i + 1 < columns.size() ? ",\n" : "\n");
            }
            std::cout << ");\n";
        }
    } else if (command == ".timer") {
        if (argument == "on") {
            _options.timer = true;
        } else if (argument == "off") {
            _options.timer = false;
        } else {
            return fail(".timer: expected on or off");
        }
    } else if (command == ".trace") {
        if (argument.empty()) {
            return fail(".trace: expected a file name or off, e.g. .trace q1.json");
        }
        if (argument == "off") {
            if (!_trace_path.has_value()) {
                return fail(".trace off: no trace is being recorded");
            }
            return stop_trace(where);
        }
        return start_trace(argument, where);
    } else if (command == ".tpch") {
        if (argument.empty()) {
            return fail(".tpch: expected a scale factor, e.g. .tpch 0.01");
        }
        return load_tpch(argument);
    } else {
        return fail("unknown command " + command + " (see .help)");
    }
    std::cout.flush();
    return true;
}

bool Session::start_trace(const std::string &path, std::string_view where) {
    if (_trace_path.has_value() && !stop_trace(where)) {
        return false;
    }
    {
        // Fails now, not after the queries ran: a directory, a missing directory, no permission.
        std::ofstream probe{path, std::ios::out | std::ios::app};
        if (!probe) {
            report_error(where, ".trace: cannot write " + path + ": " + std::strerror(errno));
            return false;
        }
    }
    const std::string error = _database.runtime().start_trace();
    if (!error.empty()) {
        report_error(where, ".trace: " + error);
        return false;
    }
    _trace_path = path;
    return true;
}

bool Session::stop_trace(std::string_view where) {
    if (!_trace_path.has_value()) {
        return true;
    }
    const std::string path = std::move(*_trace_path);
    _trace_path.reset();
    const mx::tasking::TraceWriteResult written = _database.runtime().stop_trace(path);
    if (!written.ok()) {
        report_error(where, ".trace: " + written.error);
        return false;
    }
    if (written.dropped > 0) {
        report_error(where, ".trace: " + path + ": " + std::to_string(written.dropped) +
                                " events did not fit and were dropped (MX_TRACE_EVENTS raises the limit)");
    }
    return true;
}

bool Session::load_tpch(std::string_view scale_factor) {
    const std::string sf{scale_factor};
    char *end = nullptr;
    const double value = std::strtod(sf.c_str(), &end);
    if (sf.empty() || end != sf.c_str() + sf.size() || !std::isfinite(value) || value <= 0.0 ||
        value > 1000.0) {
        report_error("tpch", "invalid scale factor \"" + sf + "\" (expected a number > 0, e.g. 0.01)");
        return false;
    }
    const bool tty = ::isatty(STDERR_FILENO) != 0;
    const std::filesystem::path dir = _options.data_dir.empty() ? tpch_cache_dir(sf) : _options.data_dir;
    std::error_code ignored;
    if (!std::filesystem::exists(dir / ".complete", ignored)) {
        const std::string source{MX_SOURCE_DIR};
        const std::string python = source + "/build/venv/bin/python";
        const std::string script = source + "/scripts/tpch.py";
        if (::access(python.c_str(), X_OK) != 0) {
            report_error("tpch",
                         "cannot generate TPC-H data: " + python + " is missing: run make deps in " + source);
            return false;
        }
        std::error_code error;
        std::filesystem::create_directories(dir.parent_path(), error);
        if (error) {
            report_error("tpch", "cannot create " + dir.parent_path().string() + ": " + error.message());
            return false;
        }
        if (tty) {
            std::fprintf(stderr, "generating TPC-H SF %s into %s\n", sf.c_str(), dir.c_str());
        }
        std::cout.flush();
        const std::string out = dir.string();
        const pid_t child = ::fork();
        if (child == 0) {
            // The generator's chatter goes to stderr so that stdout holds query results only.
            ::dup2(STDERR_FILENO, STDOUT_FILENO);
            std::array<const char *, 8> argv{python.c_str(), script.c_str(), "gen",       "--sf",
                                             sf.c_str(),     "--out",        out.c_str(), nullptr};
            ::execv(python.c_str(), const_cast<char *const *>(argv.data())); // NOLINT: execv's signature
            ::_exit(127);
        }
        int status = 0;
        if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            report_error("tpch",
                         "generating TPC-H SF " + sf + " into " + out + " failed (see the messages above)");
            return false;
        }
    }

    const auto schema_path = (dir / "schema.sql").string();
    std::ifstream schema_file{schema_path};
    if (!schema_file) {
        report_error("tpch", "cannot read " + schema_path);
        return false;
    }
    std::ostringstream schema;
    schema << schema_file.rdbuf();
    const auto start = std::chrono::steady_clock::now();
    _quiet = true;
    bool ok = run_text(schema.str(), schema_path);
    std::uint64_t rows = 0;
    for (const char *table : mx::tpch::tables) {
        if (!ok) {
            break;
        }
        const auto path = (dir / (std::string{table} + ".tbl")).string();
        std::string copy{"COPY "};
        copy.append(table).append(" FROM ").append(mx::sql::quote_literal(path));
        ok = run_piece(Piece{copy, 1, 1, 1}, "tpch");
        if (const auto loaded = _database.catalog().find(table); ok && loaded != nullptr) {
            rows += loaded->row_count();
        }
    }
    _quiet = false;
    if (ok && tty) {
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::fprintf(stderr, "loaded TPC-H SF %s from %s: 8 tables, %llu rows in %.1f s\n", sf.c_str(),
                     dir.c_str(), static_cast<unsigned long long>(rows), seconds);
    }
    return ok;
}

bool Session::flush_pending(bool final) {
    const auto split = split_statements(_pending, final, _pending_line, _pending_column);
    bool ok = true;
    for (const auto &piece : split.pieces) {
        take_interrupt();
        if (!run_piece(piece, "")) {
            ok = false;
            break; // the rest of the input line belongs to the failed batch
        }
    }
    if (!ok || final || !split.rest_has_content) {
        _pending.clear();
        return ok;
    }
    const auto [line, column] =
        position_after(std::string_view{_pending}.substr(0, split.consumed), _pending_line, _pending_column);
    _pending.erase(0, split.consumed);
    _pending_line = line;
    _pending_column = column;
    return ok;
}

void Session::handle_shell_line(std::string line, bool interactive) {
    ++_input_line;
    if (trim(_pending).empty()) {
        _pending.clear();
        // Interactive errors count lines from the statement's start; stdin ones from the input's.
        _pending_line = interactive ? 1 : _input_line;
        _pending_column = 1;
        if (trim(line).starts_with('.')) {
            if (!run_dot_command(trim(line), interactive ? "" : place("", _input_line, 0))) {
                _failed = true;
            }
            return;
        }
    }
    _pending.append(line).push_back('\n');
    if (!flush_pending(false)) {
        _failed = true;
    }
}

int Session::run_shell(bool interactive) {
    if (!interactive) {
        std::string line;
        while (!_quit && std::getline(std::cin, line)) {
            handle_shell_line(std::move(line), false);
        }
        if (!_quit && !trim(_pending).empty() && !flush_pending(true)) {
            _failed = true;
        }
        return _failed ? 1 : 0;
    }

    std::cout << "tunadb: SQL on mxtasking. Enter .help for help, Ctrl-D to leave.\n";
    rl_catch_signals = 0; // our SIGINT handler stays in place; Ctrl-C arrives through prompt_pipe()
    using_history();
    std::string history;
    if (const char *home = std::getenv("HOME"); home != nullptr && *home != '\0') {
        history = std::string{home} + "/.tunadb_history";
        read_history(history.c_str());
    }
    while (!_quit) {
        drain_prompt_pipe();
        take_interrupt();
        const char *prompt = trim(_pending).empty() ? "tunadb> " : "   ...> ";
        g_line.reset();
        g_eof = false;
        rl_callback_handler_install(prompt, on_readline_line);
        while (!g_line.has_value() && !g_eof) {
            std::array<pollfd, 2> fds{pollfd{STDIN_FILENO, POLLIN, 0}, pollfd{prompt_pipe(), POLLIN, 0}};
            if (::poll(fds.data(), fds.size(), -1) < 0) {
                continue; // EINTR from SIGINT: the pipe tells the rest
            }
            if ((fds[1].revents & POLLIN) != 0) {
                // Ctrl-C at the prompt drops the line being typed and any unfinished statement.
                drain_prompt_pipe();
                take_interrupt();
                _pending.clear();
                rl_free_line_state();
                rl_crlf();
                rl_replace_line("", 0);
                rl_callback_handler_remove();
                rl_callback_handler_install("tunadb> ", on_readline_line);
                continue;
            }
            if ((fds[0].revents & (POLLIN | POLLHUP)) != 0) {
                rl_callback_read_char();
            }
        }
        if (g_eof) {
            std::cout << '\n';
            break;
        }
        if (!trim(*g_line).empty()) {
            add_history(g_line->c_str());
        }
        handle_shell_line(std::move(*g_line), true);
    }
    rl_callback_handler_remove();
    if (!history.empty()) {
        write_history(history.c_str());
    }
    return 0;
}

} // namespace tunadb
