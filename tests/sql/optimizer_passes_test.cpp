// The optimizer's named passes: the list and its order, switching passes off (unknown and
// required names are errors), EXPLAIN's line of passes, and for every optional pass a query
// whose plan it changes while the answer stays the same with the pass off.

#include <algorithm>
#include <string>
#include <vector>

#include "sql/sql_test_support.h"

namespace mx::sql::test {

namespace {

using Rows = std::vector<std::string>;

const std::vector<std::string> all_passes = {
    "decorrelate",  "shared_subplans", "fold",         "pushdown",         "magic_sets",
    "equivalences", "join_order",      "estimates",    "right_semi_joins", "right_outer_joins",
    "count_joins",  "bloom_filters",   "scan_prefetch"};

DatabaseOptions without(const std::vector<std::string> &passes) {
    DatabaseOptions options;
    options.optimizer.disabled_passes.insert(passes.begin(), passes.end());
    return options;
}

// big: 2000 rows, m = i % 100 (mid's keys), v = i % 7. mid: 100 rows, s = i % 10 (small's keys).
// small: 10 rows, v = i % 3.
void create_tables(Database &db) {
    db.execute("CREATE TABLE big (id INTEGER NOT NULL, m INTEGER NOT NULL, v INTEGER NOT NULL);"
               "INSERT INTO big VALUES " +
               values_list(2000,
                           [](int i) {
                               return std::to_string(i) + ", " + std::to_string(i % 100) + ", " +
                                      std::to_string(i % 7);
                           }) +
               ";CREATE TABLE mid (id INTEGER NOT NULL, s INTEGER NOT NULL);"
               "INSERT INTO mid VALUES " +
               values_list(100, [](int i) { return std::to_string(i) + ", " + std::to_string(i % 10); }) +
               ";CREATE TABLE small (id INTEGER NOT NULL, v INTEGER NOT NULL);"
               "INSERT INTO small VALUES " +
               values_list(10, [](int i) { return std::to_string(i) + ", " + std::to_string(i % 3); }));
}

/// EXPLAIN without the optimizer's notes: the plan and its pipelines.
std::string plan_text(Database &db, const std::string &sql) {
    const std::string text = db.explain(sql);
    return text.substr(0, text.find("Optimizer:\n"));
}

Rows sorted_rows(Database &db, const std::string &sql) {
    Rows rows = rows_of(db.query(sql));
    std::sort(rows.begin(), rows.end());
    return rows;
}

struct PassCase {
    std::string pass;
    std::string sql;
};

/// Per optional pass a query whose plan the pass changes.
const std::vector<PassCase> &pass_cases() {
    static const std::vector<PassCase> cases = {
        // The join key is hidden in an OR; without factoring it out the join is a cross product.
        {"fold", "SELECT count(*), sum(big.v) FROM big, mid WHERE (big.m = mid.id AND big.v = 1) OR "
                 "(big.m = mid.id AND mid.s = 2)"},
        {"pushdown", "SELECT count(*) FROM big, mid WHERE big.m = mid.id AND big.v = 3 AND mid.s < 5"},
        {"magic_sets", "SELECT small.id FROM small WHERE small.v < (SELECT sum(big.v) FROM big WHERE big.m = "
                       "small.id)"},
        // mid and small meet only through big's m, unless mid.id = small.id is derived: then the
        // small join of the two comes first.
        {"equivalences", "SELECT count(*), sum(mid.s) FROM big, mid, small WHERE big.m = mid.id AND big.m = "
                         "small.id AND small.v = 1"},
        // FROM order joins big with mid first; the estimates favor the filtered small with mid.
        {"join_order", "SELECT count(*) FROM big, mid, small WHERE big.m = mid.id AND mid.s = small.id AND "
                       "small.v = 1"},
        {"right_semi_joins",
         "SELECT small.id FROM small WHERE EXISTS (SELECT 1 FROM big WHERE big.m = small.id)"},
        {"right_outer_joins", "SELECT small.id, count(big.id) FROM small LEFT JOIN big ON big.m = small.id "
                              "GROUP BY small.id"},
        {"count_joins", "SELECT small.v, count(big.v) FROM small LEFT JOIN big ON big.m = small.id "
                        "GROUP BY small.v"},
        // Few big rows find a partner among the small rows with v = 1.
        {"bloom_filters", "SELECT count(*) FROM big, small WHERE big.m = small.id AND small.v = 1"},
        {"scan_prefetch", "SELECT v, m FROM big WHERE id = 5"},
        // The CTE is read twice: computed once, or once per reference.
        {"shared_subplans", "WITH c AS (SELECT m, sum(v) AS s FROM big GROUP BY m) SELECT c.m, c.s FROM c "
                            "WHERE c.s = (SELECT max(s) FROM c)"},
    };
    return cases;
}

} // namespace

TEST(OptimizerPasses, ListsThePassesInTheOrderTheyRun) {
    std::vector<std::string> names;
    for (const OptimizerPass &pass : optimizer_passes()) {
        names.emplace_back(pass.name);
        EXPECT_FALSE(pass.description.empty()) << pass.name;
        EXPECT_EQ(pass.optional, pass.name != "estimates") << pass.name;
    }
    EXPECT_EQ(names, all_passes);
}

TEST(OptimizerPasses, UnknownOrRequiredPassesAreClearErrors) {
    tasking::Runtime runtime(small_runtime_config());
    try {
        Database db(runtime, without({"magic_set"}));
        FAIL() << "an unknown pass was accepted";
    } catch (const SqlError &error) {
        const std::string message = error.message();
        EXPECT_NE(message.find("unknown optimizer pass 'magic_set'"), std::string::npos) << message;
        EXPECT_NE(message.find("magic_sets"), std::string::npos) << message; // the valid names
    }
    try {
        Database db(runtime, without({"estimates"}));
        FAIL() << "a required pass was switched off";
    } catch (const SqlError &error) {
        EXPECT_NE(error.message().find("'estimates' cannot be switched off"), std::string::npos)
            << error.message();
    }
    OptimizerOptions options;
    options.disabled_passes = {"join_order", "fold"};
    EXPECT_NO_THROW(options.validate());
}

TEST(OptimizerPasses, TheBooleanOptionsSwitchTheirPasses) {
    OptimizerOptions options;
    EXPECT_TRUE(options.enabled("magic_sets"));
    options.magic_sets = false;
    options.right_semi_joins = false;
    options.right_outer_joins = false;
    options.disabled_passes = {"pushdown"};
    EXPECT_FALSE(options.enabled("magic_sets"));
    EXPECT_FALSE(options.enabled("right_semi_joins"));
    EXPECT_FALSE(options.enabled("right_outer_joins"));
    EXPECT_FALSE(options.enabled("pushdown"));
    EXPECT_TRUE(options.enabled("join_order"));

    tasking::Runtime runtime(small_runtime_config());
    DatabaseOptions database_options;
    database_options.optimizer = options;
    Database db(runtime, database_options);
    create_tables(db);
    EXPECT_NE(
        db.explain("SELECT id FROM small")
            .find(
                "optimizer passes: decorrelate, shared_subplans, fold, equivalences, join_order, estimates, "
                "count_joins, bloom_filters, "
                "scan_prefetch (off: pushdown, magic_sets, right_semi_joins, right_outer_joins)\n"),
        std::string::npos)
        << db.explain("SELECT id FROM small");
}

class OptimizerPassTest : public ::testing::Test {
protected:
    OptimizerPassTest() : _runtime(small_runtime_config()), _all(_runtime) { create_tables(_all); }

    tasking::Runtime _runtime;
    Database _all;
};

TEST_F(OptimizerPassTest, ExplainListsEveryPassWhenAllRun) {
    const std::string text = _all.explain("SELECT count(*) FROM big, mid WHERE big.m = mid.id");
    EXPECT_NE(
        text.find("optimizer passes: decorrelate, shared_subplans, fold, pushdown, magic_sets, equivalences, "
                  "join_order, estimates, "
                  "right_semi_joins, "
                  "right_outer_joins, count_joins, bloom_filters, scan_prefetch\n"),
        std::string::npos)
        << text;
    EXPECT_EQ(text.find("(off:"), std::string::npos) << text;
}

// The executor chooses radix-or-not per join from the actual build rows; EXPLAIN says so.
TEST_F(OptimizerPassTest, TheJoinStrategyIsLeftToTheExecutor) {
    const std::string text = _all.explain("SELECT count(*) FROM big, mid WHERE big.m = mid.id");
    EXPECT_NE(text.find("strategy=automatic (radix-partitioned above 64 MiB of build rows and bucket heads)"),
              std::string::npos)
        << text;
    const db::PlanPtr plan = _all.plan("SELECT count(*) FROM big, mid WHERE big.m = mid.id");
    std::vector<const db::PlanNode *> pending{plan.get()};
    int joins = 0;
    while (!pending.empty()) {
        const db::PlanNode *node = pending.back();
        pending.pop_back();
        if (node->kind == db::PlanKind::hash_join) {
            ++joins;
            EXPECT_EQ(node->join_strategy, db::JoinStrategy::automatic);
        }
        for (const auto &child : node->children) {
            pending.push_back(child.get());
        }
    }
    EXPECT_EQ(joins, 1);
}

// Each optional pass alone off: EXPLAIN names it as off, its query's plan differs from the plan
// with every pass on (the pass does something), and the answer is the same.
TEST_F(OptimizerPassTest, EachPassChangesItsPlanAndKeepsTheAnswer) {
    // Every optional pass but decorrelate has a case.
    ASSERT_EQ(pass_cases().size(), all_passes.size() - 2);
    for (const PassCase &test : pass_cases()) {
        SCOPED_TRACE(test.pass);
        Database off(_runtime, without({test.pass}));
        create_tables(off);
        const std::string explained = off.explain(test.sql);
        EXPECT_NE(explained.find("(off: " + test.pass + ")\n"), std::string::npos) << explained;
        EXPECT_NE(plan_text(_all, test.sql), plan_text(off, test.sql));
        const Rows expected = sorted_rows(_all, test.sql);
        EXPECT_FALSE(expected.empty());
        EXPECT_EQ(sorted_rows(off, test.sql), expected) << test.sql;
    }
    // The pass that the magic_sets case is about fired with every pass on.
    EXPECT_NE(_all.explain(pass_cases()[2].sql).find("magic set:"), std::string::npos);
    EXPECT_EQ(pass_cases()[2].pass, "magic_sets");
}

// A chain of equalities over four relations: each join applies one key of the class (the other
// equalities hold with it), and the answers match those without derived keys.
TEST_F(OptimizerPassTest, EquivalencesJoinOnOneKeyPerClass) {
    const std::string sql =
        "SELECT count(*), sum(a.v), sum(b.s) FROM big a, mid b, small c, mid d WHERE a.m = "
        "b.id AND b.id = c.id AND c.id = d.id AND c.v = 1";
    const std::string plan = plan_text(_all, sql);
    std::size_t joins = 0;
    for (std::size_t at = plan.find("HashJoin"); at != std::string::npos;
         at = plan.find("HashJoin", at + 1)) {
        ++joins;
        const std::string line = plan.substr(at, plan.find('\n', at) - at);
        const std::string keys = line.substr(0, line.find(']'));
        EXPECT_EQ(keys.find(','), std::string::npos) << "more than one key of one class: " << line;
    }
    EXPECT_EQ(joins, 3U) << plan;
    Database off(_runtime, without({"equivalences"}));
    create_tables(off);
    EXPECT_EQ(sorted_rows(off, sql), sorted_rows(_all, sql));
    EXPECT_EQ(sorted_rows(_all, sql), (Rows{"60|176|240"})) << plan;
    // Two columns of one relation in the chain (a.m and a.v): both equalities must hold, so
    // such a chain is no class and every equality stays a key or a residual.
    const std::string both = "SELECT count(*) FROM big a, mid b, small c WHERE a.m = b.id AND a.v = b.id AND "
                             "b.id = c.id";
    EXPECT_EQ(sorted_rows(_all, both), sorted_rows(off, both));
    EXPECT_EQ(sorted_rows(_all, both), (Rows{"21"}));
}

// Every optional pass off at once but decorrelate (the magic_sets case is a correlated scalar
// subquery): still the same answers.
TEST_F(OptimizerPassTest, AllOptionalPassesOffKeepTheAnswers) {
    std::vector<std::string> optional;
    for (const OptimizerPass &pass : optimizer_passes()) {
        if (pass.optional && pass.name != "decorrelate") {
            optional.emplace_back(pass.name);
        }
    }
    Database none(_runtime, without(optional));
    create_tables(none);
    for (const PassCase &test : pass_cases()) {
        SCOPED_TRACE(test.pass);
        EXPECT_EQ(sorted_rows(none, test.sql), sorted_rows(_all, test.sql)) << test.sql;
    }
}

} // namespace mx::sql::test
