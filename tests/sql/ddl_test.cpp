// CREATE TABLE, DROP TABLE, INSERT and COPY round trips.

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

#include "sql/sql_test_support.h"

namespace mx::sql::test {

namespace {

/// A file under /tmp removed at the end of the test.
class TempFile {
public:
    explicit TempFile(const std::string &contents) {
        _path = "/tmp/mx_sql_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++) + ".tbl";
        std::ofstream out(_path);
        out << contents;
    }
    ~TempFile() { std::remove(_path.c_str()); }
    TempFile(const TempFile &) = delete;
    TempFile &operator=(const TempFile &) = delete;
    [[nodiscard]] const std::string &path() const noexcept { return _path; }

private:
    static int &counter() {
        static int value = 0;
        return value;
    }
    std::string _path;
};

} // namespace

TEST_F(SqlTest, CreateTableTypesAndConstraints) {
    const auto result = db.execute(
        "CREATE TABLE t (a INTEGER NOT NULL, b INT, c BIGINT, d DECIMAL(15,2), e NUMERIC, f DOUBLE "
        "PRECISION, "
        "g FLOAT8, h REAL, i DATE, j CHAR(25), k VARCHAR(10), l TEXT, m BOOLEAN, n INT PRIMARY KEY, "
        "o NUMERIC(5), PRIMARY KEY (a, c))");
    EXPECT_EQ(result.last().tag, "CREATE TABLE");
    const auto table = db.catalog().find("T");
    ASSERT_NE(table, nullptr);
    const auto &schema = table->schema();
    ASSERT_EQ(schema.size(), 15U);
    EXPECT_EQ(schema[0].type, db::Type::integer());
    EXPECT_FALSE(schema[0].nullable);
    EXPECT_EQ(schema[1].type, db::Type::integer());
    EXPECT_TRUE(schema[1].nullable);
    EXPECT_EQ(schema[2].type, db::Type::bigint());
    EXPECT_FALSE(schema[2].nullable); // in the table's PRIMARY KEY
    EXPECT_EQ(schema[3].type, db::Type::decimal(15, 2));
    EXPECT_EQ(schema[4].type, db::Type::decimal(18, 3)); // DuckDB's default
    EXPECT_EQ(schema[5].type, db::Type::float64());
    EXPECT_EQ(schema[6].type, db::Type::float64());
    EXPECT_EQ(schema[7].type, db::Type::float64());
    EXPECT_EQ(schema[8].type, db::Type::date());
    EXPECT_EQ(schema[9].type, db::Type::varchar(25)); // CHAR(n) is VARCHAR(n), no padding
    EXPECT_EQ(schema[10].type, db::Type::varchar(10));
    EXPECT_EQ(schema[11].type, db::Type::varchar());
    EXPECT_EQ(schema[12].type, db::Type::boolean());
    EXPECT_FALSE(schema[13].nullable);
    EXPECT_EQ(schema[14].type, db::Type::decimal(5, 0));
    // IF NOT EXISTS on an existing table does nothing.
    EXPECT_EQ(db.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)").last().tag, "CREATE TABLE");
    EXPECT_EQ(db.catalog().find("t")->schema().size(), 15U);
}

TEST_F(SqlTest, InsertRoundTrip) {
    db.execute(
        "CREATE TABLE t (a INTEGER NOT NULL, b VARCHAR(5), c DECIMAL(6,2), d DATE, e BOOLEAN, f DOUBLE)");
    EXPECT_EQ(
        db.execute("INSERT INTO t VALUES (1, 'one', 1.5, '2024-02-29', true, 0.25), (-2, NULL, -3, NULL, "
                   "false, 1e3)")
            .last()
            .tag,
        "INSERT 0 2");
    EXPECT_EQ(db.execute("INSERT INTO t (b, a) VALUES ('three', 3)").last().tag, "INSERT 0 1");
    // (DOUBLE shown as DECIMAL: the test does not depend on how doubles are printed.)
    EXPECT_EQ(rows("SELECT a, b, c, d, e, CAST(f AS DECIMAL(8,2)) FROM t ORDER BY a"),
              (Rows{"-2|NULL|-3.00|NULL|false|1000.00", "1|one|1.50|2024-02-29|true|0.25",
                    "3|three|NULL|NULL|NULL|NULL"}));
    EXPECT_EQ(rows("SELECT a FROM t WHERE e"), (Rows{"1"}));
    // INSERT ... SELECT
    db.execute("CREATE TABLE u (a BIGINT, c DECIMAL(10,2))");
    EXPECT_EQ(db.execute("INSERT INTO u SELECT a * 10, c FROM t WHERE c IS NOT NULL").last().tag,
              "INSERT 0 2");
    EXPECT_EQ(rows("SELECT a, c FROM u ORDER BY a"), (Rows{"-20|-3.00", "10|1.50"}));
    // A rejected row inserts nothing.
    EXPECT_THROW(db.execute("INSERT INTO t (a, b) VALUES (4, 'ok'), (5, 'too long')"), SqlError);
    EXPECT_EQ(rows("SELECT count(*) FROM t"), (Rows{"3"}));
}

TEST_F(SqlTest, DropTable) {
    db.execute("CREATE TABLE t (a INTEGER); CREATE TABLE u (a INTEGER)");
    EXPECT_EQ(db.execute("DROP TABLE t").last().tag, "DROP TABLE");
    EXPECT_EQ(db.catalog().find("t"), nullptr);
    EXPECT_THROW(db.execute("SELECT * FROM t"), SqlError);
    EXPECT_THROW(db.execute("DROP TABLE t, u"), SqlError);
    EXPECT_NE(db.catalog().find("u"), nullptr); // nothing dropped when one name is missing
    db.execute("DROP TABLE IF EXISTS t, u");
    EXPECT_EQ(db.catalog().find("u"), nullptr);
    db.execute("CREATE TABLE t (b VARCHAR(3))");
    EXPECT_EQ(db.catalog().find("t")->schema()[0].name, "b");
}

TEST_F(SqlTest, CopyDbgenFormat) {
    db.execute(
        "CREATE TABLE nation (n_nationkey INTEGER NOT NULL, n_name CHAR(25) NOT NULL, n_regionkey INTEGER, "
        "n_comment VARCHAR(152))");
    const TempFile file("0|ALGERIA|0| haggle. carefully final|\n1|ARGENTINA|1|al foxes promise|\n"
                        "2|BRAZIL|1|y alongside of the pending deposits |\n");
    const auto result = db.execute("COPY nation FROM '" + file.path() + "' (DELIMITER '|')");
    EXPECT_EQ(result.last().tag, "COPY 3");
    EXPECT_EQ(rows("SELECT n_nationkey, n_name, n_comment FROM nation WHERE n_regionkey = 1 ORDER BY 1"),
              (Rows{"1|ARGENTINA|al foxes promise", "2|BRAZIL|y alongside of the pending deposits "}));
    // A second COPY appends.
    EXPECT_EQ(db.execute("COPY nation FROM '" + file.path() + "' WITH DELIMITER '|'").last().tag, "COPY 3");
    EXPECT_EQ(rows("SELECT count(*) FROM nation"), (Rows{"6"}));
}

TEST_F(SqlTest, CopyCsvWithHeaderQuotesAndNulls) {
    db.execute("CREATE TABLE t (id INTEGER NOT NULL, name VARCHAR(20), amount DECIMAL(8,2))");
    const TempFile file("id;name;amount\n1;\"a;b\";1.50\n2;NA;NA\n3;\"say \"\"hi\"\"\";-2\n");
    EXPECT_EQ(db.execute("COPY t FROM '" + file.path() +
                         "' (FORMAT csv, DELIMITER ';', HEADER, NULL 'NA', QUOTE '\"')")
                  .last()
                  .tag,
              "COPY 3");
    EXPECT_EQ(rows("SELECT * FROM t ORDER BY id"), (Rows{"1|a;b|1.50", "2|NULL|NULL", "3|say \"hi\"|-2.00"}));
    // A bad line: nothing is loaded and the error names file, line and column.
    const TempFile bad("4;x;1.00\n5;y;abc\n");
    try {
        db.execute("COPY t FROM '" + bad.path() + "' (DELIMITER ';')");
        ADD_FAILURE() << "no error";
    } catch (const SqlError &error) {
        EXPECT_NE(error.message().find(bad.path() + ":2:"), std::string::npos) << error.what();
    }
    EXPECT_EQ(rows("SELECT count(*) FROM t"), (Rows{"3"}));
}

} // namespace mx::sql::test
