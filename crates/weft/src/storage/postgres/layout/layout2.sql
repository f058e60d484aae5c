-- Layout 1 -> 2: entries whose payloads their appenders wrote.
--
-- An appender that does not get the numbering lock writes its group's
-- payloads into `payloads` (one row per entry, keyed by the group's staged
-- id and the entry's place in it) together with a small `staged` row of
-- the group's tags, conditions and ids, in its own transaction. The round
-- that numbers the group writes only the entries' numbers and tags into
-- `numbered`, pointing at the payload rows (group_id, ord) instead of
-- copying them (`data` NULL). Rows of entries numbered by the round that
-- wrote them (the lock holder's own group, or a staged row of layout 1)
-- keep their payload inline (`data`, group_id NULL).
--
-- `entries` becomes a view with the columns the table had, so reads — this
-- build's, and those of an older process still running during the upgrade
-- — see one relation either way. Every statement here changes only the
-- catalog (no table is rewritten or scanned): the upgrade holds its locks
-- for milliseconds whatever the log's size.
ALTER TABLE "__LOG__".entries RENAME TO numbered;
ALTER TABLE "__LOG__".numbered
    ALTER COLUMN data DROP NOT NULL,
    ADD COLUMN group_id bigint,
    ADD COLUMN ord integer,
    ADD CONSTRAINT numbered_payload_once
        CHECK ((data IS NULL) = (group_id IS NOT NULL AND ord IS NOT NULL)) NOT VALID;
CREATE TABLE "__LOG__".payloads (
    group_id bigint NOT NULL,
    ord integer NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (group_id, ord)
);
-- NULL: the group's payloads are in `data` (layout 1's staging, still
-- what an older process's `append` does); otherwise they are in
-- `payloads`, this many bytes in all (what bounds a round's share).
ALTER TABLE "__LOG__".staged ADD COLUMN payload_bytes bigint;
CREATE VIEW "__LOG__".entries AS
    SELECT e.seqnum, e.primary_tag, e.version, e.tags, coalesce(e.data, p.data) AS data,
           e.ts, e.append_id
      FROM "__LOG__".numbered e
      LEFT JOIN "__LOG__".payloads p ON p.group_id = e.group_id AND p.ord = e.ord;
UPDATE "__LOG__".head SET layout = 2 WHERE id = 1;
