#pragma once

// The CSV every benchmark driver writes: one row per measurement,
// benchmark,variant,workers,metric,value,unit,repetitions, optionally followed by columns that
// hold one value for the whole file (the run's settings, e.g. disturb_core,work_stealing).

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mx::bench {

class CsvWriter {
public:
    using Columns = std::vector<std::pair<std::string, std::string>>; // name, value

    CsvWriter(const std::string &path, bool append, const Columns &settings = {}) {
        const std::filesystem::path file{path};
        if (file.has_parent_path()) {
            std::error_code error;
            std::filesystem::create_directories(file.parent_path(), error);
        }
        std::string header = "benchmark,variant,workers,metric,value,unit,repetitions";
        for (const auto &[name, value] : settings) {
            header += ',' + name;
            _suffix += ',' + value;
        }
        const bool fresh = !append || !std::filesystem::exists(file) || std::filesystem::file_size(file) == 0;
        if (!fresh) {
            // Appended rows must fit the columns already there.
            std::ifstream existing{path};
            std::string first;
            std::getline(existing, first);
            if (first != header) {
                throw std::runtime_error{"cannot append to '" + path + "': its columns are '" + first +
                                         "', this run writes '" + header + "'"};
            }
        }
        _out.open(path, append ? std::ios::app : std::ios::trunc);
        if (!_out) {
            throw std::runtime_error{"cannot open CSV file '" + path +
                                     "' for writing: " + std::strerror(errno)};
        }
        if (fresh) {
            _out << header << '\n';
        }
    }

    void row(const std::string &benchmark, const std::string &variant, unsigned workers,
             const std::string &metric, double value, const std::string &unit, std::size_t repetitions) {
        char number[64];
        std::snprintf(number, sizeof(number), "%.9g", value);
        _out << benchmark << ',' << variant << ',' << workers << ',' << metric << ',' << number << ',' << unit
             << ',' << repetitions << _suffix << '\n';
        _out.flush();
    }

private:
    std::ofstream _out;
    std::string _suffix; // the settings' values, the same on every row
};

} // namespace mx::bench
