#!/usr/bin/env python3
"""The server time of numbering rounds, two revisions' functions side by side.

    set -a; . "$(scripts/postgres.sh env)"; set +a
    python3 scripts/pg_round_cost.py BEFORE_REV | psql -X -q "$WEFT_TEST_PG_URL"

Renders a log's tables, its layout-2 upgrade and its functions
(`crates/weft/src/storage/postgres/layout/*.sql`, placeholders filled as
`schema.rs` fills them) at git revision BEFORE_REV and in the work tree
into two scratch schemas, then times two kinds of round, three repetitions
each, the two revisions alternating:

* inline: `append_group` of 4 entries (4 streams of 8, 128-byte payloads)
  with nothing staged, so the caller numbers its own group — every round of
  a lone process; 200 calls per repetition;
* staged: 8 groups of 4 entries staged as `append_group` stages them (a
  `staged` row and `payloads` rows), then one `number()` over them — a round
  of a busy log; 40 rounds per repetition.

Prints the median and the 90th percentile per revision and kind, in
milliseconds, and drops both schemas. Only the server's work is timed, in
one transaction per repetition: no client, no commit flush.
"""
import re
import subprocess
import sys

LAYOUT = "crates/weft/src/storage/postgres/layout"
FILES = ["tables.sql", "layout2.sql", "functions.sql"]


def source(rev, name):
    path = "%s/%s" % (LAYOUT, name)
    if rev is None:
        with open(path) as f:
            return f.read()
    done = subprocess.run(["git", "show", "%s:%s" % (rev, path)], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit("no %s at %s (the layout files came with layout 2)" % (path, rev))
    return done.stdout


def render(rev, log):
    sql = "\n".join(source(rev, name) for name in FILES)
    lock = "(2003134068::bigint << 32) | ('\"%s\".head'::regclass::oid::bigint)" % log
    for name, value in [
        ("__LOCK_KEY__", lock),
        ("__CHANNEL__", "weft_" + log),
        ("__SETTLED__", "weft_settled_" + log),
        ("__TOLD__", "weft_told_" + log),
        ("__ROUND_MAX_GROUPS__", "1024"),
        ("__ROUND_MAX_BYTES__", str(64 << 20)),
        ("__FUNCTIONS_REVISION__", "0"),
        ("__LOG__", log),
    ]:
        sql = sql.replace(name, value)
    left = sorted(set(re.findall(r"__[A-Z_]+__", sql)))
    if left:
        sys.exit("unrendered placeholders: %s" % left)
    return sql


ARGS = """ARRAY['s'||(k%8), 's'||((k+1)%8), 's'||((k+2)%8), 's'||((k+3)%8)],
          ARRAY[NULL::text, NULL, NULL, NULL],
          ARRAY[repeat('x', 128)::bytea, repeat('y', 128)::bytea, repeat('z', 128)::bytea,
                repeat('w', 128)::bytea],
          ARRAY[NULL::bigint, NULL, NULL, NULL], ARRAY[NULL::text, NULL, NULL, NULL],
          ARRAY[1, 1, 1, 1], 0"""

INLINE = """
DO $$
DECLARE t0 timestamptz; k int;
BEGIN
  FOR k IN 1..200 LOOP
    t0 := clock_timestamp();
    PERFORM 1 FROM {l}.append_group(%s);
    INSERT INTO round_cost VALUES ('{name}', 'inline', extract(epoch FROM clock_timestamp() - t0) * 1000);
  END LOOP;
END $$;
""" % ARGS

STAGED = """
DO $$
DECLARE t0 timestamptz; i int; k int; v_id bigint;
BEGIN
  FOR i IN 1..40 LOOP
    FOR k IN 1..8 LOOP
      INSERT INTO {l}.staged (primary_tags, secondary, data, expected, ids, batch_len, ts,
                              payload_bytes)
        SELECT a, b, '{}', d, e, f, g, 512 FROM (SELECT %s) x(a, b, c, d, e, f, g)
        RETURNING id INTO v_id;
      INSERT INTO {l}.payloads (group_id, ord, data)
        SELECT v_id, o, repeat('p', 128)::bytea FROM generate_series(1, 4) o;
    END LOOP;
    t0 := clock_timestamp();
    PERFORM 1 FROM {l}.number(NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    INSERT INTO round_cost VALUES ('{name}', 'staged', extract(epoch FROM clock_timestamp() - t0) * 1000);
    DELETE FROM {l}.outcomes;
  END LOOP;
END $$;
""" % ARGS.replace("ARRAY[1, 1, 1, 1], 0", "ARRAY[4], 0")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    builds = [("before", "weft_round_cost_before", sys.argv[1]),
              ("after", "weft_round_cost_after", None)]
    out = []
    for _, log, rev in builds:
        out.append("DROP SCHEMA IF EXISTS %s CASCADE;" % log)
        out.append(render(rev, log))
    out.append("CREATE TEMP TABLE round_cost (build text, kind text, ms float8);")
    for _ in range(3):
        for name, log, _ in builds:
            for body in (INLINE, STAGED):
                out.append(body.replace("{l}", log).replace("{name}", name))
    out.append(
        "SELECT kind, build, count(*) AS rounds, "
        "round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 3) AS p50_ms, "
        "round(percentile_cont(0.9) WITHIN GROUP (ORDER BY ms)::numeric, 3) AS p90_ms "
        "FROM round_cost GROUP BY kind, build ORDER BY kind, build DESC;"
    )
    for _, log, _ in builds:
        out.append("DROP SCHEMA %s CASCADE;" % log)
    print("\n".join(out))


main()
