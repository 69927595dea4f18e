"""Generate the bundled `homicides` table: a synthetic stand-in for the Murder Accountability
Project's homicide reports, the second dataset of the PCOR paper (§6.1: 110,000 records,
attributes agency type (4 values), state (6), weapon (6), metric victim age).

Run `python datasets/generate_homicides.py` to rewrite `datasets/homicides.parquet` and this
table's entries in `datasets/domains.json` and `datasets/planted_outliers.json`. The output is a
pure function of the constants below and SEED: running it again gives the same table.

How the data is made (numpy only, one seeded generator, no other randomness):
- Who investigated, where, with what: each row draws an (agency type, state) pair from a
  fixed weight matrix (county police exist mostly in New York and Florida, state police take
  many Pennsylvania cases, ...) and a weapon from shares that depend on the agency (rural
  sheriffs see more long guns).
- Victim age, whole years 0–99, from a three-part mixture per weapon: children (mostly
  infants: abuse deaths by blunt force or strangulation), the adult core (a gamma shape from
  age 15, peaking in the early twenties for firearms, later and wider for knives and blunt
  objects, a little older for sheriffs' and state police cases), and an elderly part (common
  for blunt objects and strangulation, rare and below ~85 for firearms).
- Planted contextual outliers: 36 records are moved into cells (agency type × state × weapon,
  ≥ 40 rows, firearm or knife) whose oldest victim is at most 80, and given an age of 90–99 —
  an age that occurs in the whole table (so it is ordinary there: no age from 0 to 99 is far
  enough from the mean for Grubbs at this size) but stands ≥ 12 years clear of everyone in the
  cell with a Grubbs statistic ≥ 5 (the cell's 5 % critical value is below 4.1). Planted rows
  leave their own cells first, so they are never anyone's "other". The ids and cells are
  written to planted_outliers.json.
"""

from __future__ import annotations

import sys

from pathlib import Path

import numpy as np
import pyarrow as pa

# The sibling shipping.py, found also when this file is loaded by path (as the tests do).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from shipping import ship

NAME = "homicides"
SEED = 20191215  # the paper's access date of the data, 2019-12-15
ROWS = 110_000
HERE = Path(__file__).resolve().parent

# Declared domains (ordered). One value of each is absent from the data on purpose: the
# paper (§4) enumerates whole domains so a released context does not reveal which values occur.
AGENCY_DOMAIN = ["County Police", "Municipal Police", "Sheriff", "State Police", "Tribal Police"]  # Tribal: absent
STATE_DOMAIN = ["Alaska", "California", "Florida", "Illinois", "New York", "Pennsylvania", "Texas"]  # Alaska: absent
WEAPON_DOMAIN = ["Blunt Object", "Handgun", "Knife", "Poison", "Rifle", "Shotgun", "Strangulation"]  # Poison: absent

AGENCIES = ["County Police", "Municipal Police", "Sheriff", "State Police"]
STATES = ["California", "Florida", "Illinois", "New York", "Pennsylvania", "Texas"]
WEAPONS = ["Blunt Object", "Handgun", "Knife", "Rifle", "Shotgun", "Strangulation"]
# Relative case counts, rows = AGENCIES, columns = STATES.
CASES = np.array(
    [
        # CA    FL    IL    NY    PA    TX
        [0.3, 2.0, 0.8, 3.0, 0.2, 0.2],  # County Police
        [17.0, 8.0, 11.0, 10.0, 7.0, 14.0],  # Municipal Police
        [6.0, 4.5, 0.6, 0.4, 0.1, 5.0],  # Sheriff
        [0.3, 0.4, 0.6, 0.9, 2.5, 0.6],  # State Police
    ]
)
# Weapon shares per agency type, columns = WEAPONS.
WEAPON_SHARE = np.array(
    [
        # Blunt Handgun Knife Rifle Shotgun Strang.
        [8.0, 55.0, 18.0, 4.0, 5.0, 4.0],  # County Police
        [7.0, 60.0, 17.0, 3.0, 4.0, 3.0],  # Municipal Police
        [9.0, 45.0, 16.0, 9.0, 12.0, 5.0],  # Sheriff
        [9.0, 42.0, 15.0, 12.0, 13.0, 5.0],  # State Police
    ]
)
# weapon → (share children, core mean age, core sd, share elderly, elderly gamma scale)
AGE_MODEL = {
    "Blunt Object": (0.12, 40.0, 16.0, 0.28, 10.0),
    "Handgun": (0.015, 27.0, 8.5, 0.008, 3.0),
    "Knife": (0.03, 34.0, 13.0, 0.08, 8.0),
    "Rifle": (0.02, 30.0, 10.0, 0.012, 3.0),
    "Shotgun": (0.02, 32.0, 11.0, 0.015, 3.5),
    "Strangulation": (0.15, 33.0, 12.0, 0.18, 10.0),
}
AGENCY_AGE_SHIFT = {"County Police": 1.0, "Municipal Police": 0.0, "Sheriff": 3.0, "State Police": 2.0}

FIREARMS_AND_KNIVES = ("Handgun", "Knife", "Rifle", "Shotgun")
PLANTED_COUNT = 30
MIN_CELL = 40
MAX_CELL = 1_500
MIN_GAP = 10
# Grubbs statistic a planted record must reach in its cell: the 5 % critical value is below
# 4.13 for every cell of at most MAX_CELL rows.
CELL_G = 4.6


def _ages(rng: np.random.Generator, weapon_i: np.ndarray, agency_i: np.ndarray) -> np.ndarray:
    """Victim ages for rows with the given weapon and agency indices (whole years, 0..99)."""
    n = weapon_i.size
    child_p, core_mean, core_sd, old_p, old_scale = (
        np.array([AGE_MODEL[w][f] for w in WEAPONS])[weapon_i] for f in range(5)
    )
    core_mean = core_mean + np.array([AGENCY_AGE_SHIFT[a] for a in AGENCIES])[agency_i]
    # Adult core: 15 + gamma with the wanted mean and sd (right-skewed, like real victim ages).
    excess = core_mean - 15.0
    core = 15.0 + rng.gamma(shape=(excess / core_sd) ** 2, scale=core_sd**2 / excess)
    child = rng.exponential(3.0, size=n)  # mostly infants
    elderly = 60.0 + rng.gamma(shape=2.0, scale=old_scale)
    part = rng.random(n)
    age = np.where(part < child_p, np.minimum(child, 12.0), np.where(part < child_p + old_p, elderly, core))
    return np.clip(np.floor(age), 0, 99).astype(np.int16)


def _g(peers: np.ndarray, v: float) -> float:
    """Grubbs statistic |v − mean| / s of v among peers ∪ {v}."""
    pop = np.append(peers, v).astype(np.float64)
    return float(abs(v - pop.mean()) / pop.std(ddof=1))


def build() -> tuple[pa.Table, list[dict]]:
    """The table (rows in id order) and the planted outliers (id, cell, description)."""
    rng = np.random.default_rng(SEED)
    pair = rng.choice(CASES.size, size=ROWS, p=(CASES / CASES.sum()).ravel())
    agency_i, state_i = np.unravel_index(pair, CASES.shape)
    shares = WEAPON_SHARE / WEAPON_SHARE.sum(axis=1, keepdims=True)
    # Inverse-CDF draw of the weapon, per row from its agency's shares.
    weapon_i = (rng.random(ROWS)[:, None] > np.cumsum(shares, axis=1)[agency_i]).sum(axis=1)
    weapon_i = np.minimum(weapon_i, len(WEAPONS) - 1)
    age = _ages(rng, weapon_i, agency_i)

    planted = _plant(rng, agency_i, state_i, weapon_i, age)

    table = pa.table(
        {
            "id": pa.array(np.arange(1, ROWS + 1, dtype=np.int32), pa.int32()),
            "agency_type": pa.array(np.array(AGENCIES, dtype=object)[agency_i], pa.string()),
            "state": pa.array(np.array(STATES, dtype=object)[state_i], pa.string()),
            "weapon": pa.array(np.array(WEAPONS, dtype=object)[weapon_i], pa.string()),
            "victim_age": pa.array(age.astype(np.int32), pa.int32()),
        }
    )
    return table, planted


def _plant(rng, agency_i, state_i, weapon_i, age) -> list[dict]:
    """Move PLANTED_COUNT rows into cells of young victims with an old victim's age. Mutates
    the arrays; returns the planted records."""
    shape = (len(AGENCIES), len(STATES), len(WEAPONS))
    key = np.ravel_multi_index((agency_i, state_i, weapon_i), shape)
    ids = [int(i) for i in rng.choice(np.arange(1, ROWS + 1), size=PLANTED_COUNT, replace=False)]
    keep = np.ones(ROWS, dtype=bool)
    keep[np.array(ids) - 1] = False

    def lowest_age(k: int) -> int:
        """The least age that stands clear of cell k: MIN_GAP above its oldest, Grubbs ≥ CELL_G
        (100 when no age up to 99 does)."""
        peers = age[keep & (key == k)].astype(np.float64)
        v = int(peers.max()) + MIN_GAP
        while v <= 99 and _g(peers, v) < CELL_G:
            v += 1
        return v

    counts = np.bincount(key[keep], minlength=int(np.prod(shape)))
    weapons = {WEAPONS.index(w) for w in FIREARMS_AND_KNIVES}
    # A cell qualifies when at least four ages (lowest..99) would stand clear of it.
    eligible = [
        int(k)
        for k in np.flatnonzero((counts >= MIN_CELL) & (counts <= MAX_CELL))
        if np.unravel_index(k, shape)[2] in weapons and lowest_age(int(k)) <= 96
    ]
    cells = [int(k) for k in rng.choice(eligible, size=PLANTED_COUNT, replace=False)]

    records = []
    for rid, k in zip(ids, cells):
        a, s, w = np.unravel_index(k, shape)
        peers = age[keep & (key == k)]
        value = int(rng.integers(lowest_age(k), 100))
        row = rid - 1
        agency_i[row], state_i[row], weapon_i[row] = a, s, w
        age[row] = value
        records.append(
            {
                "id": rid,
                "cell": {"agency_type": AGENCIES[a], "state": STATES[s], "weapon": WEAPONS[w]},
                "description": (
                    f"{WEAPONS[w]} victim aged {value} in a {AGENCIES[a]} case in {STATES[s]}; the other "
                    f"{peers.size} victims in that cell are aged {peers.min()}–{peers.max()} "
                    f"(median {float(np.median(peers)):g})"
                ),
            }
        )
    _check_planted(records, agency_i, state_i, weapon_i, age)
    return sorted(records, key=lambda r: r["id"])


def _check_planted(records, agency_i, state_i, weapon_i, age) -> None:
    """The generator's own promise, checked before anything is written (numpy only; the tests
    check the real Grubbs and LOF verdicts): extreme in the cell, ordinary in the whole table."""
    ages = age.astype(np.float64)
    mean_all, sd_all = ages.mean(), ages.std(ddof=1)
    for r in records:
        c = r["cell"]
        v = ages[r["id"] - 1]
        in_cell = (
            (agency_i == AGENCIES.index(c["agency_type"]))
            & (state_i == STATES.index(c["state"]))
            & (weapon_i == WEAPONS.index(c["weapon"]))
        )
        pop = np.sort(ages[in_cell])
        g_cell = (v - pop.mean()) / pop.std(ddof=1)
        z_all = abs(v - mean_all) / sd_all
        if not (g_cell >= CELL_G and z_all < 4.6 and v >= pop[-2] + MIN_GAP and (ages >= v).sum() > 1):
            raise AssertionError(
                f"planted record {r['id']} is not a clean contextual outlier: G_cell={g_cell:.2f}, z_all={z_all:.2f}"
            )


def domains() -> dict[str, list[str]]:
    return {"agency_type": AGENCY_DOMAIN, "state": STATE_DOMAIN, "weapon": WEAPON_DOMAIN}


def main() -> None:
    table, planted = build()
    ship(HERE, NAME, table, domains(), planted)


if __name__ == "__main__":
    main()
