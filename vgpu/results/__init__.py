"""Results: what runs measured, kept, judged and shown, in five layers that import only
downward (each sub-package may use those listed before it):

- ``stats``: statistics of repeats (pure numbers: intervals, noise levels, alpha spending, tails)
- ``store``: the records a run writes, the SQLite/PostgreSQL store, and stored runs read back
  as series (producers write through ``store.result_store.ResultStore``)
- ``verdict``: comparisons and their verdicts (PASS / FAIL / INCONCLUSIVE): which series
  judges which, sequential repeats, calibration
- ``views``: numbers for people: the HTML/Markdown report, charts, panels, one run read back
- ``export``: runs for other tools: CSV/JSON, the MLPerf submission tree, JUnit XML
"""
