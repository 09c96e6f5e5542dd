// TPC-H Q3 (shipping priority) as hand-built plans with two hash joins,
// compared with DuckDB's answer at SF 0.01 (tests/db/queries/q3.sql, standard
// parameters), under every join strategy.

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

/// SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue,
/// o_orderdate, o_shippriority FROM customer, orders, lineitem WHERE
/// c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey =
/// o_orderkey
///   AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'
/// GROUP BY l_orderkey, o_orderdate, o_shippriority ORDER BY revenue DESC,
/// o_orderdate LIMIT 10
///
/// lineitem probes (orders JOIN customer); `customer_kind` is inner (customer's
/// columns carried along) or semi (orders only keeps the orders of BUILDING
/// customers).
PlanPtr q3_plan(const std::shared_ptr<const Table> &customer, const std::shared_ptr<const Table> &orders,
                const std::shared_ptr<const Table> &lineitem, JoinKind customer_kind) {
    const Columns c(customer, {"c_custkey", "c_mktsegment"});
    const Columns o(orders, {"o_orderkey", "o_custkey", "o_orderdate", "o_shippriority"});
    const Columns l(lineitem, {"l_orderkey", "l_extendedprice", "l_discount", "l_shipdate"});

    auto customers = plan::scan(c.table(), c.indices(),
                                expr::equal(c("c_mktsegment"), expr::constant(Value::varchar("BUILDING"))));
    auto order_rows =
        plan::scan(o.table(), o.indices(), expr::less(o("o_orderdate"), test::tpch::date("1995-03-15")));
    auto orders_of_building = plan::hash_join(std::move(order_rows), std::move(customers), customer_kind,
                                              {o("o_custkey")}, {c("c_custkey")});

    auto lines =
        plan::scan(l.table(), l.indices(), expr::greater(l("l_shipdate"), test::tpch::date("1995-03-15")));
    // Output: lineitem's 4 columns, then orders' 4 (then customer's 2 for the
    // inner variant).
    const auto offset = static_cast<std::uint32_t>(l.indices().size());
    auto joined = plan::hash_join(std::move(lines), std::move(orders_of_building), JoinKind::inner,
                                  {l("l_orderkey")}, {o("o_orderkey")});

    const ExprPtr revenue =
        expr::multiply(l("l_extendedprice"), expr::subtract(test::tpch::integer(1), l("l_discount")));
    auto aggregate = plan::aggregate(
        std::move(joined), {l("l_orderkey"), o("o_orderdate", offset), o("o_shippriority", offset)},
        {"l_orderkey", "o_orderdate", "o_shippriority"}, {{AggregateFunction::sum, revenue, "revenue"}});
    // Aggregate output: l_orderkey, o_orderdate, o_shippriority, revenue.
    auto project = plan::project(std::move(aggregate),
                                 {expr::column(0, Type::bigint()), expr::column(3, Type::decimal(38, 4)),
                                  expr::column(1, Type::date()), expr::column(2, Type::integer())},
                                 {"l_orderkey", "revenue", "o_orderdate", "o_shippriority"});
    return plan::sort(std::move(project), {{1, true, std::nullopt}, {2, false, std::nullopt}}, 10);
}

TEST_P(TpchTest, Q3) {
    const PlanPtr plan = q3_plan(table("customer"), table("orders"), table("lineitem"), JoinKind::inner);
    expect_answer(*plan, "q3", Order::exact);
}

TEST_P(TpchTest, Q3EveryJoinStrategy) {
    for (const JoinKind kind : {JoinKind::inner, JoinKind::semi}) {
        SCOPED_TRACE(kind == JoinKind::inner ? "inner" : "semi");
        const PlanPtr plan = q3_plan(table("customer"), table("orders"), table("lineitem"), kind);
        expect_answer_every_join_strategy(*plan, "q3", Order::exact);
    }
}

} // namespace
} // namespace mx::db
