// TPC-H Q1 and Q6 (the single-table queries) as hand-built plans, compared with DuckDB's answers
// at SF 0.01 (tests/db/queries/q1.sql, q6.sql with the standard parameters).

#include <gtest/gtest.h>

#include <mx/db/executor.h>
#include <mx/db/expression.h>
#include <mx/db/plan.h>

#include "tpch_support.h"

namespace mx::db {
namespace {

using test::tpch::Columns;
using test::tpch::Order;
using test::tpch::TpchTest;

/// SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice),
///        sum(l_extendedprice * (1 - l_discount)), sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)),
///        avg(l_quantity), avg(l_extendedprice), avg(l_discount), count(*)
/// FROM lineitem WHERE l_shipdate <= DATE '1998-09-02'
/// GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus
PlanPtr q1_plan(const std::shared_ptr<const Table> &lineitem) {
    const Columns l(lineitem, {"l_returnflag", "l_linestatus", "l_quantity", "l_extendedprice", "l_discount",
                               "l_tax", "l_shipdate"});
    auto scan =
        plan::scan(l.table(), l.indices(), expr::less_equal(l("l_shipdate"), test::tpch::date("1998-09-02")));
    const ExprPtr disc_price =
        expr::multiply(l("l_extendedprice"), expr::subtract(test::tpch::integer(1), l("l_discount")));
    const ExprPtr charge = expr::multiply(disc_price, expr::add(test::tpch::integer(1), l("l_tax")));
    auto aggregate = plan::aggregate(std::move(scan), {l("l_returnflag"), l("l_linestatus")},
                                     {"l_returnflag", "l_linestatus"},
                                     {
                                         {AggregateFunction::sum, l("l_quantity"), "sum_qty"},
                                         {AggregateFunction::sum, l("l_extendedprice"), "sum_base_price"},
                                         {AggregateFunction::sum, disc_price, "sum_disc_price"},
                                         {AggregateFunction::sum, charge, "sum_charge"},
                                         {AggregateFunction::avg, l("l_quantity"), "avg_qty"},
                                         {AggregateFunction::avg, l("l_extendedprice"), "avg_price"},
                                         {AggregateFunction::avg, l("l_discount"), "avg_disc"},
                                         {AggregateFunction::count_star, nullptr, "count_order"},
                                     });
    return plan::sort(std::move(aggregate), {{0, false, std::nullopt}, {1, false, std::nullopt}});
}

/// SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem
/// WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
///   AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24
PlanPtr q6_plan(const std::shared_ptr<const Table> &lineitem) {
    const Columns l(lineitem, {"l_extendedprice", "l_discount", "l_shipdate", "l_quantity"});
    auto scan =
        plan::scan(l.table(), l.indices(),
                   expr::logical_and({expr::greater_equal(l("l_shipdate"), test::tpch::date("1994-01-01")),
                                      expr::less(l("l_shipdate"), test::tpch::date("1995-01-01")),
                                      expr::between(l("l_discount"), test::tpch::decimal("0.05", 3, 2),
                                                    test::tpch::decimal("0.07", 3, 2)),
                                      expr::less(l("l_quantity"), test::tpch::integer(24))}));
    return plan::aggregate(
        std::move(scan), {}, {},
        {{AggregateFunction::sum, expr::multiply(l("l_extendedprice"), l("l_discount")), "revenue"}});
}

TEST_P(TpchTest, Q1) {
    const PlanPtr plan = q1_plan(table("lineitem"));
    expect_answer(*plan, "q1", Order::exact);
}

TEST_P(TpchTest, Q6) {
    const PlanPtr plan = q6_plan(table("lineitem"));
    expect_answer(*plan, "q6", Order::any);
}

TEST_P(TpchTest, Q1ExplainNamesThePipelines) {
    const PlanPtr plan = q1_plan(table("lineitem"));
    const std::string text = explain(*plan);
    EXPECT_NE(text.find("Scan lineitem"), std::string::npos) << text;
    EXPECT_NE(text.find("Pipelines"), std::string::npos) << text;
}

} // namespace
} // namespace mx::db
