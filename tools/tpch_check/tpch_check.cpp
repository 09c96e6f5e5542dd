#include "tpch_check.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace mx::tpch {

namespace {

/// One line of the answer CSV. The empty line of a one-column NULL row yields one NULL field.
std::vector<std::optional<std::string>> parse_csv_line(const std::string &line) {
    std::vector<std::optional<std::string>> fields;
    std::string field;
    bool quoted = false;
    bool was_quoted = false; // "" is an empty string, an unquoted empty field is NULL
    const auto finish_field = [&] {
        fields.emplace_back(field.empty() && !was_quoted ? std::nullopt : std::optional<std::string>(field));
        field.clear();
        was_quoted = false;
    };
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
                field.push_back('"');
                ++i;
            } else if (c == '"') {
                quoted = false;
            } else {
                field.push_back(c);
            }
        } else if (c == '"') {
            quoted = true;
            was_quoted = true;
        } else if (c == ',') {
            finish_field();
        } else {
            field.push_back(c);
        }
    }
    finish_field();
    return fields;
}

bool is_double_type(const std::string &type) { return type == "DOUBLE" || type == "FLOAT"; }

std::string cell_text(const db::Value &value) { return value.null ? std::string("NULL") : value.to_string(); }

/// A row's key for pairing rows regardless of order: the text of every cell DuckDB does not give
/// as a double (doubles may differ in the last bits, everything else must be equal anyway).
template <class Row, class TextOf>
std::string row_key(const Row &row, const std::vector<std::string> &types, TextOf text_of) {
    std::string key;
    for (std::size_t c = 0; c < row.size() && c < types.size(); ++c) {
        if (!is_double_type(types[c])) {
            key.append(text_of(row[c])).push_back('\x1f');
        }
    }
    return key;
}

} // namespace

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw std::runtime_error(std::string("cannot read ").append(path));
    }
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::optional<Answer> read_answer(const std::string &directory, const std::string &stem) {
    namespace fs = std::filesystem;
    const fs::path csv = fs::path(directory) / std::string(stem).append(".csv");
    const fs::path types = fs::path(directory) / std::string(stem).append(".types");
    if (!fs::is_regular_file(csv) || !fs::is_regular_file(types)) {
        return std::nullopt;
    }
    Answer answer;
    std::istringstream type_lines(read_file(types.string()));
    std::string line;
    while (std::getline(type_lines, line)) {
        const std::size_t tab = line.find('\t');
        if (tab != std::string::npos) {
            answer.names.push_back(line.substr(0, tab));
            answer.types.push_back(line.substr(tab + 1));
        }
    }
    // Fields may hold line breaks only inside quotes; TPC-H answers have none, so lines are rows.
    std::istringstream csv_lines(read_file(csv.string()));
    std::getline(csv_lines, line); // header
    while (std::getline(csv_lines, line)) {
        answer.rows.push_back(parse_csv_line(line));
    }
    return answer;
}

std::string compare_cell(const db::Value &ours, const std::optional<std::string> &theirs,
                         const std::string &type) {
    if (ours.null || !theirs) {
        return ours.null && !theirs ? std::string() : std::string("NULL mismatch");
    }
    if (is_double_type(type)) {
        if (ours.type.id != db::TypeId::float64) {
            return std::string("DuckDB has ").append(type).append(", we have ").append(ours.type.to_string());
        }
        const double expected = std::strtod(theirs->c_str(), nullptr);
        const double tolerance = 1e-9 * std::max(std::abs(expected), 1e-300);
        return std::abs(ours.f64 - expected) <= tolerance ? std::string()
                                                          : "double differs beyond 1e-9 relative";
    }
    if (type.rfind("DECIMAL", 0) == 0) {
        const std::size_t comma = type.find(',');
        const auto scale =
            comma == std::string::npos ? 0UL : std::strtoul(type.c_str() + comma + 1, nullptr, 10);
        if (ours.type.id != db::TypeId::decimal || ours.type.scale != scale) {
            return std::string("DuckDB has ").append(type).append(", we have ").append(ours.type.to_string());
        }
    }
    // DECIMAL (same scale: same digits), integers, HUGEINT, DATE, VARCHAR: exact text.
    return ours.to_string() == *theirs ? std::string() : "text differs";
}

std::string compare_result(const db::QueryResult &result, const Answer &answer, Order order) {
    if (result.columns.size() != answer.types.size()) {
        std::ostringstream why;
        why << result.columns.size() << " columns, DuckDB has " << answer.types.size();
        return why.str();
    }
    if (result.rows.size() != answer.rows.size()) {
        std::ostringstream why;
        why << result.rows.size() << " rows, DuckDB has " << answer.rows.size();
        return why.str();
    }
    const auto compare_rows = [&](std::size_t ours, std::size_t theirs) -> std::string {
        const auto &row = result.rows[ours];
        const auto &expected = answer.rows[theirs];
        if (expected.size() != answer.types.size()) {
            std::ostringstream why;
            why << "malformed answer line " << theirs + 2;
            return why.str();
        }
        for (std::size_t c = 0; c < row.size(); ++c) {
            const std::string problem = compare_cell(row[c], expected[c], answer.types[c]);
            if (!problem.empty()) {
                std::ostringstream why;
                why << "row " << ours + 1 << " column " << answer.names[c] << ": ours " << cell_text(row[c])
                    << ", DuckDB " << expected[c].value_or("NULL") << " (" << problem << ")";
                return why.str();
            }
        }
        return {};
    };
    std::string problem;
    for (std::size_t r = 0; r < result.rows.size() && problem.empty(); ++r) {
        problem = compare_rows(r, r);
    }
    if (problem.empty() || order == Order::exact) {
        return problem;
    }
    // Pair the rows by key; a stable order among equal keys keeps rows that only differ in their
    // doubles paired as they came.
    std::vector<std::pair<std::string, std::size_t>> ours;
    std::vector<std::pair<std::string, std::size_t>> theirs;
    for (std::size_t r = 0; r < result.rows.size(); ++r) {
        ours.emplace_back(row_key(result.rows[r], answer.types, cell_text), r);
        theirs.emplace_back(
            row_key(answer.rows[r], answer.types,
                    [](const std::optional<std::string> &field) { return field.value_or("NULL"); }),
            r);
    }
    std::sort(ours.begin(), ours.end());
    std::sort(theirs.begin(), theirs.end());
    for (std::size_t i = 0; i < ours.size(); ++i) {
        problem = compare_rows(ours[i].second, theirs[i].second);
        if (!problem.empty()) {
            return ours.size() == 1 ? problem : std::string("in any order: ").append(problem);
        }
    }
    return {};
}

} // namespace mx::tpch
