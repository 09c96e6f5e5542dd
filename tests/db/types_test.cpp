#include <gtest/gtest.h>

#include <mx/db/types.h>
#include <mx/db/vector.h>

namespace mx::db {
namespace {

TEST(DecimalTest, ParsesAndRoundsHalfAwayFromZero) {
    EXPECT_EQ(decimal::parse("12.345", 15, 2), Int128{1235});
    EXPECT_EQ(decimal::parse("-12.345", 15, 2), Int128{-1235});
    EXPECT_EQ(decimal::parse("-12.344", 15, 2), Int128{-1234});
    EXPECT_EQ(decimal::parse("0.05", 15, 2), Int128{5});
    EXPECT_EQ(decimal::parse(".5", 15, 1), Int128{5});
    EXPECT_EQ(decimal::parse("7", 15, 2), Int128{700});
    EXPECT_EQ(decimal::parse("+0007.10", 4, 2), Int128{710});
    EXPECT_EQ(decimal::parse("99.995", 4, 2), std::nullopt) << "rounds to 100.00: 5 digits";
    EXPECT_EQ(decimal::parse("1e5", 15, 2), std::nullopt);
    EXPECT_EQ(decimal::parse("", 15, 2), std::nullopt);
    EXPECT_EQ(decimal::parse("-", 15, 2), std::nullopt);
    EXPECT_EQ(decimal::parse("1.2.3", 15, 2), std::nullopt);
}

TEST(DecimalTest, FormatsWithExactScale) {
    EXPECT_EQ(decimal::format(1235, 2), "12.35");
    EXPECT_EQ(decimal::format(-5, 2), "-0.05");
    EXPECT_EQ(decimal::format(0, 2), "0.00");
    EXPECT_EQ(decimal::format(12, 0), "12");
    EXPECT_EQ(decimal::format(decimal::pow10(30) + 1, 6), "1000000000000000000000000.000001");
}

TEST(DecimalTest, RescaleAndDivideRound) {
    EXPECT_EQ(decimal::rescale(12345, 3, 1), 123);
    EXPECT_EQ(decimal::rescale(12350, 3, 1), 124);
    EXPECT_EQ(decimal::rescale(-12350, 3, 1), -124);
    EXPECT_EQ(decimal::rescale(12, 0, 2), 1200);
    EXPECT_EQ(decimal::divide_round(7, 2), 4);
    EXPECT_EQ(decimal::divide_round(-7, 2), -4);
    EXPECT_EQ(decimal::divide_round(7, -3), -2);
    EXPECT_TRUE(decimal::fits(99999, 5));
    EXPECT_FALSE(decimal::fits(-100000, 5));
}

TEST(DateTest, RoundTripsAndValidates) {
    EXPECT_EQ(date::parse("1970-01-01"), 0);
    EXPECT_EQ(date::parse("1998-12-01"), 10561);
    EXPECT_EQ(date::format(10561), "1998-12-01");
    EXPECT_EQ(date::parse("2000-02-29").has_value(), true);
    EXPECT_EQ(date::parse("1900-02-29"), std::nullopt);
    EXPECT_EQ(date::parse("1995-13-01"), std::nullopt);
    EXPECT_EQ(date::parse("1995-1"), std::nullopt);
    EXPECT_EQ(date::parse("x995-01-01"), std::nullopt);
    for (std::int64_t d = -800000; d < 800000; d += 997) {
        const auto c = date::to_civil(d);
        ASSERT_EQ(date::from_civil(c.year, c.month, c.day), d);
    }
}

TEST(DateTest, AddMonthsClampsToMonthEnd) {
    EXPECT_EQ(date::format(date::add_months(*date::parse("1995-01-31"), 1)), "1995-02-28");
    EXPECT_EQ(date::format(date::add_months(*date::parse("1996-01-31"), 1)), "1996-02-29");
    EXPECT_EQ(date::format(date::add_months(*date::parse("1994-01-01"), 12)), "1995-01-01");
    EXPECT_EQ(date::format(date::add_months(*date::parse("1994-03-15"), -3)), "1993-12-15");
}

TEST(ValueTest, PrintsLikeDuckDb) {
    EXPECT_EQ(Value::decimal(123456, 15, 2).to_string(), "1234.56");
    EXPECT_EQ(Value::decimal(Int128{-7}, 38, 4).to_string(), "-0.0007");
    EXPECT_EQ(Value::float64(0.1).to_string(), "0.1");
    EXPECT_EQ(Value::float64(100.0).to_string(), "100.0");
    EXPECT_EQ(Value::float64(1e15).to_string(), "1000000000000000.0");
    EXPECT_EQ(Value::date(0).to_string(), "1970-01-01");
    EXPECT_EQ(Value::null_of(Type::integer()).to_string(), "NULL");
    EXPECT_EQ(Type::decimal(15, 2).to_string(), "DECIMAL(15,2)");
    EXPECT_EQ(Type::decimal(38, 2).physical(), PhysicalType::i128);
}

TEST(VectorTest, OwningViewAndNulls) {
    Vector v(Type::bigint(), 4);
    for (std::uint32_t i = 0; i < 4; ++i) {
        v.mutable_data<std::int64_t>()[i] = i * 10;
    }
    EXPECT_EQ(v.nulls(), nullptr);
    v.set_null(2);
    const Vector s = v.slice(1, 3);
    EXPECT_TRUE(s.is_view());
    EXPECT_EQ(s.value(0).i64, 10);
    EXPECT_TRUE(s.value(1).null);
    Vector strings(Type::varchar(), 1);
    strings.mutable_data<StringRef>()[0] = strings.heap().add("hello");
    EXPECT_EQ(strings.value(0).str, "hello");
}

} // namespace
} // namespace mx::db
