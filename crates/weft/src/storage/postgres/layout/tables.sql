-- The tables of a log as layout version 1 drew them. A new log is created
-- so and upgraded to the current layout by layout2.sql in the same
-- transaction, so a new log and an upgraded one are the same shape.
CREATE SCHEMA IF NOT EXISTS "__LOG__";
CREATE TABLE IF NOT EXISTS "__LOG__".head (
    id integer PRIMARY KEY CHECK (id = 1),
    next_seqnum bigint NOT NULL,
    first_seqnum bigint NOT NULL,
    layout integer NOT NULL
) WITH (fillfactor = 10);
INSERT INTO "__LOG__".head (id, next_seqnum, first_seqnum, layout)
    VALUES (1, 0, 0, 1) ON CONFLICT (id) DO NOTHING;
CREATE TABLE IF NOT EXISTS "__LOG__".streams (
    tag text PRIMARY KEY,
    next_version bigint NOT NULL
) WITH (fillfactor = 50);
CREATE TABLE IF NOT EXISTS "__LOG__".entries (
    seqnum bigint PRIMARY KEY,
    primary_tag text NOT NULL,
    version bigint NOT NULL,
    tags text[] NOT NULL,
    data bytea NOT NULL,
    ts bigint NOT NULL,
    append_id text
);
CREATE UNIQUE INDEX IF NOT EXISTS entries_version ON "__LOG__".entries (primary_tag, version);
CREATE INDEX IF NOT EXISTS entries_tag ON "__LOG__".entries (primary_tag, seqnum);
CREATE UNIQUE INDEX IF NOT EXISTS entries_append_id ON "__LOG__".entries (append_id)
    WHERE append_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS "__LOG__".entry_tags (
    tag text NOT NULL,
    seqnum bigint NOT NULL,
    PRIMARY KEY (tag, seqnum)
);
CREATE TABLE IF NOT EXISTS "__LOG__".staged (
    id bigserial PRIMARY KEY,
    primary_tags text[] NOT NULL,
    secondary text[] NOT NULL,
    data bytea[] NOT NULL,
    expected bigint[] NOT NULL,
    ids text[] NOT NULL,
    batch_len integer[] NOT NULL,
    ts bigint NOT NULL
) WITH (vacuum_truncate = false);
CREATE TABLE IF NOT EXISTS "__LOG__".outcomes (
    id bigint PRIMARY KEY,
    status smallint[] NOT NULL,
    seqnum bigint[] NOT NULL,
    version bigint[] NOT NULL,
    ts bigint[] NOT NULL,
    tag text[] NOT NULL,
    next bigint[] NOT NULL,
    numbered_ms bigint NOT NULL
) WITH (vacuum_truncate = false);
CREATE TABLE IF NOT EXISTS "__LOG__".kv (
    scope text NOT NULL,
    key text NOT NULL,
    value bytea NOT NULL,
    PRIMARY KEY (scope, key)
);
