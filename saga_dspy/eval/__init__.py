"""Evaluation: benchmark datasets and frozen gold, the eval set, metrics, the runner, run records and
tracking. `python -m saga_dspy.eval` is the CLI (`__main__`); `evaluate()` lives in `runner`.

    datasets     benchmark catalogue and records (bundled files, user files, hub ids)
    gold         frozen gold: found, resolved per endpoint, frozen
    answerability  which frozen gold results are worth scoring (none that can inflate)
    firewall     the test firewall: when two questions are the same question
    splits       the dev splits carved from train, the firewall over the held-out splits
    evalset      the questions of a split with their gold (answerable filter, ids, limit)
    metrics      answer F1 / EM and the summary of a run
    predictions  predictions.jsonl (one line per finished question)
    records      config.json (what reproduces a run)
    report       the summary table
    runner       threads, resumable run directories, variants side by side
    rescore      a run's metrics again from its predictions.jsonl, no LM
    tracking     MLflow runs and the comparison chart, the UI's addresses
    trace_policy  what a question's trace records, which questions are traced
    mlflow_values  what MLflow shows: scores in percent as the CLI, answers as a line, trace tags

Kept without imports on purpose: `saga_dspy.eval.metrics` must not pull in dspy."""
