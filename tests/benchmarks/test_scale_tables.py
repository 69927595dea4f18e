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
