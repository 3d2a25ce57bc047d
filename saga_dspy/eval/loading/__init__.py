"""Loading: the questions of a benchmark split and their frozen gold (reading writes nothing; freezing is its own
step).

    datasets       the benchmark catalogue and records (bundled files, user files, hub ids)
    answerability  which frozen gold results are worth scoring (none that can inflate)
    gold           frozen gold: found, resolved per endpoint, frozen
    firewall       the test firewall: when two questions are the same question
    splits         the dev splits carved from train, the firewall over the held-out splits
    evalset        the questions of a split with their gold (answerable filter, ids, limit)"""
