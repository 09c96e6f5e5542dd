#include "loader_progress.h"

#include <chrono>
#include <cstdio>

#include <unistd.h>

namespace mx::db {

ProgressBar::ProgressBar(std::string label, std::uint64_t total_bytes, bool enabled)
    : _label(std::move(label)), _total(total_bytes) {
    if (enabled && total_bytes > 0 && isatty(STDERR_FILENO) == 1) {
        _reporter = std::thread([this] { report(); });
    }
}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::finish() noexcept {
    if (!_reporter.joinable()) {
        return;
    }
    {
        std::lock_guard lock{_mutex};
        _stop = true;
    }
    _wake.notify_all();
    _reporter.join();
    std::fputs("\r\033[K", stderr); // erase the bar: the caller prints the outcome
    std::fflush(stderr);
}

void ProgressBar::report() noexcept {
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock lock{_mutex};
    while (!_wake.wait_for(lock, std::chrono::milliseconds{100}, [this] { return _stop; })) {
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        draw(_done.value.load(std::memory_order_relaxed), seconds);
    }
}

void ProgressBar::draw(std::uint64_t done, double seconds) const noexcept {
    constexpr int width = 30;
    const double fraction =
        _total == 0 ? 1.0 : static_cast<double>(done > _total ? _total : done) / static_cast<double>(_total);
    char bar[width + 1];
    const auto filled = static_cast<int>(fraction * width);
    for (int i = 0; i < width; ++i) {
        bar[i] = i < filled ? '#' : '.';
    }
    bar[width] = '\0';
    const double mib_per_second = seconds > 0 ? static_cast<double>(done) / (1024.0 * 1024.0) / seconds : 0.0;
    std::fprintf(stderr, "\rloading %s [%s] %3d%% %.1f MiB/s", _label.c_str(), bar,
                 static_cast<int>(fraction * 100.0), mib_per_second);
    std::fflush(stderr);
}

} // namespace mx::db
