"""Problem sources: rows of public datasets, verl parquet import/export, procedural generators.

See `scalerl.env.sources.generators` (built-in problems), `scalerl.env.sources.rows` (rows of
public datasets → `ProblemRecord`), `scalerl.env.sources.verl` (parquet in the verl schema) and
docs/data.md. Importing this package is cheap: Hugging Face `datasets` loads only when a source does.
"""
