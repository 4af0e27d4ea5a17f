"""Prompt templates and phrases: selection, the real files in prompts/, and broken files failing loudly."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from answer.templates import TEMPLATE_NAMES, load_phrases, load_template, select_template
from config import Settings
from retrieval.analyzer import detect_lang


@pytest.mark.parametrize(
    ("is_range", "is_criminal", "expected"),
    [(True, True, "range"), (True, False, "range"), (False, True, "criminal"), (False, False, "universal")],
)
def test_select_template_range_beats_criminal_beats_universal(is_range, is_criminal, expected):
    assert select_template(is_range, is_criminal) == expected


@pytest.mark.parametrize("lang", ["ru", "kk"])
@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_every_template_renders_rules_context_question_and_disclaimer(settings: Settings, name, lang):
    prompt = load_template(settings, name, lang)
    assert set(prompt.input_variables) == {"question", "context"}
    system, user = prompt.invoke({"question": "QUESTION-MARK", "context": "[S1] CONTEXT-MARK"}).to_messages()
    assert system.type == "system" and user.type == "human"
    assert "[S1]" in system.content  # the citation format is taught
    assert load_phrases(settings, lang).disclaimer in system.content
    assert "QUESTION-MARK" in user.content and "CONTEXT-MARK" in user.content
    assert "{" not in system.content + user.content  # every placeholder was filled
    assert detect_lang(system.content) == lang


def test_criminal_templates_ask_for_corpus_delicti_and_punishment_by_part(settings: Settings):
    ru = load_template(settings, "criminal", "ru").invoke({"question": "q", "context": "c"}).to_messages()[0].content
    for words in ("объект", "объективная сторона", "субъект", "субъективная сторона", "наказание по частям"):
        assert words in ru.lower()
    kk = load_template(settings, "criminal", "kk").invoke({"question": "q", "context": "c"}).to_messages()[0].content
    for words in ("объект", "объективтік жағы", "субъект", "субъективтік жағы", "бөліктері бойынша жаза"):
        assert words in kk.lower()


def test_range_and_universal_templates_differ_in_their_task(settings: Settings):
    def system(name: str) -> str:
        return load_template(settings, name, "ru").invoke({"question": "q", "context": "c"}).to_messages()[0].content

    assert "каждую статью" in system("range")
    assert "Короткий прямой ответ" in system("universal")
    assert len({system(n) for n in TEMPLATE_NAMES}) == 3


def test_phrases_differ_by_language(settings: Settings):
    ru, kk = load_phrases(settings, "ru"), load_phrases(settings, "kk")
    assert "adilet.zan.kz" in ru.disclaimer and "adilet.zan.kz" in kk.disclaimer
    assert detect_lang(ru.disclaimer) == "ru" and detect_lang(kk.disclaimer) == "kk"
    assert ru.model_dump().keys() == kk.model_dump().keys()


def _copy_prompts(settings: Settings, tmp_path: Path) -> Settings:
    folder = tmp_path / "prompts"
    shutil.copytree(settings.prompts_dir, folder)
    return settings.model_copy(update={"prompts_dir": folder})


def test_a_template_without_its_placeholder_is_refused(settings: Settings, tmp_path: Path):
    broken = _copy_prompts(settings, tmp_path)
    path = broken.prompts_dir / "universal.ru.txt"
    path.write_text(path.read_text(encoding="utf-8").replace("{context}", "контекст"), encoding="utf-8")
    with pytest.raises(ValueError, match="placeholders"):
        load_template(broken, "universal", "ru")


def test_a_template_without_parts_is_refused(settings: Settings, tmp_path: Path):
    broken = _copy_prompts(settings, tmp_path)
    (broken.prompts_dir / "range.kk.txt").write_text("{question} {context}", encoding="utf-8")
    with pytest.raises(ValueError, match="=== system ==="):
        load_template(broken, "range", "kk")


def test_unknown_phrase_keys_and_languages_are_refused(settings: Settings, tmp_path: Path):
    broken = _copy_prompts(settings, tmp_path)
    path = broken.prompts_dir / "phrases.ru.toml"
    path.write_text(path.read_text(encoding="utf-8") + 'extra = "x"\n', encoding="utf-8")
    with pytest.raises(ValidationError):
        load_phrases(broken, "ru")
    with pytest.raises(ValueError, match="no prompts"):
        load_template(settings, "universal", "en")
