"""Answers: prompt templates, LLM backends with fallbacks, the extractive answer and the grounding check."""
