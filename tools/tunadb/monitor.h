#pragma once

// Ctrl-C and the "query is running" indicator.
//
// The SIGINT handler only sets a flag and writes a byte into two self-pipes (both are
// async-signal-safe): the monitor thread reads one and calls Database::cancel("interrupted")
// (which must not run inside a signal handler); the interactive shell polls the other to drop the
// line being typed. While a statement runs for more than a moment and stderr is a terminal, the
// monitor draws a progress bar on stderr (the share of rows the query's scans have read so far,
// from Database::progress(), and the elapsed time) and erases it when the statement ends.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

#include <mx/sql/database.h>

namespace tunadb {

/// Installs the SIGINT handler and creates the pipes (once per process).
void install_interrupt_handler();
/// Whether Ctrl-C was pressed since the last take_interrupt().
[[nodiscard]] bool interrupted() noexcept;
/// Clears and returns the flag.
bool take_interrupt() noexcept;
/// The read end of the shell's pipe (readable after Ctrl-C); drain_prompt_pipe() empties it.
[[nodiscard]] int prompt_pipe() noexcept;
void drain_prompt_pipe() noexcept;

/// The bar's percentage: done of total rows, 0..100; -1 when there is nothing to measure.
[[nodiscard]] int progress_percent(std::uint64_t done, std::uint64_t total) noexcept;

class Monitor {
public:
    Monitor(mx::sql::Database &database, bool show_progress);
    ~Monitor();
    Monitor(const Monitor &) = delete;
    Monitor &operator=(const Monitor &) = delete;

    /// Around every statement run: Ctrl-C in between cancels it; end() erases the bar.
    void begin();
    void end();

private:
    void run();
    void draw_locked(std::chrono::steady_clock::time_point now);
    void erase_locked();

    mx::sql::Database &_database;
    const bool _show_progress;
    // Guarded by _mutex; written by the main thread (begin/end, destructor), read by the
    // monitor thread. The bar on stderr is drawn and erased only under _mutex.
    std::mutex _mutex;
    bool _running{false};
    bool _stop{false};
    bool _drawn{false};
    std::chrono::steady_clock::time_point _start{};
    std::thread _thread;
};

} // namespace tunadb
