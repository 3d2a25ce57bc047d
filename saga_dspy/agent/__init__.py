"""The agent: DSPy signatures (`saga_dspy.signatures`) run as a ReAct loop over the grounding tools.

    answer_type   the expected answer type, normalised       query_form  ASK / COUNT / SELECT, rewrites
    parsing       tool names, arguments and PIDs from LM text trajectory  steps and their rendering
    react         SagaReAct (dspy.ReAct's layout, per-question tools)
    episode       one question's run and its stop policy      program     SagaProgram (the dspy.Module)
    demos         the demo pool and the one demo builder

Kept without imports on purpose: `saga_dspy.agent.query_form` must not import the program."""
