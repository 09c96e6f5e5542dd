#pragma once

// The loader's progress bar: parse tasks add the bytes they are through to one atomic counter
// (a relaxed add every thousand lines, so the bar costs them nothing measurable) and a reporter
// thread redraws one line on stderr ten times a second. Only when stderr is a terminal: logs and
// test output never see it.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include <mx/system/cpu.h>

namespace mx::db {

class ProgressBar {
public:
    /// `enabled` asks for a bar; it is drawn only if stderr is a terminal as well.
    ProgressBar(std::string label, std::uint64_t total_bytes, bool enabled);
    ~ProgressBar();
    ProgressBar(const ProgressBar &) = delete;
    ProgressBar &operator=(const ProgressBar &) = delete;

    /// Any thread.
    void add(std::uint64_t bytes) noexcept { _done.value.fetch_add(bytes, std::memory_order_relaxed); }
    /// Stops the reporter and erases the bar (idempotent).
    void finish() noexcept;
    [[nodiscard]] bool active() const noexcept { return _reporter.joinable(); }

private:
    void report() noexcept;
    void draw(std::uint64_t done, double seconds) const noexcept;

    std::string _label;
    std::uint64_t _total;
    // Bytes parsed so far: added by the parse tasks, read by the reporter thread. On its own
    // cache line so the tasks' adds do not contend with the fields the reporter reads.
    struct alignas(system::cache_line_size) Counter {
        std::atomic<std::uint64_t> value{0};
    } _done;
    std::mutex _mutex;
    std::condition_variable _wake;
    bool _stop{false}; // guarded by _mutex; set by finish(), read by the reporter
    std::thread _reporter;
};

} // namespace mx::db
