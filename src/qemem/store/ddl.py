"""The tables of both SQL backends: one schema, rendered per dialect (column types and the
source of scope versions are the only differences).

A new store gets :func:`create` at once; a store of an older schema is brought to it by each
backend's numbered migrations (:mod:`qemem.store.schema`, :mod:`qemem.store.postgres_schema`).
"""

from __future__ import annotations

from qemem.store.dialect import Dialect

_CONVERSATIONS = """
CREATE TABLE {name} (
    pk {key},
    namespace TEXT NOT NULL,
    id TEXT NOT NULL,
    speakers TEXT NOT NULL,
    version {version},
    created_at TEXT NOT NULL,
    removals INTEGER NOT NULL DEFAULT 0,
    UNIQUE (namespace, id)
);
"""

_TABLES = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
{conversations}
CREATE TABLE sessions (
    conv {ref} NOT NULL REFERENCES conversations(pk) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    key TEXT NOT NULL,
    date_time TEXT NOT NULL,
    PRIMARY KEY (conv, idx),
    UNIQUE (conv, key)
);
CREATE TABLE turns (
    conv {ref} NOT NULL,
    id TEXT NOT NULL,
    session INTEGER NOT NULL,
    position INTEGER NOT NULL,
    speaker TEXT NOT NULL,
    text TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    tokens TEXT NOT NULL,
    PRIMARY KEY (conv, id),
    UNIQUE (conv, session, position),
    FOREIGN KEY (conv, session) REFERENCES sessions(conv, idx) ON DELETE CASCADE
);
CREATE TABLE episodes (
    conv {ref} NOT NULL,
    id TEXT NOT NULL,
    session INTEGER NOT NULL,
    title TEXT NOT NULL,
    content TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    tokens TEXT NOT NULL,
    PRIMARY KEY (conv, id),
    FOREIGN KEY (conv, session) REFERENCES sessions(conv, idx) ON DELETE CASCADE
);
CREATE TABLE episode_turns (
    conv {ref} NOT NULL,
    episode TEXT NOT NULL,
    turn TEXT NOT NULL,
    ord INTEGER NOT NULL,
    PRIMARY KEY (conv, episode, ord),
    FOREIGN KEY (conv, episode) REFERENCES episodes(conv, id) ON DELETE CASCADE,
    FOREIGN KEY (conv, turn) REFERENCES turns(conv, id) ON DELETE CASCADE
);
CREATE INDEX episode_turns_by_turn ON episode_turns (conv, turn);
CREATE TABLE facts (
    conv {ref} NOT NULL,
    id TEXT NOT NULL,
    content TEXT NOT NULL,
    session INTEGER NOT NULL,
    tokens TEXT NOT NULL,
    PRIMARY KEY (conv, id),
    FOREIGN KEY (conv, session) REFERENCES sessions(conv, idx) ON DELETE CASCADE
);
{fact_episodes}
CREATE TABLE vectors (
    conv {ref} NOT NULL REFERENCES conversations(pk) ON DELETE CASCADE,
    space TEXT NOT NULL,
    id TEXT NOT NULL,
    vector {vector} NOT NULL,
    PRIMARY KEY (conv, space, id)
);
CREATE TABLE state (
    conv {ref} NOT NULL REFERENCES conversations(pk) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (conv, key)
);
"""

_FACT_EPISODES = """
CREATE TABLE {name} (
    conv {ref} NOT NULL,
    fact TEXT NOT NULL,
    episode TEXT NOT NULL,
    ord INTEGER NOT NULL,
    PRIMARY KEY (conv, fact, episode),
    FOREIGN KEY (conv, fact) REFERENCES facts(conv, id) ON DELETE CASCADE,
    FOREIGN KEY (conv, episode) REFERENCES episodes(conv, id) ON DELETE CASCADE
);
"""
FACT_EPISODES_INDEX = "CREATE INDEX fact_episodes_by_episode ON fact_episodes (conv, episode);"

API_KEYS = """
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    label TEXT NOT NULL,
    read_only INTEGER NOT NULL,
    salt TEXT NOT NULL,
    hash TEXT NOT NULL,
    created TEXT NOT NULL,
    revoked TEXT
);
"""
"""API keys of the HTTP service (:mod:`qemem.keys`): a salted hash per key, never the key."""

IDEMPOTENCY = """
CREATE TABLE idempotency (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    response TEXT NOT NULL,
    created TEXT NOT NULL,
    PRIMARY KEY (namespace, key)
);
CREATE INDEX idempotency_by_created ON idempotency (created);
"""
"""Responses of appends sent with an ``Idempotency-Key``, per namespace: the request's
fingerprint, the response JSON and when it was recorded (UTC ISO 8601, fixed width)."""

_IDEMPOTENCY_CONVERSATION = """
ALTER TABLE idempotency ADD COLUMN conv {ref} REFERENCES conversations(pk) ON DELETE CASCADE;
CREATE INDEX idempotency_by_conv ON idempotency (conv);
"""


def idempotency_conversation(dialect: Dialect) -> str:
    """The ``conv`` column of the ``idempotency`` table (added after the table, in every
    store): the conversation a recorded response appended to, so that the record goes with
    the conversation (records of older stores have none; they expire with their retention)."""
    return _IDEMPOTENCY_CONVERSATION.format(ref=dialect.ref_type)


JOBS = """
CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    kind TEXT NOT NULL,
    conversation TEXT NOT NULL,
    status TEXT NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    total INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    lease_owner TEXT,
    lease_until DOUBLE PRECISION,
    heartbeat_at DOUBLE PRECISION,
    error TEXT,
    result TEXT,
    created DOUBLE PRECISION NOT NULL,
    updated DOUBLE PRECISION NOT NULL
);
CREATE INDEX jobs_by_namespace ON jobs (namespace, created);
CREATE INDEX jobs_by_status ON jobs (status, created);
CREATE UNIQUE INDEX jobs_active ON jobs (namespace, kind, conversation)
    WHERE status IN ('queued', 'running');
"""
"""Background jobs (:mod:`qemem.store.jobs`): one row each, any process of the store may claim
it; at most one queued or running job per (namespace, kind, conversation). Times are epoch
seconds; ``not_before`` is when a queued job may start at the earliest (an automatic build
waits for its conversation to be quiet), and of a running one when it is to run again."""
JOBS_NOT_BEFORE = "ALTER TABLE jobs ADD COLUMN not_before DOUBLE PRECISION;"
"""The ``not_before`` column of the ``jobs`` table (added after the table, in every store)."""


_ID_COUNTERS = """
CREATE TABLE id_counters (
    conv {ref} NOT NULL REFERENCES conversations(pk) ON DELETE CASCADE,
    prefix TEXT NOT NULL,
    value BIGINT NOT NULL,
    PRIMARY KEY (conv, prefix)
);
"""

_SUPERSESSIONS = """
CREATE TABLE supersessions (
    conv {ref} NOT NULL REFERENCES conversations(pk) ON DELETE CASCADE,
    old TEXT NOT NULL,
    new TEXT NOT NULL,
    turns TEXT NOT NULL,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    recorded TEXT NOT NULL,
    PRIMARY KEY (conv, old)
);
CREATE INDEX supersessions_by_new ON supersessions (conv, new);
"""


_PASSAGES = """
CREATE TABLE passages (
    conv {ref} NOT NULL,
    id TEXT NOT NULL,
    turn TEXT NOT NULL,
    start INTEGER NOT NULL,
    stop INTEGER NOT NULL,
    tokens TEXT NOT NULL,
    PRIMARY KEY (conv, id),
    FOREIGN KEY (conv, turn) REFERENCES turns(conv, id) ON DELETE CASCADE
);
CREATE INDEX passages_by_turn ON passages (conv, turn, start);
"""


def passages(dialect: Dialect) -> str:
    """The ``passages`` table: the passages of each turn longer than one passage, by key
    (:func:`~qemem.models.passage_key`: turn id and span), as the character range
    ``[start, stop)`` of the turn's text with its BM25 tokens; their vectors are in
    ``vectors`` under the space ``passage``. A turn's passages go with the turn (a foreign
    key), and with its conversation; a turn without passages is searched whole."""
    return _PASSAGES.format(ref=dialect.ref_type)


def supersessions(dialect: Dialect) -> str:
    """The ``supersessions`` table: fact ``old`` replaced by fact ``new`` (each fact at most
    once), ``turns`` the JSON list of the turn ids that show it, ``at`` the conversation time
    it holds from (ISO 8601), ``kind`` build or manual, ``recorded`` when it was stored (UTC).
    No foreign keys to ``facts`` (SQLite's upsert of a fact is a delete and an insert): the
    store removes a fact's supersessions with the fact."""
    return _SUPERSESSIONS.format(ref=dialect.ref_type)


_CORRECTIONS = """
CREATE TABLE corrections (
    conv {ref} NOT NULL REFERENCES conversations(pk) ON DELETE CASCADE,
    fact TEXT NOT NULL,
    turns TEXT NOT NULL,
    corrected_turns TEXT NOT NULL,
    recorded TEXT NOT NULL,
    PRIMARY KEY (conv, fact)
);
"""

_FILL_CORRECTIONS = """
INSERT INTO corrections (conv, fact, turns, corrected_turns, recorded)
SELECT s.conv, s.new, s.turns, COALESCE((
    SELECT {aggregate} FROM (
        SELECT DISTINCT t.id AS turn, t.session, t.position FROM fact_episodes l
        JOIN episode_turns e ON e.conv = l.conv AND e.episode = l.episode
        JOIN turns t ON t.conv = e.conv AND t.id = e.turn
        WHERE l.conv = s.conv AND l.fact = s.old ORDER BY t.session, t.position
    ) AS learned), '[]'), s.recorded
FROM supersessions s WHERE s.kind = 'manual'
ON CONFLICT (conv, fact) DO NOTHING;
INSERT INTO corrections (conv, fact, turns, corrected_turns, recorded)
SELECT f.conv, f.id, '[]', '[]', {now} FROM facts f
WHERE NOT EXISTS (SELECT 1 FROM fact_episodes l WHERE l.conv = f.conv AND l.fact = f.id)
ON CONFLICT (conv, fact) DO NOTHING;
"""


def corrections(dialect: Dialect) -> str:
    """The ``corrections`` table: the provenance of each fact written by hand
    (:class:`~qemem.models.Correction`): ``turns`` the JSON list of the turn ids the user
    cited, ``corrected_turns`` those the corrected statement was learned from, ``recorded``
    when (UTC). No foreign key to ``facts`` (as for ``supersessions``)."""
    return _CORRECTIONS.format(ref=dialect.ref_type)


def fill_corrections(aggregate: str, now: str) -> str:
    """The migration step's filling of ``corrections`` in a store that had none: each fact
    new in a manual supersession, citing its turns, the corrected fact's episodes' turns as
    ``corrected_turns``; and each fact without an episode (a correction whose supersession
    went with the fact it corrected), by hand alone. ``aggregate`` is the dialect's JSON list
    of the ``turn`` column (in ``session``, ``position`` order), ``now`` its UTC time text."""
    return _FILL_CORRECTIONS.format(aggregate=aggregate, now=now)


_AGENT_MEMORY = """
ALTER TABLE turns ADD COLUMN role TEXT;
ALTER TABLE facts ADD COLUMN kind TEXT NOT NULL DEFAULT 'fact';
CREATE TABLE fact_turns (
    conv {ref} NOT NULL,
    fact TEXT NOT NULL,
    turn TEXT NOT NULL,
    ord INTEGER NOT NULL,
    PRIMARY KEY (conv, fact, turn),
    FOREIGN KEY (conv, fact) REFERENCES facts(conv, id) ON DELETE CASCADE,
    FOREIGN KEY (conv, turn) REFERENCES turns(conv, id) ON DELETE CASCADE
);
CREATE INDEX fact_turns_by_turn ON fact_turns (conv, turn);
"""


def agent_memory(dialect: Dialect) -> str:
    """What memory for an assistant adds (added after the tables, in every store): a turn's
    ``role`` (user, assistant, other; NULL when not given), a fact's ``kind`` (fact,
    instruction, preference) and ``fact_turns``, the messages a fact was read from directly
    (a standing instruction or preference found at ingest), ``ord`` in their order."""
    return _AGENT_MEMORY.format(ref=dialect.ref_type)


_ITEMS = """
CREATE TABLE items (
    conv {ref} NOT NULL REFERENCES conversations(pk) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    data TEXT NOT NULL,
    turn TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (conv, seq)
);
CREATE INDEX items_by_turn ON items (conv, turn);
"""


def items(dialect: Dialect) -> str:
    """The ``items`` table: an agent framework's history items of a conversation, kept
    exactly as sent (``data``, canonical JSON of one object), in order of ``seq`` (from the
    conversation's ``item`` id counter: never given twice in a life of it), ``turn`` the
    message an item was also stored as (NULL for tool calls and the like; the item goes when
    that message is deleted or redacted), ``created_at`` when it was stored (UTC). No foreign
    key to ``turns`` (as for ``supersessions``): the store removes a turn's items with it."""
    return _ITEMS.format(ref=dialect.ref_type)


def conversations(dialect: Dialect, name: str = "conversations") -> str:
    """The ``conversations`` table created as ``name``: ``pk`` is never given to another
    conversation (not even one re-created under the same id), ``created_at`` is when this
    life of the conversation began (UTC, ISO 8601), ``removals`` counts the records removed
    from it by hand (messages deleted or redacted, facts deleted): a build that saw another
    count at its start writes nothing more."""
    return _CONVERSATIONS.format(name=name, key=dialect.key_type, version=dialect.version_column)


def id_counters(dialect: Dialect) -> str:
    """The ``id_counters`` table: per conversation and id prefix (``E``, ``S``,
    ``D<session>:``) the highest number an id ``<prefix><n>`` has had in the conversation's
    life (raised by every write of such an id, lowered by nothing)."""
    return _ID_COUNTERS.format(ref=dialect.ref_type)


def fact_episodes(dialect: Dialect, name: str = "fact_episodes") -> str:
    """The ``fact_episodes`` table (a fact's supporting episodes, ``ord`` in their order)
    created as ``name``."""
    return _FACT_EPISODES.format(name=name, ref=dialect.ref_type)


def create(dialect: Dialect) -> str:
    """The whole current schema of ``dialect``, for a new store."""
    tables = _TABLES.format(
        conversations=conversations(dialect),
        ref=dialect.ref_type,
        vector=dialect.vector_type,
        fact_episodes=fact_episodes(dialect) + FACT_EPISODES_INDEX,
    )
    return (
        dialect.versions_ddl
        + tables
        + API_KEYS
        + IDEMPOTENCY
        + JOBS
        + JOBS_NOT_BEFORE
        + supersessions(dialect)
        + corrections(dialect)
        + idempotency_conversation(dialect)
        + id_counters(dialect)
        + agent_memory(dialect)
        + items(dialect)
        + passages(dialect)
    )
