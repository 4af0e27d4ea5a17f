"""Prompt templates and fixed user-facing phrases, read from the files in prompts/."""

from __future__ import annotations

import logging
import re
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Literal

from langchain_core.prompts import ChatPromptTemplate
from pydantic import BaseModel, ConfigDict

from config import Settings

logger = logging.getLogger(__name__)

TemplateName = Literal["universal", "criminal", "range"]
TEMPLATE_NAMES: tuple[TemplateName, ...] = ("universal", "criminal", "range")
LANGS = ("ru", "kk")

# A template file holds two parts, each opened by its own marker line.
_PART_RE = re.compile(r"^=== (system|user) ===$", re.MULTILINE)
_INPUTS = {"question", "context"}


class Phrases(BaseModel):
    """Fixed texts of one language (prompts/phrases.<lang>.toml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    disclaimer: str
    extractive_intro: str
    remedy_intro: str
    no_sources: str
    grounding_failed: str
    model_failed: str
    budget_spent: str  # the model's request budget (answer/budget.py) is spent for now
    repealed: str
    # a source whose text is in the other language (no text in the answer's): {url}, its page in this language
    other_language_text: str
    # what cannot be answered (retrieval's verdict): {code}, {article}, {name}, {codes} are filled in
    no_such_article: str
    no_such_article_anywhere: str
    possibly: str
    unknown_code: str
    off_topic: str


def select_template(is_range: bool, is_criminal: bool) -> TemplateName:
    """Range beats criminal beats universal: a range of UK articles is still answered article by article."""
    if is_range:
        return "range"
    if is_criminal:
        return "criminal"
    return "universal"


def _checked_lang(lang: str) -> str:
    if lang not in LANGS:
        raise ValueError(f"language {lang!r} has no prompts; use one of {LANGS}")
    return lang


@lru_cache(maxsize=64)
def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} is missing: restore it from the repository's prompts/ folder") from None


def load_phrases(settings: Settings, lang: str) -> Phrases:
    """The disclaimer and other fixed texts in the given language."""
    path = settings.prompts_dir / f"phrases.{_checked_lang(lang)}.toml"
    return Phrases.model_validate(tomllib.loads(_read(path)))


def load_template(settings: Settings, name: TemplateName, lang: str) -> ChatPromptTemplate:
    """The chat prompt `name` in `lang` with rules and disclaimer filled in; inputs: question, context."""
    if name not in TEMPLATE_NAMES:
        raise ValueError(f"unknown template {name!r}; use one of {TEMPLATE_NAMES}")
    path = settings.prompts_dir / f"{name}.{_checked_lang(lang)}.txt"
    parts = _PART_RE.split(_read(path))
    # split() gives [before, "system", text, "user", text]
    if [p for p in parts[1::2]] != ["system", "user"] or parts[0].strip():
        raise ValueError(f"{path} must consist of a '=== system ===' part followed by a '=== user ===' part")
    system, user = parts[2].strip(), parts[4].strip()
    prompt = ChatPromptTemplate.from_messages([("system", system), ("human", user)])
    rules = _read(settings.prompts_dir / f"rules.{lang}.txt").strip()
    prompt = prompt.partial(rules=rules, disclaimer=load_phrases(settings, lang).disclaimer)
    if set(prompt.input_variables) != _INPUTS:
        raise ValueError(
            f"{path} must use exactly the placeholders {{question}} and {{context}} (plus {{rules}}, "
            f"{{disclaimer}}); it uses {sorted(prompt.input_variables)}. Write literal braces as {{{{ }}}}."
        )
    return prompt
