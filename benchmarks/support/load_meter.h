#pragma once

// CPU time other processes used while a benchmark measured: the busy time of all CPUs
// (/proc/stat) minus this process's CPU time. Granularity is one clock tick (usually 10 ms) per
// CPU. Every performance claim names it, since the 2-core machine is shared. The busy process of
// --disturb-core is load the benchmark asked for: it is counted apart, not as other load.

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>

#include "disturber.h"

namespace mx::bench {

class LoadMeter {
public:
    explicit LoadMeter(const Disturber *disturber = nullptr) noexcept
        : _disturber(disturber), _machine(machine_busy_seconds()), _own(own_cpu_seconds()),
          _disturbed(disturber != nullptr ? disturber->cpu_seconds() : 0.0) {}

    struct Reading {
        double other_cpu_seconds;
        double own_cpu_seconds;
        double wall_seconds;
        double disturber_cpu_seconds; // the busy process of --disturb-core
    };
    [[nodiscard]] Reading read() const noexcept {
        const double machine = machine_busy_seconds() - _machine;
        const double own = own_cpu_seconds() - _own;
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - _wall).count();
        const double disturbed = _disturber != nullptr ? _disturber->cpu_seconds() - _disturbed : 0.0;
        return Reading{std::max(0.0, machine - own - disturbed), own, wall, disturbed};
    }

private:
    static double machine_busy_seconds() noexcept {
        std::ifstream stat{"/proc/stat"};
        std::string label;
        unsigned long long user = 0, nice = 0, sys = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
        stat >> label >> user >> nice >> sys >> idle >> iowait >> irq >> softirq >> steal;
        if (!stat || label != "cpu") {
            return 0.0;
        }
        const auto ticks = static_cast<double>(user + nice + sys + irq + softirq + steal);
        return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
    static double own_cpu_seconds() noexcept {
        rusage usage{};
        getrusage(RUSAGE_SELF, &usage);
        const auto seconds = [](const timeval &t) {
            return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
        };
        return seconds(usage.ru_utime) + seconds(usage.ru_stime);
    }

    const Disturber *_disturber;
    double _machine;
    double _own;
    double _disturbed;
    std::chrono::steady_clock::time_point _wall{std::chrono::steady_clock::now()};
};

} // namespace mx::bench
