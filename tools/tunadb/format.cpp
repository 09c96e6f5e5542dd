#include "format.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace tunadb {

namespace {
/// Display width in characters (UTF-8 continuation bytes take no column).
std::size_t width_of(const std::string &text) noexcept {
    std::size_t width = 0;
    for (const char c : text) {
        if ((static_cast<unsigned char>(c) & 0xC0U) != 0x80U) {
            ++width;
        }
    }
    return width;
}

void pad(std::ostream &out, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
        out.put(' ');
    }
}
} // namespace

void print_table(std::ostream &out, const mx::db::QueryResult &rows, const std::string &null_text) {
    const std::size_t columns = rows.column_count();
    std::vector<std::vector<std::string>> cells;
    cells.reserve(rows.row_count());
    std::vector<std::size_t> widths(columns, 0);
    for (std::size_t c = 0; c < columns; ++c) {
        widths[c] = width_of(rows.columns[c].name);
    }
    for (const auto &row : rows.rows) {
        auto &texts = cells.emplace_back();
        texts.reserve(columns);
        for (std::size_t c = 0; c < columns && c < row.size(); ++c) {
            texts.push_back(row[c].null ? null_text : row[c].to_string());
            widths[c] = std::max(widths[c], width_of(texts.back()));
        }
    }

    // Header names are left-aligned whatever the column type, as in psql.
    for (std::size_t c = 0; c < columns; ++c) {
        out << (c == 0 ? " " : " | ") << rows.columns[c].name;
        if (c + 1 < columns) {
            pad(out, widths[c] - width_of(rows.columns[c].name));
        }
    }
    out << '\n';
    for (std::size_t c = 0; c < columns; ++c) {
        out << (c == 0 ? "-" : "-+-") << std::string(widths[c], '-');
    }
    out << "-\n";
    for (const auto &texts : cells) {
        for (std::size_t c = 0; c < texts.size(); ++c) {
            out << (c == 0 ? " " : " | ");
            const std::size_t fill = widths[c] - width_of(texts[c]);
            const bool right = rows.columns[c].type.is_numeric();
            if (right) {
                pad(out, fill);
            }
            out << texts[c];
            if (!right && c + 1 < texts.size()) {
                pad(out, fill);
            }
        }
        out << '\n';
    }
    out << '(' << rows.row_count() << (rows.row_count() == 1 ? " row)\n" : " rows)\n");
}

void print_result(std::ostream &out, const mx::sql::StatementResult &result, bool csv,
                  const std::optional<std::string> &null_text) {
    switch (result.kind) {
    case mx::sql::StatementKind::query:
        if (csv) {
            out << result.rows.to_csv(null_text.value_or(std::string{}));
        } else {
            print_table(out, result.rows, null_text.value_or("NULL"));
        }
        break;
    case mx::sql::StatementKind::explain:
        out << result.text;
        if (!result.text.empty() && result.text.back() != '\n') {
            out << '\n';
        }
        break;
    case mx::sql::StatementKind::command:
        if (!csv) {
            out << result.tag << '\n';
        }
        break;
    }
}

} // namespace tunadb
