"""Retrieval: text analysis, query understanding, BM25/dense/law-aware retrievers and reranking."""
