"""Legal references: the names of each code, references to articles in Russian and Kazakh, and how an article is
named. Every stage and face uses this package; its modules: `registry` (the documents: ids, titles, short names,
aliases), `names` (registry names, headings, citations, URLs), `refs` (a question's references, /article
arguments), `cited` (an answer's citations).

- The registry, `registry.ADILET_SOURCES` (data; imported from its module, it imports nothing of this package).
- Names: every alias and short name of the registry, in Russian and Kazakh, matched by stems in any case form
  («гражданского кодекса», «ҚК-нің», «Азаматтық кодекске»), the state's name allowed inside («… туралы Қазақстан
  Республикасының Заңы»); an abbreviation that also means other things (УК = управляющая компания) names a code
  only next to a reference or after «статья»/«кодекс».
- A question's references, `read_references`: «ст. 188 УК», «статьи 187-190», «статьей с 120 по 125», «188-бап»,
  «ҚК-нің 9999-бабы», «136 УК»; `References.articles` gives each number its document (the Civil Code by part).
- An answer's citations, `cited_refs`: «согласно статьям 188, 189 Уголовного кодекса», «Қылмыстық кодекстің
  188-1-бабы», with the code named near them.
- /article arguments: `split_article_args` («ТК РК ст. 22» → "ТК РК", "22") and `article_ref` (→ the article).
- Naming an article: `heading` «УК РК. Статья 188. Кража» (a chunk's first line, /article), `citation` «УК РК,
  Статья 188. Кража» (an answer's sources), `code_name` and `source_url`.
"""

from __future__ import annotations

from corpus.legal.cited import CitedRef, cited_refs
from corpus.legal.names import (
    CIVIL_GENERAL_ID,
    CIVIL_GENERAL_LAST_ARTICLE,
    CIVIL_SPECIAL_ID,
    ArticleRef,
    Mention,
    article_label,
    citation,
    code_name,
    doc_for,
    heading,
    source_url,
)
from corpus.legal.refs import (
    MAX_RANGE,
    References,
    RefMatch,
    article_lang,
    article_ref,
    expand_numbers,
    read_article_args,
    read_references,
    split_article_args,
)

__all__ = [
    "CIVIL_GENERAL_ID",
    "CIVIL_GENERAL_LAST_ARTICLE",
    "CIVIL_SPECIAL_ID",
    "MAX_RANGE",
    "ArticleRef",
    "CitedRef",
    "Mention",
    "RefMatch",
    "References",
    "article_label",
    "article_lang",
    "article_ref",
    "citation",
    "cited_refs",
    "code_name",
    "doc_for",
    "expand_numbers",
    "heading",
    "read_article_args",
    "read_references",
    "source_url",
    "split_article_args",
]
