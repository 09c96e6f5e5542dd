SELECT
    sum(l_extendedprice * l_discount) AS revenue
FROM
    lineitem
WHERE
    l_shipdate >= CAST('1997-01-01' AS date)
    AND l_shipdate < CAST('1998-01-01' AS date)
    AND l_discount BETWEEN 0.08 AND 0.10
    AND l_quantity < 24;
