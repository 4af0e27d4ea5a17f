"""Telegram bot over `rag_chain.invoke_qa()`: run `python -m bot`, or embed `build_application(settings)`."""
