// Scan conjuncts over one dictionary-encoded column are evaluated once per dictionary entry and
// applied to the rows' codes (ExecutionOptions::dictionary_filters). Every query here runs on a
// database whose strings are dictionary encoded, with the filters on, and on one whose strings are
// stored plainly with the filters off; the answers must be the same. Fragments of 4 rows and
// batches of 2 rows make many morsels; a second INSERT gives later fragments a different dictionary.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sql/sql_test_support.h"

namespace mx::sql::test {

namespace {

constexpr const char *tables = R"sql(
CREATE TABLE t (x INTEGER, s VARCHAR, u VARCHAR);
INSERT INTO t VALUES (1, 'apple', 'a'), (2, 'banana', 'b'), (3, NULL, 'c'), (4, 'apple', NULL),
    (5, 'cherry', 'apple'), (6, 'banana', 'b'), (7, '1', 'a'), (8, '2', 'b'), (9, 'x', 'c'),
    (10, 'apple', 'a'), (11, NULL, NULL), (12, 'date', 'd');
INSERT INTO t VALUES (13, 'elder', 'e'), (14, 'apple', 'a'), (15, '3', 'c'), (16, NULL, 'f');
)sql";

DatabaseOptions options(bool dictionary) {
    DatabaseOptions result = tiny_batches();
    result.tables.fragment_capacity = 4;
    result.tables.string_encoding = dictionary ? db::StringEncoding::dictionary : db::StringEncoding::plain;
    result.execution.dictionary_filters = dictionary;
    return result;
}

class DictionaryFilterTest : public ::testing::Test {
protected:
    DictionaryFilterTest()
        : runtime(small_runtime_config(3)), dictionary(runtime, options(true)),
          plain(runtime, options(false)) {
        dictionary.execute(tables);
        plain.execute(tables);
    }

    static std::vector<std::string> sorted(std::vector<std::string> rows) {
        std::sort(rows.begin(), rows.end());
        return rows;
    }

    /// The query's rows on both databases (sorted), after checking that they agree.
    std::vector<std::string> both(const std::string &sql) {
        const std::vector<std::string> with_codes = sorted(rows_of(dictionary.query(sql)));
        EXPECT_EQ(with_codes, sorted(rows_of(plain.query(sql)))) << sql;
        return with_codes;
    }

    tasking::Runtime runtime;
    Database dictionary;
    Database plain;
};

} // namespace

TEST_F(DictionaryFilterTest, PredicatesOnOneColumnAgreeWithThePlainScan) {
    EXPECT_EQ(both("SELECT x FROM t WHERE s = 'apple'"), (Rows{"1", "10", "14", "4"}));
    EXPECT_EQ(both("SELECT x FROM t WHERE s IN ('banana', 'cherry')"), (Rows{"2", "5", "6"}));
    EXPECT_EQ(both("SELECT x FROM t WHERE s IS NULL"), (Rows{"11", "16", "3"}));
    EXPECT_EQ(both("SELECT count(*) FROM t WHERE s IS NOT NULL"), (Rows{"13"}));
    EXPECT_EQ(both("SELECT x FROM t WHERE s LIKE '%an%'"), (Rows{"2", "6"}));
    EXPECT_EQ(both("SELECT x FROM t WHERE NOT (s = 'apple')"),
              (Rows{"12", "13", "15", "2", "5", "6", "7", "8", "9"}));
    EXPECT_EQ(both("SELECT x FROM t WHERE s > 'cherry'"), (Rows{"12", "13", "9"}));
    EXPECT_EQ(both("SELECT x FROM t WHERE s = 'apple' OR s IS NULL"),
              (Rows{"1", "10", "11", "14", "16", "3", "4"}));
    EXPECT_EQ(both("SELECT x FROM t WHERE upper(s) = 'DATE'"), (Rows{"12"}));
    EXPECT_EQ(both("SELECT x FROM t WHERE s = 'nothing'"), Rows{});
    // Only in the second INSERT's fragments.
    EXPECT_EQ(both("SELECT x FROM t WHERE s = 'elder'"), (Rows{"13"}));
}

TEST_F(DictionaryFilterTest, MixedConjunctsKeepTheRestAsRowFilters) {
    EXPECT_EQ(both("SELECT x FROM t WHERE s = 'apple' AND x > 5"), (Rows{"10", "14"}));
    EXPECT_EQ(both("SELECT x FROM t WHERE s = 'apple' AND u = 'a'"), (Rows{"1", "10", "14"}));
    EXPECT_EQ(both("SELECT x FROM t WHERE s <> 'apple' AND s <> 'banana' AND x < 9"), (Rows{"5", "7", "8"}));
    // Two columns in one conjunct: a row filter.
    EXPECT_EQ(both("SELECT x FROM t WHERE s = u OR x = 1"), (Rows{"1"}));
    EXPECT_EQ(both("SELECT x, s FROM t WHERE u IS NULL AND s IS NOT NULL"), (Rows{"4|apple"}));
}

TEST_F(DictionaryFilterTest, AConjunctThatFailsOnSomeEntryStaysARowFilter) {
    // 'apple' and 'x' do not cast to INTEGER, but the rows holding them are filtered out by the
    // other conjunct: evaluating the cast over the whole dictionary would fail where the query
    // does not.
    EXPECT_EQ(both("SELECT x FROM t WHERE x IN (7, 8, 15) AND CAST(s AS INTEGER) > 1"), (Rows{"15", "8"}));
    EXPECT_THROW(dictionary.query("SELECT x FROM t WHERE CAST(s AS INTEGER) > 1"), std::exception);
    EXPECT_THROW(plain.query("SELECT x FROM t WHERE CAST(s AS INTEGER) > 1"), std::exception);
}

TEST_F(DictionaryFilterTest, ExplainNamesTheFilteredColumns) {
    const std::string plan =
        dictionary.explain("SELECT x FROM t WHERE s = 'apple' AND x > 2 AND u LIKE 'a%'");
    EXPECT_NE(plan.find("dictionary_filters=[s, u]"), std::string::npos) << plan;
    const std::string plain_plan = plain.explain("SELECT x FROM t WHERE s = 'apple'");
    EXPECT_EQ(plain_plan.find("dictionary_filters"), std::string::npos) << plain_plan;
}

} // namespace mx::sql::test
