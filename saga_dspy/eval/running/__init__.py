"""Running an evaluation: `evaluate()` (`runner`) answers the questions of each variant into resumable run
directories.

    runner       threads, resumable run directories, variants side by side
    run_inputs   what a run checks and opens before its first question
    answering    the questions in threads, each scored line appended as it finishes
    predictions  predictions.jsonl (one line per finished question)
    records      config.json (what reproduces a run)
    resume       `--resume`: the recorded run continued
    rundir       one run at a time holds a run directory"""
