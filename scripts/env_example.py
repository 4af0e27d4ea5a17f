"""Regenerate .env.example from config.Settings: `.venv/bin/python scripts/env_example.py > .env.example`."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from config import PROJECT_DIR, Settings

SECTIONS = {
    "data_dir": "Where things live",
    "adilet_base_url": "Ingest (adilet.zan.kz)",
    "embedding_backend": "Index",
    "first_stage_k": "Retrieval",
    "llm_backends": "Answer: LLM backends (none configured = extractive answers)",
    "database_url": "Service (several replicas)",
    "telegram_bot_token": "Telegram bot",
}


def value(default: object) -> str:
    if default is None or hasattr(default, "get_secret_value"):
        return ""
    if isinstance(default, Path):
        return "./" + str(default.relative_to(PROJECT_DIR)) if default.is_relative_to(PROJECT_DIR) else str(default)
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, list):
        return json.dumps(default)
    return str(default)


lines = [
    "# Every setting of the assistant, with its default. Copy to .env and uncomment what you change;",
    '# environment variables win over .env. Lists are JSON: LLM_BACKENDS=["ollama"].',
]
for name, field in Settings.model_fields.items():
    if name in SECTIONS:
        lines += ["", f"# --- {SECTIONS[name]} ---"]
    if field.description:
        lines.append(f"# {field.description}")
    default = field.get_default(call_default_factory=True, validated_data={})
    lines.append(f"# {name.upper()}={value(default)}")
print("\n".join(lines))
