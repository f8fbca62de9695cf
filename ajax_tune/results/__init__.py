"""What a trial reports, as data: nothing here builds or trains, so every layer from the loop up
reads it (`ajax_tune.expected_keys` predicts a config's keys from it).

keys.py     the vocabulary of result keys, declared once
record.py   the per-trial record of every result (`ajax_tune_results.jsonl`), kept across restores
series.py   results read back as series for plots
best.py     the best trial of an experiment's results
"""
