"""Stage 5 — evaluation: sweeps over datasets × objectives × devices × methods × budgets ×
seeds with a resumable results table, and the reports made from it. ``eval/*.py`` are thin
command-line entry points over these modules:

* :mod:`.config` — the sweep config (typed TOML, checked and resolved);
* :mod:`.units` — work units (one ``optimize`` call each) and their cell hashes;
* :mod:`.results` — the results table: reading, merging, compacting;
* :mod:`.run` — :func:`~.run.run_sweep` (resume, sharding, several processes);
* :mod:`.report` — the SPEC §7 report (Tables 1-2, Figs. 4-5);
* :mod:`.ablations`, :mod:`.generations`, :mod:`.hybrid` — REGAL's and NTO's Table 3,
  generations-to-match, the hybrid against its parents;
* :mod:`.benchmarks` — what the benchmarks share (their ``docs/benchmarks.md`` sections);
* programs: :mod:`.cost_model_bench`, :mod:`.brkga_bench`, :mod:`.demo`, :mod:`.tune_brkga`,
  :mod:`.hybrid_concentration`, :mod:`.go_baselines`, :mod:`.xla_check`,
  :mod:`.regal_controls` (controls for REGAL's gains), :mod:`.go_gdp` (GDP / GO tables).

The standard tasks' cost settings live in :mod:`gsched.costmodel.tasks`.
"""
