#pragma once

// The CSV every benchmark driver writes: one row per measurement,
// benchmark,variant,workers,metric,value,unit,repetitions.

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace mx::bench {

class CsvWriter {
public:
    CsvWriter(const std::string &path, bool append) {
        const std::filesystem::path file{path};
        if (file.has_parent_path()) {
            std::error_code error;
            std::filesystem::create_directories(file.parent_path(), error);
        }
        const bool header =
            !append || !std::filesystem::exists(file) || std::filesystem::file_size(file) == 0;
        _out.open(path, append ? std::ios::app : std::ios::trunc);
        if (!_out) {
            throw std::runtime_error{"cannot open CSV file '" + path +
                                     "' for writing: " + std::strerror(errno)};
        }
        if (header) {
            _out << "benchmark,variant,workers,metric,value,unit,repetitions\n";
        }
    }

    void row(const std::string &benchmark, const std::string &variant, unsigned workers,
             const std::string &metric, double value, const std::string &unit, std::size_t repetitions) {
        char number[64];
        std::snprintf(number, sizeof(number), "%.9g", value);
        _out << benchmark << ',' << variant << ',' << workers << ',' << metric << ',' << number << ',' << unit
             << ',' << repetitions << '\n';
        _out.flush();
    }

private:
    std::ofstream _out;
};

} // namespace mx::bench
