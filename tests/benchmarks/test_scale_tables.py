"""The scale tables' planted record: on the flights shape rows 1..40 share its cell with an
ordinary metric (so that LOF has a context to start from); the other shapes keep the recipe
whose tables earlier figures were measured on."""

import duckdb
import pytest

from benchmarks.scale_tables import CELL_MATES, SHAPES, generation_sql, record_cell_values


def cell_of_record(shape: str, rows: int):
    con = duckdb.connect()
    for statement in generation_sql(shape, rows):
        con.execute(statement)
    where = " AND ".join(f"{name} = '{value}'" for name, value in record_cell_values(shape).items())
    return con.execute(f"SELECT id, v FROM t WHERE {where} ORDER BY id").fetchall()


def test_the_flights_record_has_forty_ordinary_cell_mates():
    rows = cell_of_record("flights", 3_000)
    ids = [i for i, _ in rows]
    assert ids[: CELL_MATES["flights"] + 1] == list(range(CELL_MATES["flights"] + 1))
    assert rows[0][1] == 120.0
    mates = [v for i, v in rows if 1 <= i <= CELL_MATES["flights"]]
    assert 35 < sum(mates) / len(mates) < 65 and max(mates) < 120.0  # the cell's own law: mean 50, sd 10


@pytest.mark.parametrize("shape", [s for s in SHAPES if s not in CELL_MATES])
def test_other_shapes_plant_the_record_alone(shape):
    assert all("id <= " not in statement for statement in generation_sql(shape, 1_000))


def test_the_births_shape_is_one_row_per_state_day_with_a_tied_count_and_the_record_at_two():
    from benchmarks.scale_tables import BIRTHS_ROWS, BIRTHS_RECORD_VALUE

    con = duckdb.connect()
    for statement in generation_sql("births", 0):  # the births shape has its own row count
        con.execute(statement)
    rows, cells, distinct, ints = con.execute(
        "SELECT count(*), count(DISTINCT (state, year, month, weekday)), count(DISTINCT v), "
        "bool_and(v = round(v)) FROM t").fetchall()[0]
    assert rows == BIRTHS_ROWS and cells == 51 * 20 * 12 * 7
    assert distinct < 3_000 and ints  # an integer count: ties galore
    where = " AND ".join(f"{name} = '{value}'" for name, value in record_cell_values("births").items())
    assert con.execute(f"SELECT id, v FROM t WHERE {where} ORDER BY id LIMIT 1").fetchall() == [(0, BIRTHS_RECORD_VALUE)]
    mean = con.execute("SELECT avg(v) FROM t WHERE state = 's000' AND id > 0").fetchall()[0][0]
    assert 700 < mean < 1_000  # the record's state averages ~900 (weekends 0.85 of it)
    means = [m for (m,) in con.execute("SELECT avg(v) FROM t GROUP BY state").fetchall()]
    assert 10 <= min(means) and max(means) <= 1_600
