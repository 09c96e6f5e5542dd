// SELECT features on the small emp/dept tables; every expected answer is computed by hand from
// the rows in sql_test_support.h.

#include "sql/sql_test_support.h"

namespace mx::sql::test {

TEST_F(EmployeeTest, WhereAndOrderBy) {
    EXPECT_EQ(rows("SELECT id FROM emp WHERE salary > 1000 ORDER BY id"), (Rows{"2", "3", "5"}));
    EXPECT_EQ(rows("SELECT id FROM emp WHERE NOT (salary > 1000) OR salary IS NULL ORDER BY id"),
              (Rows{"1", "4", "6"}));
}

TEST_F(EmployeeTest, Arithmetic) {
    // DuckDB: integer / integer is DOUBLE; DECIMAL * INTEGER keeps the scale.
    EXPECT_EQ(
        rows("SELECT id, salary * 2 AS s2, id / 2, id % 4, -id FROM emp WHERE id IN (1, 3) ORDER BY id"),
        (Rows{"1|2000.00|0.5|1|-1", "3|4000.00|1.5|3|-3"}));
    EXPECT_EQ(db.query("SELECT id / 2 FROM emp WHERE id = 1").columns[0].type, db::Type::float64());
    EXPECT_EQ(rows("SELECT sum(salary * (1 - 0.1)) FROM emp WHERE dept = 10"), (Rows{"2250.450"}));
    EXPECT_EQ(rows("SELECT 1 + 2 * 3, 7 - -2, 'x'"), (Rows{"7|9|x"}));
}

TEST_F(EmployeeTest, BetweenInListLike) {
    EXPECT_EQ(rows("SELECT name FROM emp WHERE salary BETWEEN 1000 AND 1500.50 ORDER BY name"),
              (Rows{"alice", "bob", "eve"}));
    EXPECT_EQ(rows("SELECT name FROM emp WHERE salary NOT BETWEEN 1000 AND 1500.50 ORDER BY name"),
              (Rows{"carol", "frank"}));
    EXPECT_EQ(rows("SELECT id FROM emp WHERE dept IN (10, 30) ORDER BY id"), (Rows{"1", "2", "5"}));
    // NOT IN: the NULL department is neither in nor not in the list.
    EXPECT_EQ(rows("SELECT id FROM emp WHERE dept NOT IN (10, 30) ORDER BY id"), (Rows{"3", "4"}));
    EXPECT_EQ(rows("SELECT id FROM emp WHERE name LIKE '%a%' ORDER BY id"), (Rows{"1", "3", "4", "6"}));
    EXPECT_EQ(rows("SELECT id FROM emp WHERE name NOT LIKE 'a%' ORDER BY id"),
              (Rows{"2", "3", "4", "5", "6"}));
    EXPECT_EQ(rows("SELECT id FROM emp WHERE name LIKE '_o%' ORDER BY id"), (Rows{"2"}));
}

TEST_F(EmployeeTest, CaseCastCoalesce) {
    EXPECT_EQ(
        rows("SELECT id, CASE WHEN salary >= 1500 THEN 'high' WHEN salary IS NULL THEN 'none' ELSE 'low' END "
             "FROM emp ORDER BY id"),
        (Rows{"1|low", "2|high", "3|high", "4|none", "5|low", "6|low"}));
    EXPECT_EQ(
        rows("SELECT CASE dept WHEN 10 THEN 1 WHEN 20 THEN 2 END FROM emp WHERE id IN (1, 3, 5) ORDER BY id"),
        (Rows{"1", "2", "NULL"}));
    // DECIMAL -> INTEGER rounds half away from zero.
    EXPECT_EQ(
        rows("SELECT CAST(salary AS INTEGER), CAST('42' AS INTEGER) + 1, '7'::integer FROM emp WHERE id = 2"),
        (Rows{"1501|43|7"}));
    EXPECT_EQ(rows("SELECT COALESCE(salary, 0) FROM emp WHERE id = 4"), (Rows{"0.00"}));
}

TEST_F(EmployeeTest, DatesIntervalsExtractSubstring) {
    EXPECT_EQ(
        rows("SELECT id, extract(year FROM hired) FROM emp WHERE hired < date '2020-01-01' ORDER BY id"),
        (Rows{"2|2019", "4|2018"}));
    EXPECT_EQ(rows("SELECT id FROM emp WHERE hired >= date '2020-01-15' - interval '1' month "
                   "AND hired < date '2021-01-01'"),
              (Rows{"1"}));
    EXPECT_EQ(rows("SELECT date '1998-12-01' - interval '90' day, date '2020-01-31' + interval '1' month, "
                   "date '2020-02-29' + interval '1 year'"),
              (Rows{"1998-09-02|2020-02-29|2021-02-28"}));
    // A string literal compared with a DATE column is a DATE (DuckDB).
    EXPECT_EQ(rows("SELECT id FROM emp WHERE hired = '2019-03-01'"), (Rows{"2"}));
    EXPECT_EQ(rows("SELECT substring(name FROM 2 FOR 3), substring(name, 1, 2), substr(name, 4) FROM emp "
                   "WHERE id = 3"),
              (Rows{"aro|ca|ol"}));
    EXPECT_EQ(rows("SELECT extract(month FROM hired), extract(day FROM hired) FROM emp WHERE id = 3"),
              (Rows{"7|30"}));
}

TEST_F(EmployeeTest, InnerAndCommaJoins) {
    EXPECT_EQ(rows("SELECT e.name, d.dname FROM emp e JOIN dept d ON e.dept = d.id ORDER BY e.id"),
              (Rows{"alice|sales", "bob|sales", "carol|research", "dave|research"}));
    EXPECT_EQ(
        rows("SELECT name, dname FROM emp, dept WHERE emp.dept = dept.id AND budget > 6000 ORDER BY name"),
        (Rows{"carol|research", "dave|research"}));
    // A cross product (no join condition) of 6 x 3 rows.
    EXPECT_EQ(rows("SELECT count(*) FROM emp, dept"), (Rows{"18"}));
    // A join condition that is not an equality.
    EXPECT_EQ(
        rows("SELECT e.id, d.id FROM emp e JOIN dept d ON e.dept < d.id AND d.budget < 200 ORDER BY e.id"),
        (Rows{"1|40", "2|40", "3|40", "4|40", "5|40"}));
}

TEST_F(EmployeeTest, OuterJoins) {
    EXPECT_EQ(rows("SELECT e.id, d.dname FROM emp e LEFT JOIN dept d ON e.dept = d.id ORDER BY e.id"),
              (Rows{"1|sales", "2|sales", "3|research", "4|research", "5|NULL", "6|NULL"}));
    // A condition on the nullable side belongs to the join, not to the WHERE clause.
    EXPECT_EQ(
        rows("SELECT e.id, d.dname FROM emp e LEFT OUTER JOIN dept d ON e.dept = d.id AND d.budget > 6000 "
             "ORDER BY e.id"),
        (Rows{"1|NULL", "2|NULL", "3|research", "4|research", "5|NULL", "6|NULL"}));
    EXPECT_EQ(
        rows("SELECT d.dname, count(e.id) FROM emp e RIGHT JOIN dept d ON e.dept = d.id GROUP BY d.dname "
             "ORDER BY d.dname"),
        (Rows{"empty|0", "research|2", "sales|2"}));
    EXPECT_EQ(
        rows("SELECT e.id FROM emp e LEFT JOIN dept d ON e.dept = d.id WHERE d.id IS NULL ORDER BY e.id"),
        (Rows{"5", "6"}));
}

TEST_F(EmployeeTest, GroupByAggregatesHaving) {
    // avg is DOUBLE; cast to DECIMAL to compare its text independently of double formatting.
    EXPECT_EQ(
        rows("SELECT dept, count(*), sum(salary), CAST(avg(salary) AS DECIMAL(10,2)), min(hired), max(name), "
             "count(salary), count(DISTINCT dept) FROM emp GROUP BY dept ORDER BY dept NULLS FIRST"),
        (Rows{"NULL|1|900.00|900.00|2022-02-28|frank|1|0", "10|2|2500.50|1250.25|2019-03-01|bob|2|1",
              "20|2|2000.00|2000.00|2018-12-31|dave|1|1", "30|1|1200.00|1200.00|NULL|eve|1|1"}));
    EXPECT_EQ(rows("SELECT dept, count(*) AS c FROM emp GROUP BY dept HAVING count(*) > 1 ORDER BY dept"),
              (Rows{"10|2", "20|2"}));
    EXPECT_EQ(rows("SELECT count(*), sum(salary), max(salary) FROM emp WHERE id > 100"),
              (Rows{"0|NULL|NULL"}));
    // Group keys by expression, by select alias and by ordinal.
    EXPECT_EQ(rows("SELECT extract(year FROM hired) AS y, count(*) FROM emp WHERE hired IS NOT NULL "
                   "GROUP BY extract(year FROM hired) ORDER BY y"),
              (Rows{"2018|1", "2019|1", "2020|1", "2021|1", "2022|1"}));
    EXPECT_EQ(
        rows("SELECT dept * 10 AS d10, count(*) FROM emp WHERE dept IS NOT NULL GROUP BY d10 ORDER BY 1"),
        (Rows{"100|2", "200|2", "300|1"}));
    EXPECT_EQ(rows("SELECT dept, sum(salary) FROM emp GROUP BY 1 HAVING sum(salary) > 1500 ORDER BY 2 DESC"),
              (Rows{"10|2500.50", "20|2000.00"}));
}

TEST_F(EmployeeTest, OrderByLimitOffsetDistinct) {
    EXPECT_EQ(rows("SELECT name AS n FROM emp ORDER BY n DESC LIMIT 2"), (Rows{"frank", "eve"}));
    EXPECT_EQ(rows("SELECT name FROM emp ORDER BY salary DESC NULLS LAST, id LIMIT 3"),
              (Rows{"carol", "bob", "eve"}));
    // NULLs sort last in both directions unless told otherwise (DuckDB; PostgreSQL differs for DESC).
    EXPECT_EQ(rows("SELECT dept, name FROM emp ORDER BY 1 DESC, 2"),
              (Rows{"30|eve", "20|carol", "20|dave", "10|alice", "10|bob", "NULL|frank"}));
    EXPECT_EQ(rows("SELECT dept, name FROM emp ORDER BY 1 DESC NULLS FIRST, 2 LIMIT 2"),
              (Rows{"NULL|frank", "30|eve"}));
    EXPECT_EQ(rows("SELECT id FROM emp ORDER BY id LIMIT 2 OFFSET 3"), (Rows{"4", "5"}));
    EXPECT_EQ(rows("SELECT id FROM emp ORDER BY id OFFSET 4"), (Rows{"5", "6"}));
    EXPECT_EQ(rows("SELECT id FROM emp LIMIT 2").size(), 2U);
    EXPECT_EQ(rows("SELECT DISTINCT dept FROM emp ORDER BY dept"), (Rows{"10", "20", "30", "NULL"}));
    EXPECT_EQ(rows("SELECT count(*) FROM (SELECT DISTINCT dept, dept > 15 FROM emp) AS t"), (Rows{"4"}));
    EXPECT_EQ(rows("SELECT id FROM emp ORDER BY salary * -1 NULLS FIRST, id LIMIT 2"), (Rows{"4", "3"}));
}

TEST_F(EmployeeTest, StarAliasesQualifiedNames) {
    EXPECT_EQ(rows("SELECT * FROM dept ORDER BY id"),
              (Rows{"10|sales|5000", "20|research|8000", "40|empty|100"}));
    EXPECT_EQ(rows("SELECT d.*, e.name FROM dept d JOIN emp e ON e.dept = d.id WHERE e.id = 3"),
              (Rows{"20|research|8000|carol"}));
    EXPECT_EQ(rows("SELECT emp.name FROM emp WHERE emp.id = 1"), (Rows{"alice"}));
    const auto result = db.query("SELECT id AS number, name FROM emp WHERE id = 1");
    ASSERT_EQ(result.columns.size(), 2U);
    EXPECT_EQ(result.columns[0].name, "number");
    EXPECT_EQ(result.columns[1].name, "name");
}

TEST_F(EmployeeTest, ScalarSubqueries) {
    // avg over the five salaries = 1320.1
    EXPECT_EQ(rows("SELECT name FROM emp WHERE salary > (SELECT avg(salary) FROM emp) ORDER BY name"),
              (Rows{"bob", "carol"}));
    EXPECT_EQ(rows("SELECT name, (SELECT max(budget) FROM dept) FROM emp WHERE id = 1"),
              (Rows{"alice|8000"}));
    EXPECT_EQ(rows("SELECT dept FROM emp GROUP BY dept HAVING count(*) = (SELECT max(id) - 38 FROM dept) "
                   "ORDER BY dept"),
              (Rows{"10", "20"}));
    // Correlated: the best paid of each department (decorrelated into a grouped join).
    EXPECT_EQ(
        rows("SELECT name FROM emp e WHERE salary = (SELECT max(salary) FROM emp e2 WHERE e2.dept = e.dept) "
             "ORDER BY name"),
        (Rows{"bob", "carol", "eve"}));
}

TEST_F(EmployeeTest, ExistsAndInSubqueries) {
    EXPECT_EQ(rows("SELECT dname FROM dept d WHERE EXISTS (SELECT * FROM emp e WHERE e.dept = d.id AND "
                   "e.salary > 1200) ORDER BY dname"),
              (Rows{"research", "sales"}));
    EXPECT_EQ(rows("SELECT dname FROM dept d WHERE NOT EXISTS (SELECT * FROM emp e WHERE e.dept = d.id)"),
              (Rows{"empty"}));
    // Correlated with a non-equality part (a residual of the semi join).
    EXPECT_EQ(rows("SELECT name FROM emp e WHERE EXISTS (SELECT * FROM emp o WHERE o.dept = e.dept AND o.id "
                   "<> e.id) "
                   "ORDER BY name"),
              (Rows{"alice", "bob", "carol", "dave"}));
    EXPECT_EQ(
        rows("SELECT name FROM emp WHERE dept IN (SELECT id FROM dept WHERE budget > 1000) ORDER BY name"),
        (Rows{"alice", "bob", "carol", "dave"}));
    EXPECT_EQ(rows("SELECT name FROM emp WHERE dept NOT IN (SELECT id FROM dept) ORDER BY name"),
              (Rows{"eve"}));
    // NOT IN over a subquery that yields a NULL is never true.
    EXPECT_EQ(rows("SELECT id FROM dept WHERE id NOT IN (SELECT dept FROM emp)"), (Rows{}));
    // NOT IN over an empty subquery is true, also for a NULL operand.
    EXPECT_EQ(rows("SELECT count(*) FROM emp WHERE dept NOT IN (SELECT id FROM dept WHERE budget > 100000)"),
              (Rows{"6"}));
    EXPECT_EQ(rows("SELECT count(*) FROM emp WHERE EXISTS (SELECT * FROM dept WHERE budget > 7000)"),
              (Rows{"6"}));
    EXPECT_EQ(rows("SELECT count(*) FROM emp WHERE id IN (SELECT max(id) FROM emp GROUP BY dept)"),
              (Rows{"4"}));
}

TEST_F(EmployeeTest, DerivedTablesAndCtes) {
    EXPECT_EQ(
        rows("SELECT d, c FROM (SELECT dept AS d, count(*) AS c FROM emp GROUP BY dept) AS t WHERE c > 1 "
             "ORDER BY d"),
        (Rows{"10|2", "20|2"}));
    EXPECT_EQ(rows("SELECT x FROM (SELECT id, name FROM emp) AS t (x, y) WHERE y = 'eve'"), (Rows{"5"}));
    EXPECT_EQ(rows("WITH big AS (SELECT * FROM emp WHERE salary >= 1500) SELECT count(*) FROM big"),
              (Rows{"2"}));
    EXPECT_EQ(rows("WITH a AS (SELECT dept, sum(salary) AS s FROM emp GROUP BY dept) "
                   "SELECT dept FROM a WHERE s = (SELECT max(s) FROM a)"),
              (Rows{"10"}));
}

} // namespace mx::sql::test
