import os

import pytest

import tunadb

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def con():
    connection = tunadb.connect(threads=2)
    yield connection
    connection.close()


@pytest.fixture
def cur(con):
    return con.cursor()


ALL_TYPES_SCHEMA = (
    "CREATE TABLE v (b BOOLEAN, i INTEGER, l BIGINT, d DECIMAL(15,2), w DECIMAL(30,4), f DOUBLE, "
    "t DATE, s VARCHAR(40))")
