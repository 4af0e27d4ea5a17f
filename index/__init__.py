"""The index stage: embeddings, the embedding cache, vector stores and the build that fills them."""
