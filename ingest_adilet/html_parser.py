"""Parse an adilet law page (old server-rendered HTML, or the JSON API's `text_content`) into articles."""

from __future__ import annotations

import logging
import re

logger = logging.getLogger(__name__)

_SHELL = re.compile(r"<div\s[^>]*\bid\s*=\s*[\"']?root\b", re.IGNORECASE)
_CAPTCHA = re.compile(r"captcha", re.IGNORECASE)
_ANY_HEADING = re.compile(r"Статья\s+\d|\d+-бап\b")


def page_problem(html: str) -> str | None:
    """Why `html` is not law text (empty JS shell, captcha, no article heading), or None when it is."""
    if "<article" in html:
        return None
    if _SHELL.search(html):
        return 'an empty JavaScript shell (<div id="root">, no law text)'
    if _CAPTCHA.search(html):
        return "a captcha page"
    if not _ANY_HEADING.search(html):
        return "a page without any article heading"
    return None
