// Tests of TunaDB's expressions: DuckDB's typing rules (expected types and values below were
// confirmed with DuckDB 1.5.5, see docs/design/expressions.md), every node kind with and
// without NULLs and selections, runtime errors, and a random differential test against a slow
// row-at-a-time reference evaluator written here independently of the vectorized kernels.

#include <gtest/gtest.h>

#include <mx/db/expression.h>

#include "expression_internal.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <limits>
#include <optional>
#include <random>
#include <thread>

namespace mx::db {
namespace {

namespace e = expr;

// ------------------------------------------------------------------------------------------
// Helpers

Value dec(std::string_view text, std::uint8_t precision, std::uint8_t scale) {
    const auto unscaled = decimal::parse(text, precision, scale);
    EXPECT_TRUE(unscaled.has_value()) << text;
    return Value::decimal(unscaled.value_or(0), precision, scale);
}
Value day(std::string_view text) {
    const auto days = date::parse(text);
    EXPECT_TRUE(days.has_value()) << text;
    return Value::date(days.value_or(0));
}
Value str(std::string text) { return Value::varchar(std::move(text)); }
Value i32(std::int64_t v) { return Value::integer(v); }
Value i64(std::int64_t v) { return Value::bigint(v); }
Value f64(double v) { return Value::float64(v); }
Value boolean(bool v) { return Value::boolean(v); }
Value null_of(Type type) { return Value::null_of(type); }

ExprPtr lit(Value v) { return e::constant(std::move(v)); }

/// An owning column holding `values` (all of type `type`; NULL rows get arbitrary bits).
Vector make_column(Type type, const std::vector<Value> &values, std::int64_t garbage = 0) {
    Vector v(type, static_cast<std::uint32_t>(values.size()));
    for (std::uint32_t i = 0; i < values.size(); ++i) {
        const Value &value = values[i];
        if (value.null) {
            v.set_null(i);
        }
        switch (type.physical()) {
        case PhysicalType::u8:
            v.mutable_data<std::uint8_t>()[i] =
                static_cast<std::uint8_t>(value.null ? garbage & 1 : value.i64);
            break;
        case PhysicalType::i64:
            v.mutable_data<std::int64_t>()[i] = value.null ? garbage : value.i64;
            break;
        case PhysicalType::i128:
            v.mutable_data<Int128>()[i] = value.null ? Int128{garbage} * garbage : value.i128;
            break;
        case PhysicalType::f64:
            v.mutable_data<double>()[i] = value.null ? static_cast<double>(garbage) : value.f64;
            break;
        case PhysicalType::string:
            // NULL rows point at nothing valid on purpose: kernels must not touch them
            v.mutable_data<StringRef>()[i] =
                value.null ? StringRef(reinterpret_cast<const char *>(std::uintptr_t{16}), 1000)
                           : v.heap().add(value.str);
            break;
        }
    }
    return v;
}

Batch make_batch(std::vector<Vector> columns) {
    Batch batch;
    batch.rows = columns.empty() ? 1 : columns.front().size();
    batch.columns = std::move(columns);
    return batch;
}
template <class... Columns>
Batch batch_of(Columns &&...columns) {
    std::vector<Vector> vectors;
    (vectors.push_back(std::forward<Columns>(columns)), ...);
    return make_batch(std::move(vectors));
}

std::string text_of(const Value &v) { return v.null ? "NULL" : v.to_string(); }

/// Results of the live rows, as text ("NULL" for NULL), or "ERROR: message".
std::vector<std::string> eval_texts(const ExprPtr &expression, const Batch &batch) {
    Vector out;
    const EvalStatus status = evaluate(*expression, batch, out);
    if (!status.ok()) {
        return {"ERROR: " + status.message()};
    }
    EXPECT_EQ(out.type().physical(), expression->type().physical());
    std::vector<std::string> texts;
    for (std::uint32_t i = 0; i < batch.count(); ++i) {
        texts.push_back(text_of(out.value(batch.row(i))));
    }
    return texts;
}

/// One row without columns: constant expressions (folded or not) and their errors.
std::string sql(const ExprPtr &expression) {
    Batch batch;
    batch.rows = 1;
    const auto texts = eval_texts(expression, batch);
    return texts.empty() ? "?" : texts.front();
}

std::vector<std::string> texts(std::initializer_list<const char *> list) {
    return {list.begin(), list.end()};
}

// Typical TPC-H-like columns.
struct Fixture {
    Batch batch;
    ExprPtr i;  // INTEGER
    ExprPtr b;  // BIGINT
    ExprPtr d;  // DECIMAL(15,2)
    ExprPtr e4; // DECIMAL(12,4)
    ExprPtr f;  // DOUBLE
    ExprPtr s;  // VARCHAR
    ExprPtr dt; // DATE
    ExprPtr h;  // DECIMAL(38,4)
    ExprPtr sm; // DECIMAL(4,1)

    Fixture() {
        std::vector<Vector> columns;
        columns.push_back(make_column(Type::integer(), {i32(3)}));
        columns.push_back(make_column(Type::bigint(), {i64(5)}));
        columns.push_back(make_column(Type::decimal(15, 2), {dec("1.25", 15, 2)}));
        columns.push_back(make_column(Type::decimal(12, 4), {dec("2.5", 12, 4)}));
        columns.push_back(make_column(Type::float64(), {f64(1.5)}));
        columns.push_back(make_column(Type::varchar(), {str("abc")}));
        columns.push_back(make_column(Type::date(), {day("1996-02-29")}));
        columns.push_back(make_column(Type::decimal(38, 4), {dec("1.5", 38, 4)}));
        columns.push_back(make_column(Type::decimal(4, 1), {dec("2.5", 4, 1)}));
        batch = make_batch(std::move(columns));
        i = e::column(0, Type::integer(), "i");
        b = e::column(1, Type::bigint(), "b");
        d = e::column(2, Type::decimal(15, 2), "d");
        e4 = e::column(3, Type::decimal(12, 4), "e");
        f = e::column(4, Type::float64(), "f");
        s = e::column(5, Type::varchar(), "s");
        dt = e::column(6, Type::date(), "dt");
        h = e::column(7, Type::decimal(38, 4), "h");
        sm = e::column(8, Type::decimal(4, 1), "small");
    }

    /// type and value of the single row, as DuckDB prints `SELECT typeof(x), x::VARCHAR`
    std::pair<std::string, std::string> run(const ExprPtr &x) const {
        return {x->type().to_string(), eval_texts(x, batch).front()};
    }
};

// ------------------------------------------------------------------------------------------
// DuckDB-confirmed types and values (`SELECT typeof(x), x::VARCHAR FROM t` in DuckDB 1.5.5 with
// t(i INTEGER 3, b BIGINT 5, d DECIMAL(15,2) 1.25, e DECIMAL(12,4) 2.5, f DOUBLE 1.5,
// s VARCHAR 'abc', dt DATE 1996-02-29, h DECIMAL(38,4) 1.5, small DECIMAL(4,1) 2.5)).

TEST(ExpressionTypes, MatchDuckDB) {
    const Fixture t;
    using P = std::pair<std::string, std::string>;
    auto one = [] { return lit(i32(1)); };
    EXPECT_EQ(t.run(e::multiply(t.d, e::subtract(one(), t.d))), P("DECIMAL(18,4)", "-0.3125"));
    EXPECT_EQ(t.run(e::multiply(lit(dec("1.5", 2, 1)), lit(i32(2)))), P("DECIMAL(12,1)", "3.0"));
    EXPECT_EQ(t.run(e::add(t.i, t.d)), P("DECIMAL(16,2)", "4.25"));
    EXPECT_EQ(t.run(e::add(t.b, t.d)), P("DECIMAL(22,2)", "6.25"));
    EXPECT_EQ(t.run(e::add(t.d, t.e4)), P("DECIMAL(18,4)", "3.7500"));
    EXPECT_EQ(t.run(e::multiply(t.d, t.e4)), P("DECIMAL(18,6)", "3.125000"));
    EXPECT_EQ(t.run(e::subtract(t.d, t.e4)), P("DECIMAL(18,4)", "-1.2500"));
    EXPECT_EQ(t.run(e::divide(t.d, t.e4)), P("DOUBLE", "0.5"));
    EXPECT_EQ(t.run(e::divide(t.i, t.b)), P("DOUBLE", "0.6"));
    EXPECT_EQ(t.run(e::add(t.i, t.b)), P("BIGINT", "8"));
    EXPECT_EQ(t.run(e::multiply(t.i, t.i)), P("INTEGER", "9"));
    EXPECT_EQ(t.run(e::subtract(one(), t.d)), P("DECIMAL(16,2)", "-0.25"));
    EXPECT_EQ(t.run(e::multiply(e::multiply(t.d, e::subtract(one(), t.d)), e::add(one(), t.d))),
              P("DECIMAL(18,6)", "-0.703125"));
    EXPECT_EQ(t.run(e::add(t.d, t.f)), P("DOUBLE", "2.75"));
    EXPECT_EQ(t.run(e::add(t.i, t.f)), P("DOUBLE", "4.5"));
    EXPECT_EQ(t.run(e::negate(t.d)), P("DECIMAL(15,2)", "-1.25"));
    EXPECT_EQ(t.run(e::negate(t.i)), P("INTEGER", "-3"));
    EXPECT_EQ(t.run(e::subtract(t.dt, t.dt)), P("BIGINT", "0"));
    EXPECT_EQ(t.run(e::add(t.dt, one())), P("DATE", "1996-03-01"));
    EXPECT_EQ(t.run(e::extract(DatePart::year, t.dt)), P("BIGINT", "1996"));
    EXPECT_EQ(t.run(e::extract(DatePart::month, t.dt)), P("BIGINT", "2"));
    EXPECT_EQ(t.run(e::extract(DatePart::day, t.dt)), P("BIGINT", "29"));
    EXPECT_EQ(t.run(e::substring(t.s, lit(i32(2)), lit(i32(1)))), P("VARCHAR", "b"));
    EXPECT_EQ(t.run(e::substring(t.s, lit(i32(2)))), P("VARCHAR", "bc"));
    auto i_gt_1 = [&] { return e::greater(t.i, one()); };
    EXPECT_EQ(t.run(e::case_when({{i_gt_1(), t.d}}, t.e4)), P("DECIMAL(17,4)", "1.2500"));
    EXPECT_EQ(t.run(e::case_when({{i_gt_1(), t.i}}, t.d)), P("DECIMAL(15,2)", "3.00"));
    EXPECT_EQ(t.run(e::case_when({{i_gt_1(), t.b}}, t.d)), P("DECIMAL(21,2)", "5.00"));
    EXPECT_EQ(t.run(e::case_when({{i_gt_1(), t.f}}, t.d)), P("DOUBLE", "1.5"));
    EXPECT_EQ(t.run(e::case_when({{i_gt_1(), one()}}, lit(dec("2.5", 2, 1)))), P("DECIMAL(11,1)", "1.0"));
    EXPECT_EQ(t.run(e::case_when({{i_gt_1(), e::null(Type::integer())}}, t.d)), P("DECIMAL(15,2)", "NULL"));
    EXPECT_EQ(t.run(e::coalesce({t.d, t.e4})), P("DECIMAL(17,4)", "1.2500"));
    EXPECT_EQ(t.run(e::coalesce({t.i, t.b})), P("BIGINT", "3"));
    EXPECT_EQ(t.run(e::cast(t.d, Type::decimal(10, 1))), P("DECIMAL(10,1)", "1.3"));
    EXPECT_EQ(t.run(e::cast(lit(str("1.25")), Type::decimal(10, 1))), P("DECIMAL(10,1)", "1.3"));
    EXPECT_EQ(t.run(e::add(t.h, t.d)), P("DECIMAL(38,4)", "2.7500"));
    EXPECT_EQ(t.run(e::multiply(t.h, t.d)), P("DECIMAL(38,6)", "1.875000"));
    EXPECT_EQ(t.run(e::multiply(t.sm, t.sm)), P("DECIMAL(8,2)", "6.25"));
    EXPECT_EQ(t.run(e::add(t.sm, t.sm)), P("DECIMAL(5,1)", "5.0"));
    EXPECT_EQ(t.run(e::multiply(e::multiply(t.d, t.d), t.d)), P("DECIMAL(18,6)", "1.953125"));
    EXPECT_EQ(t.run(e::multiply(e::multiply(e::multiply(t.d, t.d), t.d), t.d)),
              P("DECIMAL(18,8)", "2.44140625"));
    EXPECT_EQ(t.run(e::multiply(t.i, t.d)), P("DECIMAL(18,2)", "3.75"));
    EXPECT_EQ(t.run(e::multiply(t.b, t.d)), P("DECIMAL(34,2)", "6.25"));
    EXPECT_EQ(t.run(e::modulo(t.i, lit(i32(2)))), P("INTEGER", "1"));
    EXPECT_EQ(t.run(e::modulo(t.d, t.e4)), P("DECIMAL(17,4)", "1.2500"));
    EXPECT_EQ(t.run(e::add(t.i, lit(dec("1.5", 2, 1)))), P("DECIMAL(12,1)", "4.5"));
    EXPECT_EQ(t.run(e::add(t.d, lit(dec("0.05", 3, 2)))), P("DECIMAL(16,2)", "1.30"));
    EXPECT_EQ(t.run(e::cast(t.d, Type::integer())), P("INTEGER", "1"));
    EXPECT_EQ(t.run(e::cast(t.f, Type::integer())), P("INTEGER", "2"));
    EXPECT_EQ(t.run(e::cast(t.f, Type::decimal(10, 2))), P("DECIMAL(10,2)", "1.50"));
    EXPECT_EQ(t.run(e::cast(t.d, Type::varchar())), P("VARCHAR", "1.25"));
    EXPECT_EQ(t.run(e::cast(t.i, Type::decimal(4, 1))), P("DECIMAL(4,1)", "3.0"));
    EXPECT_EQ(t.run(e::equal(t.d, t.e4)), P("BOOLEAN", "false"));
    EXPECT_EQ(t.run(e::between(t.d, one(), lit(i32(2)))), P("BOOLEAN", "true"));
    EXPECT_EQ(t.run(e::like(t.s, "a%")), P("BOOLEAN", "true"));
    EXPECT_EQ(t.run(e::in_list(t.i, {i32(1), i32(2)})), P("BOOLEAN", "false"));
    EXPECT_EQ(t.run(e::in_list(t.d, {dec("1.5", 2, 1), i32(2)})), P("BOOLEAN", "false"));
}

TEST(ExpressionTypes, DecimalWidthClampsMatchDuckDB) {
    // t(a DECIMAL(18,2), b DECIMAL(17,2), c DECIMAL(19,2), d DECIMAL(15,2))
    const auto a = e::column(0, Type::decimal(18, 2));
    const auto b = e::column(1, Type::decimal(17, 2));
    const auto c = e::column(2, Type::decimal(19, 2));
    const auto d = e::column(3, Type::decimal(15, 2));
    EXPECT_EQ(e::add(a, a)->type(), Type::decimal(18, 2));
    EXPECT_EQ(e::add(b, b)->type(), Type::decimal(18, 2));
    EXPECT_EQ(e::add(a, c)->type(), Type::decimal(20, 2));
    EXPECT_EQ(e::multiply(a, a)->type(), Type::decimal(18, 4));
    EXPECT_EQ(e::multiply(c, c)->type(), Type::decimal(38, 4));
    EXPECT_EQ(e::subtract(a, b)->type(), Type::decimal(18, 2));
    EXPECT_EQ(e::multiply(b, d)->type(), Type::decimal(18, 4));
    EXPECT_EQ(e::modulo(a, d)->type(), Type::decimal(18, 2));
    EXPECT_EQ(e::multiply(e::column(4, Type::integer()), lit(dec("2.5", 2, 1)))->type(),
              Type::decimal(12, 1));
    EXPECT_EQ(e::multiply(e::column(4, Type::float64()), lit(dec("2.5", 2, 1)))->type(), Type::float64());
    EXPECT_EQ(e::multiply(e::column(0, Type::integer()), e::column(1, Type::bigint()))->type(),
              Type::bigint());
}

TEST(ExpressionTypes, InvalidCombinationsThrowTypeError) {
    const Fixture t;
    try {
        (void)e::equal(t.dt, t.s);
        FAIL() << "no TypeError";
    } catch (const TypeError &error) {
        EXPECT_STREQ(error.what(), "cannot compare DATE with VARCHAR");
    }
    try {
        (void)e::add(t.s, t.i);
        FAIL() << "no TypeError";
    } catch (const TypeError &error) {
        EXPECT_STREQ(error.what(), "operator + is not defined for VARCHAR and INTEGER");
    }
    EXPECT_THROW((void)e::cast(t.dt, Type::integer()), TypeError);
    EXPECT_THROW((void)e::cast(t.i, Type::date()), TypeError);
    EXPECT_THROW((void)e::like(t.i, "1%"), TypeError);
    EXPECT_THROW((void)e::logical_and(t.i, t.i), TypeError);
    EXPECT_THROW((void)e::multiply(t.dt, t.i), TypeError);
    EXPECT_THROW((void)e::add(t.dt, t.d), TypeError);
    EXPECT_THROW((void)e::extract(DatePart::year, t.s), TypeError);
    EXPECT_THROW((void)e::substring(t.s, t.d), TypeError);
    EXPECT_THROW((void)e::case_when({{e::greater(t.i, t.i), t.s}}, t.i), TypeError);
    EXPECT_THROW((void)e::in_list(t.i, {}), TypeError);
    EXPECT_THROW((void)e::in_list(t.dt, {str("x")}), TypeError);
    EXPECT_THROW((void)e::cast(t.i, Type::decimal(3, 4)), TypeError);
    EXPECT_THROW((void)e::negate(t.s), TypeError);
    EXPECT_TRUE((std::is_base_of_v<std::invalid_argument, TypeError>));
}

// ------------------------------------------------------------------------------------------
// Arithmetic

TEST(ExpressionArithmetic, NullsAndSelection) {
    std::vector<Vector> columns;
    columns.push_back(make_column(Type::integer(),
                                  {i32(1), null_of(Type::integer()), i32(3), i32(4), i32(-5)},
                                  std::numeric_limits<std::int64_t>::max()));
    columns.push_back(
        make_column(Type::integer(), {i32(10), i32(20), null_of(Type::integer()), i32(40), i32(50)}));
    Batch batch = make_batch(std::move(columns));
    const auto x = e::column(0, Type::integer(), "x");
    const auto y = e::column(1, Type::integer(), "y");
    EXPECT_EQ(eval_texts(e::add(x, y), batch), texts({"11", "NULL", "NULL", "44", "45"}));
    EXPECT_EQ(eval_texts(e::multiply(x, lit(i32(3))), batch), texts({"3", "NULL", "9", "12", "-15"}));
    EXPECT_EQ(eval_texts(e::subtract(lit(i32(100)), x), batch), texts({"99", "NULL", "97", "96", "105"}));
    EXPECT_EQ(eval_texts(e::add(x, e::null(Type::integer())), batch),
              texts({"NULL", "NULL", "NULL", "NULL", "NULL"}));
    EXPECT_EQ(eval_texts(e::modulo(y, x), batch), texts({"0", "NULL", "NULL", "0", "0"}));
    EXPECT_EQ(eval_texts(e::modulo(lit(i32(-7)), x), batch), texts({"0", "NULL", "-1", "-3", "-2"}));
    EXPECT_EQ(eval_texts(e::negate(x), batch), texts({"-1", "NULL", "-3", "-4", "5"}));
    EXPECT_EQ(eval_texts(e::divide(y, x), batch), texts({"10.0", "NULL", "NULL", "10.0", "-10.0"}));

    batch.all_selected = false;
    batch.selection = {1, 3, 4};
    EXPECT_EQ(eval_texts(e::add(x, y), batch), texts({"NULL", "44", "45"}));
    EXPECT_EQ(eval_texts(e::multiply(x, x), batch), texts({"NULL", "16", "25"}));
}

TEST(ExpressionArithmetic, OverflowIsAnErrorNotACrash) {
    EXPECT_EQ(sql(e::add(lit(i32(2147483647)), lit(i32(1)))),
              "ERROR: Overflow in addition of INTEGER (2147483647 + 1)");
    EXPECT_EQ(sql(e::multiply(lit(i32(-2147483648)), lit(i32(-1)))),
              "ERROR: Overflow in multiplication of INTEGER (-2147483648 * -1)");
    EXPECT_EQ(sql(e::negate(lit(i32(-2147483648)))), "ERROR: Overflow in negation of INTEGER (-2147483648)");
    EXPECT_EQ(sql(e::add(lit(i64(std::numeric_limits<std::int64_t>::max())), lit(i32(1)))),
              "ERROR: Overflow in addition of BIGINT (9223372036854775807 + 1)");
    EXPECT_EQ(sql(e::negate(lit(i64(std::numeric_limits<std::int64_t>::min())))),
              "ERROR: Overflow in negation of BIGINT (-9223372036854775808)");
    EXPECT_EQ(sql(e::multiply(lit(i32(2147483647)), lit(i64(2)))), "4294967294");

    // DECIMAL(18,2) + DECIMAL(18,2) stays DECIMAL(18,2) and checks (DuckDB: Overflow in addition)
    const auto a = e::column(0, Type::decimal(18, 2));
    Batch batch = batch_of(make_column(Type::decimal(18, 2), {dec("9999999999999999.99", 18, 2)}));
    EXPECT_EQ(eval_texts(e::add(a, a), batch).front().rfind("ERROR: Overflow in addition of DECIMAL(18)", 0),
              0U);
    EXPECT_EQ(eval_texts(e::multiply(a, a), batch).front().rfind("ERROR: Overflow in multiplication", 0), 0U);
    EXPECT_EQ(eval_texts(e::multiply(a, lit(i32(100))), batch).front().rfind("ERROR: Overflow", 0), 0U);
    EXPECT_EQ(eval_texts(e::subtract(a, a), batch), texts({"0.00"}));

    // a NULL row holding bits that would overflow is not an error
    Batch with_null = batch_of(make_column(Type::integer(), {i32(5), null_of(Type::integer())},
                                           std::numeric_limits<std::int64_t>::max()));
    const auto x = e::column(0, Type::integer());
    EXPECT_EQ(eval_texts(e::add(x, lit(i32(1))), with_null), texts({"6", "NULL"}));
    EXPECT_EQ(eval_texts(e::multiply(x, x), with_null), texts({"25", "NULL"}));
    EXPECT_EQ(eval_texts(e::negate(x), with_null), texts({"-5", "NULL"}));
    // ...and neither is a row outside the selection
    Batch unselected = batch_of(make_column(Type::integer(), {i32(5), i32(2147483647)}));
    unselected.all_selected = false;
    unselected.selection = {0};
    EXPECT_EQ(eval_texts(e::add(x, lit(i32(1))), unselected), texts({"6"}));
}

TEST(ExpressionArithmetic, DecimalScalesAndWidePath) {
    // (15,2) + (12,4): the (15,2) side is rescaled exactly
    Batch batch = batch_of(make_column(Type::decimal(15, 2), {dec("1.25", 15, 2), dec("-99.99", 15, 2)}),
                           make_column(Type::decimal(12, 4), {dec("0.0001", 12, 4), dec("-0.0049", 12, 4)}));
    const auto d = e::column(0, Type::decimal(15, 2));
    const auto q = e::column(1, Type::decimal(12, 4));
    EXPECT_EQ(eval_texts(e::add(d, q), batch), texts({"1.2501", "-99.9949"}));
    EXPECT_EQ(eval_texts(e::subtract(q, d), batch), texts({"-1.2499", "99.9851"}));
    EXPECT_EQ(eval_texts(e::multiply(d, q), batch), texts({"0.000125", "0.489951"}));
    EXPECT_EQ(eval_texts(e::cast(e::multiply(d, q), Type::decimal(10, 4)), batch),
              texts({"0.0001", "0.4900"}));
    EXPECT_EQ(eval_texts(e::cast(e::negate(e::multiply(d, q)), Type::decimal(10, 5)), batch),
              texts({"-0.00013", "-0.48995"}));

    // INT128: DECIMAL(38,2) arithmetic and DECIMAL(19,2) * DECIMAL(19,2) -> DECIMAL(38,4)
    const Int128 big = decimal::pow10(35) + 12345;
    Batch wide =
        batch_of(make_column(Type::decimal(38, 2), {Value::decimal(big, 38, 2), Value::decimal(-big, 38, 2)}),
                 make_column(Type::decimal(19, 2),
                             {dec("12345678901234567.89", 19, 2), null_of(Type::decimal(19, 2))}));
    const auto w = e::column(0, Type::decimal(38, 2));
    const auto n = e::column(1, Type::decimal(19, 2));
    EXPECT_EQ(eval_texts(e::add(w, w), wide),
              texts({"2000000000000000000000000000000246.90", "-2000000000000000000000000000000246.90"}));
    EXPECT_EQ(eval_texts(e::multiply(n, n), wide), texts({"152415787532388367501905199875019.0521", "NULL"}));
    EXPECT_EQ(e::multiply(n, n)->type(), Type::decimal(38, 4));
    EXPECT_EQ(eval_texts(e::add(n, lit(i32(1))), wide), texts({"12345678901234568.89", "NULL"}));
    EXPECT_EQ(e::add(n, lit(i32(1)))->type(), Type::decimal(20, 2));
    EXPECT_EQ(eval_texts(e::multiply(w, w), wide)
                  .front()
                  .rfind("ERROR: Overflow in multiplication of DECIMAL(38)", 0),
              0U);
    EXPECT_EQ(eval_texts(e::add(e::add(w, w), e::add(w, w)), wide),
              texts({"4000000000000000000000000000000493.80", "-4000000000000000000000000000000493.80"}));
    const auto nine = lit(Value::decimal(decimal::pow10(38) - 1, 38, 0));
    EXPECT_EQ(sql(e::add(nine, lit(i32(1)))).rfind("ERROR: Overflow in addition of DECIMAL(38)", 0), 0U);
    EXPECT_EQ(eval_texts(e::cast(e::multiply(n, n), Type::decimal(38, 0)), wide),
              texts({"152415787532388367501905199875019", "NULL"}));
    EXPECT_EQ(eval_texts(e::cast(w, Type::float64()), wide), texts({"1e+33", "-1e+33"}));
    EXPECT_EQ(eval_texts(e::modulo(w, lit(i32(7))), wide).size(), 2U);
}

TEST(ExpressionArithmetic, DoubleDivisionFollowsDuckDB) {
    EXPECT_EQ(sql(e::divide(lit(i32(1)), lit(i32(0)))), "inf");
    EXPECT_EQ(sql(e::divide(lit(i32(0)), lit(i32(0)))), "nan");
    EXPECT_EQ(sql(e::divide(lit(i32(1)), lit(i32(2)))), "0.5");
    EXPECT_EQ(sql(e::modulo(lit(i32(5)), lit(i32(0)))), "NULL");
    EXPECT_EQ(sql(e::modulo(lit(f64(1.5)), lit(i32(0)))), "nan");
    EXPECT_EQ(sql(e::modulo(lit(dec("5.5", 2, 1)), lit(i32(2)))), "1.5");
    EXPECT_EQ(sql(e::multiply(lit(f64(1e308)), lit(i32(10)))), "inf");
}

// ------------------------------------------------------------------------------------------
// Comparisons and logic

TEST(ExpressionCompare, AllOperatorsTypesAndNulls) {
    Batch batch =
        batch_of(make_column(Type::integer(), {i32(1), i32(2), i32(3), null_of(Type::integer())}),
                 make_column(Type::decimal(15, 2),
                             {dec("1.00", 15, 2), dec("2.50", 15, 2), dec("2.99", 15, 2), dec("1", 15, 2)}),
                 make_column(Type::varchar(), {str("a"), str("B"), str("abc"), null_of(Type::varchar())}),
                 make_column(Type::float64(), {f64(1.0), f64(std::nan("")), f64(-0.0), f64(2.0)}),
                 make_column(Type::date(),
                             {day("1994-01-01"), day("1995-01-01"), day("1993-12-31"), day("1994-01-01")}));
    const auto i = e::column(0, Type::integer());
    const auto d = e::column(1, Type::decimal(15, 2));
    const auto s = e::column(2, Type::varchar());
    const auto f = e::column(3, Type::float64());
    const auto dt = e::column(4, Type::date());
    EXPECT_EQ(eval_texts(e::equal(i, d), batch), texts({"true", "false", "false", "NULL"}));
    EXPECT_EQ(eval_texts(e::not_equal(i, d), batch), texts({"false", "true", "true", "NULL"}));
    EXPECT_EQ(eval_texts(e::less(i, d), batch), texts({"false", "true", "false", "NULL"}));
    EXPECT_EQ(eval_texts(e::less_equal(d, i), batch), texts({"true", "false", "true", "NULL"}));
    EXPECT_EQ(eval_texts(e::greater(d, lit(dec("2.5", 2, 1))), batch),
              texts({"false", "false", "true", "false"}));
    EXPECT_EQ(eval_texts(e::greater_equal(lit(dec("2.500", 4, 3)), d), batch),
              texts({"true", "true", "false", "true"}));
    EXPECT_EQ(eval_texts(e::less(s, lit(str("b"))), batch), texts({"true", "true", "true", "NULL"}));
    EXPECT_EQ(eval_texts(e::less(lit(str("B")), s), batch), texts({"true", "false", "true", "NULL"}));
    EXPECT_EQ(eval_texts(e::equal(s, lit(str("abc"))), batch), texts({"false", "false", "true", "NULL"}));
    // NaN equals NaN and is greater than everything; -0.0 = 0.0
    EXPECT_EQ(eval_texts(e::greater(f, lit(f64(1e300))), batch), texts({"false", "true", "false", "false"}));
    EXPECT_EQ(eval_texts(e::equal(f, f), batch), texts({"true", "true", "true", "true"}));
    EXPECT_EQ(eval_texts(e::equal(f, lit(f64(0.0))), batch), texts({"false", "false", "true", "false"}));
    // decimal against double compares as double
    EXPECT_EQ(eval_texts(e::equal(d, lit(f64(2.5))), batch), texts({"false", "true", "false", "false"}));
    EXPECT_EQ(e::equal(d, lit(f64(2.5)))->child(0).type(), Type::float64());
    EXPECT_EQ(eval_texts(e::greater_equal(dt, lit(day("1994-01-01"))), batch),
              texts({"true", "true", "false", "true"}));
    EXPECT_EQ(eval_texts(e::equal(i, e::null(Type::integer())), batch),
              texts({"NULL", "NULL", "NULL", "NULL"}));
    // the same predicates as filters
    auto select = [&](const ExprPtr &predicate) {
        Batch copy;
        copy.rows = batch.rows;
        for (const Vector &column : batch.columns) {
            copy.columns.push_back(column.slice(0, column.size()));
        }
        const EvalStatus status = filter(*predicate, copy);
        EXPECT_TRUE(status.ok()) << status.message();
        std::vector<std::uint32_t> rows;
        for (std::uint32_t k = 0; k < copy.count(); ++k) {
            rows.push_back(copy.row(k));
        }
        return rows;
    };
    using R = std::vector<std::uint32_t>;
    EXPECT_EQ(select(e::not_equal(i, d)), R({1, 2}));
    EXPECT_EQ(select(e::less(s, lit(str("b")))), R({0, 1, 2}));
    EXPECT_EQ(select(e::greater(f, lit(f64(1e300)))), R({1}));
    EXPECT_EQ(select(e::less_equal(lit(i32(2)), i)), R({1, 2}));
    EXPECT_EQ(select(e::equal(i, i)), R({0, 1, 2}));
}

TEST(ExpressionLogic, ThreeValuedTruthTables) {
    // all nine combinations of TRUE, FALSE, NULL
    std::vector<Value> left;
    std::vector<Value> right;
    const Value values[] = {boolean(true), boolean(false), null_of(Type::boolean())};
    for (const Value &l : values) {
        for (const Value &r : values) {
            left.push_back(l);
            right.push_back(r);
        }
    }
    Batch batch = batch_of(make_column(Type::boolean(), left, 1), make_column(Type::boolean(), right, 1));
    const auto p = e::column(0, Type::boolean());
    const auto q = e::column(1, Type::boolean());
    EXPECT_EQ(eval_texts(e::logical_and(p, q), batch),
              texts({"true", "false", "NULL", "false", "false", "false", "NULL", "false", "NULL"}));
    EXPECT_EQ(eval_texts(e::logical_or(p, q), batch),
              texts({"true", "true", "true", "true", "false", "NULL", "true", "NULL", "NULL"}));
    EXPECT_EQ(eval_texts(e::logical_not(p), batch),
              texts({"false", "false", "false", "true", "true", "true", "NULL", "NULL", "NULL"}));
    EXPECT_EQ(eval_texts(e::is_null(p), batch),
              texts({"false", "false", "false", "false", "false", "false", "true", "true", "true"}));
    EXPECT_EQ(eval_texts(e::is_null(q, true), batch),
              texts({"true", "true", "false", "true", "true", "false", "true", "true", "false"}));
    // three operands: NULL AND FALSE AND x is FALSE, NULL OR TRUE is TRUE
    EXPECT_EQ(eval_texts(e::logical_and({p, q, e::logical_not(q)}), batch),
              texts({"false", "false", "NULL", "false", "false", "false", "false", "false", "NULL"}));
    EXPECT_EQ(sql(e::logical_and(e::null(Type::boolean()), lit(boolean(false)))), "false");
    EXPECT_EQ(sql(e::logical_or(e::null(Type::boolean()), lit(boolean(true)))), "true");
    EXPECT_EQ(sql(e::logical_not(e::null(Type::boolean()))), "NULL");

    // filters keep exactly the TRUE rows
    auto kept = [&](const ExprPtr &predicate, Batch b) {
        EXPECT_TRUE(filter(*predicate, b).ok());
        std::vector<std::uint32_t> rows;
        for (std::uint32_t k = 0; k < b.count(); ++k) {
            rows.push_back(b.row(k));
        }
        return rows;
    };
    auto copy = [&] {
        Batch b;
        b.rows = batch.rows;
        for (const Vector &column : batch.columns) {
            b.columns.push_back(column.slice(0, column.size()));
        }
        return b;
    };
    using R = std::vector<std::uint32_t>;
    EXPECT_EQ(kept(e::logical_and(p, q), copy()), R({0}));
    EXPECT_EQ(kept(e::logical_or(p, q), copy()), R({0, 1, 2, 3, 6}));
    EXPECT_EQ(kept(e::logical_not(p), copy()), R({3, 4, 5}));
    EXPECT_EQ(kept(e::logical_or(e::logical_and(p, q), e::logical_not(q)), copy()), R({0, 1, 4, 7}));
    // a filter on a batch that already has a selection narrows it
    Batch selected = copy();
    selected.all_selected = false;
    selected.selection = {0, 2, 3, 6, 8};
    EXPECT_EQ(kept(e::logical_or(p, q), std::move(selected)), R({0, 2, 3, 6}));
    // nothing dropped keeps the dense form
    Batch dense = copy();
    EXPECT_TRUE(filter(*lit(boolean(true)), dense).ok());
    EXPECT_TRUE(dense.all_selected);
    EXPECT_EQ(kept(e::null(Type::boolean()), copy()), R({}));
}

TEST(ExpressionLogic, BetweenAndInLists) {
    Batch batch = batch_of(
        make_column(Type::integer(), {i32(1), i32(5), i32(10), null_of(Type::integer()), i32(2)}),
        make_column(Type::varchar(),
                    {str("MAIL"), str("SHIP"), str("AIR"), str("RAIL"), null_of(Type::varchar())}),
        make_column(Type::decimal(15, 2), {dec("0.05", 15, 2), dec("0.07", 15, 2), dec("0.08", 15, 2),
                                           dec("0.06", 15, 2), null_of(Type::decimal(15, 2))}));
    const auto x = e::column(0, Type::integer());
    const auto s = e::column(1, Type::varchar());
    const auto d = e::column(2, Type::decimal(15, 2));
    EXPECT_EQ(eval_texts(e::between(x, lit(i32(2)), lit(i32(5))), batch),
              texts({"false", "true", "false", "NULL", "true"}));
    EXPECT_EQ(eval_texts(e::between(x, lit(i32(2)), lit(i32(5)), true), batch),
              texts({"true", "false", "true", "NULL", "false"}));
    // l_discount between 0.06 - 0.01 and 0.06 + 0.01 (TPC-H Q6)
    const auto low = e::subtract(lit(dec("0.06", 3, 2)), lit(dec("0.01", 3, 2)));
    const auto high = e::add(lit(dec("0.06", 3, 2)), lit(dec("0.01", 3, 2)));
    EXPECT_EQ(low->kind(), ExprKind::constant) << "constant arithmetic folds";
    EXPECT_EQ(eval_texts(e::between(d, low, high), batch), texts({"true", "true", "false", "true", "NULL"}));
    EXPECT_EQ(eval_texts(e::between(x, lit(dec("1.5", 2, 1)), lit(i32(4))), batch),
              texts({"false", "false", "false", "NULL", "true"}));

    EXPECT_EQ(eval_texts(e::in_list(s, {str("MAIL"), str("SHIP")}), batch),
              texts({"true", "true", "false", "false", "NULL"}));
    EXPECT_EQ(eval_texts(e::in_list(s, {str("MAIL"), str("SHIP")}, true), batch),
              texts({"false", "false", "true", "true", "NULL"}));
    // Short lists compare lengths, then bytes; long ones search the sorted list. Prefixes, longer
    // strings with the same start and strings over 16 bytes must not match.
    Batch words = batch_of(make_column(
        Type::varchar(), {str("AI"), str("AIRX"), str("a string of over sixteen bytes"),
                          str("a string of over sixteen bytez"), str(""), null_of(Type::varchar())}));
    const auto w = e::column(0, Type::varchar());
    EXPECT_EQ(eval_texts(e::in_list(w, {str("AIR"), str("a string of over sixteen bytes"), str("")}), words),
              texts({"false", "false", "true", "false", "true", "NULL"}));
    std::vector<Value> codes;
    for (const char *code : {"10", "11", "12", "13", "14", "15", "16", "17", "18", "AIRX", ""}) {
        codes.push_back(str(code));
    }
    EXPECT_EQ(eval_texts(e::in_list(w, codes), words),
              texts({"false", "true", "false", "false", "true", "NULL"}));
    // NULL in the list: no match is NULL, a match is TRUE (DuckDB: 1 IN (1, NULL) true, 2 IN (1, NULL) NULL)
    EXPECT_EQ(eval_texts(e::in_list(x, {i32(1), null_of(Type::integer())}), batch),
              texts({"true", "NULL", "NULL", "NULL", "NULL"}));
    EXPECT_EQ(eval_texts(e::in_list(x, {i32(1), null_of(Type::integer())}, true), batch),
              texts({"false", "NULL", "NULL", "NULL", "NULL"}));
    // the operand is widened to the list's common type: 1 IN (1.5, 1) is true
    EXPECT_EQ(eval_texts(e::in_list(x, {dec("1.5", 2, 1), i32(1)}), batch),
              texts({"true", "false", "false", "NULL", "false"}));
    // long lists take the binary search
    std::vector<Value> many;
    for (int v = 2; v < 60; v += 4) {
        many.push_back(i32(v));
    }
    EXPECT_EQ(eval_texts(e::in_list(x, many), batch), texts({"false", "false", "true", "NULL", "true"}));
    EXPECT_EQ(eval_texts(e::in_list(d, {dec("0.07", 3, 2), dec("0.08", 3, 2)}), batch),
              texts({"false", "true", "true", "false", "NULL"}));
    EXPECT_EQ(sql(e::in_list(lit(f64(std::nan(""))), {f64(1.0), f64(std::nan(""))})), "true");
}

// ------------------------------------------------------------------------------------------
// LIKE

/// Reference matcher: recursion over code points.
bool like_reference(std::string_view text, std::string_view pattern, std::optional<char> escape) {
    auto code_point_length = [](std::string_view s) {
        std::size_t n = 1;
        while (n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0U) == 0x80U) {
            ++n;
        }
        return n;
    };
    if (pattern.empty()) {
        return text.empty();
    }
    const char p = pattern.front();
    if (escape.has_value() && p == *escape) {
        if (pattern.size() == 1) {
            return false;
        }
        return !text.empty() && text.front() == pattern[1] &&
               like_reference(text.substr(1), pattern.substr(2), escape);
    }
    if (p == '%') {
        for (std::size_t skip = 0;; skip += code_point_length(text.substr(skip))) {
            if (like_reference(text.substr(skip), pattern.substr(1), escape)) {
                return true;
            }
            if (skip >= text.size()) {
                return false;
            }
        }
    }
    if (text.empty()) {
        return false;
    }
    if (p == '_') {
        return like_reference(text.substr(code_point_length(text)), pattern.substr(1), escape);
    }
    return text.front() == p && like_reference(text.substr(1), pattern.substr(1), escape);
}

TEST(ExpressionLike, PatternsMatchDuckDB) {
    auto like = [](const char *text, const char *pattern, std::optional<char> escape = std::nullopt) {
        return sql(e::like(lit(str(text)), pattern, false, escape));
    };
    EXPECT_EQ(like("a\\b", "a\\b"), "true"); // no default escape
    EXPECT_EQ(like("a\\b", "a\\\\b"), "false");
    EXPECT_EQ(like("aXb", "a\\Xb", '\\'), "true");
    EXPECT_EQ(like("a%b", "a\\%b", '\\'), "true");
    EXPECT_EQ(like("axb", "a\\%b", '\\'), "false");
    EXPECT_EQ(like("a", "a\\", '\\'), "false");
    EXPECT_EQ(like("\xc3\xa9", "_"), "true"); // é is one character
    EXPECT_EQ(like("", "%"), "true");
    EXPECT_EQ(like("", "_"), "false");
    EXPECT_EQ(like("", ""), "true");
    EXPECT_EQ(like("abc", "ABC"), "false");
    EXPECT_EQ(like("abc", "a%c%"), "true");
    EXPECT_EQ(like("abc", "%%"), "true");
    EXPECT_EQ(like("ab", "a_%_"), "false");
    EXPECT_EQ(like("abc", "a_%_"), "true");
    EXPECT_EQ(like("aba", "ab%ba"), "false");
    EXPECT_EQ(like("abba", "ab%ba"), "true");
    EXPECT_EQ(sql(e::like(e::null(Type::varchar()), "a")), "NULL");

    // TPC-H shapes on a column with NULLs and a selection, LIKE and NOT LIKE
    Batch batch =
        batch_of(make_column(Type::varchar(), {str("PROMO BRUSHED TIN"), str("forest green"),
                                               str("special deposits requests"), null_of(Type::varchar()),
                                               str("LARGE BRASS"), str("Customer x Complaints"), str("")}));
    batch.all_selected = false;
    batch.selection = {0, 1, 2, 3, 4, 5, 6};
    const auto s = e::column(0, Type::varchar());
    EXPECT_EQ(eval_texts(e::like(s, "PROMO%"), batch),
              texts({"true", "false", "false", "NULL", "false", "false", "false"}));
    EXPECT_EQ(eval_texts(e::like(s, "%BRASS"), batch),
              texts({"false", "false", "false", "NULL", "true", "false", "false"}));
    EXPECT_EQ(eval_texts(e::like(s, "%green%"), batch),
              texts({"false", "true", "false", "NULL", "false", "false", "false"}));
    EXPECT_EQ(eval_texts(e::like(s, "%special%requests%", true), batch),
              texts({"true", "true", "false", "NULL", "true", "true", "true"}));
    EXPECT_EQ(eval_texts(e::like(s, "%Customer%Complaints%"), batch),
              texts({"false", "false", "false", "NULL", "false", "true", "false"}));
    EXPECT_EQ(eval_texts(e::like(s, "forest%"), batch),
              texts({"false", "true", "false", "NULL", "false", "false", "false"}));
    EXPECT_EQ(eval_texts(e::like(s, "_____ BRASS"), batch),
              texts({"false", "false", "false", "NULL", "true", "false", "false"}));
    EXPECT_EQ(eval_texts(e::like(s, ""), batch),
              texts({"false", "false", "false", "NULL", "false", "false", "true"}));
    EXPECT_EQ(eval_texts(e::logical_not(e::like(s, "%e%")), batch),
              texts({"true", "false", "false", "NULL", "true", "false", "true"}));
}

TEST(ExpressionLike, RandomPatternsAgainstReference) {
    const unsigned seed = std::random_device{}();
    std::cout << "LIKE seed " << seed << "\n";
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    const std::string alphabet[] = {"a", "b", "%", "_", "\\", "\xc3\xa9"};
    auto random_text = [&](bool pattern) {
        std::string text;
        const int length = static_cast<int>(rng() % 7);
        for (int k = 0; k < length; ++k) {
            const std::size_t pick = rng() % (pattern ? 6 : 3);
            text += pick == 2 && !pattern ? alphabet[5] : alphabet[pick];
        }
        return text;
    };
    for (int round = 0; round < 3000; ++round) {
        const std::string text = random_text(false);
        const std::string pattern = random_text(true);
        const std::optional<char> escape = rng() % 2 == 0 ? std::optional<char>('\\') : std::nullopt;
        const bool expected = like_reference(text, pattern, escape);
        ASSERT_EQ(sql(e::like(lit(str(text)), pattern, false, escape)), expected ? "true" : "false")
            << "'" << text << "' LIKE '" << pattern << "' escape " << escape.has_value();
    }
}

TEST(ExpressionLike, FindSubstringAgreesWithStringFind) {
    // Texts long enough for the 16-windows-at-a-time path, its tail and candidates whose first
    // and last bytes match but whose middle does not (alphabet of three letters).
    const unsigned seed = std::random_device{}();
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    auto random_text = [&](std::size_t max_length) {
        std::string text(rng() % (max_length + 1), 'a');
        for (char &c : text) {
            c = static_cast<char>('a' + rng() % 3);
        }
        return text;
    };
    for (int round = 0; round < 20000; ++round) {
        const std::string text = random_text(80);
        const std::string needle = random_text(6);
        const std::size_t from = rng() % (text.size() + 3);
        ASSERT_EQ(mx::db::detail::find_substring(text, needle, from),
                  std::string_view(text).find(needle, from))
            << "'" << text << "' find '" << needle << "' from " << from;
    }
    // Every match position and start in texts of 16 to 48 windows: the full blocks, the last
    // block that overlaps them (only the windows from the start on count) and a second match
    // after the first.
    for (const std::string needle : {"special", "sl", "requests"}) {
        for (std::size_t length = needle.size() + 15; length <= needle.size() + 47; ++length) {
            for (std::size_t at = 0; at + needle.size() <= length; ++at) {
                std::string haystack(length, 's');
                haystack.replace(at, needle.size(), needle);
                if (at >= needle.size()) {
                    haystack.replace(0, needle.size(), needle);
                }
                for (std::size_t from = 0; from <= length; ++from) {
                    ASSERT_EQ(mx::db::detail::find_substring(haystack, needle, from),
                              std::string_view(haystack).find(needle, from))
                        << "'" << haystack << "' find '" << needle << "' from " << from;
                }
            }
        }
    }
    // A match in the last window, found by the byte loop after the 16-window blocks.
    const std::string text = std::string(40, 'x') + "special";
    EXPECT_EQ(mx::db::detail::find_substring(text, "special"), 40U);
    EXPECT_EQ(mx::db::detail::find_substring(text, "specials"), std::string_view::npos);
    EXPECT_EQ(mx::db::detail::find_substring(text, "x", 39), 39U);
    // LIKE over long texts against the reference matcher
    for (int round = 0; round < 2000; ++round) {
        const std::string long_text = random_text(60);
        const std::string pattern = "%" + random_text(3) + "%" + random_text(3) + "%";
        ASSERT_EQ(sql(e::like(lit(str(long_text)), pattern, false, std::nullopt)),
                  like_reference(long_text, pattern, std::nullopt) ? "true" : "false")
            << "'" << long_text << "' LIKE '" << pattern << "'";
    }
}

// ------------------------------------------------------------------------------------------
// CASE, COALESCE

TEST(ExpressionCase, NullConditionsAndLazyBranches) {
    Batch batch =
        batch_of(make_column(Type::integer(), {i32(1), i32(2), null_of(Type::integer()), i32(4)}),
                 make_column(Type::varchar(), {str("7"), str("x"), str("9"), null_of(Type::varchar())}));
    const auto x = e::column(0, Type::integer());
    const auto s = e::column(1, Type::varchar());
    // WHEN x > 1: the NULL row does not match and falls to ELSE
    EXPECT_EQ(
        eval_texts(e::case_when({{e::greater(x, lit(i32(1))), lit(str("big"))}}, lit(str("small"))), batch),
        texts({"small", "big", "small", "big"}));
    EXPECT_EQ(eval_texts(e::case_when({{e::greater(x, lit(i32(1))), x}}), batch),
              texts({"NULL", "2", "NULL", "4"}));
    EXPECT_EQ(
        eval_texts(e::case_when({{e::equal(x, lit(i32(1))), lit(i32(10))}, {e::equal(x, lit(i32(2))), x}},
                                e::multiply(x, lit(i32(100)))),
                   batch),
        texts({"10", "2", "NULL", "400"}));
    // the CAST only runs on the rows its condition selects ('x' never reaches it)
    EXPECT_EQ(eval_texts(
                  e::case_when({{e::not_equal(s, lit(str("x"))), e::cast(s, Type::integer())}}, lit(i32(-1))),
                  batch),
              texts({"7", "-1", "9", "-1"}));
    EXPECT_EQ(eval_texts(e::cast(s, Type::integer()), batch).front(),
              "ERROR: Could not convert string 'x' to INTEGER");
    // simple CASE desugars to equality
    EXPECT_EQ(eval_texts(e::simple_case(x, {{lit(i32(1)), lit(str("one"))}, {lit(i32(4)), lit(str("four"))}}),
                         batch),
              texts({"one", "NULL", "NULL", "four"}));
    EXPECT_EQ(sql(e::case_when({{e::null(Type::boolean()), lit(i32(1))}}, lit(i32(2)))), "2");
    // strings from a temporary survive the temporary
    EXPECT_EQ(
        eval_texts(e::case_when({{e::is_null(x), lit(str("none"))}}, e::cast(x, Type::varchar())), batch),
        texts({"1", "2", "none", "4"}));
    // COALESCE
    EXPECT_EQ(eval_texts(e::coalesce({x, lit(i32(0))}), batch), texts({"1", "2", "0", "4"}));
    EXPECT_EQ(eval_texts(e::coalesce({e::cast(x, Type::varchar()), s, lit(str("-"))}), batch),
              texts({"1", "2", "9", "4"}));
    EXPECT_EQ(
        eval_texts(e::coalesce({e::case_when({{e::greater(x, lit(i32(1))), x}}), e::null(Type::integer())}),
                   batch),
        texts({"NULL", "2", "NULL", "4"}));
    EXPECT_EQ(sql(e::coalesce({e::null(Type::integer()), e::null(Type::integer()), lit(i32(3))})), "3");
}

// ------------------------------------------------------------------------------------------
// CAST

TEST(ExpressionCast, NumericConversionsRoundLikeDuckDB) {
    auto cast = [](Value v, Type to) { return sql(e::cast(lit(std::move(v)), to)); };
    // decimal and string sources round half away from zero
    EXPECT_EQ(cast(dec("1.25", 3, 2), Type::decimal(10, 1)), "1.3");
    EXPECT_EQ(cast(dec("-1.25", 3, 2), Type::decimal(10, 1)), "-1.3");
    EXPECT_EQ(cast(dec("1.5", 2, 1), Type::integer()), "2");
    EXPECT_EQ(cast(dec("-1.5", 2, 1), Type::integer()), "-2");
    EXPECT_EQ(cast(dec("2.5", 2, 1), Type::integer()), "3");
    EXPECT_EQ(cast(dec("12.5", 3, 1), Type::bigint()), "13");
    EXPECT_EQ(cast(dec("123.456", 6, 3), Type::decimal(5, 2)), "123.46");
    EXPECT_EQ(cast(dec("123.456", 6, 3), Type::decimal(4, 2)).rfind("ERROR: Could not cast value 123.456", 0),
              0U);
    EXPECT_EQ(cast(dec("99.995", 5, 3), Type::decimal(4, 2)).rfind("ERROR:", 0), 0U);
    EXPECT_EQ(cast(i32(3), Type::decimal(1, 0)), "3");
    EXPECT_EQ(cast(i32(30), Type::decimal(2, 1)), "ERROR: Could not cast value 30 to DECIMAL(2,1)");
    EXPECT_EQ(cast(i64(3000000000), Type::integer()).rfind("ERROR:", 0), 0U);
    EXPECT_EQ(cast(dec("1.25", 3, 2), Type::float64()), "1.25");
    // DOUBLE to integer rounds half to even, DOUBLE to DECIMAL half away from the scaled double
    EXPECT_EQ(cast(f64(1.5), Type::integer()), "2");
    EXPECT_EQ(cast(f64(2.5), Type::integer()), "2");
    EXPECT_EQ(cast(f64(-2.5), Type::integer()), "-2");
    EXPECT_EQ(cast(f64(0.5), Type::integer()), "0");
    EXPECT_EQ(cast(f64(1e10), Type::integer()).rfind("ERROR:", 0), 0U);
    EXPECT_EQ(cast(f64(std::nan("")), Type::integer()).rfind("ERROR:", 0), 0U);
    EXPECT_EQ(cast(f64(9.2e18), Type::bigint()), "9200000000000000000");
    EXPECT_EQ(cast(f64(1e19), Type::bigint()).rfind("ERROR:", 0), 0U);
    EXPECT_EQ(cast(f64(1.005), Type::decimal(10, 2)), "1.00");
    EXPECT_EQ(cast(f64(1.015), Type::decimal(10, 2)), "1.01");
    EXPECT_EQ(cast(f64(-1.005), Type::decimal(10, 2)), "-1.00");
    EXPECT_EQ(cast(f64(0.125), Type::decimal(10, 2)), "0.13");
    EXPECT_EQ(cast(f64(-0.125), Type::decimal(10, 2)), "-0.13");
    EXPECT_EQ(cast(f64(2.675), Type::decimal(10, 2)), "2.68");
    EXPECT_EQ(cast(f64(0.5), Type::decimal(10, 0)), "1");
    EXPECT_EQ(cast(f64(2.5), Type::decimal(10, 0)), "3");
    EXPECT_EQ(cast(f64(1e30), Type::decimal(10, 2)).rfind("ERROR:", 0), 0U);
    EXPECT_EQ(cast(f64(12345678901234567890.5), Type::decimal(38, 1)), "12345678901234566758.4");
    // booleans
    EXPECT_EQ(cast(boolean(true), Type::integer()), "1");
    EXPECT_EQ(cast(i32(1), Type::boolean()), "true");
    EXPECT_EQ(cast(dec("1.5", 2, 1), Type::boolean()), "true");
    EXPECT_EQ(cast(boolean(true), Type::decimal(3, 2)), "1.00");
}

TEST(ExpressionCast, StringConversionsMatchDuckDB) {
    auto cast = [](const char *text, Type to) { return sql(e::cast(lit(str(text)), to)); };
    EXPECT_EQ(cast(" 12 ", Type::integer()), "12");
    EXPECT_EQ(cast("1.5", Type::integer()), "2");
    EXPECT_EQ(cast("2.5", Type::integer()), "3");
    EXPECT_EQ(cast("-2.5", Type::integer()), "-3");
    EXPECT_EQ(cast("+12", Type::integer()), "12");
    EXPECT_EQ(cast(" 1.5e1 ", Type::integer()), "15");
    EXPECT_EQ(cast("12a", Type::integer()), "ERROR: Could not convert string '12a' to INTEGER");
    EXPECT_EQ(cast("", Type::integer()).rfind("ERROR:", 0), 0U);
    EXPECT_EQ(cast("3000000000", Type::integer()).rfind("ERROR:", 0), 0U);
    EXPECT_EQ(cast("3000000000", Type::bigint()), "3000000000");
    EXPECT_EQ(cast("1.25", Type::decimal(3, 2)), "1.25");
    EXPECT_EQ(cast("12.25", Type::decimal(3, 2)).rfind("ERROR:", 0), 0U);
    EXPECT_EQ(cast("1e3", Type::decimal(10, 2)), "1000.00");
    EXPECT_EQ(cast("0.005", Type::decimal(10, 2)), "0.01");
    EXPECT_EQ(cast("-0.005", Type::decimal(10, 2)), "-0.01");
    EXPECT_EQ(cast(".5", Type::decimal(10, 2)), "0.50");
    EXPECT_EQ(cast("5.", Type::decimal(10, 2)), "5.00");
    EXPECT_EQ(cast("1e-2", Type::decimal(10, 2)), "0.01");
    EXPECT_EQ(cast(" -1.5 ", Type::decimal(10, 2)), "-1.50");
    const std::string tiny = std::string("0.") + std::string(44, '0') + "1e45"; // 10^-45 * 10^45
    EXPECT_EQ(cast(tiny.c_str(), Type::decimal(10, 2)), "1.00");
    for (const char *bad : {".", "1,5", "1.5e", "--1", "1..2", "e5"}) {
        EXPECT_EQ(cast(bad, Type::decimal(10, 2)).rfind("ERROR:", 0), 0U) << bad;
    }
    EXPECT_EQ(cast(" 1.5 ", Type::float64()), "1.5");
    EXPECT_EQ(cast("1e3", Type::float64()), "1000.0");
    EXPECT_EQ(cast("inf", Type::float64()), "inf");
    EXPECT_EQ(cast("abc", Type::float64()), "ERROR: Could not convert string 'abc' to DOUBLE");
    EXPECT_EQ(cast("  ", Type::float64()).rfind("ERROR:", 0), 0U);
    EXPECT_EQ(cast("1996-2-3", Type::date()), "1996-02-03");
    EXPECT_EQ(cast(" 1996-02-03 ", Type::date()), "1996-02-03");
    EXPECT_EQ(cast("1996-02-30", Type::date()), "ERROR: Could not convert string '1996-02-30' to DATE");
    EXPECT_EQ(cast("19960203", Type::date()).rfind("ERROR:", 0), 0U);
    EXPECT_EQ(cast("true", Type::boolean()), "true");
    EXPECT_EQ(cast("t", Type::boolean()), "true");
    EXPECT_EQ(cast("FALSE", Type::boolean()), "false");
    EXPECT_EQ(cast("no", Type::boolean()), "false");
    EXPECT_EQ(cast(" true ", Type::boolean()).rfind("ERROR:", 0), 0U);

    auto text = [](Value v) { return sql(e::cast(lit(std::move(v)), Type::varchar())); };
    EXPECT_EQ(text(f64(100.0)), "100.0");
    EXPECT_EQ(text(f64(1e20)), "1e+20");
    EXPECT_EQ(text(f64(1.5)), "1.5");
    EXPECT_EQ(text(f64(0.1)), "0.1");
    EXPECT_EQ(text(f64(1e15)), "1000000000000000.0");
    EXPECT_EQ(text(f64(1e16)), "1e+16");
    EXPECT_EQ(text(f64(123456789012345680000.0)), "1.2345678901234568e+20");
    EXPECT_EQ(text(f64(1e-5)), "1e-05");
    EXPECT_EQ(text(f64(1e-4)), "0.0001");
    EXPECT_EQ(text(f64(123.456)), "123.456");
    EXPECT_EQ(text(f64(-1.5e300)), "-1.5e+300");
    EXPECT_EQ(text(f64(0.0)), "0.0");
    EXPECT_EQ(text(f64(-0.0)), "-0.0");
    EXPECT_EQ(text(f64(1e16 + 2)), "1.0000000000000002e+16");
    EXPECT_EQ(text(f64(9007199254740993.0)), "9007199254740992.0");
    EXPECT_EQ(text(f64(12345678.9)), "12345678.9");
    EXPECT_EQ(text(f64(std::numeric_limits<double>::infinity())), "inf");
    EXPECT_EQ(text(dec("-0.05", 3, 2)), "-0.05");
    EXPECT_EQ(text(dec("0", 5, 2)), "0.00");
    EXPECT_EQ(text(boolean(true)), "true");
    EXPECT_EQ(text(day("1996-02-03")), "1996-02-03");
    EXPECT_EQ(text(i32(12)), "12");

    // column casts with NULLs: NULL rows never fail
    Batch batch = batch_of(make_column(Type::varchar(), {str("1"), null_of(Type::varchar()), str("3.5")}));
    EXPECT_EQ(eval_texts(e::cast(e::column(0, Type::varchar()), Type::decimal(5, 1)), batch),
              texts({"1.0", "NULL", "3.5"}));
    EXPECT_EQ(eval_texts(e::cast(e::column(0, Type::varchar()), Type::varchar(10)), batch),
              texts({"1", "NULL", "3.5"}));
}

// ------------------------------------------------------------------------------------------
// Dates and strings

TEST(ExpressionDate, IntervalsAtMonthEnds) {
    auto plus = [](const char *date, Interval interval) {
        return sql(e::add_interval(lit(day(date)), interval));
    };
    EXPECT_EQ(plus("1996-01-31", Interval::of_months(1)), "1996-02-29");
    EXPECT_EQ(sql(e::subtract_interval(lit(day("1996-03-31")), Interval::of_months(1))), "1996-02-29");
    EXPECT_EQ(plus("1995-01-31", Interval::of_months(1)), "1995-02-28");
    EXPECT_EQ(plus("1996-02-29", Interval::of_years(1)), "1997-02-28");
    EXPECT_EQ(plus("1996-01-31", Interval{1, 1}), "1996-03-01");
    EXPECT_EQ(sql(e::subtract_interval(lit(day("1998-12-01")), Interval::of_days(90))), "1998-09-02");
    EXPECT_EQ(plus("1994-01-01", Interval::of_years(1)), "1995-01-01");
    EXPECT_EQ(plus("1993-10-01", Interval::of_months(3)), "1994-01-01");
    EXPECT_EQ(sql(e::subtract(lit(day("1996-02-29")), lit(day("1995-02-28")))), "366");
    EXPECT_EQ(sql(e::add(lit(i32(1)), lit(day("1996-02-29")))), "1996-03-01");
    EXPECT_EQ(sql(e::subtract(lit(day("1996-03-01")), lit(i64(1)))), "1996-02-29");
    EXPECT_EQ(sql(e::extract(DatePart::year, lit(day("0001-01-01")))), "1");
    EXPECT_EQ(sql(e::add(lit(day("1996-03-01")), lit(i64(std::int64_t{1} << 40))))
                  .rfind("ERROR: Date out of range", 0),
              0U);

    // the folded constant of TPC-H Q1's predicate, then the filter on a column with NULLs
    const auto bound = e::subtract_interval(lit(day("1998-12-01")), Interval::of_days(90));
    ASSERT_EQ(bound->kind(), ExprKind::constant);
    Batch batch = batch_of(make_column(
        Type::date(), {day("1998-09-02"), day("1998-09-03"), null_of(Type::date()), day("1992-01-01")}));
    const auto shipdate = e::column(0, Type::date(), "l_shipdate");
    const auto predicate = e::less_equal(shipdate, bound);
    EXPECT_EQ(to_string(*predicate), "(l_shipdate <= DATE '1998-09-02')");
    ASSERT_TRUE(filter(*predicate, batch).ok());
    EXPECT_EQ(batch.selection, (std::vector<std::uint32_t>{0, 3}));
    EXPECT_EQ(eval_texts(e::extract(DatePart::month, shipdate), batch), texts({"9", "1"}));
    EXPECT_EQ(eval_texts(e::add_interval(shipdate, Interval{1, 30}), batch),
              texts({"1998-11-01", "1992-03-02"}));
}

TEST(ExpressionString, SubstringEdgeCasesMatchDuckDB) {
    auto sub = [](const char *text, std::int64_t from, std::optional<std::int64_t> length = std::nullopt) {
        return sql(e::substring(lit(str(text)), lit(i64(from)), length ? lit(i64(*length)) : nullptr));
    };
    EXPECT_EQ(sub("hello", 0), "hello");
    EXPECT_EQ(sub("hello", 0, 2), "h");
    EXPECT_EQ(sub("hello", -1, 3), "o");
    EXPECT_EQ(sub("hello", -3), "llo");
    EXPECT_EQ(sub("hello", -3, 2), "ll");
    EXPECT_EQ(sub("hello", 2, -1), "h");
    EXPECT_EQ(sub("hello", 2, 0), "");
    EXPECT_EQ(sub("hello", 10), "");
    EXPECT_EQ(sub("hello", 5, 10), "o");
    EXPECT_EQ(sub("h\xc3\xa9llo", 2, 2), "\xc3\xa9l");
    EXPECT_EQ(sub("h\xc3\xa9llo", 1, 2), "h\xc3\xa9");
    EXPECT_EQ(sub("h\xc3\xa9llo", 3), "llo");
    EXPECT_EQ(sub("\xc3\xa9\xc3\xa9", 2, 5), "\xc3\xa9");
    EXPECT_EQ(sub("\xc3\xa9\xc3\xa9", 3, 1), "");
    EXPECT_EQ(sub("h\xc3\xa9llo", -4), "\xc3\xa9llo");
    EXPECT_EQ(sub("hello", -10, 12), "hello");
    EXPECT_EQ(sub("hello", -10), "hello");
    EXPECT_EQ(sub("", 1, 1), "");
    EXPECT_EQ(sub("hello", 1, 2147483647), "hello");
    EXPECT_EQ(sub("a", -3, 2), "");
    EXPECT_EQ(sub("abc", -5, 3), "a");
    EXPECT_EQ(sub("abc", -2, -1), "a");
    EXPECT_EQ(sub("abc", -1, -5), "ab");
    EXPECT_EQ(sub("abc", 0, -1), "");
    EXPECT_EQ(sub("abc", 0, 1), "");
    EXPECT_EQ(sub("abc", 4, -2), "bc");
    EXPECT_EQ(sub("abc", 10, -8), "bc");
    EXPECT_EQ(
        sub("hello", std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()),
        "hello");
    EXPECT_EQ(sql(e::substring(lit(str("abc")), e::null(Type::integer()))), "NULL");

    // TPC-H Q22: substring(c_phone, 1, 2) in ('13', '31', ...), columns with NULLs and selections
    Batch batch = batch_of(
        make_column(Type::varchar(), {str("13-555"), null_of(Type::varchar()), str("29-1"), str("3")}),
        make_column(Type::integer(), {i32(1), i32(1), null_of(Type::integer()), i32(1)}));
    batch.all_selected = false;
    batch.selection = {0, 1, 2, 3};
    const auto phone = e::column(0, Type::varchar());
    const auto code = e::substring(phone, lit(i32(1)), lit(i32(2)));
    EXPECT_EQ(eval_texts(code, batch), texts({"13", "NULL", "29", "3"}));
    EXPECT_EQ(eval_texts(e::in_list(code, {str("13"), str("31"), str("29")}), batch),
              texts({"true", "NULL", "true", "false"}));
    EXPECT_EQ(eval_texts(e::substring(phone, e::column(1, Type::integer()), lit(i32(2))), batch),
              texts({"13", "NULL", "NULL", "3"}));
    // substring of a temporary string keeps the temporary alive
    EXPECT_EQ(
        eval_texts(e::substring(e::cast(e::column(1, Type::integer()), Type::varchar()), lit(i32(1))), batch),
        texts({"1", "1", "NULL", "1"}));
}

// ------------------------------------------------------------------------------------------
// Folding, EXPLAIN text, column remapping

TEST(ExpressionTree, FoldingTextAndRemapping) {
    const auto price = e::column(5, Type::decimal(15, 2), "l_extendedprice");
    const auto discount = e::column(6, Type::decimal(15, 2), "l_discount");
    const auto revenue = e::multiply(price, e::subtract(lit(i32(1)), discount));
    EXPECT_EQ(to_string(*revenue), "(l_extendedprice * (1.00 - l_discount))");
    EXPECT_EQ(revenue->type(), Type::decimal(18, 4));
    EXPECT_FALSE(revenue->is_constant_tree());
    std::vector<std::uint32_t> used;
    e::collect_columns(*revenue, used);
    EXPECT_EQ(used, (std::vector<std::uint32_t>{5, 6}));
    const auto moved = e::remap_columns(revenue, [](std::uint32_t c) { return c - 5; });
    used.clear();
    e::collect_columns(*moved, used);
    EXPECT_EQ(used, (std::vector<std::uint32_t>{0, 1}));
    Batch batch = batch_of(make_column(Type::decimal(15, 2), {dec("100.00", 15, 2)}),
                           make_column(Type::decimal(15, 2), {dec("0.05", 15, 2)}));
    EXPECT_EQ(eval_texts(moved, batch), texts({"95.0000"}));

    const auto folded = e::add(e::multiply(lit(i32(6)), lit(i32(7))), lit(dec("0.5", 2, 1)));
    ASSERT_EQ(folded->kind(), ExprKind::constant);
    EXPECT_EQ(folded->value().to_string(), "42.5");
    EXPECT_EQ(folded->type(), Type::decimal(12, 1)); // DuckDB: typeof(1.5 + 1) = DECIMAL(12,1)
    EXPECT_EQ(evaluate_constant(*e::cast(lit(str("12")), Type::integer())).i64, 12);
    // a failing constant is not folded; evaluating it reports the error
    const auto failing = e::cast(lit(str("abc")), Type::integer());
    EXPECT_EQ(failing->kind(), ExprKind::cast);
    EXPECT_THROW((void)evaluate_constant(*failing), EvalError);
    const auto c = e::column(0, Type::integer(), "x");
    EXPECT_EQ(to_string(*e::logical_and({e::greater(c, lit(i32(1))),
                                         e::like(e::column(1, Type::varchar(), "s"), "a'%"),
                                         e::in_list(c, {i32(1), i32(2)}, true), e::is_null(c, true)})),
              "((x > 1) AND (s LIKE 'a''%') AND (x NOT IN (1, 2)) AND (x IS NOT NULL))");
    EXPECT_EQ(to_string(*e::logical_not(e::less(c, lit(i32(3))))), "(x >= 3)");
    EXPECT_EQ(to_string(*e::case_when({{e::greater(c, lit(i32(0))), lit(str("p"))}}, lit(str("n")))),
              "CASE WHEN (x > 0) THEN 'p' ELSE 'n' END");
    EXPECT_EQ(to_string(*e::extract(DatePart::year, e::column(2, Type::date(), "o_orderdate"))),
              "EXTRACT(YEAR FROM o_orderdate)");
    EXPECT_EQ(to_string(*e::cast(c, Type::decimal(12, 2))), "CAST(x AS DECIMAL(12,2))");
    EXPECT_EQ(to_string(*e::logical_and(e::greater(c, lit(i32(1))), lit(boolean(true)))), "(x > 1)");
    EXPECT_EQ(to_string(*e::logical_and(e::greater(c, lit(i32(1))), lit(boolean(false)))), "FALSE");
}

// ------------------------------------------------------------------------------------------
// Random differential test against a row-at-a-time reference evaluator

/// Reference semantics, one row at a time over Values; independent of the kernels.
class Reference {
public:
    explicit Reference(const std::vector<Value> &row) : _row(row) {}

    /// nullopt on a runtime error. `filtering`: the caller only distinguishes TRUE from the rest,
    /// so AND may stop at NULL as the vectorized filter does.
    std::optional<Value> eval(const Expr &x, bool filtering = false) {
        switch (x.kind()) {
        case ExprKind::column:
            return _row[x.column_index()];
        case ExprKind::constant:
            return x.value();
        case ExprKind::arithmetic:
            return arithmetic(x);
        case ExprKind::negate: {
            auto v = eval(x.child(0));
            if (!v || v->null) {
                return v ? std::optional(Value::null_of(x.type())) : std::nullopt;
            }
            if (x.type().id == TypeId::float64) {
                return Value::float64(-v->f64);
            }
            return exact(x.type(), -unscaled(*v));
        }
        case ExprKind::compare: {
            auto l = eval(x.child(0));
            auto r = eval(x.child(1));
            if (!l || !r) {
                return std::nullopt;
            }
            if (l->null || r->null) {
                return Value::null_of(Type::boolean());
            }
            const int c = compare(*l, *r);
            bool result = false;
            switch (x.compare_op()) {
            case CompareOp::equal:
                result = c == 0;
                break;
            case CompareOp::not_equal:
                result = c != 0;
                break;
            case CompareOp::less:
                result = c < 0;
                break;
            case CompareOp::less_equal:
                result = c <= 0;
                break;
            case CompareOp::greater:
                result = c > 0;
                break;
            case CompareOp::greater_equal:
                result = c >= 0;
                break;
            }
            return Value::boolean(result);
        }
        case ExprKind::logical_and:
        case ExprKind::logical_or: {
            const bool is_and = x.kind() == ExprKind::logical_and;
            bool saw_null = false;
            for (const auto &child : x.children()) {
                auto v = eval(*child, filtering);
                if (!v) {
                    return std::nullopt;
                }
                if (v->null) {
                    saw_null = true;
                    if (filtering && is_and) {
                        return Value::null_of(Type::boolean());
                    }
                } else if ((v->i64 != 0) != is_and) {
                    return Value::boolean(!is_and);
                }
            }
            return saw_null ? Value::null_of(Type::boolean()) : Value::boolean(is_and);
        }
        case ExprKind::logical_not: {
            auto v = eval(x.child(0));
            if (!v || v->null) {
                return v;
            }
            return Value::boolean(v->i64 == 0);
        }
        case ExprKind::is_null: {
            auto v = eval(x.child(0));
            if (!v) {
                return v;
            }
            return Value::boolean(v->null != x.negated());
        }
        case ExprKind::in_list: {
            auto v = eval(x.child(0));
            if (!v || v->null) {
                return v ? std::optional(Value::null_of(Type::boolean())) : std::nullopt;
            }
            bool found = false;
            bool has_null = false;
            for (const Value &item : x.list()) {
                has_null = has_null || item.null;
                found = found || (!item.null && compare(*v, item) == 0);
            }
            if (!found && has_null) {
                return Value::null_of(Type::boolean());
            }
            return Value::boolean(found != x.negated());
        }
        case ExprKind::like: {
            auto v = eval(x.child(0));
            if (!v || v->null) {
                return v ? std::optional(Value::null_of(Type::boolean())) : std::nullopt;
            }
            return Value::boolean(like_reference(v->str, x.pattern(), x.escape()) != x.negated());
        }
        case ExprKind::case_when: {
            const auto &children = x.children();
            const std::size_t pairs = (children.size() - (x.has_else() ? 1 : 0)) / 2;
            for (std::size_t p = 0; p < pairs; ++p) {
                auto condition = eval(*children[2 * p], true);
                if (!condition) {
                    return std::nullopt;
                }
                if (!condition->null && condition->i64 != 0) {
                    return eval(*children[2 * p + 1]);
                }
            }
            return x.has_else() ? eval(*children.back()) : Value::null_of(x.type());
        }
        case ExprKind::coalesce:
            for (const auto &child : x.children()) {
                auto v = eval(*child);
                if (!v || !v->null) {
                    return v;
                }
            }
            return Value::null_of(x.type());
        case ExprKind::function:
            ADD_FAILURE() << "the generator makes no function nodes";
            return std::nullopt;
        case ExprKind::cast:
            return cast(x);
        case ExprKind::extract: {
            auto v = eval(x.child(0));
            if (!v || v->null) {
                return v ? std::optional(Value::null_of(x.type())) : std::nullopt;
            }
            const auto civil = date::to_civil(v->i64);
            switch (x.date_part()) {
            case DatePart::year:
                return Value::bigint(civil.year);
            case DatePart::month:
                return Value::bigint(civil.month);
            case DatePart::day:
                return Value::bigint(civil.day);
            default:
                ADD_FAILURE() << "the generator extracts year, month and day only";
                return std::nullopt;
            }
        }
        case ExprKind::substring:
            return substring(x);
        case ExprKind::add_interval: {
            auto v = eval(x.child(0));
            if (!v || v->null) {
                return v ? std::optional(Value::null_of(x.type())) : std::nullopt;
            }
            const std::int64_t days = date::add_months(v->i64, x.interval().months) + x.interval().days;
            return days < -2147483647 || days > 2147483647 ? std::nullopt : std::optional(Value::date(days));
        }
        }
        return std::nullopt;
    }

private:
    static Int128 unscaled(const Value &v) {
        return v.type.physical() == PhysicalType::i128 ? v.i128 : v.i64;
    }
    static std::uint8_t scale_of(const Type &t) { return t.id == TypeId::decimal ? t.scale : 0; }
    static double to_double(const Value &v) {
        if (v.type.id == TypeId::float64) {
            return v.f64;
        }
        return static_cast<double>(unscaled(v)) / std::pow(10.0, scale_of(v.type));
    }
    static bool in_range(const Type &t, Int128 v) {
        switch (t.id) {
        case TypeId::integer:
            return v >= std::numeric_limits<std::int32_t>::min() &&
                   v <= std::numeric_limits<std::int32_t>::max();
        case TypeId::bigint:
            return v >= std::numeric_limits<std::int64_t>::min() &&
                   v <= std::numeric_limits<std::int64_t>::max();
        case TypeId::date:
            return v >= -2147483647 && v <= 2147483647;
        default:
            return decimal::fits(v, t.precision);
        }
    }
    /// An exact result, or nullopt when it leaves the type's range.
    static std::optional<Value> exact(const Type &t, Int128 v) {
        if (!in_range(t, v)) {
            return std::nullopt;
        }
        Value out;
        out.type = t;
        out.null = false;
        if (t.physical() == PhysicalType::i128) {
            out.i128 = v;
        } else {
            out.i64 = static_cast<std::int64_t>(v);
        }
        return out;
    }
    /// Three-way comparison of two non-NULL values of comparable types (exact across scales).
    static int compare(const Value &a, const Value &b) {
        if (a.type.id == TypeId::varchar) {
            return a.str < b.str ? -1 : (a.str == b.str ? 0 : 1);
        }
        if (a.type.id == TypeId::float64 || b.type.id == TypeId::float64) {
            const double x = to_double(a);
            const double y = to_double(b);
            if (std::isnan(x) || std::isnan(y)) {
                return std::isnan(x) == std::isnan(y) ? 0 : (std::isnan(x) ? 1 : -1);
            }
            return x < y ? -1 : (x == y ? 0 : 1);
        }
        // exact: bring both to the larger scale (the values here are far below 10^30)
        const std::uint8_t scale = std::max(scale_of(a.type), scale_of(b.type));
        const Int128 x = unscaled(a) * decimal::pow10(static_cast<std::uint8_t>(scale - scale_of(a.type)));
        const Int128 y = unscaled(b) * decimal::pow10(static_cast<std::uint8_t>(scale - scale_of(b.type)));
        return x < y ? -1 : (x == y ? 0 : 1);
    }

    std::optional<Value> arithmetic(const Expr &x) {
        auto l = eval(x.child(0));
        auto r = eval(x.child(1));
        if (!l || !r) {
            return std::nullopt;
        }
        const Type t = x.type();
        if (l->null || r->null) {
            return Value::null_of(t);
        }
        const ArithmeticOp op = x.arithmetic_op();
        if (t.id == TypeId::float64) {
            const double a = to_double(*l);
            const double b = to_double(*r);
            switch (op) {
            case ArithmeticOp::add:
                return Value::float64(a + b);
            case ArithmeticOp::subtract:
                return Value::float64(a - b);
            case ArithmeticOp::multiply:
                return Value::float64(a * b);
            case ArithmeticOp::divide:
                return Value::float64(a / b);
            case ArithmeticOp::modulo:
                return Value::float64(std::fmod(a, b));
            }
        }
        const std::uint8_t s = scale_of(t);
        Int128 a = unscaled(*l);
        Int128 b = unscaled(*r);
        Int128 result = 0;
        switch (op) {
        case ArithmeticOp::add:
        case ArithmeticOp::subtract:
        case ArithmeticOp::modulo:
            a *= decimal::pow10(static_cast<std::uint8_t>(s - scale_of(l->type)));
            b *= decimal::pow10(static_cast<std::uint8_t>(s - scale_of(r->type)));
            if (op == ArithmeticOp::modulo) {
                if (b == 0) {
                    return Value::null_of(t);
                }
                return exact(t, a % b);
            }
            result = op == ArithmeticOp::add ? a + b : a - b;
            break;
        case ArithmeticOp::multiply: {
            EXPECT_EQ(scale_of(l->type) + scale_of(r->type), s);
            // exact product, or an error when it leaves 128 bits (then it leaves 38 digits too)
            const Int128 limit = decimal::pow10(38);
            const Int128 abs_a = a < 0 ? -a : a;
            const Int128 abs_b = b < 0 ? -b : b;
            if (abs_a != 0 && abs_b > limit / abs_a) {
                return std::nullopt;
            }
            result = a * b;
            break;
        }
        case ArithmeticOp::divide:
            return std::nullopt;
        }
        return exact(t, result);
    }

    std::optional<Value> cast(const Expr &x) {
        auto v = eval(x.child(0));
        const Type to = x.type();
        if (!v || v->null) {
            return v ? std::optional(Value::null_of(to)) : std::nullopt;
        }
        const Type from = v->type;
        if (to.id == TypeId::varchar) {
            return Value::varchar(v->to_string()); // the random trees cast no DOUBLE to VARCHAR
        }
        if (to.id == TypeId::float64) {
            return Value::float64(to_double(*v));
        }
        if (to.id == TypeId::boolean) {
            return Value::boolean(from.id == TypeId::float64 ? v->f64 != 0 : unscaled(*v) != 0);
        }
        // exact target
        const std::uint8_t s = scale_of(to);
        if (from.id == TypeId::float64) {
            if (to.id != TypeId::decimal) {
                const double r = std::nearbyint(v->f64);
                // The exact int64 range, as the engine checks it ([-2^63, 2^63); NaN fails):
                // a rounder 9e18 bound failed casts the engine rightly accepts (-2^63 itself).
                if (!(r >= -9223372036854775808.0 && r < 9223372036854775808.0)) {
                    return std::nullopt;
                }
                return exact(to, static_cast<std::int64_t>(r));
            }
            const double r = std::round(v->f64 * std::pow(10.0, s));
            if (!(std::fabs(r) < std::pow(10.0, to.precision))) {
                return std::nullopt;
            }
            return exact(to, static_cast<Int128>(r));
        }
        if (from.id == TypeId::boolean) {
            return exact(to, unscaled(*v) * decimal::pow10(s));
        }
        return exact(to, decimal::rescale(unscaled(*v), scale_of(from), s));
    }

    std::optional<Value> substring(const Expr &x) {
        auto text = eval(x.child(0));
        auto from = eval(x.child(1));
        std::optional<Value> length;
        if (x.children().size() == 3) {
            length = eval(x.child(2));
            if (!length) {
                return std::nullopt;
            }
        }
        if (!text || !from) {
            return std::nullopt;
        }
        if (text->null || from->null || (length && length->null)) {
            return Value::null_of(x.type());
        }
        // characters as code points
        std::vector<std::string> chars;
        for (const char c : text->str) {
            if ((static_cast<unsigned char>(c) & 0xC0U) == 0x80U) {
                chars.back().push_back(c);
            } else {
                chars.emplace_back(1, c);
            }
        }
        // DuckDB: SQL positions from 1; 0 starts before the text; negative counts from the end
        const std::int64_t size = static_cast<std::int64_t>(chars.size());
        std::int64_t n = length ? std::clamp<std::int64_t>(length->i64, -size - 10, size + 10) : size + 10;
        const std::int64_t offset = std::clamp<std::int64_t>(from->i64, -size - 10, size + 10);
        std::int64_t first = offset > 0 ? offset - 1 : (offset < 0 ? size + offset : -1);
        std::int64_t last = 0; // exclusive
        if (n >= 0) {
            last = first + n;
        } else {
            last = first;
            first = first + n;
        }
        std::string out;
        for (std::int64_t c = std::max<std::int64_t>(first, 0); c < std::min(last, size); ++c) {
            out += chars[static_cast<std::size_t>(c)];
        }
        return Value::varchar(out);
    }

    const std::vector<Value> &_row;
};

/// Random expression trees over a fixed set of columns.
class Generator {
public:
    explicit Generator(unsigned seed) : _rng(seed) {
        _columns = {Type::integer(),      Type::bigint(),  Type::decimal(15, 2), Type::decimal(12, 4),
                    Type::float64(),      Type::varchar(), Type::date(),         Type::boolean(),
                    Type::decimal(20, 3), Type::integer()};
    }
    const std::vector<Type> &column_types() const { return _columns; }

    Value random_value(const Type &type) {
        if (pick(6) == 0) {
            return Value::null_of(type);
        }
        switch (type.id) {
        case TypeId::integer:
            return Value::integer(pick(20) == 0 ? 2147483600 + range(-100, 47) : range(-50, 50));
        case TypeId::bigint:
            return Value::bigint(pick(20) == 0 ? std::numeric_limits<std::int64_t>::max() - range(0, 100)
                                               : range(-100000, 100000));
        case TypeId::decimal: {
            const auto digits =
                static_cast<std::int64_t>(std::min<Int128>(decimal::pow10(type.precision) - 1, 99999));
            Int128 unscaled = range(-digits, digits);
            if (pick(10) == 0 && type.precision > 6) {
                unscaled *= decimal::pow10(static_cast<std::uint8_t>(type.precision - 6)); // near the limit
            }
            return Value::decimal(unscaled, type.precision, type.scale);
        }
        case TypeId::float64: {
            const double choices[] = {0.0, -0.0, 1.5, -2.25, 1e10, std::nan(""), 0.1, 3.0};
            return Value::float64(pick(3) == 0 ? choices[pick(8)]
                                               : static_cast<double>(range(-1000, 1000)) / 8.0);
        }
        case TypeId::varchar: {
            const char *choices[] = {"",        "a",  "ab",  "abc", "b%", "h\xc3\xa9llo",
                                     "PROMO x", "12", "1.5", "x_y"};
            return Value::varchar(choices[pick(10)]);
        }
        case TypeId::date:
            return Value::date(range(8000, 11000) + (pick(10) == 0 ? 30 : 0));
        case TypeId::boolean:
            return Value::boolean(pick(2) == 0);
        }
        return Value::null_of(type);
    }

    ExprPtr numeric(int depth) {
        if (depth <= 0 || pick(4) == 0) {
            const std::uint32_t columns[] = {0, 1, 2, 3, 4, 8, 9};
            if (pick(3) == 0) {
                const Type types[] = {Type::integer(), Type::decimal(3, 1), Type::float64(),
                                      Type::decimal(5, 3)};
                return e::constant(random_value(types[pick(4)]));
            }
            const std::uint32_t c = columns[pick(7)];
            return e::column(c, _columns[c]);
        }
        switch (pick(9)) {
        case 0:
        case 1: {
            const ArithmeticOp ops[] = {ArithmeticOp::add, ArithmeticOp::subtract, ArithmeticOp::multiply,
                                        ArithmeticOp::divide, ArithmeticOp::modulo};
            return guarded(
                [&] { return e::arithmetic(ops[pick(5)], numeric(depth - 1), numeric(depth - 1)); });
        }
        case 2:
            return e::negate(numeric(depth - 1));
        case 3:
            return guarded([&] {
                return e::case_when({{boolean(depth - 1), numeric(depth - 1)}}, numeric(depth - 1));
            });
        case 4:
            return guarded([&] { return e::coalesce({numeric(depth - 1), numeric(depth - 1)}); });
        case 5: {
            const Type targets[] = {Type::integer(),      Type::bigint(),  Type::decimal(10, 2),
                                    Type::decimal(18, 4), Type::float64(), Type::decimal(25, 1),
                                    Type::decimal(6, 0)};
            return e::cast(numeric(depth - 1), targets[pick(7)]);
        }
        case 6:
            return e::extract(static_cast<DatePart>(pick(3)), date(depth - 1));
        case 7:
            return e::subtract(date(depth - 1), date(depth - 1));
        default:
            return e::case_when({{boolean(depth - 1), numeric(depth - 1)}});
        }
    }

    ExprPtr date(int depth) {
        if (depth <= 0 || pick(3) == 0) {
            return pick(4) == 0 ? e::constant(random_value(Type::date())) : e::column(6, Type::date());
        }
        switch (pick(4)) {
        case 0:
            return e::add_interval(date(depth - 1), Interval{range(-30, 30), range(-40, 40)});
        case 1:
            return e::add(date(depth - 1), e::column(0, Type::integer()));
        case 2:
            return e::case_when({{boolean(depth - 1), date(depth - 1)}}, date(depth - 1));
        default:
            return e::coalesce({date(depth - 1), date(depth - 1)});
        }
    }

    ExprPtr string(int depth) {
        if (depth <= 0 || pick(3) == 0) {
            return pick(4) == 0 ? e::constant(random_value(Type::varchar())) : e::column(5, Type::varchar());
        }
        switch (pick(4)) {
        case 0:
            return e::substring(string(depth - 1), small_integer(), pick(2) == 0 ? small_integer() : nullptr);
        case 1: {
            const Type from[] = {Type::integer(), Type::decimal(15, 2), Type::date(), Type::boolean()};
            const std::uint32_t columns[] = {0, 2, 6, 7};
            const std::size_t k = pick(4);
            return e::cast(e::column(columns[k], from[k]), Type::varchar());
        }
        case 2:
            return e::case_when({{boolean(depth - 1), string(depth - 1)}}, string(depth - 1));
        default:
            return e::coalesce({string(depth - 1), string(depth - 1)});
        }
    }

    ExprPtr boolean(int depth) {
        if (depth <= 0 || pick(5) == 0) {
            return pick(5) == 0 ? e::constant(random_value(Type::boolean())) : e::column(7, Type::boolean());
        }
        switch (pick(11)) {
        case 0:
        case 1: {
            const CompareOp ops[] = {CompareOp::equal,      CompareOp::not_equal, CompareOp::less,
                                     CompareOp::less_equal, CompareOp::greater,   CompareOp::greater_equal};
            return e::compare(ops[pick(6)], numeric(depth - 1), numeric(depth - 1));
        }
        case 2: {
            const CompareOp ops[] = {CompareOp::equal, CompareOp::less, CompareOp::greater_equal};
            return pick(2) == 0 ? e::compare(ops[pick(3)], string(depth - 1), string(depth - 1))
                                : e::compare(ops[pick(3)], date(depth - 1), date(depth - 1));
        }
        case 3:
            return e::logical_and(boolean(depth - 1), boolean(depth - 1));
        case 4:
            return e::logical_or({boolean(depth - 1), boolean(depth - 1), boolean(depth - 1)});
        case 5:
            return e::logical_not(boolean(depth - 1));
        case 6:
            return e::is_null(pick(2) == 0 ? numeric(depth - 1) : string(depth - 1), pick(2) == 0);
        case 7: {
            std::vector<Value> list;
            const std::size_t n = 1 + pick(12);
            for (std::size_t k = 0; k < n; ++k) {
                list.push_back(pick(8) == 0 ? Value::null_of(Type::integer())
                                            : Value::integer(range(-50, 50)));
            }
            return pick(3) == 0
                       ? e::in_list(string(depth - 1), {Value::varchar("a"), Value::varchar("12")},
                                    pick(2) == 0)
                       : e::in_list(e::column(pick(2) == 0 ? 0 : 9, Type::integer()), list, pick(2) == 0);
        }
        case 8: {
            const char *patterns[] = {"a%", "%c", "%b%", "_", "%_", "a_c", "", "%", "h%o", "%l%l%"};
            return e::like(string(depth - 1), patterns[pick(10)], pick(2) == 0);
        }
        case 9:
            return e::between(numeric(depth - 1), numeric(depth - 1), numeric(depth - 1), pick(2) == 0);
        default:
            return e::compare(CompareOp::less, numeric(depth - 1), numeric(depth - 1));
        }
    }

    std::size_t pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(_rng); }
    std::int64_t range(std::int64_t low, std::int64_t high) {
        return std::uniform_int_distribution<std::int64_t>(low, high)(_rng);
    }

private:
    ExprPtr small_integer() {
        return pick(2) == 0 ? e::constant(Value::integer(range(-7, 7))) : e::column(9, Type::integer());
    }
    /// Some random combinations are invalid (e.g. a scale above 38); retry those.
    template <class Build>
    ExprPtr guarded(Build build) {
        for (int attempt = 0; attempt < 10; ++attempt) {
            try {
                return build();
            } catch (const TypeError &) {
            }
        }
        return e::column(0, Type::integer());
    }

    std::mt19937_64 _rng;
    std::vector<Type> _columns;
};

unsigned test_seed() {
    if (const char *text = std::getenv("MX_EXPRESSION_SEED")) {
        return static_cast<unsigned>(std::strtoul(text, nullptr, 10));
    }
    return std::random_device{}();
}

TEST(ExpressionRandom, VectorizedMatchesRowAtATimeReference) {
    const unsigned seed = test_seed();
    std::cout << "expression differential seed " << seed << " (MX_EXPRESSION_SEED=" << seed << " replays)\n";
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    Generator gen(seed);
    const auto &types = gen.column_types();
    int compared = 0;
    int errors = 0;
    for (int round = 0; round < 300; ++round) {
        // a batch of random rows; the small-integer column 9 stays small for SUBSTRING positions
        const std::uint32_t rows = 1 + static_cast<std::uint32_t>(gen.pick(40));
        std::vector<std::vector<Value>> table(rows);
        std::vector<std::vector<Value>> columns(types.size());
        for (std::uint32_t r = 0; r < rows; ++r) {
            for (std::size_t c = 0; c < types.size(); ++c) {
                Value v = gen.random_value(types[c]);
                if (c == 9 && !v.null) {
                    v.i64 = gen.range(-8, 8);
                }
                table[r].push_back(v);
                columns[c].push_back(v);
            }
        }
        std::vector<Vector> vectors;
        for (std::size_t c = 0; c < types.size(); ++c) {
            vectors.push_back(make_column(types[c], columns[c],
                                          std::numeric_limits<std::int64_t>::max() / 3 * gen.range(-3, 3)));
        }
        Batch batch = make_batch(std::move(vectors));
        if (gen.pick(2) == 0) {
            batch.all_selected = false;
            for (std::uint32_t r = 0; r < rows; ++r) {
                if (gen.pick(3) != 0) {
                    batch.selection.push_back(r);
                }
            }
        }
        const int kind = static_cast<int>(gen.pick(4));
        const ExprPtr x = kind == 0   ? gen.numeric(4)
                          : kind == 1 ? gen.string(3)
                          : kind == 2 ? gen.date(3)
                                      : gen.boolean(4);
        SCOPED_TRACE(to_string(*x));

        // evaluate: values of the live rows, or an error when any live row fails
        std::vector<std::optional<Value>> expected;
        bool expected_error = false;
        for (std::uint32_t k = 0; k < batch.count(); ++k) {
            Reference reference(table[batch.row(k)]);
            expected.push_back(reference.eval(*x));
            expected_error = expected_error || !expected.back().has_value();
        }
        auto describe_rows = [&] {
            std::string rows_text;
            for (std::uint32_t k = 0; k < batch.count(); ++k) {
                rows_text.append("\nrow ").append(std::to_string(batch.row(k))).append(":");
                for (const Value &v : table[batch.row(k)]) {
                    rows_text.append(" ").append(text_of(v));
                }
                rows_text.append(expected[k].has_value() ? " -> " + text_of(*expected[k]) : " -> error");
            }
            return rows_text;
        };
        Vector out;
        const EvalStatus status = evaluate(*x, batch, out);
        ASSERT_EQ(status.ok(), !expected_error) << status.message() << describe_rows();
        if (expected_error) {
            ++errors;
            continue;
        }
        for (std::uint32_t k = 0; k < batch.count(); ++k) {
            const Value actual = out.value(batch.row(k));
            const Value &wanted = *expected[k];
            ASSERT_EQ(actual.null, wanted.null) << "row " << batch.row(k);
            if (!actual.null) {
                if (x->type().id == TypeId::float64) {
                    const bool both_nan = std::isnan(actual.f64) && std::isnan(wanted.f64);
                    ASSERT_TRUE(both_nan || actual.f64 == wanted.f64) << actual.f64 << " vs " << wanted.f64;
                } else {
                    ASSERT_EQ(actual.to_string(), Value(wanted).to_string()) << "row " << batch.row(k);
                }
            }
            ++compared;
        }

        // filter with a boolean tree: the rows whose predicate is TRUE
        if (x->type().id == TypeId::boolean) {
            std::vector<std::uint32_t> kept;
            bool filter_error = false;
            for (std::uint32_t k = 0; k < batch.count(); ++k) {
                Reference reference(table[batch.row(k)]);
                const auto v = reference.eval(*x, true);
                filter_error = filter_error || !v.has_value();
                if (v && !v->null && v->i64 != 0) {
                    kept.push_back(batch.row(k));
                }
            }
            const EvalStatus filtered = filter(*x, batch);
            ASSERT_EQ(filtered.ok(), !filter_error) << filtered.message();
            if (filtered.ok()) {
                std::vector<std::uint32_t> actual;
                for (std::uint32_t k = 0; k < batch.count(); ++k) {
                    actual.push_back(batch.row(k));
                }
                ASSERT_EQ(actual, kept);
            }
        }
    }
    std::cout << compared << " values compared, " << errors << " expected errors\n";
    EXPECT_GT(compared, 1000);
}

// ------------------------------------------------------------------------------------------
// Concurrency: one tree, many threads, each with its own batch (run under tsan)

TEST(ExpressionConcurrency, SharedTreeEvaluatesFromManyThreads) {
    const auto price = e::column(0, Type::decimal(15, 2));
    const auto name = e::column(1, Type::varchar());
    const auto tree =
        e::case_when({{e::like(name, "%green%"), e::multiply(price, lit(dec("0.5", 2, 1)))}},
                     e::cast(e::substring(name, lit(i32(1)), lit(i32(3))), Type::decimal(20, 3)));
    const auto predicate = e::logical_or(e::like(name, "%green%"), e::greater(price, lit(i32(50))));
    constexpr int threads = 4;
    std::vector<std::thread> workers;
    std::vector<int> failures(threads, 0);
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            for (int round = 0; round < 50; ++round) {
                std::vector<Value> prices;
                std::vector<Value> names;
                for (int r = 0; r < 64; ++r) {
                    prices.push_back(Value::decimal((t * 1000 + round * 64 + r) % 10000, 15, 2));
                    names.push_back(Value::varchar(r % 3 == 0 ? "dark green" : std::to_string(100 + r)));
                }
                Batch batch =
                    batch_of(make_column(Type::decimal(15, 2), prices), make_column(Type::varchar(), names));
                Vector out;
                if (!evaluate(*tree, batch, out).ok()) {
                    ++failures[static_cast<std::size_t>(t)];
                    continue;
                }
                for (std::uint32_t r = 0; r < 64; ++r) {
                    const std::string expected =
                        r % 3 == 0 ? decimal::format(prices[r].i64 * 5, 3) : std::to_string(100 + r) + ".000";
                    if (out.value(r).to_string() != expected) {
                        ++failures[static_cast<std::size_t>(t)];
                    }
                }
                if (!filter(*predicate, batch).ok()) {
                    ++failures[static_cast<std::size_t>(t)];
                }
            }
        });
    }
    for (auto &worker : workers) {
        worker.join();
    }
    for (int t = 0; t < threads; ++t) {
        EXPECT_EQ(failures[static_cast<std::size_t>(t)], 0) << "thread " << t;
    }
}

} // namespace
} // namespace mx::db
