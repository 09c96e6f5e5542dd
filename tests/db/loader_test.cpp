// Loading .tbl/CSV files: every type, options, exact error positions, atomicity, and parallel
// loads on several runtime shapes compared with a sequential expectation.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <mx/db/catalog.h>
#include <mx/db/loader.h>

#include "support/runtime_fixture.h"

namespace mx::db {
namespace {

/// Writes `content` to a fresh file in the test temp directory and returns its path.
std::string write_file(const std::string &name, const std::string &content) {
    static std::atomic<std::uint32_t> counter{0};
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string test = std::string(info->test_suite_name()) + "_" + info->name();
    for (char &c : test) {
        c = (std::isalnum(static_cast<unsigned char>(c)) != 0) ? c : '_';
    }
    const std::string directory =
        ::testing::TempDir() + "mx_loader_" + test + "_" + std::to_string(counter.fetch_add(1)) + "_";
    const std::string path = directory + name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    EXPECT_TRUE(out.good()) << "cannot write " << path;
    return path;
}

CsvOptions quiet(CsvOptions options = {}) {
    options.progress = ProgressMode::never;
    return options;
}

class LoaderTest : public test::RuntimeFixture {};

Schema small_schema() {
    return Schema({{"id", Type::integer(), false},
                   {"price", Type::decimal(6, 2), true},
                   {"day", Type::date(), true},
                   {"name", Type::varchar(5), true},
                   {"flag", Type::boolean(), true},
                   {"big", Type::bigint(), true}});
}

const char *const good_lines = "1|12.50|1998-01-02|abc|true|77|\n"
                               "2|-0.125|1970-01-01|x|F|-9223372036854775808|\n";

TEST_P(LoaderTest, LoadsEveryTypeWithNullsAndTrailingDelimiter) {
    Catalog catalog;
    catalog.create_table("t", small_schema());
    const std::string path =
        write_file("t.tbl", std::string(good_lines) + "3|||||\n" + "4|99.995|2000-02-29||1|0\n");
    const LoadResult result = load(runtime(), catalog, "t", path, quiet());
    ASSERT_TRUE(result.ok()) << result.error;
    EXPECT_EQ(result.rows, 4U);
    const auto table = catalog.find("t");
    ASSERT_EQ(table, result.table);
    ASSERT_EQ(table->row_count(), 4U);
    EXPECT_EQ(table->value(0, 0).i64, 1);
    EXPECT_EQ(table->value(0, 1).i64, 1250);
    EXPECT_EQ(date::format(table->value(0, 2).i64), "1998-01-02");
    EXPECT_EQ(table->value(0, 3).str, "abc");
    EXPECT_EQ(table->value(0, 4).i64, 1);
    EXPECT_EQ(table->value(0, 5).i64, 77);
    EXPECT_EQ(table->value(1, 1).i64, -13) << "-0.125 rounds half away from zero";
    EXPECT_EQ(table->value(1, 4).i64, 0);
    EXPECT_EQ(table->value(1, 5).i64, INT64_MIN);
    for (std::size_t c = 1; c < 6; ++c) {
        EXPECT_TRUE(table->value(2, c).null) << "column " << c;
    }
    EXPECT_EQ(table->value(3, 1).i64, 10000) << "99.995 rounds to 100.00";
    EXPECT_TRUE(table->value(3, 3).null) << "an empty field is NULL in a nullable VARCHAR";
    EXPECT_EQ(table->value(3, 5).i64, 0) << "last field without a trailing delimiter";
    EXPECT_EQ(table->statistics(1).null_count, 1U);
    EXPECT_EQ(table->statistics(0).min.i64, 1);
    EXPECT_EQ(table->statistics(0).max.i64, 4);
}

TEST_P(LoaderTest, CsvWithHeaderQuotesAndNullString) {
    Catalog catalog;
    catalog.create_table("c", Schema({{"id", Type::integer(), false},
                                      {"name", Type::varchar(), true},
                                      {"price", Type::decimal(6, 2), true},
                                      {"note", Type::varchar(), false}}));
    const std::string path = write_file("c.csv", "id,name,price,note\r\n"
                                                 "1,\"a,b\",1.5,x\r\n"
                                                 "\r\n"
                                                 "2,\"say \"\"hi\"\"\",2,\"\"\r\n"
                                                 "3,\"\",,\n"
                                                 "4,,\"3\",\"line|with|pipes\"");
    const LoadResult result = load(runtime(), catalog, "c", path, quiet(CsvOptions{.header = true}));
    ASSERT_TRUE(result.ok()) << result.error;
    const auto table = catalog.find("c");
    ASSERT_EQ(table->row_count(), 4U) << "header and blank line skipped";
    EXPECT_EQ(table->value(0, 1).str, "a,b");
    EXPECT_EQ(table->value(0, 2).i64, 150);
    EXPECT_EQ(table->value(0, 3).str, "x");
    EXPECT_EQ(table->value(1, 1).str, "say \"hi\"");
    EXPECT_EQ(table->value(1, 3).str, "");
    EXPECT_FALSE(table->value(2, 1).null) << "a quoted empty field is an empty string";
    EXPECT_EQ(table->value(2, 1).str, "");
    EXPECT_TRUE(table->value(2, 2).null);
    EXPECT_FALSE(table->value(2, 3).null) << "an empty field in a NOT NULL VARCHAR is the empty string";
    EXPECT_TRUE(table->value(3, 1).null);
    EXPECT_EQ(table->value(3, 2).i64, 300);
    EXPECT_EQ(table->value(3, 3).str, "line|with|pipes");

    // A NULL string, quoting off, an explicit delimiter.
    Catalog other;
    other.create_table("n", Schema({{"a", Type::varchar(), true}, {"b", Type::bigint(), true}}));
    const std::string tabs = write_file("n.txt", "\"q\"\tNULL\nNULL\t5\n\t6\n");
    CsvOptions options = quiet();
    options.delimiter = '\t';
    options.quote = std::nullopt;
    options.null_string = "NULL";
    const LoadResult second = load(runtime(), other, "n", tabs, options);
    ASSERT_TRUE(second.ok()) << second.error;
    const auto n = other.find("n");
    ASSERT_EQ(n->row_count(), 3U);
    EXPECT_EQ(n->value(0, 0).str, "\"q\"");
    EXPECT_TRUE(n->value(0, 1).null);
    EXPECT_TRUE(n->value(1, 0).null);
    EXPECT_EQ(n->value(1, 1).i64, 5);
    EXPECT_FALSE(n->value(2, 0).null) << "with a NULL string, the empty field is an empty string";
}

struct BadLine {
    const char *line;     ///< replaces line 3
    const char *expected; ///< error after "<path>:"
};

TEST_P(LoaderTest, MalformedInputIsReportedExactlyAndChangesNothing) {
    const BadLine cases[] = {
        {"3|12x|1998-01-02|abc|true|77|", "3:3: column price: expected DECIMAL(6,2), got \"12x\""},
        {"3|12345.678|1998-01-02|abc|true|77|",
         "3:3: column price: value \"12345.678\" out of range for DECIMAL(6,2)"},
        {"3|1.00|1998-02-30|abc|true|77|", "3:8: column day: expected DATE (YYYY-MM-DD), got \"1998-02-30\""},
        {"3|1.00|1998-01-02|abc|true|77|9|", "3:31: expected 6 fields, got 7"},
        {"3|1.00|1998-01-02|abc|true|77|9|10", "3:31: expected 6 fields, got 8"},
        {"3|1.00|1998-01-02|abc|true", "3:27: expected 6 fields, got 5"},
        {"3|1.00|1998-01-02|abcdef|true|77|",
         "3:19: column name: value \"abcdef\" too long for VARCHAR(5) (6 characters)"},
        {"2147483648|1.00|1998-01-02|abc|true|77|",
         "3:1: column id: value \"2147483648\" out of range for INTEGER"},
        {"3|1.00|1998-01-02|abc|true|9223372036854775808|",
         "3:28: column big: value \"9223372036854775808\" out of range for BIGINT"},
        {"|1.00|1998-01-02|abc|true|77|", "3:1: column id: empty field in a NOT NULL column"},
        {"3|1.00|1998-01-02|abc|maybe|77|", "3:23: column flag: expected BOOLEAN, got \"maybe\""},
        {"3|1.00|1998-01-02|äb|maybe|77|", "3:22: column flag: expected BOOLEAN, got \"maybe\""},
        {"3|1.00|1998-01-02|\"abc|true|77|", "3:19: column name: unterminated quoted field"},
        {"3|1.00|1998-01-02|\"ab\"c|true|77|",
         "3:23: column name: unexpected character after the closing quote"},
    };
    Catalog catalog;
    catalog.create_table("t", small_schema());
    const std::string good = write_file("good.tbl", good_lines);
    ASSERT_TRUE(load(runtime(), catalog, "t", good, quiet()).ok());
    const auto before = catalog.find("t");
    for (const BadLine &bad : cases) {
        SCOPED_TRACE(bad.line);
        const std::string path = write_file("t.tbl", std::string(good_lines) + bad.line + "\n" +
                                                         "4|1.00|1998-01-02|abc|true|77|\n");
        const LoadResult result = load(runtime(), catalog, "t", path, quiet());
        EXPECT_FALSE(result.ok());
        EXPECT_EQ(result.error, path + ":" + bad.expected);
        EXPECT_EQ(result.table, nullptr);
        EXPECT_EQ(catalog.find("t"), before) << "a failed load must not publish anything";
    }
    EXPECT_EQ(before->row_count(), 2U);
    EXPECT_EQ(before->value(1, 5).i64, INT64_MIN);

    // An empty table stays empty.
    catalog.create_table("empty", small_schema());
    const auto empty = catalog.find("empty");
    const std::string path = write_file("e.tbl", std::string(good_lines) + "oops\n");
    const LoadResult result = load(runtime(), catalog, "empty", path, quiet());
    EXPECT_EQ(result.error, path + ":3:1: column id: expected INTEGER, got \"oops\"");
    EXPECT_EQ(catalog.find("empty"), empty);
    EXPECT_EQ(empty->row_count(), 0U);
}

TEST_P(LoaderTest, LineNumbersCountAcrossChunks) {
    Catalog catalog;
    catalog.create_table("t", small_schema());
    std::string content;
    for (int i = 1; i <= 2000; ++i) {
        if (i == 1777) {
            content += "1777|1.00|1998-01-02|abc|true|77|extra|\n";
        } else if (i == 1900) {
            content += "1900|bad|1998-01-02|abc|true|77|\n"; // later: must not be the one reported
        } else if (i % 100 == 0) {
            content += "\n"; // blank lines count as lines
        } else {
            content += std::to_string(i) + "|1.00|1998-01-02|abc|true|77|\n";
        }
    }
    const std::string path = write_file("t.tbl", content);
    CsvOptions options = quiet();
    options.chunk_bytes = 100; // about three lines per chunk: many tasks
    const LoadResult result = load(runtime(), catalog, "t", path, options);
    EXPECT_EQ(result.error, path + ":1777:34: expected 6 fields, got 7");
    EXPECT_EQ(catalog.find("t")->row_count(), 0U);
}

TEST_P(LoaderTest, MissingFileTableAndEmptyFile) {
    Catalog catalog;
    catalog.create_table("t", small_schema());
    const std::string missing = ::testing::TempDir() + "mx_loader_does_not_exist.tbl";
    LoadResult result = load(runtime(), catalog, "t", missing, quiet());
    EXPECT_EQ(result.error, "cannot open " + missing + ": No such file or directory");
    const std::string empty = write_file("empty.tbl", "");
    result = load(runtime(), catalog, "nope", empty, quiet());
    EXPECT_EQ(result.error, "cannot load " + empty + ": table nope does not exist");
    result = load(runtime(), catalog, "t", empty, quiet());
    ASSERT_TRUE(result.ok()) << result.error;
    EXPECT_EQ(result.rows, 0U);
    EXPECT_EQ(catalog.find("t")->row_count(), 0U);
    result = load(runtime(), catalog, "t", ::testing::TempDir(), quiet());
    EXPECT_NE(result.error.find("not a regular file"), std::string::npos) << result.error;
}

TEST_P(LoaderTest, LoadsAppendAndKeepOldSnapshots) {
    Catalog catalog;
    catalog.create_table("t", small_schema(), TableOptions{.fragment_capacity = 3});
    const std::string path = write_file("t.tbl", good_lines);
    ASSERT_TRUE(load(runtime(), catalog, "t", path, quiet()).ok());
    const auto first = catalog.find("t");
    ASSERT_TRUE(load(runtime(), catalog, "t", path, quiet()).ok());
    ASSERT_TRUE(load(runtime(), catalog, "t", path, quiet()).ok());
    const auto third = catalog.find("t");
    EXPECT_EQ(first->row_count(), 2U);
    ASSERT_EQ(third->row_count(), 6U);
    EXPECT_EQ(third->fragment_count(), 2U);
    for (std::uint64_t r = 0; r < 6; ++r) {
        EXPECT_EQ(third->value(r, 0).i64, static_cast<std::int64_t>(r % 2 + 1));
        EXPECT_EQ(third->value(r, 3).str, r % 2 == 0 ? "abc" : "x");
    }
    EXPECT_EQ(third->version(), 3U);
}

// Many small chunks and small fragments: fragments are built while later chunks are parsed, so
// the chunks held stay few. A dictionary column with NULLs gets its final codes (NULL rows code
// 0); a column that is written as codes while streaming but has too many distinct values for a
// dictionary in the end (the rows-per-value rule) is rewritten plain.
TEST_P(LoaderTest, StagedChunksStayBoundedWhileFragmentsAreBuilt) {
    static const char *const modes[] = {"TRUCK", "AIR", "MAIL", "SHIP", "RAIL"};
    constexpr std::uint32_t rows = 6000;
    constexpr std::uint32_t capacity = 64;
    const auto mode_of = [](std::uint32_t i) -> std::string { return i % 7 == 3 ? "" : modes[i % 5]; };
    std::string content;
    for (std::uint32_t i = 0; i < rows; ++i) {
        content.append(std::to_string(i)).append("|t").append(std::to_string(i / 3)).append("|");
        content.append(mode_of(i)).append("|\n"); // at most 23 bytes a line
    }
    const std::string path = write_file("t.tbl", content);
    Catalog catalog;
    const Schema schema({{"id", Type::bigint(), false},
                         {"tag", Type::varchar(10), false},
                         {"mode", Type::varchar(10), true}});
    catalog.create_table("t", schema, TableOptions{.fragment_capacity = capacity});
    CsvOptions options = quiet();
    options.chunk_bytes = 100; // at least four lines a chunk, about 1100 chunks
    options.staged_chunks = 1;
    const LoadResult result = load(runtime(), catalog, "t", path, options);
    ASSERT_TRUE(result.ok()) << result.error;
    EXPECT_EQ(result.rows, rows);
    // One chunk besides those holding the rows of the fragment being filled (fewer than 64
    // rows: at most 16 chunks, plus one partly in the previous fragment).
    EXPECT_GE(result.peak_staged_chunks, 1U);
    EXPECT_LE(result.peak_staged_chunks, 1U + capacity / 4 + 1);

    const auto table = catalog.find("t");
    ASSERT_EQ(table->row_count(), rows);
    ASSERT_EQ(table->fragment_count(), (rows + capacity - 1) / capacity);
    EXPECT_FALSE(table->dictionary_encoded(1)); // 2000 values for 6000 rows: fewer than 4 rows each
    ASSERT_TRUE(table->dictionary_encoded(2));
    EXPECT_EQ(table->dictionary(2)->size(), 5U);
    std::uint64_t nulls = 0;
    const std::uint16_t regions = runtime().region_count();
    for (std::size_t f = 0; f < table->fragment_count(); ++f) {
        const Fragment &fragment = table->fragment(f);
        EXPECT_EQ(fragment.region(), f % regions);
        const std::uint32_t *codes = fragment.codes(2);
        const std::uint8_t *null_bytes = fragment.nulls(2);
        for (std::uint32_t r = 0; r < fragment.size(); ++r) {
            const auto i = static_cast<std::uint32_t>(f * capacity + r);
            ASSERT_EQ(fragment.value(0, r).i64, static_cast<std::int64_t>(i)) << "row " << i;
            ASSERT_EQ(fragment.value(1, r).str, "t" + std::to_string(i / 3)) << "row " << i;
            const Value mode = fragment.value(2, r);
            ASSERT_EQ(mode.null, mode_of(i).empty()) << "row " << i;
            if (mode.null) {
                ASSERT_NE(null_bytes, nullptr);
                EXPECT_EQ(codes[r], 0U) << "row " << i;
                ++nulls;
            } else {
                ASSERT_EQ(mode.str, mode_of(i)) << "row " << i;
            }
        }
    }
    EXPECT_EQ(table->statistics(2).null_count, nulls);
    EXPECT_EQ(table->statistics(1).max_length, std::string("t1999").size());
    EXPECT_EQ(table->statistics(2).max_length, 5U);
    EXPECT_EQ(table->statistics(2).min.str, "AIR");
    EXPECT_EQ(table->statistics(2).max.str, "TRUCK");

    // A bad line near the end: reported exactly, nothing published.
    content.append("6000|t2000|AIR|extra|\n");
    const std::string bad = write_file("bad.tbl", content);
    const LoadResult failed = load(runtime(), catalog, "t", bad, options);
    EXPECT_EQ(failed.error, bad + ":6001:16: expected 3 fields, got 4");
    EXPECT_EQ(catalog.find("t"), table);
}

// A column with more distinct values than a dictionary may hold turns plain in mid-stream
// (fragments written with its codes before are rewritten); an append that brings new values
// into a dictionary column rebuilds the base's fragments with the new codes.
TEST_P(LoaderTest, DictionaryOverflowAndAppendWithNewValues) {
    constexpr std::uint32_t capacity = 64;
    const auto line = [](std::uint32_t i, std::uint32_t keys) {
        return std::to_string(i) + "|k" + std::to_string(i % keys) + "|w" + std::to_string(i / 4) + "|\n";
    };
    std::string first;
    std::string second;
    for (std::uint32_t i = 0; i < 1000; ++i) {
        first += line(i, 40);
    }
    for (std::uint32_t i = 1000; i < 2000; ++i) {
        second += line(i, 45);
    }
    Catalog catalog;
    const Schema schema({{"id", Type::bigint(), false},
                         {"key", Type::varchar(10), false},
                         {"word", Type::varchar(10), false}});
    catalog.create_table("t", schema, TableOptions{.fragment_capacity = capacity, .max_dictionary_size = 50});
    CsvOptions options = quiet();
    options.chunk_bytes = 200;
    options.staged_chunks = 2;
    const LoadResult loaded = load(runtime(), catalog, "t", write_file("a.tbl", first), options);
    ASSERT_TRUE(loaded.ok()) << loaded.error;
    const auto base = catalog.find("t");
    ASSERT_TRUE(base->dictionary_encoded(1));
    EXPECT_EQ(base->dictionary(1)->size(), 40U);
    EXPECT_FALSE(base->dictionary_encoded(2)); // 250 values, at most 50 in a dictionary
    const LoadResult appended = load(runtime(), catalog, "t", write_file("b.tbl", second), options);
    ASSERT_TRUE(appended.ok()) << appended.error;
    const auto table = catalog.find("t");
    ASSERT_EQ(table->row_count(), 2000U);
    ASSERT_EQ(table->fragment_count(), (2000U + capacity - 1) / capacity);
    ASSERT_TRUE(table->dictionary_encoded(1));
    const Dictionary &keys = *table->dictionary(1);
    ASSERT_EQ(keys.size(), 45U);
    for (std::uint32_t k = 1; k < keys.size(); ++k) {
        EXPECT_LT(keys[k - 1].view(), keys[k].view());
    }
    EXPECT_FALSE(table->dictionary_encoded(2));
    for (std::uint64_t i = 0; i < 2000; ++i) {
        ASSERT_EQ(table->value(i, 0).i64, static_cast<std::int64_t>(i)) << "row " << i;
        ASSERT_EQ(table->value(i, 1).str, "k" + std::to_string(i % (i < 1000 ? 40 : 45))) << "row " << i;
        ASSERT_EQ(table->value(i, 2).str, "w" + std::to_string(i / 4)) << "row " << i;
    }
    for (std::size_t f = 0; f < table->fragment_count(); ++f) {
        EXPECT_EQ(table->fragment(f).dictionary_ptr(1).get(), &keys) << "fragment " << f;
    }
    // The old version is untouched.
    for (std::uint64_t i = 0; i < 1000; ++i) {
        ASSERT_EQ(base->value(i, 1).str, "k" + std::to_string(i % 40)) << "row " << i;
    }
}

// A lineitem-like table, generated from the row number so the expectation needs no parser.
Schema lineitem_schema() {
    return Schema({{"l_orderkey", Type::bigint(), false},
                   {"l_partkey", Type::integer(), false},
                   {"l_quantity", Type::decimal(15, 2), false},
                   {"l_extendedprice", Type::decimal(15, 2), false},
                   {"l_discount", Type::decimal(15, 2), false},
                   {"l_returnflag", Type::varchar(1), false},
                   {"l_shipdate", Type::date(), false},
                   {"l_shipmode", Type::varchar(10), false},
                   {"l_comment", Type::varchar(44), true}});
}

struct LineitemRow {
    std::int64_t orderkey;
    std::int64_t partkey;
    std::int64_t quantity; // times 100
    std::int64_t price;
    std::int64_t discount;
    std::string flag;
    std::int64_t shipdate;
    std::string mode;
    std::string comment; // "" = NULL
};

LineitemRow lineitem_row(std::uint64_t seed, std::uint64_t i) {
    static const char *const modes[] = {"TRUCK", "AIR", "MAIL", "SHIP", "RAIL", "FOB", "REG AIR"};
    static const char *const flags[] = {"A", "N", "R"};
    const std::uint64_t h = test::mix(seed, i);
    LineitemRow row;
    row.orderkey = static_cast<std::int64_t>(i / 4 + 1);
    row.partkey = static_cast<std::int64_t>(h % 200000) + 1;
    row.quantity = static_cast<std::int64_t>((h >> 20) % 50 + 1) * 100;
    row.price = static_cast<std::int64_t>((h >> 8) % 10000000);
    row.discount = static_cast<std::int64_t>((h >> 30) % 11);
    row.flag = flags[(h >> 40) % 3];
    row.shipdate = date::from_civil(1992, 1, 2) + static_cast<std::int64_t>((h >> 12) % 2500);
    row.mode = modes[(h >> 44) % 7];
    row.comment = (h >> 50) % 10 == 0 ? "" : "comment " + std::to_string(h % 1000003) + " quickly";
    return row;
}

/// The generated file and its rows, made once per process (with one seed) and shared by the
/// runtime shapes, so the test spends its time loading rather than generating.
struct LineitemData {
    std::uint64_t seed;
    std::vector<LineitemRow> rows;
    std::string path;
};

const LineitemData &lineitem_data() {
    static const LineitemData data = [] {
        LineitemData made{test::test_seed(), {}, {}};
        const std::uint64_t rows = test::scaled(200'000, 4);
        std::string content;
        content.reserve(rows * 110);
        made.rows.reserve(rows);
        for (std::uint64_t i = 0; i < rows; ++i) {
            made.rows.push_back(lineitem_row(made.seed, i));
            const LineitemRow &row = made.rows.back();
            content.append(std::to_string(row.orderkey)).append("|");
            content.append(std::to_string(row.partkey)).append("|");
            content.append(decimal::format(row.quantity, 2)).append("|");
            content.append(decimal::format(row.price, 2)).append("|");
            content.append(decimal::format(row.discount, 2)).append("|");
            content.append(row.flag).append("|");
            content.append(date::format(row.shipdate)).append("|");
            content.append(row.mode).append("|");
            content.append(row.comment).append("|\n");
        }
        made.path = write_file("lineitem.tbl", content);
        return made;
    }();
    return data;
}

TEST_P(LoaderTest, ParallelLoadEqualsSequentialExpectation) {
    const LineitemData &data = lineitem_data();
    std::printf("[   SEED   ] %llu (replay with MX_TEST_SEED=%llu)\n",
                static_cast<unsigned long long>(data.seed), static_cast<unsigned long long>(data.seed));
    const std::uint64_t rows = data.rows.size();
    const std::string &path = data.path;
    Catalog catalog;
    catalog.create_table("lineitem", lineitem_schema(), TableOptions{.fragment_capacity = 16384});
    CsvOptions options = quiet();
    options.chunk_bytes = 256 * 1024;
    const LoadResult result = load(runtime(), catalog, "lineitem", path, options);
    ASSERT_TRUE(result.ok()) << result.error;
    std::printf("[   LOAD   ] %llu rows, %.1f MB in %.3f s\n", static_cast<unsigned long long>(rows),
                static_cast<double>(result.bytes) / 1e6, result.seconds);
    EXPECT_EQ(result.rows, rows);
    const auto table = catalog.find("lineitem");
    ASSERT_EQ(table->row_count(), rows);
    ASSERT_EQ(table->fragment_count(), (rows + 16383) / 16384);
    EXPECT_TRUE(table->dictionary_encoded(5));
    EXPECT_TRUE(table->dictionary_encoded(7));
    EXPECT_FALSE(table->dictionary_encoded(8));
    EXPECT_EQ(table->dictionary(7)->size(), 7U);

    const std::uint16_t regions = runtime().region_count();
    std::uint64_t i = 0;
    std::uint64_t nulls = 0;
    std::int64_t max_price = 0;
    for (std::size_t f = 0; f < table->fragment_count(); ++f) {
        const Fragment &fragment = table->fragment(f);
        EXPECT_EQ(fragment.region(), f % regions);
        const auto *orderkey = static_cast<const std::int64_t *>(fragment.data(0));
        const auto *partkey = static_cast<const std::int64_t *>(fragment.data(1));
        const auto *quantity = static_cast<const std::int64_t *>(fragment.data(2));
        const auto *price = static_cast<const std::int64_t *>(fragment.data(3));
        const auto *discount = static_cast<const std::int64_t *>(fragment.data(4));
        const Vector flag = fragment.column(5);
        const auto *shipdate = static_cast<const std::int64_t *>(fragment.data(6));
        const std::uint32_t *mode = fragment.codes(7);
        const Vector comment = fragment.column(8);
        for (std::uint32_t r = 0; r < fragment.size(); ++r, ++i) {
            const LineitemRow &expected = data.rows[i];
            ASSERT_EQ(orderkey[r], expected.orderkey) << "row " << i;
            ASSERT_EQ(partkey[r], expected.partkey) << "row " << i;
            ASSERT_EQ(quantity[r], expected.quantity) << "row " << i;
            ASSERT_EQ(price[r], expected.price) << "row " << i;
            ASSERT_EQ(discount[r], expected.discount) << "row " << i;
            ASSERT_EQ(flag.data<StringRef>()[r].view(), expected.flag) << "row " << i;
            ASSERT_EQ(shipdate[r], expected.shipdate) << "row " << i;
            ASSERT_EQ(fragment.dictionary(7)[mode[r]].view(), expected.mode) << "row " << i;
            ASSERT_EQ(comment.is_null(r), expected.comment.empty()) << "row " << i;
            if (!expected.comment.empty()) {
                ASSERT_EQ(comment.data<StringRef>()[r].view(), expected.comment) << "row " << i;
            }
            nulls += expected.comment.empty() ? 1U : 0U;
            max_price = std::max(max_price, expected.price);
        }
    }
    EXPECT_EQ(i, rows);
    EXPECT_EQ(table->statistics(8).null_count, nulls);
    EXPECT_EQ(table->statistics(0).min.i64, 1);
    EXPECT_EQ(table->statistics(0).max.i64, static_cast<std::int64_t>((rows - 1) / 4 + 1));
    EXPECT_EQ(table->statistics(3).max.i64, max_price);
    const double orders = static_cast<double>((rows - 1) / 4 + 1);
    EXPECT_NEAR(static_cast<double>(table->statistics(0).distinct_count), orders, orders * 0.06);
}

INSTANTIATE_TEST_SUITE_P(Shapes, LoaderTest,
                         ::testing::Values(test::RuntimeShape{"workers1", 1, "", 1, 0},
                                           test::RuntimeShape{"workers2", 2, "", 2, 0},
                                           test::RuntimeShape{"workers4", 4, "", 4, 0},
                                           test::RuntimeShape{"numa2x1", std::nullopt, "2x1", 2, 2}),
                         test::shape_name);

} // namespace
} // namespace mx::db
