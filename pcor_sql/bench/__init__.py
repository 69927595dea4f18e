"""Benchmarks and the reproduction of the PCOR paper's experiments (library code; no printing).

- `suite`: `pcor-sql bench` — release timings against the naive baseline (`naive`), the
  per-cell summary build, per-context verification, the exact direct enumeration and a
  10-million-row table (`bigtable`), each next to its target (`targets`).
- `reproduce`: `pcor-sql reproduce` — Tables 2–11 (`experiments`, with exact maxima from
  `exact`) and Tables 12–13 with the §6.7 check (`coe_match`); figures in `plots`.
- `measure`, `tables`, `report`: timings, machine description, Markdown / JSON writers and the
  generated sections of BENCHMARKS.md.
"""
