"""Scoring: what a run's answers are worth and how two runs differ (no LM, no endpoint).

metrics       answer F1 / EM (the paper's Eq. 4-5, SPINACH's row-major F1) and the summary of a run
breakdown     F1 by answer kind of the gold, who wrote each final query
significance  paired bootstrap intervals, wins / losses / ties; one system on two question sets
report        the tables printed at the end of a run (variants side by side, as text and markdown)"""
