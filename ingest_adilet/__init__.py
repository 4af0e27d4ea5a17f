"""Fetch and parse adilet.zan.kz documents into articles (CLI: `python -m ingest_adilet`)."""
