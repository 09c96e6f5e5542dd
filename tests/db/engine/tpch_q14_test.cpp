// TPC-H Q14 (promotion effect) as hand-built plans with one hash join, compared
// with DuckDB's answer at SF 0.01 (tests/db/queries/q14.sql, standard
// parameters): once with part as the build side, once with the filtered
// lineitem rows as the build side, under every join strategy.

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

/// SELECT 100.00 * sum(CASE WHEN p_type LIKE 'PROMO%' THEN l_extendedprice * (1
/// - l_discount)
///                     ELSE 0 END) / sum(l_extendedprice * (1 - l_discount)) AS
///                     promo_revenue
/// FROM lineitem, part
/// WHERE l_partkey = p_partkey AND l_shipdate >= DATE '1995-09-01' AND
/// l_shipdate < DATE '1995-10-01'
PlanPtr q14_plan(const std::shared_ptr<const Table> &lineitem, const std::shared_ptr<const Table> &part,
                 bool build_part) {
    const Columns l(lineitem, {"l_partkey", "l_extendedprice", "l_discount", "l_shipdate"});
    const Columns p(part, {"p_partkey", "p_type"});
    auto lines =
        plan::scan(l.table(), l.indices(),
                   expr::logical_and(expr::greater_equal(l("l_shipdate"), test::tpch::date("1995-09-01")),
                                     expr::less(l("l_shipdate"), test::tpch::date("1995-10-01"))));
    auto parts = plan::scan(p.table(), p.indices());

    // Column positions in the join output: the probe side first.
    const std::uint32_t l_offset = build_part ? 0 : static_cast<std::uint32_t>(p.indices().size());
    const std::uint32_t p_offset = build_part ? static_cast<std::uint32_t>(l.indices().size()) : 0;
    auto joined = build_part ? plan::hash_join(std::move(lines), std::move(parts), JoinKind::inner,
                                               {l("l_partkey")}, {p("p_partkey")})
                             : plan::hash_join(std::move(parts), std::move(lines), JoinKind::inner,
                                               {p("p_partkey")}, {l("l_partkey")});

    const ExprPtr revenue = expr::multiply(l("l_extendedprice", l_offset),
                                           expr::subtract(test::tpch::integer(1), l("l_discount", l_offset)));
    const ExprPtr promo =
        expr::case_when({{expr::like(p("p_type", p_offset), "PROMO%"), revenue}}, test::tpch::integer(0));
    auto aggregate = plan::aggregate(
        std::move(joined), {}, {},
        {{AggregateFunction::sum, promo, "promo"}, {AggregateFunction::sum, revenue, "total"}});
    const Type promo_type = aggregate->output[0].type;
    const Type total_type = aggregate->output[1].type;
    return plan::project(
        std::move(aggregate),
        {expr::divide(expr::multiply(test::tpch::decimal("100.00", 5, 2), expr::column(0, promo_type)),
                      expr::column(1, total_type))},
        {"promo_revenue"});
}

TEST_P(TpchTest, Q14) {
    const PlanPtr plan = q14_plan(table("lineitem"), table("part"), true);
    expect_answer(*plan, "q14", Order::any);
}

TEST_P(TpchTest, Q14EitherBuildSideEveryJoinStrategy) {
    for (const bool build_part : {true, false}) {
        SCOPED_TRACE(build_part ? "build part" : "build lineitem");
        const PlanPtr plan = q14_plan(table("lineitem"), table("part"), build_part);
        expect_answer_every_join_strategy(*plan, "q14", Order::any);
    }
}

} // namespace
} // namespace mx::db
