#!/usr/bin/env python3
"""The server time of one numbering round, two builds' functions side by side.

    set -a; . "$(scripts/postgres.sh env)"; set +a
    python3 scripts/pg_round_cost.py BEFORE_REV | psql -X -q "$WEFT_TEST_PG_URL"

Renders the log tables and functions of `crates/weft/src/storage/postgres/
schema.rs` at git revision BEFORE_REV and in the work tree into two scratch
schemas, then, three times each, alternately: stages 40 groups of 3 entries
(one 200-byte payload among them) straight into `staged` and times one
`number()` over them, 40 rounds per repetition. Prints the median and the
90th percentile per build, in milliseconds, and drops both schemas. Only
the server's round is timed: no client, no commit flush.
"""
import re
import subprocess
import sys

PATH = "crates/weft/src/storage/postgres/schema.rs"


def render(source, log):
    def body(fn):
        i = source.index("fn %s(schema: &str) -> String" % fn)
        a = source.index('r#"', i) + 3
        return source[a:source.index('"#', a)]

    sql = (body("tables") + body("functions")).replace("{{", "\0").replace("}}", "\1")
    lock = "(2003134068::bigint << 32) | ('\"%s\".head'::regclass::oid::bigint)" % log
    for name, value in [
        ("lock_key", lock),
        ("channel", "weft_" + log),
        ("settled", "weft_settled_" + log),
        ("s", log),
        ("LAYOUT_VERSION", "1"),
        ("ROUND_MAX_GROUPS", "1024"),
        ("ROUND_MAX_BYTES", str(64 << 20)),
    ]:
        sql = sql.replace("{%s}" % name, value)
    left = re.findall(r"\{[A-Za-z_]+\}", sql)
    if left:
        sys.exit("unrendered placeholders: %s" % left)
    return sql.replace("\0", "{").replace("\1", "}")


ROUND = """
DO $$
DECLARE t0 timestamptz; i int; g int;
BEGIN
  FOR i IN 1..40 LOOP
    FOR g IN 1..40 LOOP
      INSERT INTO {l}.staged (primary_tags, secondary, data, expected, ids, batch_len, ts)
      VALUES (ARRAY['a'||g, 'a'||g, 'a'||g], ARRAY[NULL::text, NULL, NULL],
              ARRAY['x'::bytea, repeat('y', 200)::bytea, 'z'::bytea],
              ARRAY[NULL::bigint, NULL, NULL], ARRAY[NULL::text, NULL, NULL], ARRAY[1, 1, 1], 0);
    END LOOP;
    t0 := clock_timestamp();
    PERFORM 1 FROM {l}.number(NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    INSERT INTO round_cost VALUES ('{name}', extract(epoch FROM clock_timestamp() - t0) * 1000);
    DELETE FROM {l}.outcomes;
  END LOOP;
END $$;
"""


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    before = subprocess.run(
        ["git", "show", "%s:%s" % (sys.argv[1], PATH)], check=True, capture_output=True, text=True
    ).stdout
    with open(PATH) as f:
        after = f.read()
    builds = [("before", "weft_round_cost_before", before), ("after", "weft_round_cost_after", after)]
    out = []
    for _, log, source in builds:
        out.append("DROP SCHEMA IF EXISTS %s CASCADE;" % log)
        out.append(render(source, log))
    out.append("CREATE TEMP TABLE round_cost (build text, ms float8);")
    for _ in range(3):
        for name, log, _ in builds:
            out.append(ROUND.replace("{l}", log).replace("{name}", name))
    out.append(
        "SELECT build, count(*) AS rounds, "
        "round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2) AS p50_ms, "
        "round(percentile_cont(0.9) WITHIN GROUP (ORDER BY ms)::numeric, 2) AS p90_ms "
        "FROM round_cost GROUP BY build ORDER BY build DESC;"
    )
    for _, log, _ in builds:
        out.append("DROP SCHEMA %s CASCADE;" % log)
    print("\n".join(out))


main()
