"""Corpora (`dragoman translate --corpus`): records of JSON Lines, TSV/CSV, Parquet or plain text
translated into one or several languages, written back in their format with the translations as
new columns, shard by shard (formats: the readers and writers; run: shards, resume, the driver
loop; progress: what the terminal shows). Qt-free; the translation itself is the pipeline's."""
