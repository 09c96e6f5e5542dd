// The JSON -> parse tree converter: statements as the binder sees them (kinds, fields, byte
// locations), and constructs TunaDB rejects arriving as nodes that carry their error.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sql/ast_from_json.h"

namespace mx::sql::detail {
namespace {

ast::Statement convert(const std::string &text) {
    const Source source(text);
    const std::vector<Statement> statements = parse(source);
    EXPECT_EQ(statements.size(), 1U);
    return to_ast(statements.front());
}

const ast::SelectStmt &select_of(const ast::Statement &statement) {
    const auto *select = std::get_if<ast::SelectPtr>(&statement.node);
    EXPECT_NE(select, nullptr);
    return **select;
}

TEST(Ast, SelectClausesWithKindsAndLocations) {
    const std::string text =
        "SELECT a AS x, sum(b) FROM t JOIN u ON t.id = u.id WHERE a > 1 AND b LIKE 'x%' GROUP BY 1 "
        "HAVING count(*) > 2 ORDER BY x DESC NULLS FIRST LIMIT 5";
    const ast::Statement statement = convert(text);
    const ast::SelectStmt &select = select_of(statement);
    EXPECT_EQ(select.kind, ast::SelectStmt::Kind::select);
    ASSERT_EQ(select.targets.size(), 2U);
    EXPECT_EQ(select.targets[0].name, "x");
    const auto *column = select.targets[0].value->as<ast::ColumnRef>();
    ASSERT_NE(column, nullptr);
    EXPECT_EQ(column->names, (std::vector<std::string>{"a"}));
    EXPECT_EQ(select.targets[0].value->location, static_cast<ast::Location>(text.find("a AS")));
    const auto *sum = select.targets[1].value->as<ast::FuncCall>();
    ASSERT_NE(sum, nullptr);
    EXPECT_EQ(sum->name, "sum");
    EXPECT_EQ(sum->arguments.size(), 1U);
    EXPECT_EQ(sum->over, nullptr);

    ASSERT_EQ(select.from.size(), 1U);
    const auto *join = std::get_if<ast::JoinExpr>(&select.from[0]->node);
    ASSERT_NE(join, nullptr);
    EXPECT_EQ(join->type, ast::JoinType::inner);
    ASSERT_NE(join->condition, nullptr);
    const auto *equal = join->condition->as<ast::Operator>();
    ASSERT_NE(equal, nullptr);
    EXPECT_EQ(equal->name, "=");
    EXPECT_EQ(join->condition->location, static_cast<ast::Location>(text.find("= u.id")));
    const auto *left = std::get_if<ast::RangeVar>(&join->left->node);
    ASSERT_NE(left, nullptr);
    EXPECT_EQ(left->name, "t");
    EXPECT_EQ(join->left->location, static_cast<ast::Location>(text.find("t JOIN")));

    const auto *where = select.where->as<ast::BoolExpr>();
    ASSERT_NE(where, nullptr);
    EXPECT_EQ(where->op, ast::BoolOperator::and_op);
    ASSERT_EQ(where->arguments.size(), 2U);
    const auto *like = where->arguments[1]->as<ast::Like>();
    ASSERT_NE(like, nullptr);
    EXPECT_FALSE(like->negated);
    EXPECT_FALSE(like->insensitive);
    EXPECT_EQ(like->pattern->get<ast::Constant>().text, "x%");

    ASSERT_EQ(select.group_by.size(), 1U);
    const auto *ordinal = select.group_by[0]->as<ast::Constant>();
    ASSERT_NE(ordinal, nullptr);
    EXPECT_EQ(ordinal->kind, ast::Constant::Kind::integer);
    EXPECT_EQ(ordinal->integer, 1);
    const auto *having = select.having->as<ast::Operator>();
    ASSERT_NE(having, nullptr);
    EXPECT_TRUE(having->left->get<ast::FuncCall>().star);

    ASSERT_EQ(select.order_by.size(), 1U);
    EXPECT_EQ(select.order_by[0].direction, ast::SortDirection::descending);
    EXPECT_EQ(select.order_by[0].nulls, ast::NullsOrder::first);
    ASSERT_NE(select.limit, nullptr);
    EXPECT_EQ(select.limit->get<ast::Constant>().integer, 5);
    EXPECT_EQ(select.offset, nullptr);
}

TEST(Ast, ExpressionKinds) {
    const std::string text = "SELECT CAST(a AS DECIMAL(15, 2)), x IN (1, 2), x NOT BETWEEN 1 AND 3, "
                             "CASE WHEN a THEN 1 ELSE -2 END, a IS NOT NULL, "
                             "EXISTS (SELECT 1), x > ALL (SELECT y FROM u), "
                             "rank() OVER (PARTITION BY a ORDER BY b ROWS 2 PRECEDING), "
                             "count(DISTINCT a) FILTER (WHERE b), NULLIF(a, b), a IS DISTINCT FROM b";
    const ast::Statement statement = convert(text);
    const ast::SelectStmt &select = select_of(statement);
    ASSERT_EQ(select.targets.size(), 11U);
    const auto *cast = select.targets[0].value->as<ast::TypeCast>();
    ASSERT_NE(cast, nullptr);
    EXPECT_EQ(cast->type.names.back(), "numeric");
    ASSERT_EQ(cast->type.modifiers.size(), 2U);
    EXPECT_EQ(cast->type.modifiers[1]->get<ast::Constant>().integer, 2);

    const auto *in = select.targets[1].value->as<ast::InList>();
    ASSERT_NE(in, nullptr);
    EXPECT_FALSE(in->negated);
    EXPECT_EQ(in->items.size(), 2U);

    const auto *between = select.targets[2].value->as<ast::Between>();
    ASSERT_NE(between, nullptr);
    EXPECT_TRUE(between->negated);
    EXPECT_EQ(between->bounds.size(), 2U);

    const auto *case_expression = select.targets[3].value->as<ast::CaseExpr>();
    ASSERT_NE(case_expression, nullptr);
    EXPECT_EQ(case_expression->operand, nullptr);
    ASSERT_EQ(case_expression->branches.size(), 1U);
    EXPECT_EQ(case_expression->branches[0].location, static_cast<ast::Location>(text.find("WHEN a")));
    // libpg_query leaves out the value of negative integer constants; the parser restores it.
    EXPECT_EQ(case_expression->otherwise->get<ast::Constant>().integer, -2);

    EXPECT_TRUE(select.targets[4].value->get<ast::NullTest>().negated);

    const auto *exists = select.targets[5].value->as<ast::SubLink>();
    ASSERT_NE(exists, nullptr);
    EXPECT_EQ(exists->kind, ast::SubLinkKind::exists);
    ASSERT_NE(exists->query, nullptr);
    const auto *all = select.targets[6].value->as<ast::SubLink>();
    ASSERT_NE(all, nullptr);
    EXPECT_EQ(all->kind, ast::SubLinkKind::all);
    EXPECT_EQ(all->operators, (std::vector<std::string>{">"}));
    EXPECT_TRUE(all->test->is<ast::ColumnRef>());
    EXPECT_EQ(all->query->from.size(), 1U);

    const auto *rank = select.targets[7].value->as<ast::FuncCall>();
    ASSERT_NE(rank, nullptr);
    ASSERT_NE(rank->over, nullptr);
    EXPECT_EQ(rank->over->partition.size(), 1U);
    EXPECT_EQ(rank->over->order.size(), 1U);
    EXPECT_NE(rank->over->frame_options & 0x4, 0); // ROWS
    ASSERT_NE(rank->over->start_offset, nullptr);
    EXPECT_EQ(rank->over->start_offset->get<ast::Constant>().integer, 2);

    const auto *count = select.targets[8].value->as<ast::FuncCall>();
    ASSERT_NE(count, nullptr);
    EXPECT_TRUE(count->distinct);
    EXPECT_TRUE(count->filter != nullptr && count->filter->is<ast::ColumnRef>());

    EXPECT_TRUE(select.targets[9].value->is<ast::NullIf>());
    const auto *distinct = select.targets[10].value->as<ast::DistinctFrom>();
    ASSERT_NE(distinct, nullptr);
    EXPECT_FALSE(distinct->negated);
}

TEST(Ast, SetOperationsAreALeftDeepChainAndResultClausesWrapThem) {
    const ast::Statement plain = convert("SELECT 1 UNION ALL SELECT 2 INTERSECT SELECT 3 EXCEPT SELECT 4");
    const ast::SelectStmt &chain = select_of(plain);
    ASSERT_EQ(chain.kind, ast::SelectStmt::Kind::set_operation);
    // INTERSECT binds tighter: (1 UNION ALL (2 INTERSECT 3)) EXCEPT 4.
    ASSERT_EQ(chain.steps.size(), 2U);
    EXPECT_EQ(chain.steps[0].op, ast::SetOperator::union_op);
    EXPECT_TRUE(chain.steps[0].all);
    EXPECT_EQ(chain.steps[0].right->kind, ast::SelectStmt::Kind::set_operation);
    EXPECT_EQ(chain.steps[1].op, ast::SetOperator::except);
    EXPECT_EQ(chain.first->kind, ast::SelectStmt::Kind::select);

    const ast::Statement ordered = convert("VALUES (1, 'a'), (2, 'b') ORDER BY 1 LIMIT 1");
    const ast::SelectStmt &wrapper = select_of(ordered);
    EXPECT_EQ(wrapper.kind, ast::SelectStmt::Kind::select);
    ASSERT_EQ(wrapper.targets.size(), 1U);
    EXPECT_TRUE(wrapper.targets[0].value->get<ast::ColumnRef>().star);
    EXPECT_EQ(wrapper.order_by.size(), 1U);
    ASSERT_NE(wrapper.limit, nullptr);
    const auto *derived = std::get_if<ast::RangeSubselect>(&wrapper.from.at(0)->node);
    ASSERT_NE(derived, nullptr);
    EXPECT_EQ(derived->alias->name, "unnamed_subquery");
    EXPECT_EQ(derived->query->kind, ast::SelectStmt::Kind::values);
    ASSERT_EQ(derived->query->values.size(), 2U);
    EXPECT_EQ(derived->query->values[1][1]->get<ast::Constant>().text, "b");

    // A long chain needs no deep recursion.
    std::string text = "SELECT 0";
    for (int i = 0; i < 5000; ++i) {
        text.append(" UNION ALL SELECT 1");
    }
    EXPECT_EQ(select_of(convert(text)).steps.size(), 5000U);
}

TEST(Ast, WithClauseAndStatements) {
    const ast::Statement with = convert("WITH c (x) AS (SELECT 1) SELECT x FROM c");
    const ast::SelectStmt &select = select_of(with);
    ASSERT_NE(select.with, nullptr);
    ASSERT_EQ(select.with->ctes.size(), 1U);
    EXPECT_EQ(select.with->ctes[0].name, "c");
    EXPECT_EQ(select.with->ctes[0].columns, (std::vector<std::string>{"x"}));
    ASSERT_NE(select.with->ctes[0].query, nullptr);

    const ast::Statement create =
        convert("CREATE TABLE t (a INTEGER NOT NULL, b VARCHAR(10), PRIMARY KEY (a))");
    const auto *table = std::get_if<ast::CreateTable>(&create.node);
    ASSERT_NE(table, nullptr);
    EXPECT_EQ(table->table.name, "t");
    ASSERT_EQ(table->elements.size(), 3U);
    const auto &a = std::get<ast::ColumnDefinition>(table->elements[0]);
    EXPECT_EQ(a.name, "a");
    ASSERT_EQ(a.constraints.size(), 1U);
    EXPECT_EQ(a.constraints[0].kind, ast::ColumnDefinition::Constraint::not_null);
    EXPECT_EQ(std::get<ast::ColumnDefinition>(table->elements[1]).type.modifiers.size(), 1U);
    EXPECT_EQ(std::get<ast::TableConstraint>(table->elements[2]).keys, (std::vector<std::string>{"a"}));

    const ast::Statement insert = convert("INSERT INTO t (b, a) VALUES ('x', 1), (DEFAULT, 2)");
    const auto *into = std::get_if<ast::Insert>(&insert.node);
    ASSERT_NE(into, nullptr);
    ASSERT_EQ(into->columns.size(), 2U);
    EXPECT_EQ(into->columns[1].name, "a");
    ASSERT_EQ(into->query->kind, ast::SelectStmt::Kind::values);
    EXPECT_TRUE(into->query->values[1][0]->is<ast::SetToDefault>());

    const ast::Statement copy = convert("COPY t FROM 'f.csv' (DELIMITER '|', HEADER)");
    const auto *load = std::get_if<ast::Copy>(&copy.node);
    ASSERT_NE(load, nullptr);
    EXPECT_TRUE(load->from);
    EXPECT_EQ(load->file, "f.csv");
    ASSERT_EQ(load->options.size(), 2U);
    EXPECT_EQ(load->options[0].kind, ast::CopyOption::Kind::string);
    EXPECT_EQ(load->options[0].text, "|");
    EXPECT_EQ(load->options[1].kind, ast::CopyOption::Kind::none);

    const ast::Statement explain = convert("EXPLAIN ANALYZE SELECT 1");
    const auto *plan = std::get_if<ast::Explain>(&explain.node);
    ASSERT_NE(plan, nullptr);
    ASSERT_EQ(plan->options.size(), 1U);
    EXPECT_EQ(plan->options[0].name, "analyze");
    EXPECT_TRUE(std::holds_alternative<ast::SelectPtr>(plan->statement->node));

    const ast::Statement drop = convert("DROP TABLE IF EXISTS main.t");
    const auto *dropped = std::get_if<ast::DropTable>(&drop.node);
    ASSERT_NE(dropped, nullptr);
    EXPECT_TRUE(dropped->if_exists);
    EXPECT_EQ(dropped->names.at(0), (std::vector<std::string>{"main", "t"}));

    const ast::Statement other = convert("BEGIN");
    ASSERT_TRUE(std::holds_alternative<ast::OtherStatement>(other.node));
    EXPECT_EQ(std::get<ast::OtherStatement>(other.node).kind, "TransactionStmt");
}

TEST(Ast, UnsupportedConstructsCarryTheirError) {
    const std::string text = "SELECT a SIMILAR TO 'x', $1, a IS TRUE FROM generate_series(1, 3) FOR UPDATE";
    const ast::Statement statement = convert(text);
    const ast::SelectStmt &select = select_of(statement);
    EXPECT_EQ(select.unsupported_clause, "FOR UPDATE/SHARE");
    const auto *similar = select.targets[0].value->as<ast::Unsupported>();
    ASSERT_NE(similar, nullptr);
    EXPECT_EQ(similar->message, "SIMILAR TO is not supported");
    EXPECT_EQ(select.targets[0].value->location, static_cast<ast::Location>(text.find("SIMILAR")));
    EXPECT_EQ(similar->children.size(), 2U);
    EXPECT_EQ(select.targets[1].value->get<ast::Unsupported>().message, "parameters ($n) are not supported");
    EXPECT_EQ(select.targets[2].value->get<ast::Unsupported>().message,
              "IS [NOT] TRUE/FALSE/UNKNOWN is not supported");
    const auto *function = std::get_if<ast::UnsupportedFrom>(&select.from.at(0)->node);
    ASSERT_NE(function, nullptr);
    EXPECT_EQ(function->message, "table functions are not supported");

    // Expressions nested beyond the limit end in a node with the depth error.
    std::string chain = "SELECT 1";
    for (int i = 0; i < 1000; ++i) {
        chain.append("+1");
    }
    const ast::Statement deep = convert(chain);
    const ast::Expr *node = select_of(deep).targets.at(0).value.get();
    int depth = 1;
    while (const auto *op = node->as<ast::Operator>()) {
        node = op->left.get();
        ++depth;
    }
    EXPECT_EQ(depth, ast::max_expression_depth + 1);
    ASSERT_TRUE(node->is<ast::Unsupported>());
    EXPECT_EQ(node->get<ast::Unsupported>().message, "expression nested too deeply (more than 256 levels)");
}

TEST(Ast, QueryBlocksBeyondTheLimitAreLeftEmpty) {
    std::string text = "SELECT * FROM ";
    for (int i = 0; i < 80; ++i) {
        text.append("(SELECT * FROM ");
    }
    text.append("t");
    for (int i = 0; i < 80; ++i) {
        text.append(") AS t").append(std::to_string(i));
    }
    const ast::Statement statement = convert(text);
    const ast::SelectStmt *select = &select_of(statement);
    int level = 1;
    while (!select->too_deep) {
        ASSERT_EQ(select->from.size(), 1U);
        const auto *derived = std::get_if<ast::RangeSubselect>(&select->from[0]->node);
        ASSERT_NE(derived, nullptr);
        select = derived->query.get();
        ++level;
    }
    // Binding refuses blocks deeper than max_query_depth before it reaches this one.
    EXPECT_EQ(level, ast::max_query_depth + 2);
    EXPECT_TRUE(select->from.empty());
}

} // namespace
} // namespace mx::sql::detail
