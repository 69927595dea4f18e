"""Benchmarks and the reproduction of the papers' experiments, run from a checkout (`python -m
benchmarks ...`); not part of the pcor-sql wheel. The commands are in `cli`; the modules here
print nothing.

- `suite`: `bench` — release timings against the naive baseline (`naive`), the per-cell
  summary build, per-context verification, the exact direct enumeration and a
  10-million-row table (`bigtable`), each next to its target (`targets`).
- `reproduce`: `reproduce` — Tables 2–11 (`experiments`, with exact maxima from `exact`) and
  Tables 12–13 with the §6.7 check (`coe_match`); figures in `plots`.
- `anomaly_evidence`: `anomaly-evidence` — the sensitive-privacy paper's claim, SP vs DP
  error rates over every record.
- `measure`, `tables`, `report`: timings, machine description, Markdown / JSON writers and the
  generated sections of BENCHMARKS.md.
"""
