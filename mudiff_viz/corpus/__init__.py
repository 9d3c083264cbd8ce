"""Many pages at once: decode a corpus into a Parquet trace store and aggregate it (docs/corpus.md).

``runner.run_corpus`` decodes (in-process or on Ray), ``store`` writes and reads the Parquet files,
``stats`` aggregates them with DuckDB for the command line and the app.
"""
