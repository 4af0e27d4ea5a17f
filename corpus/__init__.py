"""The article corpus: typed records, chunking and the on-disk JSONL store every later stage reads."""
