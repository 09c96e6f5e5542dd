#include "monitor.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

namespace tunadb {

namespace {
// Written by the signal handler, read and cleared by the main thread.
std::atomic<bool> g_interrupted{false};
// Set once by install_interrupt_handler before the handler is installed; read-only afterwards.
int g_cancel_pipe[2] = {-1, -1};
int g_prompt_pipe[2] = {-1, -1};

extern "C" void on_sigint(int /*signal*/) {
    const int saved = errno;
    g_interrupted.store(true);
    const char byte = 'i';
    [[maybe_unused]] const auto a = ::write(g_cancel_pipe[1], &byte, 1);
    [[maybe_unused]] const auto b = ::write(g_prompt_pipe[1], &byte, 1);
    errno = saved;
}

void drain(int fd) noexcept {
    char buffer[64];
    while (::read(fd, buffer, sizeof(buffer)) > 0) {
    }
}

void make_pipe(int (&fds)[2]) {
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        fds[0] = fds[1] = -1;
    }
}
} // namespace

void install_interrupt_handler() {
    if (g_cancel_pipe[0] >= 0) {
        return;
    }
    make_pipe(g_cancel_pipe);
    make_pipe(g_prompt_pipe);
    struct sigaction action {};
    action.sa_handler = on_sigint;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &action, nullptr);
}

bool interrupted() noexcept { return g_interrupted.load(); }
bool take_interrupt() noexcept { return g_interrupted.exchange(false); }
int prompt_pipe() noexcept { return g_prompt_pipe[0]; }
void drain_prompt_pipe() noexcept {
    if (g_prompt_pipe[0] >= 0) {
        drain(g_prompt_pipe[0]);
    }
}

int progress_percent(std::uint64_t done, std::uint64_t total) noexcept {
    if (total == 0) {
        return -1;
    }
    return static_cast<int>(std::min(done, total) * 100 / total);
}

Monitor::Monitor(mx::sql::Database &database, bool show_progress)
    : _database(database), _show_progress(show_progress) {
    _thread = std::thread([this] { run(); });
}

Monitor::~Monitor() {
    {
        std::lock_guard lock{_mutex};
        _stop = true;
    }
    _thread.join();
}

void Monitor::begin() {
    std::lock_guard lock{_mutex};
    _running = true;
    _start = std::chrono::steady_clock::now();
}

void Monitor::end() {
    std::lock_guard lock{_mutex};
    _running = false;
    erase_locked();
}

void Monitor::run() {
    for (;;) {
        pollfd fd{g_cancel_pipe[0], POLLIN, 0};
        const int ready = g_cancel_pipe[0] >= 0 ? ::poll(&fd, 1, 100) : (::usleep(100'000), 0);
        const bool ctrl_c = ready > 0 && (fd.revents & POLLIN) != 0;
        if (ctrl_c) {
            drain(g_cancel_pipe[0]);
        }
        std::lock_guard lock{_mutex};
        if (_stop) {
            erase_locked();
            return;
        }
        if (ctrl_c && _running) {
            _database.cancel("interrupted");
        }
        if (_running && _show_progress) {
            draw_locked(std::chrono::steady_clock::now());
        }
    }
}

void Monitor::draw_locked(std::chrono::steady_clock::time_point now) {
    const double seconds = std::chrono::duration<double>(now - _start).count();
    if (seconds < 1.0) {
        return;
    }
    constexpr int width = 24;
    char bar[width + 1];
    const mx::db::QueryProgress::Snapshot progress = _database.progress();
    const int percent = progress_percent(progress.done, progress.total);
    if (percent >= 0) {
        // The rows the query's scans have read so far out of all they read: joins and
        // aggregations after the last scan still take their time at 100 %.
        const int filled = percent * width / 100;
        for (int i = 0; i < width; ++i) {
            bar[i] = i < filled ? '#' : '.';
        }
        bar[width] = '\0';
        std::fprintf(stderr, "\r[%s] %3d %%  %.1f s  (Ctrl-C cancels)", bar, percent, seconds);
    } else {
        // Nothing to measure (a COPY): a block bouncing back and forth.
        const int step = static_cast<int>(seconds * 10.0) % (2 * (width - 3));
        const int position = step < width - 3 ? step : 2 * (width - 3) - step;
        for (int i = 0; i < width; ++i) {
            bar[i] = (i >= position && i < position + 3) ? '#' : ' ';
        }
        bar[width] = '\0';
        std::fprintf(stderr, "\r[%s]        %.1f s  (Ctrl-C cancels)", bar, seconds);
    }
    std::fflush(stderr);
    _drawn = true;
}

void Monitor::erase_locked() {
    if (_drawn) {
        std::fputs("\r\033[K", stderr);
        std::fflush(stderr);
        _drawn = false;
    }
}

} // namespace tunadb
