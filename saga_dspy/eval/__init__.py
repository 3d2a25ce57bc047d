"""Evaluation, cut by concept into subpackages that import only downward (tests/test_codebase.py checks the order):

    errors, files, preflight   (this folder) what every part uses: EvalError, run files written private and whole,
                               the checks before the first question (the endpoint, the search and schema, the LM)
    scoring    answer F1 / EM and the summary of a run, paired significance, the tables a run prints
    loading    benchmarks and frozen gold, answerability, the test firewall and dev splits, the eval set
    stats      LLM-free statistics over whole splits (`saga-stats`: components, conflicts, Table 9)
    tracking   MLflow runs, traces and the comparison chart
    running    `evaluate()`: run directories, predictions.jsonl and config.json, resume, the questions in threads
    reports    finished runs read back: rescore, compare, export
    __main__   the CLI (`python -m saga_dspy.eval`, `saga-eval`)

Kept without imports on purpose (so are the subpackages): `saga_dspy.eval.scoring.metrics` must not pull in dspy."""
