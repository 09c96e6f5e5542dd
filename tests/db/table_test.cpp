// Table storage: fragments, encodings, statistics, copy-on-write appends, the catalog.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <mx/db/catalog.h>
#include <mx/db/table.h>

#include "support/runtime_fixture.h"

namespace mx::db {
namespace {

Schema all_types_schema() {
    return Schema({
        {"flag", Type::boolean(), true},
        {"small", Type::integer(), true},
        {"big", Type::bigint(), false},
        {"price", Type::decimal(15, 2), true},
        {"huge", Type::decimal(30, 4), true},
        {"ratio", Type::float64(), true},
        {"day", Type::date(), true},
        {"code", Type::varchar(10), true},
        {"text", Type::varchar(), false},
    });
}

/// Row i of the all-types table: NULLs in the nullable columns every 7th row, an empty string
/// every 5th row.
std::vector<Value> all_types_row(std::int64_t i) {
    const bool null = i % 7 == 3;
    std::vector<Value> row;
    row.push_back(null ? Value::null_of(Type::boolean()) : Value::boolean(i % 2 == 0));
    row.push_back(null ? Value::null_of(Type::integer()) : Value::integer(i * 1000 - 2'000'000'000LL / 3));
    row.push_back(Value::bigint(i * 1'000'000'007LL - 4'000'000'000'000LL));
    row.push_back(null ? Value::null_of(Type::decimal(15, 2)) : Value::decimal(i * 101 - 5000, 15, 2));
    row.push_back(null ? Value::null_of(Type::decimal(30, 4))
                       : Value::decimal(decimal::pow10(25) + Int128{i} * 12345, 30, 4));
    row.push_back(null ? Value::null_of(Type::float64())
                       : Value::float64(static_cast<double>(i) / 8.0 - 3.5));
    row.push_back(null ? Value::null_of(Type::date()) : Value::date(date::from_civil(1992, 1, 1) + i));
    row.push_back(null ? Value::null_of(Type::varchar())
                       : Value::varchar(i % 5 == 0 ? "" : "c" + std::to_string(i % 3)));
    row.push_back(Value::varchar(i % 5 == 0 ? "" : "text number " + std::to_string(i)));
    return row;
}

void expect_cell(const Value &actual, const Value &expected, const std::string &where) {
    ASSERT_EQ(actual.null, expected.null) << where;
    if (expected.null) {
        return;
    }
    switch (actual.type.physical()) {
    case PhysicalType::u8:
    case PhysicalType::i64:
        EXPECT_EQ(actual.i64, expected.i64) << where;
        break;
    case PhysicalType::i128:
        EXPECT_TRUE(actual.i128 == expected.wide()) << where;
        break;
    case PhysicalType::f64:
        EXPECT_EQ(actual.f64, expected.f64) << where;
        break;
    case PhysicalType::string:
        EXPECT_EQ(actual.str, expected.str) << where;
        break;
    }
}

std::shared_ptr<const Table> build_all_types(std::int64_t rows, TableOptions options) {
    TableBuilder builder("all_types", all_types_schema(), options);
    for (std::int64_t i = 0; i < rows; ++i) {
        const std::vector<Value> row = all_types_row(i);
        EXPECT_EQ(builder.append_row(row), "") << "row " << i;
    }
    return builder.finish();
}

/// Checks every cell through Table::value and through the vectors scans use.
void expect_all_types(const Table &table, std::int64_t rows) {
    ASSERT_EQ(table.row_count(), static_cast<std::uint64_t>(rows));
    for (std::int64_t i = 0; i < rows; ++i) {
        const std::vector<Value> expected = all_types_row(i);
        for (std::size_t c = 0; c < expected.size(); ++c) {
            expect_cell(table.value(static_cast<std::uint64_t>(i), c), expected[c],
                        "row " + std::to_string(i) + " column " + table.schema()[c].name);
        }
    }
    std::uint64_t row = 0;
    for (std::size_t f = 0; f < table.fragment_count(); ++f) {
        const Fragment &fragment = table.fragment(f);
        ASSERT_EQ(table.fragment_offset(f), row);
        for (std::size_t c = 0; c < table.schema().size(); ++c) {
            const std::uint32_t begin = fragment.size() / 3;
            const Vector vector = fragment.column(c, begin, fragment.size());
            ASSERT_EQ(vector.size(), fragment.size() - begin);
            EXPECT_EQ(vector.is_view(), !fragment.dictionary_encoded(c));
            for (std::uint32_t r = 0; r < vector.size(); ++r) {
                const auto i = static_cast<std::int64_t>(row + begin + r);
                expect_cell(vector.value(r), all_types_row(i)[c],
                            "vector row " + std::to_string(i) + " column " + table.schema()[c].name);
            }
        }
        row += fragment.size();
    }
    EXPECT_EQ(row, table.row_count());
}

TEST(SchemaTest, FindsColumnsIgnoringCaseAndValidates) {
    const Schema schema = all_types_schema();
    EXPECT_EQ(schema.find("PRICE"), std::optional<std::size_t>{3});
    EXPECT_EQ(schema.find("missing"), std::nullopt);
    EXPECT_EQ(schema.validate(), "");
    EXPECT_NE(Schema(std::vector<ColumnDef>{}).validate(), "");
    EXPECT_NE(Schema({{"a", Type::integer(), true}, {"A", Type::bigint(), true}}).validate().find("twice"),
              std::string::npos);
    EXPECT_NE(Schema({{"d", Type::decimal(39, 2), true}}).validate(), "");
    EXPECT_NE(Schema({{"d", Type::decimal(4, 5), true}}).validate(), "");
}

TEST(TableTest, RoundTripsEveryTypeWithNullsAndEmptyStrings) {
    TableOptions options;
    options.fragment_capacity = 64;
    const auto table = build_all_types(300, options);
    expect_all_types(*table, 300);
    EXPECT_EQ(table->fragment_count(), 5U);
    EXPECT_EQ(table->version(), 1U);
}

TEST(TableTest, FragmentBoundaries) {
    for (const std::int64_t rows : {0, 1, 63, 64, 65, 128, 129}) {
        TableOptions options;
        options.fragment_capacity = 64;
        const auto table = build_all_types(rows, options);
        SCOPED_TRACE("rows " + std::to_string(rows));
        EXPECT_EQ(table->fragment_count(), static_cast<std::size_t>((rows + 63) / 64));
        for (std::size_t f = 0; f < table->fragment_count(); ++f) {
            const std::uint32_t expected =
                f + 1 < table->fragment_count()
                    ? 64U
                    : static_cast<std::uint32_t>(rows - static_cast<std::int64_t>(f) * 64);
            EXPECT_EQ(table->fragment(f).size(), expected);
            EXPECT_EQ(table->fragment(f).capacity(), 64U);
        }
        expect_all_types(*table, rows);
    }
}

TEST(TableTest, ColumnBlocksAreCacheLineAlignedAndNullBytesOnlyWhereNeeded) {
    TableOptions options;
    options.fragment_capacity = 7; // rows 3 of each fragment of 7 are NULL in nullable columns
    const auto table = build_all_types(14, options);
    for (std::size_t f = 0; f < table->fragment_count(); ++f) {
        const Fragment &fragment = table->fragment(f);
        for (std::size_t c = 0; c < fragment.column_count(); ++c) {
            EXPECT_EQ(reinterpret_cast<std::uintptr_t>(fragment.data(c)) % 64, 0U);
            EXPECT_EQ(fragment.nulls(c) != nullptr, table->schema()[c].nullable) << "column " << c;
        }
    }
    // A nullable column without NULLs in a fragment has no NULL bytes there.
    TableBuilder builder("t", Schema({{"x", Type::integer(), true}}), TableOptions{.fragment_capacity = 2});
    for (const Value &v : {Value::integer(1), Value::integer(2), Value::null_of(Type::integer())}) {
        ASSERT_EQ(builder.append_row(std::span<const Value>(&v, 1)), "");
    }
    const auto small = builder.finish();
    ASSERT_EQ(small->fragment_count(), 2U);
    EXPECT_EQ(small->fragment(0).nulls(0), nullptr);
    ASSERT_NE(small->fragment(1).nulls(0), nullptr);
    EXPECT_EQ(small->fragment(1).nulls(0)[0], 1);
    EXPECT_TRUE(small->fragment(1).column(0).is_null(0));
}

Schema string_schema() {
    return Schema({{"mode", Type::varchar(10), true}, {"comment", Type::varchar(), false}});
}

std::string mode_of(std::size_t i) {
    static const char *const modes[] = {"TRUCK", "AIR", "MAIL", "SHIP", "RAIL", "FOB", "REG AIR"};
    return modes[(i * 5) % 7];
}

TEST(TableTest, DictionaryForFewDistinctValuesPlainOtherwise) {
    TableBuilder builder("strings", string_schema(), TableOptions{.fragment_capacity = 100});
    for (std::size_t i = 0; i < 1000; ++i) {
        const Value row[] = {i % 11 == 0 ? Value::null_of(Type::varchar()) : Value::varchar(mode_of(i)),
                             Value::varchar("comment " + std::to_string(i))};
        ASSERT_EQ(builder.append_row(row), "");
    }
    const auto table = builder.finish();
    ASSERT_TRUE(table->dictionary_encoded(0));
    EXPECT_FALSE(table->dictionary_encoded(1));
    const Dictionary &dictionary = *table->dictionary(0);
    ASSERT_EQ(dictionary.size(), 7U);
    EXPECT_TRUE(std::is_sorted(dictionary.entries().begin(), dictionary.entries().end()));
    EXPECT_EQ(dictionary.find("MAIL").has_value(), true);
    EXPECT_EQ(dictionary[*dictionary.find("MAIL")].view(), "MAIL");
    EXPECT_EQ(dictionary.find("BOAT"), std::nullopt);
    EXPECT_EQ(dictionary.lower_bound("B"), 1U); // AIR < B <= FOB
    EXPECT_EQ(dictionary.upper_bound("AIR"), 1U);
    EXPECT_TRUE(table->statistics(0).distinct_exact);
    EXPECT_EQ(table->statistics(0).distinct_count, 7U);
    EXPECT_EQ(table->statistics(0).null_count, 91U);
    EXPECT_EQ(table->statistics(0).min.str, "AIR");
    EXPECT_EQ(table->statistics(0).max.str, "TRUCK");
    EXPECT_EQ(table->statistics(0).max_length, 7U);

    for (std::size_t f = 0; f < table->fragment_count(); ++f) {
        const Fragment &fragment = table->fragment(f);
        ASSERT_TRUE(fragment.dictionary_encoded(0));
        EXPECT_EQ(fragment.dictionary(0).size(), 7U);
        const std::uint32_t *codes = fragment.codes(0);
        const Vector decoded = fragment.column(0);
        const Vector comments = fragment.column(1);
        EXPECT_TRUE(comments.is_view());
        for (std::uint32_t r = 0; r < fragment.size(); ++r) {
            const std::size_t i = f * 100 + r;
            if (i % 11 == 0) {
                EXPECT_TRUE(decoded.is_null(r));
            } else {
                EXPECT_EQ(fragment.dictionary(0)[codes[r]].view(), mode_of(i));
                EXPECT_EQ(decoded.data<StringRef>()[r].view(), mode_of(i));
            }
            EXPECT_EQ(comments.data<StringRef>()[r].view(), "comment " + std::to_string(i));
        }
    }
    // Code order is string order.
    const Fragment &first = table->fragment(0);
    for (std::uint32_t a = 1; a < first.size(); ++a) {
        if (first.column(0).is_null(a) || first.column(0).is_null(a - 1)) {
            continue;
        }
        const auto ca = first.codes(0)[a];
        const auto cb = first.codes(0)[a - 1];
        EXPECT_EQ(ca < cb, first.dictionary(0)[ca] < first.dictionary(0)[cb]);
    }
}

TEST(TableTest, EncodingOptions) {
    for (const StringEncoding encoding : {StringEncoding::plain, StringEncoding::dictionary}) {
        TableOptions options;
        options.string_encoding = encoding;
        TableBuilder builder("strings", string_schema(), options);
        for (std::size_t i = 0; i < 20; ++i) {
            const Value row[] = {Value::varchar(mode_of(i)), Value::varchar(std::to_string(i))};
            ASSERT_EQ(builder.append_row(row), "");
        }
        const auto table = builder.finish();
        // 20 rows: automatic would make neither a dictionary (too few rows per value).
        EXPECT_EQ(table->dictionary_encoded(0), encoding == StringEncoding::dictionary);
        EXPECT_EQ(table->dictionary_encoded(1), encoding == StringEncoding::dictionary);
        for (std::size_t i = 0; i < 20; ++i) {
            EXPECT_EQ(table->value(i, 0).str, mode_of(i));
            EXPECT_EQ(table->value(i, 1).str, std::to_string(i));
        }
    }
}

TEST(TableTest, AutomaticEncodingGivesUpEarlyOnMostlyUniqueStrings) {
    TableBuilder builder("strings",
                         Schema({{"unique", Type::varchar(), false}, {"some", Type::varchar(), false}}));
    for (std::size_t i = 0; i < 10000; ++i) {
        const Value row[] = {Value::varchar("u" + std::to_string(i)),
                             Value::varchar("s" + std::to_string(i % 2000))};
        ASSERT_EQ(builder.append_row(row), "");
    }
    const auto table = builder.finish();
    EXPECT_FALSE(table->dictionary_encoded(0));
    ASSERT_TRUE(table->dictionary_encoded(1)) << "2000 values in 10000 rows: 5 rows per value";
    EXPECT_EQ(table->dictionary(1)->size(), 2000U);
    for (std::size_t i = 0; i < 10000; i += 997) {
        EXPECT_EQ(table->value(i, 0).str, "u" + std::to_string(i));
        EXPECT_EQ(table->value(i, 1).str, "s" + std::to_string(i % 2000));
    }
    const double error =
        std::abs(static_cast<double>(table->statistics(0).distinct_count) - 10000.0) / 10000.0;
    EXPECT_LT(error, 0.06) << table->statistics(0).distinct_count;

    // A chunk that outgrows max_dictionary_size midway turns its codes into strings.
    TableOptions tight;
    tight.max_dictionary_size = 8;
    tight.string_encoding = StringEncoding::dictionary;
    TableBuilder overflow("overflow", Schema({{"s", Type::varchar(), true}}), tight);
    for (std::size_t i = 0; i < 100; ++i) {
        const Value v =
            i % 9 == 0 ? Value::null_of(Type::varchar()) : Value::varchar("v" + std::to_string(i % 20));
        ASSERT_EQ(overflow.append_row(std::span<const Value>(&v, 1)), "");
    }
    const auto plain = overflow.finish();
    EXPECT_FALSE(plain->dictionary_encoded(0));
    for (std::size_t i = 0; i < 100; ++i) {
        EXPECT_EQ(plain->value(i, 0).null, i % 9 == 0);
        if (i % 9 != 0) {
            EXPECT_EQ(plain->value(i, 0).str, "v" + std::to_string(i % 20));
        }
    }
    EXPECT_EQ(plain->statistics(0).distinct_count, 20U);
}

TEST(TableTest, StatisticsOfNumbers) {
    const std::uint64_t seed = test::test_seed();
    std::mt19937_64 random(seed);
    TableBuilder builder("numbers",
                         Schema({{"k", Type::bigint(), false},
                                 {"v", Type::decimal(12, 2), true},
                                 {"d", Type::date(), true},
                                 {"x", Type::float64(), true}}),
                         TableOptions{.fragment_capacity = 1000});
    std::set<std::int64_t> distinct;
    std::int64_t low = INT64_MAX;
    std::int64_t high = INT64_MIN;
    std::int64_t low_of_v = INT64_MAX; // v is NULL on every 4th row: its minimum skips those
    const std::size_t rows = 20000;
    for (std::size_t i = 0; i < rows; ++i) {
        const auto k = static_cast<std::int64_t>(random() % 5000) - 2500;
        distinct.insert(k);
        low = std::min(low, k);
        high = std::max(high, k);
        if (i % 4 != 0) {
            low_of_v = std::min(low_of_v, k * 3);
        }
        const Value row[] = {Value::bigint(k),
                             i % 4 == 0 ? Value::null_of(Type::decimal(12, 2)) : Value::decimal(k * 3, 12, 2),
                             Value::null_of(Type::date()), Value::float64(static_cast<double>(k) * 0.5)};
        ASSERT_EQ(builder.append_row(row), "");
    }
    const auto table = builder.finish();
    const ColumnStatistics &k = table->statistics(0);
    EXPECT_EQ(k.null_count, 0U);
    EXPECT_EQ(k.min.i64, low);
    EXPECT_EQ(k.max.i64, high);
    EXPECT_FALSE(k.distinct_exact);
    const double error =
        std::abs(static_cast<double>(k.distinct_count) - static_cast<double>(distinct.size())) /
        static_cast<double>(distinct.size());
    EXPECT_LT(error, 0.06) << "estimate " << k.distinct_count << " exact " << distinct.size();
    EXPECT_EQ(table->statistics(1).null_count, rows / 4);
    EXPECT_EQ(table->statistics(1).min.i64, low_of_v) << "seed " << seed;
    EXPECT_EQ(table->statistics(1).min.type, Type::decimal(12, 2));
    EXPECT_EQ(table->statistics(2).null_count, rows);
    EXPECT_TRUE(table->statistics(2).min.null);
    EXPECT_EQ(table->statistics(2).distinct_count, 0U);
    EXPECT_EQ(table->statistics(3).max.f64, static_cast<double>(high) * 0.5);
    // Zone maps bound every fragment's values.
    for (std::size_t f = 0; f < table->fragment_count(); ++f) {
        const ZoneMap &zone = table->fragment(f).zone_map(0);
        const auto *values = static_cast<const std::int64_t *>(table->fragment(f).data(0));
        const auto [mn, mx] = std::minmax_element(values, values + table->fragment(f).size());
        EXPECT_EQ(zone.min.i64, *mn);
        EXPECT_EQ(zone.max.i64, *mx);
    }
}

TEST(TableTest, AppendIsCopyOnWrite) {
    TableOptions options;
    options.fragment_capacity = 64;
    const auto first = build_all_types(100, options);
    TableBuilder builder(first);
    for (std::int64_t i = 100; i < 250; ++i) {
        ASSERT_EQ(builder.append_row(all_types_row(i)), "");
    }
    const auto second = builder.finish();
    expect_all_types(*first, 100); // the old snapshot is untouched
    expect_all_types(*second, 250);
    EXPECT_EQ(second->version(), first->version() + 1);
    // The full fragment is shared, the partial one rebuilt.
    EXPECT_EQ(second->fragments()[0], first->fragments()[0]);
    EXPECT_NE(second->fragments()[1], first->fragments()[1]);
    EXPECT_EQ(second->statistics(1).null_count, static_cast<std::uint64_t>((250 + 3) / 7));
}

TEST(TableTest, AppendWithNewDictionaryValuesReencodesAndKeepsOldSnapshot) {
    TableOptions options;
    options.fragment_capacity = 50;
    TableBuilder builder("strings", string_schema(), options);
    for (std::size_t i = 0; i < 200; ++i) {
        const Value row[] = {Value::varchar(mode_of(i)), Value::varchar("c" + std::to_string(i))};
        ASSERT_EQ(builder.append_row(row), "");
    }
    const auto first = builder.finish();
    ASSERT_TRUE(first->dictionary_encoded(0));

    // Same values: the dictionary stays and full fragments are shared.
    TableBuilder same(first);
    const Value known[] = {Value::varchar("AIR"), Value::varchar("x")};
    ASSERT_EQ(same.append_row(known), "");
    const auto second = same.finish();
    EXPECT_EQ(second->dictionary(0), first->dictionary(0));
    EXPECT_EQ(second->fragments()[0], first->fragments()[0]);

    // A new value: a new dictionary, every fragment re-encoded, the old version still decodes.
    TableBuilder more(second);
    const Value fresh[] = {Value::varchar("BOAT"), Value::varchar("y")};
    ASSERT_EQ(more.append_row(fresh), "");
    const auto third = more.finish();
    ASSERT_TRUE(third->dictionary_encoded(0));
    EXPECT_EQ(third->dictionary(0)->size(), 8U);
    EXPECT_NE(third->fragments()[0], second->fragments()[0]);
    for (std::size_t i = 0; i < 200; ++i) {
        EXPECT_EQ(first->value(i, 0).str, mode_of(i));
        EXPECT_EQ(third->value(i, 0).str, mode_of(i));
    }
    EXPECT_EQ(third->value(200, 0).str, "AIR");
    EXPECT_EQ(third->value(201, 0).str, "BOAT");
    EXPECT_EQ(third->value(201, 1).str, "y");
    EXPECT_EQ(third->row_count(), 202U);

    // Too many distinct values for the dictionary: the column turns plain.
    TableOptions tight = options;
    tight.max_dictionary_size = 8;
    TableBuilder small("small", string_schema(), tight);
    for (std::size_t i = 0; i < 100; ++i) {
        const Value row[] = {Value::varchar(mode_of(i)), Value::varchar("c")};
        ASSERT_EQ(small.append_row(row), "");
    }
    const auto dictionary_version = small.finish();
    ASSERT_TRUE(dictionary_version->dictionary_encoded(0));
    TableBuilder grow(dictionary_version);
    for (std::size_t i = 0; i < 5; ++i) {
        const Value row[] = {Value::varchar("new" + std::to_string(i)), Value::varchar("c")};
        ASSERT_EQ(grow.append_row(row), "");
    }
    const auto plain_version = grow.finish();
    EXPECT_FALSE(plain_version->dictionary_encoded(0));
    for (std::size_t i = 0; i < 100; ++i) {
        EXPECT_EQ(plain_version->value(i, 0).str, mode_of(i));
        EXPECT_EQ(dictionary_version->value(i, 0).str, mode_of(i));
    }
    EXPECT_EQ(plain_version->value(104, 0).str, "new4");
    EXPECT_FALSE(plain_version->statistics(0).distinct_exact);
    EXPECT_EQ(plain_version->statistics(0).distinct_count, 12U);
}

TEST(TableTest, AppendRowRejectsBadValuesAndAppendsNothing) {
    TableBuilder builder("t", Schema({{"i", Type::integer(), false},
                                      {"s", Type::varchar(3), true},
                                      {"d", Type::decimal(4, 1), true},
                                      {"day", Type::date(), true}}));
    const auto row = [](Value a, Value b, Value c, Value d) { return std::vector<Value>{a, b, c, d}; };
    const Value ok_s = Value::varchar("abc");
    const Value null_d = Value::null_of(Type::date());
    EXPECT_NE(builder.append_row(row(Value::null_of(Type::integer()), ok_s, Value::integer(1), null_d))
                  .find("column i: NULL in a NOT NULL column"),
              std::string::npos);
    EXPECT_NE(builder.append_row(row(Value::bigint(1LL << 40), ok_s, Value::integer(1), null_d))
                  .find("out of range"),
              std::string::npos);
    EXPECT_NE(builder.append_row(row(Value::integer(1), Value::varchar("abcd"), Value::integer(1), null_d))
                  .find("too long for VARCHAR(3)"),
              std::string::npos);
    EXPECT_NE(
        builder.append_row(row(Value::integer(1), ok_s, Value::integer(1000), null_d)).find("DECIMAL(4,1)"),
        std::string::npos);
    EXPECT_NE(
        builder.append_row(row(Value::integer(1), ok_s, Value::integer(1), Value::varchar("1999-02-30")))
            .find("DATE"),
        std::string::npos);
    EXPECT_NE(builder.append_row(std::vector<Value>{Value::integer(1)}).find("expected 4 values"),
              std::string::npos);
    EXPECT_EQ(builder.appended_rows(), 0U);
    // Conversions an INSERT relies on: integer and rounded decimals into DECIMAL, text into DATE,
    // multi-byte characters counted as characters.
    EXPECT_EQ(builder.append_row(row(Value::integer(7), Value::varchar("äöü"), Value::decimal(1235, 4, 2),
                                     Value::varchar("1998-12-01"))),
              "");
    const auto table = builder.finish();
    ASSERT_EQ(table->row_count(), 1U);
    EXPECT_EQ(table->value(0, 1).str, "äöü");
    EXPECT_EQ(table->value(0, 2).i64, 124); // 12.35 rounded to 12.4
    EXPECT_EQ(date::format(table->value(0, 3).i64), "1998-12-01");
}

class PlacementTest : public test::RuntimeFixture {};

TEST_P(PlacementTest, FragmentsAreSpreadOverRegionsAndReadBack) {
    TableOptions options;
    options.fragment_capacity = 32;
    TableBuilder builder("all_types", all_types_schema(), options);
    for (std::int64_t i = 0; i < 500; ++i) {
        ASSERT_EQ(builder.append_row(all_types_row(i)), "");
    }
    const auto table = builder.finish(&runtime());
    expect_all_types(*table, 500);
    const std::uint16_t regions = runtime().region_count();
    for (std::size_t f = 0; f < table->fragment_count(); ++f) {
        EXPECT_EQ(table->fragment(f).region(), f % regions);
    }
    if (GetParam().expected_regions > 1) {
        const Placement placement = Placement::of(runtime());
        EXPECT_EQ(placement.regions(), GetParam().expected_regions);
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PlacementTest,
                         ::testing::Values(test::RuntimeShape{"workers1", 1, "", 1, 0},
                                           test::RuntimeShape{"workers2", 2, "", 2, 0},
                                           test::RuntimeShape{"numa2x1", std::nullopt, "2x1", 2, 2}),
                         test::shape_name);

TEST(CatalogTest, CreateFindDropReplace) {
    Catalog catalog;
    const auto created = catalog.create_table("Orders", Schema({{"o_orderkey", Type::bigint(), false}}));
    EXPECT_EQ(created->name(), "Orders");
    EXPECT_EQ(catalog.find("ORDERS"), created);
    EXPECT_EQ(catalog.find("lineitem"), nullptr);
    EXPECT_THROW(catalog.create_table("orders", Schema({{"x", Type::integer(), true}})), CatalogError);
    EXPECT_THROW(catalog.create_table("bad", Schema(std::vector<ColumnDef>{})), CatalogError);
    EXPECT_THROW(catalog.create_table("bad", Schema({{"x", Type::integer(), true}}),
                                      TableOptions{.fragment_capacity = 0}),
                 CatalogError);
    catalog.create_table("customer", Schema({{"c_custkey", Type::bigint(), false}}));
    EXPECT_EQ(catalog.names(), (std::vector<std::string>{"customer", "Orders"}));

    TableBuilder builder(created);
    const Value one = Value::bigint(1);
    ASSERT_EQ(builder.append_row(std::span<const Value>(&one, 1)), "");
    const auto next = builder.finish();
    EXPECT_TRUE(catalog.replace(created, next));
    EXPECT_EQ(catalog.find("orders"), next);
    EXPECT_FALSE(catalog.replace(created, next)) << "a stale version must not be published";

    const auto snapshot = catalog.find("orders");
    EXPECT_TRUE(catalog.drop_table("ORDERS"));
    EXPECT_EQ(catalog.find("orders"), nullptr);
    EXPECT_EQ(snapshot->row_count(), 1U) << "a dropped table stays readable while held";
    EXPECT_EQ(snapshot->value(0, 0).i64, 1);
    EXPECT_FALSE(catalog.replace(next, next)) << "publishing into a dropped table must fail";
    EXPECT_THROW(catalog.drop_table("orders"), CatalogError);
    EXPECT_FALSE(catalog.drop_table("orders", true));
    catalog.add_table(snapshot);
    EXPECT_THROW(catalog.add_table(snapshot), CatalogError);
}

TEST(CatalogTest, ConcurrentReadersAndWriters) {
    Catalog catalog;
    const auto base = catalog.create_table("t", Schema({{"x", Type::bigint(), false}}));
    std::atomic<bool> stop{false};
    std::thread reader([&] {
        while (!stop.load()) {
            if (const auto table = catalog.find("t")) {
                for (std::uint64_t r = 0; r < table->row_count(); ++r) {
                    ASSERT_EQ(table->value(r, 0).i64, static_cast<std::int64_t>(r));
                }
            }
        }
    });
    for (std::int64_t i = 0; i < 50; ++i) {
        const auto current = catalog.find("t");
        TableBuilder builder(current);
        const Value v = Value::bigint(i);
        ASSERT_EQ(builder.append_row(std::span<const Value>(&v, 1)), "");
        ASSERT_TRUE(catalog.replace(current, builder.finish()));
    }
    stop.store(true);
    reader.join();
    EXPECT_EQ(catalog.find("t")->row_count(), 50U);
    EXPECT_EQ(base->row_count(), 0U);
}

} // namespace
} // namespace mx::db
