"""Generate the bundled `salaries` table: a synthetic stand-in for Ontario's public sector
salary disclosure ("sunshine list"), the first dataset of the PCOR paper (§6.1).

Run `python datasets/generate_salaries.py` to rewrite `datasets/salaries.parquet` and this
table's entries in `datasets/domains.json` and `datasets/planted_outliers.json`. The output is a
pure function of the constants below and SEED: running it again gives the same table.

How the data is made (numpy only, one seeded generator, no other randomness):
- Head counts: each row draws a (job, employer) pair from a fixed weight matrix (teachers work
  for the school board, constables for the police service, ...) and a year from weights that
  grow 6 % a year, as the real list does.
- Pay: the real list is the top of a pay distribution cut at $100,000 (a threshold never
  indexed). So each row's pay is a log-normal draw for its job × employer × year (median grows
  2 % a year) conditioned on pay ≥ 100,000 by rejection, which gives the list's shape: most
  people just above the floor, a long right tail. Rounded to cents.
- Ties, as in the real list: collective-agreement grid pay for teachers, firefighters and
  constables (a few identical values per year: grid step + allowance), and contract salaries
  rounded to the thousand for some managers, directors and professors.
- Planted contextual outliers: record 42 and 35 other records are moved into a tight cell
  (one job × employer × year, ≥ 40 rows, low-paid job) and given a pay that is ordinary for the
  whole list (between its 60th and 97th percentiles, |z| < 3 there, against a Grubbs critical
  value of 4.89) but far above everyone else in that cell (a Grubbs statistic ≥ 5 there, where
  the critical value is below 4.1, and at least 3 interquartile ranges above the cell's
  maximum). Planted rows leave their own cells first, so they are never anyone's "other".
  The ids and cells are written to planted_outliers.json.
"""

from __future__ import annotations

import sys

from pathlib import Path

import numpy as np
import pyarrow as pa

# The sibling shipping.py, found also when this file is loaded by path (as the tests do).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from shipping import ship

NAME = "salaries"
SEED = 20200731  # the paper's access date of the Ontario data, 2019-07-31, would do as well
ROWS = 51_000
FLOOR = 100_000.0
HERE = Path(__file__).resolve().parent

# Declared domains (ordered). One value of each is absent from the data on purpose: the
# paper (§4) enumerates whole domains so a released context does not reveal which values occur.
JOB_DOMAIN = [
    "Chief Executive Officer",  # absent from the data
    "Director",
    "Engineer",
    "Firefighter",
    "Manager",
    "Police Constable",
    "Professor",
    "Registered Nurse",
    "Teacher",
]
EMPLOYER_DOMAIN = [
    "City of Toronto",
    "Hydro One Networks",
    "Ontario Lottery and Gaming Corporation",  # absent from the data
    "Ontario Power Generation",
    "Toronto District School Board",
    "Toronto Police Service",
    "University Health Network",
    "University of Toronto",
]
YEAR_DOMAIN = [str(y) for y in range(2012, 2020)]  # 2012 is absent from the data
YEARS = list(range(2013, 2020))

# job → (median annual pay before the $100k cut, log-scale spread)
JOB_PAY = {
    "Director": (150_000.0, 0.22),
    "Engineer": (108_000.0, 0.12),
    "Firefighter": (101_000.0, 0.07),
    "Manager": (118_000.0, 0.16),
    "Police Constable": (102_000.0, 0.08),
    "Professor": (160_000.0, 0.25),
    "Registered Nurse": (92_000.0, 0.08),
    "Teacher": (96_000.0, 0.05),
}
EMPLOYER_PAY = {
    "City of Toronto": 1.00,
    "Hydro One Networks": 1.08,
    "Ontario Power Generation": 1.10,
    "Toronto District School Board": 0.99,
    "Toronto Police Service": 1.02,
    "University Health Network": 1.01,
    "University of Toronto": 1.04,
}
EMPLOYERS = list(EMPLOYER_PAY)
JOBS = list(JOB_PAY)
# Relative head counts on the list, rows = JOBS, columns = EMPLOYERS.
HEADCOUNT = np.array(
    [
        # CoT  Hydro  OPG   TDSB  TPS   UHN   UofT
        [3.0, 2.0, 3.0, 2.0, 1.0, 2.0, 3.0],  # Director
        [4.0, 8.0, 10.0, 0.0, 0.0, 1.0, 1.5],  # Engineer
        [10.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0],  # Firefighter
        [8.0, 6.0, 6.0, 4.0, 2.0, 5.0, 8.0],  # Manager
        [0.0, 0.0, 0.0, 0.0, 25.0, 0.0, 0.0],  # Police Constable
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 27.0],  # Professor
        [2.0, 0.0, 0.3, 0.0, 0.0, 24.0, 0.4],  # Registered Nurse
        [0.0, 0.0, 0.0, 30.0, 0.0, 0.0, 0.0],  # Teacher
    ]
)
YEAR_GROWTH_ROWS = 1.06
YEAR_GROWTH_PAY = 1.02
# Grid pay: (job, employer) → (first year's grid value, allowances added on top, share of rows on the grid)
GRID = {
    ("Teacher", "Toronto District School Board"): (100_412.40, (0.0, 1_250.00, 2_870.00), 0.05),
    ("Firefighter", "City of Toronto"): (100_981.16, (0.0, 1_520.48), 0.04),
    ("Police Constable", "Toronto Police Service"): (100_566.72, (0.0, 3_016.92), 0.03),
}
ROUNDED_JOBS = {"Manager": 0.03, "Director": 0.05, "Professor": 0.02}  # share paid a round thousand

TIGHT_JOBS = ("Engineer", "Firefighter", "Police Constable", "Registered Nurse", "Teacher")
PLANTED_COUNT = 36
MIN_CELL = 40
# Grubbs statistic a planted record must reach in its cell: the 5 % critical value is below
# 4.1 for every cell here (≤ 1,200 rows) and 4.89 for the whole list, where z must stay < 3.
CELL_G = 5.0
FEATURED_ID = 42
FEATURED_CELL = ("Registered Nurse", "University Health Network", 2018)


def _truncated_lognormal(rng: np.random.Generator, median: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Log-normal draws conditioned on ≥ FLOOR, by rejection (each row redrawn until it passes)."""
    out = np.empty(median.size)
    todo = np.arange(median.size)
    while todo.size:
        draw = median[todo] * np.exp(sigma[todo] * rng.standard_normal(todo.size))
        ok = draw >= FLOOR
        out[todo[ok]] = draw[ok]
        todo = todo[~ok]
    return out


def _g(peers: np.ndarray, v: float) -> float:
    """Grubbs statistic |v − mean| / s of v among peers ∪ {v}."""
    pop = np.append(peers, v)
    return float(abs(v - pop.mean()) / pop.std(ddof=1))


def _pay_for_g(peers: np.ndarray, g: float) -> float:
    """The least v above the peers whose Grubbs statistic in peers ∪ {v} is ≥ g (it grows with
    v towards (n−1)/√n, so bisection finds it; callers keep g below that bound)."""
    lo, hi = float(peers.max()), float(peers.max()) + 1e3 * float(peers.std(ddof=1) + 1.0)
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _g(peers, mid) >= g else (mid, hi)
    return hi


def _cents(x: np.ndarray) -> np.ndarray:
    return np.round(x, 2)


def _money(x: float) -> str:
    return f"${x:,.2f}"


def build() -> tuple[pa.Table, list[dict]]:
    """The table (rows in id order) and the planted outliers (id, cell, description)."""
    rng = np.random.default_rng(SEED)

    # Who is on the list.
    year_w = YEAR_GROWTH_ROWS ** np.arange(len(YEARS))
    cell_w = (HEADCOUNT[:, :, None] * year_w[None, None, :]).ravel()
    cell = rng.choice(cell_w.size, size=ROWS, p=cell_w / cell_w.sum())
    job_i, emp_i, year_i = np.unravel_index(cell, (len(JOBS), len(EMPLOYERS), len(YEARS)))

    # What they are paid.
    base = np.array([JOB_PAY[j][0] for j in JOBS])[job_i]
    sigma = np.array([JOB_PAY[j][1] for j in JOBS])[job_i]
    emp_f = np.array([EMPLOYER_PAY[e] for e in EMPLOYERS])[emp_i]
    median = base * emp_f * YEAR_GROWTH_PAY**year_i
    salary = _truncated_lognormal(rng, median, sigma)

    for (job, emp), (grid0, allowances, share) in GRID.items():
        mask = (job_i == JOBS.index(job)) & (emp_i == EMPLOYERS.index(emp))
        on_grid = mask & (rng.random(ROWS) < share)
        grid = _cents(grid0 * YEAR_GROWTH_PAY ** year_i[on_grid])
        salary[on_grid] = grid + np.asarray(allowances)[rng.integers(len(allowances), size=int(on_grid.sum()))]
    for job, share in ROUNDED_JOBS.items():
        rounded = (job_i == JOBS.index(job)) & (rng.random(ROWS) < share)
        salary[rounded] = np.maximum(np.round(salary[rounded], -3), FLOOR)
    salary = _cents(salary)

    planted = _plant(rng, job_i, emp_i, year_i, salary)

    ids = np.arange(1, ROWS + 1, dtype=np.int32)
    table = pa.table(
        {
            "id": pa.array(ids, pa.int32()),
            "job_title": pa.array(np.array(JOBS, dtype=object)[job_i], pa.string()),
            "employer": pa.array(np.array(EMPLOYERS, dtype=object)[emp_i], pa.string()),
            "year": pa.array(np.array([str(y) for y in YEARS], dtype=object)[year_i], pa.string()),
            "salary": pa.array(salary, pa.float64()),
        }
    )
    return table, planted


def _plant(rng, job_i, emp_i, year_i, salary) -> list[dict]:
    """Move PLANTED_COUNT rows (FEATURED_ID first) into tight cells with a pay ordinary for the
    whole list but extreme in the cell. Mutates the arrays; returns the planted records."""
    shape = (len(JOBS), len(EMPLOYERS), len(YEARS))
    key = np.ravel_multi_index((job_i, emp_i, year_i), shape)
    other_ids = rng.choice(np.setdiff1d(np.arange(1, ROWS + 1), [FEATURED_ID]), size=PLANTED_COUNT - 1, replace=False)
    ids = [FEATURED_ID] + [int(i) for i in other_ids]
    # A planted row leaves its own cell, so it is not one of the "others" anywhere.
    keep = np.ones(ROWS, dtype=bool)
    keep[np.array(ids) - 1] = False
    lo_all, hi_all = np.percentile(salary[keep], [60.0, 97.0])

    def lowest_pay(k: int) -> float:
        """The least pay that stands clear of cell k: 3 IQRs above its maximum, a Grubbs
        statistic of at least CELL_G once it joins the cell, and not below the list's 60th
        percentile (so it is an ordinary pay for the list as a whole)."""
        peers = salary[keep & (key == k)]
        q1, q3 = np.percentile(peers, [25.0, 75.0])
        return max(float(peers.max() + 3.0 * (q3 - q1)), _pay_for_g(peers, CELL_G), float(lo_all))

    counts = np.bincount(key[keep], minlength=int(np.prod(shape)))
    tight = {JOBS.index(j) for j in TIGHT_JOBS}
    job, employer, year = FEATURED_CELL
    featured = int(np.ravel_multi_index((JOBS.index(job), EMPLOYERS.index(employer), YEARS.index(year)), shape))
    eligible = [
        int(k)
        for k in np.flatnonzero(counts >= MIN_CELL)
        if np.unravel_index(k, shape)[0] in tight and k != featured and lowest_pay(int(k)) < hi_all - 10_000.0
    ]
    cells = [featured] + [int(k) for k in rng.choice(eligible, size=PLANTED_COUNT - 1, replace=False)]

    records = []
    for rid, k in zip(ids, cells):
        j, e, y = np.unravel_index(k, shape)
        peers = salary[keep & (key == k)]
        value = float(_cents(rng.uniform(lowest_pay(k), hi_all)))
        row = rid - 1
        job_i[row], emp_i[row], year_i[row] = j, e, y
        salary[row] = value
        records.append(
            {
                "id": rid,
                "cell": {"job_title": JOBS[j], "employer": EMPLOYERS[e], "year": str(YEARS[y])},
                "description": (
                    f"{JOBS[j]} at {EMPLOYERS[e]} in {YEARS[y]} paid {_money(value)}; the other "
                    f"{peers.size} in that cell earn {_money(peers.min())}–{_money(peers.max())} "
                    f"(median {_money(float(np.median(peers)))})"
                ),
            }
        )
    _check_planted(records, job_i, emp_i, year_i, salary)
    return sorted(records, key=lambda r: r["id"])


def _check_planted(records, job_i, emp_i, year_i, salary) -> None:
    """The generator's own promise, checked before anything is written (numpy only; the tests
    check the real Grubbs and LOF verdicts): extreme in the cell, ordinary in the whole list."""
    mean_all, sd_all = salary.mean(), salary.std(ddof=1)
    for r in records:
        c = r["cell"]
        v = salary[r["id"] - 1]
        in_cell = (
            (job_i == JOBS.index(c["job_title"]))
            & (emp_i == EMPLOYERS.index(c["employer"]))
            & (year_i == YEARS.index(int(c["year"])))
        )
        pop = salary[in_cell]
        z_cell = (v - pop.mean()) / pop.std(ddof=1)
        z_all = abs(v - mean_all) / sd_all
        if not (z_cell >= CELL_G and z_all < 3.0 and v > np.sort(pop)[-2]):
            raise AssertionError(
                f"planted record {r['id']} is not a clean contextual outlier: G_cell={z_cell:.2f}, z_all={z_all:.2f}"
            )


def domains() -> dict[str, list[str]]:
    return {"job_title": JOB_DOMAIN, "employer": EMPLOYER_DOMAIN, "year": YEAR_DOMAIN}


def main() -> None:
    table, planted = build()
    ship(HERE, NAME, table, domains(), planted)


if __name__ == "__main__":
    main()
