#pragma once

// A busy process pinned to one CPU for the lifetime of this object: the "disturbed core" of the
// load-balancing benchmarks (a worker shares its core with a program it does not know about).
// The child only spins; it is killed and reaped by the destructor, and it dies with this
// process (PR_SET_PDEATHSIG) when that ends without unwinding (std::exit, a signal, a crash),
// so it never outlives a benchmark run.

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace mx::bench {

class Disturber {
public:
    /// No process for cpu < 0. Throws std::runtime_error when `cpu` is not in this process's
    /// affinity mask or the child cannot be started.
    explicit Disturber(int cpu) : _cpu(cpu) {
        if (cpu < 0) {
            return;
        }
        cpu_set_t allowed;
        CPU_ZERO(&allowed);
        if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || cpu >= CPU_SETSIZE ||
            !CPU_ISSET(static_cast<std::size_t>(cpu), &allowed)) {
            throw std::runtime_error{"--disturb-core " + std::to_string(cpu) +
                                     ": this process may not run on that CPU (usable: " + usable(allowed) +
                                     ")"};
        }
        int ready[2];
        if (pipe(ready) != 0) {
            throw std::runtime_error{std::string{"--disturb-core: pipe: "} + std::strerror(errno)};
        }
        const pid_t parent = getpid();
        _pid = fork();
        if (_pid < 0) {
            const int error = errno;
            close(ready[0]);
            close(ready[1]);
            throw std::runtime_error{std::string{"--disturb-core: fork: "} + std::strerror(error)};
        }
        if (_pid == 0) {
            spin(cpu, parent, ready); // never returns
        }
        close(ready[1]);
        // One byte once the child runs pinned; end of file if it could not pin itself.
        char byte = 0;
        ssize_t got = 0;
        do {
            got = read(ready[0], &byte, 1);
        } while (got < 0 && errno == EINTR);
        close(ready[0]);
        if (got != 1) {
            stop();
            throw std::runtime_error{"--disturb-core " + std::to_string(cpu) +
                                     ": the busy process could not pin itself to that CPU"};
        }
    }

    Disturber(const Disturber &) = delete;
    Disturber &operator=(const Disturber &) = delete;
    ~Disturber() { stop(); }

    [[nodiscard]] int cpu() const noexcept { return _cpu; }

    /// CPU time the busy process has used so far (0 without one).
    [[nodiscard]] double cpu_seconds() const noexcept {
        if (_pid <= 0) {
            return _final_cpu_seconds;
        }
        clockid_t clock{};
        timespec t{};
        if (clock_getcpuclockid(_pid, &clock) != 0 || clock_gettime(clock, &t) != 0) {
            return 0.0;
        }
        return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
    }

    /// Kills and reaps the busy process; idempotent.
    void stop() noexcept {
        if (_pid <= 0) {
            return;
        }
        kill(_pid, SIGKILL);
        int status = 0;
        rusage usage{};
        while (wait4(_pid, &status, 0, &usage) < 0 && errno == EINTR) {
        }
        const auto seconds = [](const timeval &t) {
            return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
        };
        _final_cpu_seconds = seconds(usage.ru_utime) + seconds(usage.ru_stime);
        _pid = -1;
    }

private:
    /// The child: only async-signal-safe calls, since the parent may have threads.
    [[noreturn]] static void spin(int cpu, pid_t parent, const int ready[2]) noexcept {
        close(ready[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(0); // the parent ended before the death signal was armed
        }
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(static_cast<std::size_t>(cpu), &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0) {
            _exit(1);
        }
        const char byte = 1;
        if (write(ready[1], &byte, 1) != 1) {
            _exit(1);
        }
        close(ready[1]);
        volatile std::uint64_t counter = 0;
        while (true) {
            counter = counter + 1;
        }
    }

    static std::string usable(const cpu_set_t &set) {
        std::string text;
        for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
            if (CPU_ISSET(static_cast<std::size_t>(cpu), &set)) {
                text += (text.empty() ? "" : ",") + std::to_string(cpu);
            }
        }
        return text;
    }

    int _cpu;
    pid_t _pid{-1};
    double _final_cpu_seconds{0.0};
};

} // namespace mx::bench
