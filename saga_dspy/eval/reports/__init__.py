"""Reports: finished run directories read back, no LM.

runs     a run directory (or an invocation's variants) read and checked
rescore  a run's metrics again from its predictions.jsonl
compare  runs question by question, with paired intervals
export   a run's answers as QALD-JSON"""
