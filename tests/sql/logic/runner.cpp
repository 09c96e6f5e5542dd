// Runs sqllogictest-style files (tests/sql/logic/*.test) against a fresh TunaDB database per
// file and reports every record whose outcome differs, as "FILE:LINE: what differs". The
// format is described in docs/design/sql.md ("SQL logic tests"); the expected results are
// checked into the files, so running them needs neither DuckDB nor the TPC-H data.
//
//   mx_sql_logic_test FILE.test...      exit 0 when every record passes, 1 otherwise

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <mx/db/executor.h>
#include <mx/sql/database.h>
#include <mx/tasking/runtime.h>

namespace {

using mx::db::TypeId;

struct Record {
    enum class Kind : std::uint8_t { statement_ok, statement_error, query };
    Kind kind{Kind::statement_ok};
    std::size_t line{0}; // line of the record's header in the file
    std::string sql;     // the statement text (lines joined with '\n')
    std::string error;   // statement error: the expected substring of the message (may be empty)
    std::string types;   // query: one letter per column
    bool rowsort{false}; // query: compare the rows sorted
    std::vector<std::string> expected; // query: the result lines, cells separated by tabs
};

std::vector<std::string> split(std::string_view text, char separator) {
    std::vector<std::string> parts;
    std::size_t begin = 0;
    while (true) {
        const auto end = text.find(separator, begin);
        parts.emplace_back(
            text.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
        if (end == std::string_view::npos) {
            return parts;
        }
        begin = end + 1;
    }
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && (text.back() == ' ' || text.back() == '\r' || text.back() == '\t')) {
        text.remove_suffix(1);
    }
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
        text.remove_prefix(1);
    }
    return text;
}

bool starts_with_word(std::string_view line, std::string_view word) {
    return line.starts_with(word) && (line.size() == word.size() || line[word.size()] == ' ');
}

/// Reads the records of a file; a malformed header is reported as a failure at its line.
bool parse_file(const std::string &path, std::vector<Record> &records, std::ostream &errors) {
    std::ifstream in(path);
    if (!in) {
        errors << path << ": cannot open the file\n";
        return false;
    }
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') {
            line.pop_back();
        }
        lines.push_back(std::move(line));
    }
    bool ok = true;
    std::size_t i = 0;
    const auto blank = [&](std::size_t at) { return trim(lines[at]).empty(); };
    while (i < lines.size()) {
        const std::string_view header = trim(lines[i]);
        if (header.empty() || header.front() == '#') {
            ++i;
            continue;
        }
        Record record;
        record.line = i + 1;
        if (header == "statement ok") {
            record.kind = Record::Kind::statement_ok;
        } else if (starts_with_word(header, "statement error") || header == "statement error") {
            record.kind = Record::Kind::statement_error;
            record.error = std::string(trim(header.substr(std::string_view("statement error").size())));
        } else if (starts_with_word(header, "query")) {
            record.kind = Record::Kind::query;
            const auto words = split(trim(header.substr(5)), ' ');
            record.types = words.empty() ? std::string{} : words[0];
            for (std::size_t w = 1; w < words.size(); ++w) {
                if (words[w] == "rowsort") {
                    record.rowsort = true;
                } else if (words[w] != "nosort" && !words[w].empty()) {
                    errors << path << ":" << record.line << ": unknown sort mode '" << words[w] << "'\n";
                    ok = false;
                }
            }
            if (record.types.empty() || record.types.find_first_not_of("IRDTB") != std::string::npos) {
                errors << path << ":" << record.line
                       << ": a query needs its column types (letters I, R, D, T, B)\n";
                ok = false;
            }
        } else {
            errors << path << ":" << record.line << ": unknown record '" << header << "'\n";
            ok = false;
            while (i < lines.size() && !blank(i)) {
                ++i;
            }
            continue;
        }
        ++i;
        // The statement runs to a blank line or to the "----" that starts the expected result.
        while (i < lines.size() && !blank(i) && trim(lines[i]) != "----") {
            record.sql += (record.sql.empty() ? "" : "\n") + lines[i];
            ++i;
        }
        if (i < lines.size() && trim(lines[i]) == "----") {
            ++i;
            while (i < lines.size() && !blank(i)) {
                if (record.kind == Record::Kind::statement_error) {
                    record.error += (record.error.empty() ? "" : "\n") + lines[i];
                } else {
                    record.expected.push_back(lines[i]);
                }
                ++i;
            }
        }
        if (record.sql.empty()) {
            errors << path << ":" << record.line << ": the record has no SQL\n";
            ok = false;
            continue;
        }
        records.push_back(std::move(record));
    }
    return ok;
}

/// The letter a result column of this type is declared with: I integers, R DOUBLE, D DECIMAL,
/// B BOOLEAN, T text and dates.
char letter_of(const mx::db::Type &type) {
    switch (type.id) {
    case TypeId::integer:
    case TypeId::bigint:
        return 'I';
    case TypeId::float64:
        return 'R';
    case TypeId::decimal:
        return 'D';
    case TypeId::boolean:
        return 'B';
    case TypeId::date:
    case TypeId::varchar:
        return 'T';
    }
    return '?';
}

/// A declared letter accepts its own type, and I also accepts DECIMAL(38,0): integer results
/// beyond 64 bits (DuckDB's HUGEINT) are DECIMAL(38,0) here.
bool letter_accepts(char declared, const mx::db::Type &type) {
    const char actual = letter_of(type);
    return declared == actual || (declared == 'I' && type.id == TypeId::decimal && type.scale == 0);
}

std::string cell_text(const mx::db::Value &value) {
    if (!value.null && value.type.id == TypeId::varchar && value.str.empty()) {
        return "(empty)";
    }
    return value.to_string();
}

bool parse_double(const std::string &text, double &out) {
    if (text == "inf" || text == "-inf" || text == "nan" || text == "-nan") {
        out = text == "inf" ? INFINITY : text == "-inf" ? -INFINITY : NAN;
        return true;
    }
    const auto *end = text.data() + text.size();
    const auto result = std::from_chars(text.data(), end, out);
    return result.ec == std::errc{} && result.ptr == end;
}

/// Cells match when their texts are equal; DOUBLE cells also when they agree to 12 digits
/// (engines print the shortest round-trip text, but sums may differ in the last bits).
bool cells_match(const std::string &expected, const std::string &actual, char type) {
    if (expected == actual) {
        return true;
    }
    double e = 0.0;
    double a = 0.0;
    if (type != 'R' || !parse_double(expected, e) || !parse_double(actual, a)) {
        return false;
    }
    if (std::isnan(e) || std::isnan(a)) {
        return std::isnan(e) && std::isnan(a);
    }
    if (std::isinf(e) || std::isinf(a)) {
        return e == a;
    }
    return std::fabs(e - a) <= 1e-12 * std::max(std::fabs(e), std::fabs(a)) + 1e-300;
}

std::string one_line(std::string text) {
    std::replace(text.begin(), text.end(), '\n', ' ');
    return text;
}

class FileRunner {
public:
    FileRunner(mx::tasking::Runtime &runtime, std::string path) : _db(runtime), _path(std::move(path)) {}

    std::size_t run(const std::vector<Record> &records) {
        for (const auto &record : records) {
            run_one(record);
        }
        return _failures;
    }

private:
    void fail(const Record &record, const std::string &what) {
        ++_failures;
        std::cerr << _path << ":" << record.line << ": " << what << "\n    " << one_line(record.sql) << "\n";
    }

    void run_one(const Record &record) {
        switch (record.kind) {
        case Record::Kind::statement_ok:
            try {
                _db.execute(record.sql);
            } catch (const std::exception &error) {
                fail(record, std::string("statement failed: ") + error.what());
            }
            return;
        case Record::Kind::statement_error:
            try {
                _db.execute(record.sql);
            } catch (const mx::sql::SqlError &error) {
                if (std::string(error.what()).find(record.error) == std::string::npos) {
                    fail(record, "error message '" + std::string(error.what()) + "' does not contain '" +
                                     record.error + "'");
                }
                return;
            } catch (const std::exception &error) {
                fail(record, std::string("not an SqlError: ") + error.what());
                return;
            }
            fail(record, "statement succeeded but should fail with '" + record.error + "'");
            return;
        case Record::Kind::query:
            run_query(record);
            return;
        }
    }

    void run_query(const Record &record) {
        mx::sql::Result result;
        try {
            result = _db.execute(record.sql);
        } catch (const std::exception &error) {
            fail(record, std::string("query failed: ") + error.what());
            return;
        }
        if (result.statements.empty() || result.last().kind != mx::sql::StatementKind::query) {
            fail(record, "not a query");
            return;
        }
        const auto &rows = result.last().rows;
        if (rows.columns.size() != record.types.size()) {
            fail(record, "expected " + std::to_string(record.types.size()) + " columns, got " +
                             std::to_string(rows.columns.size()));
            return;
        }
        for (std::size_t c = 0; c < rows.columns.size(); ++c) {
            if (!letter_accepts(record.types[c], rows.columns[c].type)) {
                fail(record, "column " + std::to_string(c + 1) + " is " + rows.columns[c].type.to_string() +
                                 ", declared '" + record.types[c] + "'");
                return;
            }
        }
        std::vector<std::vector<std::string>> actual;
        for (const auto &row : rows.rows) {
            std::vector<std::string> cells;
            for (const auto &value : row) {
                cells.push_back(cell_text(value));
            }
            actual.push_back(std::move(cells));
        }
        std::vector<std::vector<std::string>> expected;
        for (const auto &line : record.expected) {
            expected.push_back(split(line, '\t'));
        }
        const auto joined = [](const std::vector<std::string> &cells) {
            std::string text;
            for (std::size_t c = 0; c < cells.size(); ++c) {
                text += (c == 0 ? "" : "\t") + cells[c];
            }
            return text;
        };
        if (record.rowsort) {
            const auto by_text = [&](const auto &a, const auto &b) { return joined(a) < joined(b); };
            std::sort(actual.begin(), actual.end(), by_text);
            std::sort(expected.begin(), expected.end(), by_text);
        }
        bool same = actual.size() == expected.size();
        for (std::size_t r = 0; same && r < actual.size(); ++r) {
            same = actual[r].size() == expected[r].size();
            for (std::size_t c = 0; same && c < actual[r].size(); ++c) {
                same = cells_match(expected[r][c], actual[r][c], record.types[c]);
            }
        }
        if (!same) {
            std::ostringstream what;
            what << "wrong result\n    expected " << expected.size() << " rows:";
            for (const auto &row : expected) {
                what << "\n      " << joined(row);
            }
            what << "\n    actual " << actual.size() << " rows:";
            for (const auto &row : actual) {
                what << "\n      " << joined(row);
            }
            fail(record, what.str());
        }
    }

    mx::sql::Database _db;
    std::string _path;
    std::size_t _failures{0};
};

} // namespace

int main(int argc, char **argv) {
    if (argc < 2) {
        std::cerr << "usage: mx_sql_logic_test FILE.test...\n";
        return 2;
    }
    mx::tasking::RuntimeConfig config;
    config.workers = 2;
    mx::tasking::Runtime runtime(config);
    std::size_t failures = 0;
    std::size_t records_run = 0;
    for (int a = 1; a < argc; ++a) {
        std::vector<Record> records;
        if (!parse_file(argv[a], records, std::cerr)) {
            ++failures;
        }
        FileRunner runner(runtime, argv[a]);
        failures += runner.run(records);
        records_run += records.size();
    }
    std::cerr << records_run << " records, " << failures << " failed\n";
    return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
