"""Schema migrations (sqlite-utils `Migrations`). Append new ones (counted in `db.SCHEMA_VERSION`), edit none."""

from __future__ import annotations

import sqlite3

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from store import accounts, budget, search_index, trigger_schema, webhooks

MIGRATIONS = Migrations("anyy")


@MIGRATIONS()
def m001_core(db: Database) -> None:
    db.executescript(
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,            -- surface:chat[:thread][:user]
            surface TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            thread_id TEXT,
            user_key TEXT NOT NULL,         -- surface:user_id of the owner of this session
            kind TEXT NOT NULL DEFAULT 'chat',  -- chat | automation
            pinned_toolsets TEXT,           -- JSON list, NULL = automatic selection
            last_selection TEXT,            -- JSON: what the last turn selected and why
            epoch INTEGER NOT NULL DEFAULT 0,   -- /new bumps it; context only reads the current epoch
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            epoch INTEGER NOT NULL DEFAULT 0,
            turn_id TEXT NOT NULL,
            role TEXT NOT NULL,             -- user | assistant | tool | event
            content TEXT NOT NULL DEFAULT '',
            tool_calls TEXT,                -- JSON list of {id,name,arguments} on assistant messages
            tool_call_id TEXT,
            tool_name TEXT,
            user_key TEXT,
            meta TEXT,                      -- JSON: usage, persisted_output_path, ...
            created_at TEXT NOT NULL
        );
        CREATE INDEX messages_session ON messages(session_id, id);
        CREATE INDEX messages_user ON messages(user_key, id);
        CREATE TABLE tasks (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user_key TEXT NOT NULL,
            title TEXT NOT NULL,
            notes TEXT NOT NULL DEFAULT '',
            due TEXT,
            status TEXT NOT NULL DEFAULT 'open',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX tasks_user ON tasks(user_key, status);
        CREATE TABLE memory (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user_key TEXT NOT NULL,
            target TEXT NOT NULL,           -- user | notes
            content TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX memory_user ON memory(user_key, target);
        CREATE TABLE audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,
            actor TEXT NOT NULL,
            action TEXT NOT NULL,
            tool TEXT,
            args_sha256 TEXT,
            subject TEXT,                   -- e.g. an approval id
            session_id TEXT,
            detail TEXT                     -- JSON
        );
        CREATE INDEX audit_at ON audit(at);
        CREATE TABLE seen_inbound (
            key TEXT PRIMARY KEY,           -- surface:platform id
            at TEXT NOT NULL
        );
        CREATE TABLE inbound_queue (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            key TEXT UNIQUE,
            payload TEXT NOT NULL,          -- JSON Inbound
            state TEXT NOT NULL DEFAULT 'pending',  -- pending | done
            created_at TEXT NOT NULL
        );
        CREATE TABLE outbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            dedupe_key TEXT UNIQUE,
            surface TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            thread_id TEXT,
            payload TEXT NOT NULL,          -- JSON Outbound
            state TEXT NOT NULL DEFAULT 'pending',  -- pending | sent | failed
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at TEXT,
            platform_message_id TEXT,
            error TEXT,
            created_at TEXT NOT NULL,
            sent_at TEXT
        );
        CREATE INDEX outbox_pending ON outbox(state, surface);
        CREATE TABLE approvals (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            origin TEXT NOT NULL,           -- JSON Origin
            requester TEXT NOT NULL,        -- user key
            deciders TEXT NOT NULL,         -- JSON list of user keys
            tool TEXT NOT NULL,
            tool_call_id TEXT NOT NULL,
            args_json TEXT NOT NULL,        -- canonical JSON of the validated arguments
            args_sha256 TEXT NOT NULL,
            binding_sha256 TEXT,            -- hash of what the preview showed (draft body, event ETag, ...)
            execution TEXT NOT NULL,        -- confirm | change_plan | force_change_plan
            preview TEXT NOT NULL,
            state TEXT NOT NULL,
            created_at TEXT NOT NULL,
            expires_at TEXT NOT NULL,
            decided_by TEXT,
            decided_at TEXT,
            reason TEXT,
            result TEXT,
            prompt_refs TEXT                -- JSON list of {outbox_id}
        );
        CREATE INDEX approvals_state ON approvals(state, expires_at);
        CREATE TABLE automations (
            id TEXT PRIMARY KEY,
            user_key TEXT NOT NULL,
            origin TEXT NOT NULL,           -- JSON Origin
            name TEXT NOT NULL,
            schedule TEXT NOT NULL,         -- JSON canonical schedule
            action TEXT NOT NULL,           -- JSON action
            enabled INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            last_run_at TEXT,
            next_run_at TEXT
        );
        CREATE INDEX automations_user ON automations(user_key);
        CREATE TABLE automation_runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            automation_id TEXT NOT NULL,
            scheduled_for TEXT NOT NULL,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            status TEXT NOT NULL,           -- claimed | delivered | failed
            late INTEGER NOT NULL DEFAULT 0,
            output TEXT,
            UNIQUE(automation_id, scheduled_for)
        );
        CREATE TABLE email_drafts (
            id TEXT PRIMARY KEY,
            user_key TEXT NOT NULL,
            message TEXT NOT NULL,          -- JSON of the full message (headers, body, Message-ID)
            state TEXT NOT NULL DEFAULT 'draft',  -- draft | sent
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE allowed_users (
            surface TEXT NOT NULL,
            user_id TEXT NOT NULL,
            added_at TEXT NOT NULL,
            PRIMARY KEY (surface, user_id)
        );
        CREATE TABLE pairing (
            code TEXT PRIMARY KEY,
            surface TEXT NOT NULL,
            user_id TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            user_name TEXT,
            created_at TEXT NOT NULL,
            expires_at TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0
        );
        """
    )
    db.table("messages").enable_fts(["content"], create_triggers=True, tokenize="trigram")


@MIGRATIONS()
def m002_fts_conversation_only(db: Database) -> None:
    """Index only user and assistant text (search never returned tool results; each cost trigrams per char)."""
    db.executescript(
        """
        DROP TRIGGER messages_ai;
        DROP TRIGGER messages_ad;
        DROP TRIGGER messages_au;
        CREATE TRIGGER messages_ai AFTER INSERT ON messages WHEN new.role IN ('user', 'assistant') BEGIN
            INSERT INTO messages_fts (rowid, content) VALUES (new.rowid, new.content);
        END;
        CREATE TRIGGER messages_ad AFTER DELETE ON messages WHEN old.role IN ('user', 'assistant') BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
        END;
        CREATE TRIGGER messages_au AFTER UPDATE ON messages WHEN old.role IN ('user', 'assistant') BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
            INSERT INTO messages_fts (rowid, content) SELECT new.rowid, new.content
                WHERE new.role IN ('user', 'assistant');
        END;
        INSERT INTO messages_fts (messages_fts) VALUES ('delete-all');
        INSERT INTO messages_fts (rowid, content)
            SELECT id, content FROM messages WHERE role IN ('user', 'assistant');
        """
    )


@MIGRATIONS()
def m003_subagent_jobs(db: Database) -> None:
    """Child turns of delegate_task / background_job: durable, so a crash is reported, never re-run."""
    db.executescript(
        """
        CREATE TABLE subagent_jobs (
            id TEXT PRIMARY KEY,
            parent_session_id TEXT NOT NULL,
            child_session_id TEXT NOT NULL UNIQUE,
            user_key TEXT NOT NULL,
            origin TEXT NOT NULL,           -- JSON Origin: where the parent's chat is
            task TEXT NOT NULL,
            toolsets TEXT NOT NULL,         -- JSON list of the toolsets the child may use
            depth INTEGER NOT NULL,
            mode TEXT NOT NULL,             -- sync | background
            state TEXT NOT NULL,            -- running | succeeded | failed | cancelled | interrupted
            summary TEXT,
            owner_pid INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            finished_at TEXT
        );
        CREATE INDEX subagent_jobs_parent ON subagent_jobs (parent_session_id, created_at);
        CREATE INDEX subagent_jobs_running ON subagent_jobs (user_key, state);
        """
    )


@MIGRATIONS()
def m003_host_tools(db: Database) -> None:
    """What file and terminal toolsets remember: file versions a session read, background processes started."""
    db.executescript(
        """
        CREATE TABLE file_reads (
            session_id TEXT NOT NULL,
            path TEXT NOT NULL,             -- resolved absolute path
            sha256 TEXT NOT NULL,           -- of the whole file when it was read
            read_at TEXT NOT NULL,
            PRIMARY KEY (session_id, path)
        );
        CREATE TABLE processes (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            user_key TEXT NOT NULL,
            command TEXT NOT NULL,
            cwd TEXT NOT NULL,
            pid INTEGER,
            state TEXT NOT NULL,            -- running | exited | killed | stopped | lost
            exit_code INTEGER,
            log_path TEXT NOT NULL,
            started_at TEXT NOT NULL,
            finished_at TEXT
        );
        CREATE INDEX processes_session ON processes (session_id, started_at);
        """
    )


@MIGRATIONS()
def m003_artifacts(db: Database) -> None:
    db.executescript(
        """
        CREATE TABLE artifacts (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            user_key TEXT NOT NULL,
            name TEXT NOT NULL,
            type TEXT NOT NULL,             -- MIME type
            size INTEGER NOT NULL,
            path TEXT NOT NULL,             -- under <data dir>/artifacts, mode 0600
            sha256 TEXT NOT NULL,
            pinned INTEGER NOT NULL DEFAULT 0,  -- pinned ones outlive [artifacts] retention_days
            origin TEXT NOT NULL,           -- received | produced
            source_key TEXT UNIQUE,         -- the turn and attachment it came from (re-runs find it)
            meta TEXT,                      -- JSON: transcript, image size, ...
            created_at TEXT NOT NULL
        );
        CREATE INDEX artifacts_session ON artifacts(session_id, created_at);
        CREATE INDEX artifacts_user ON artifacts(user_key, created_at);
        CREATE INDEX artifacts_retention ON artifacts(pinned, created_at);
        """
    )


@MIGRATIONS()
def m010_summaries_searchable(db: Database) -> None:
    """Context-compaction summaries are searchable like conversation text (session_search finds what was
    summarised). Rebuilds the FTS triggers of m002 with the 'summary' role added."""
    roles = "('user', 'assistant', 'summary')"
    db.executescript(
        f"""
        DROP TRIGGER messages_ai;
        DROP TRIGGER messages_ad;
        DROP TRIGGER messages_au;
        CREATE TRIGGER messages_ai AFTER INSERT ON messages WHEN new.role IN {roles} BEGIN
            INSERT INTO messages_fts (rowid, content) VALUES (new.rowid, new.content);
        END;
        CREATE TRIGGER messages_ad AFTER DELETE ON messages WHEN old.role IN {roles} BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
        END;
        CREATE TRIGGER messages_au AFTER UPDATE ON messages WHEN old.role IN {roles} BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
            INSERT INTO messages_fts (rowid, content) SELECT new.rowid, new.content WHERE new.role IN {roles};
        END;
        """
    )


@MIGRATIONS()
def m011_exactly_once(db: Database) -> None:
    """The tool-call journal, owners and leases on running work, bound approval payloads, and one
    approval per tool call."""
    db.executescript(
        """
        CREATE TABLE tool_journal (
            session_id TEXT NOT NULL,
            turn_id TEXT NOT NULL,
            tool_call_id TEXT NOT NULL,
            tool TEXT NOT NULL,
            args_sha256 TEXT NOT NULL,
            owner TEXT NOT NULL,            -- host/pid/start of the process that ran it
            state TEXT NOT NULL,            -- started | done | unknown
            started_at TEXT NOT NULL,
            finished_at TEXT,
            message_id INTEGER,             -- the tool-result row that completed it
            PRIMARY KEY (session_id, turn_id, tool_call_id)
        );
        ALTER TABLE inbound_queue ADD COLUMN owner TEXT;
        ALTER TABLE inbound_queue ADD COLUMN lease_until TEXT;
        ALTER TABLE approvals ADD COLUMN turn_id TEXT;
        ALTER TABLE approvals ADD COLUMN payload_json TEXT;     -- the exact effect the preview showed
        ALTER TABLE approvals ADD COLUMN payload_sha256 TEXT;
        ALTER TABLE approvals ADD COLUMN owner TEXT;            -- who is executing it
        ALTER TABLE approvals ADD COLUMN lease_until TEXT;
        CREATE UNIQUE INDEX approvals_call ON approvals(session_id, turn_id, tool_call_id);
        CREATE INDEX inbound_pending ON inbound_queue(state);
        """
    )


@MIGRATIONS()
def m012_outbox_revision(db: Database) -> None:
    """A streamed reply rewrites its outbox row as the text grows; the revision tells the dispatcher
    whether the text it delivered is still the row's latest."""
    db.execute("ALTER TABLE outbox ADD COLUMN revision INTEGER NOT NULL DEFAULT 0")


@MIGRATIONS()
def m013_subagent_owner(db: Database) -> None:
    """A job names its process as leases do (host/pid/start time), so a reused pid is not taken for it."""
    db.execute("ALTER TABLE subagent_jobs ADD COLUMN owner TEXT NOT NULL DEFAULT ''")


@MIGRATIONS()
def m014_outbox_sending(db: Database) -> None:
    """When a new message's send began, cleared once its outcome is recorded: a row left with it set by a
    killed process may already be on the platform, so its next delivery looks before posting again."""
    db.execute("ALTER TABLE outbox ADD COLUMN sending_at TEXT")


@MIGRATIONS()
def m015_claims(db: Database) -> None:
    """Owners and leases for several residents on one database (docs/scale.md): outbox rows, automation runs
    and subagent jobs are owned by the process doing them, `processes` names each one's supervisor, `leases`
    holds named leases (a session lane, a polling surface); the PostgreSQL baseline has the same columns."""
    db.executescript(
        """
        ALTER TABLE outbox ADD COLUMN owner TEXT;
        ALTER TABLE outbox ADD COLUMN lease_until TEXT;
        ALTER TABLE automation_runs ADD COLUMN owner TEXT;
        ALTER TABLE automation_runs ADD COLUMN lease_until TEXT;
        ALTER TABLE subagent_jobs ADD COLUMN lease_until TEXT;
        ALTER TABLE processes ADD COLUMN owner TEXT;
        CREATE TABLE leases (
            name TEXT PRIMARY KEY,          -- lane:<session id> | poll:<surface>
            owner TEXT NOT NULL,
            lease_until TEXT NOT NULL
        );
        """
    )


MIGRATIONS()(search_index.m016_deferred_search_index)
MIGRATIONS()(accounts.m017_accounts)
MIGRATIONS()(trigger_schema.m018_triggers)
MIGRATIONS()(webhooks.m019_webhooks)
MIGRATIONS()(budget.m020_budget)


def migrate(conn: sqlite3.Connection) -> None:
    """Apply the pending migrations; the file's `user_version` says how many are (`Store` reads it)."""
    MIGRATIONS.apply(db := Database(conn))
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS.applied(db))}")
