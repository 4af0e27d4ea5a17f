"""corpus.lang: the one Lang read from outside, Kazakh by its letters, the normal form keeps positions."""

from __future__ import annotations

from corpus.lang import LANGS, has_kazakh_letters, lang_of, normalize, script_lang, stem_kk, stem_ru


def test_lang_of_reads_kk_and_takes_anything_else_for_russian() -> None:
    assert [lang_of(v) for v in ("kk", "ru", None, "", "en", "KK")] == ["kk", "ru", "ru", "ru", "ru", "ru"]
    assert LANGS == ("ru", "kk")


def test_kazakh_letters_in_either_case() -> None:
    assert has_kazakh_letters("қылмыс") and not has_kazakh_letters("кража")
    assert not has_kazakh_letters("ҚК")  # the word-level check takes normalized (lowercase) words
    assert script_lang("ҚК") == "kk" and script_lang("ӘҚБтК") == "kk" and script_lang("УК РК") == "ru"


def test_normal_form_keeps_length_and_folds_look_alikes() -> None:
    text = "Ёлка кодекстiң"  # a Latin «i» typed inside a Kazakh word, as adilet's texts do
    assert normalize(text) == "елка кодекстің" and len(normalize(text)) == len(text)


def test_stems_of_both_languages() -> None:
    assert stem_kk("бабы") == "бап" and stem_kk("кодекстің") == "кодекс"
    assert stem_ru("кражи") == stem_ru("кража")
