"""Tracking: MLflow runs and traces of eval and optimize runs, the comparison chart (mlflow is imported only when
tracking is on).

    tracker        `Tracker`: runs, metrics, artifacts, the UI's addresses
    store          the tracking URI is a usable store (asked when the tracker opens)
    trace_policy   what a question's trace records, which questions are traced
    trace_writer   traces written to the store by a child process
    trace_export   mlflow's in-process trace export queue written now, its threads stopped
    mlflow_values  what MLflow shows: scores in percent as the CLI, answers as a line, trace tags
    chart          the comparison chart (F1 / EM / empty-result rate per variant, PNG)"""
