"""What a trial reports.

keys.py     the vocabulary of result keys, declared once
predict.py  the keys a config's results will hold, known before anything compiles
record.py   the per-trial record of every result (`ajax_tune_results.jsonl`), kept across restores
"""
