#!/usr/bin/env python3
"""Checks that the docs name only things that exist.

Every relative Markdown link in README.md, CHANGELOG.md, BENCHMARKS.md and
docs/*.md must point at a file or directory of the repository (and, for a
link to a Markdown heading, at a heading that exists), and every path a doc
names in backticks (`crates/weft/tests/local/gc.rs`, `tests/local/gc.rs`,
`storage/bucket/local.rs`, `weft-cli/tests/local/damage.rs`) must exist under the
repository root, a crate, or a crate's src/ — so a renamed or deleted file
cannot leave a doc pointing at nothing.

    scripts/doc_paths.py            # check; exit 1 and list what is missing
    scripts/doc_paths.py selftest   # the checker finds what it must
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
PATH_END = (".rs", ".md", ".py", ".sh", ".toml", ".yaml", ".yml", ".sql", ".json", ".html", ".js", ".css")


def docs(root):
    names = ["README.md", "CHANGELOG.md", "BENCHMARKS.md"]
    found = [root / n for n in names if (root / n).exists()]
    return found + sorted((root / "docs").rglob("*.md"))


def anchors(md_file):
    """GitHub's heading anchors of a Markdown file."""
    out = set()
    for line in md_file.read_text(encoding="utf-8").splitlines():
        m = re.match(r"#+\s+(.*)", line)
        if m:
            text = re.sub(r"[`*_]", "", m.group(1).strip().lower())
            text = re.sub(r"[^\w\- ]", "", text)
            out.add(text.replace(" ", "-"))
    return out


def roots(root):
    """Where a path a doc names may be relative to."""
    out = [root, root / "crates"]
    crates = root / "crates"
    if crates.is_dir():
        for c in sorted(crates.iterdir()):
            if c.is_dir():
                out += [c, c / "src"]
    return out


def looks_like_path(token):
    if any(ch in token for ch in " <>*{}$|=,;()") or token.startswith(("http", "-", "/", "~")):
        return False
    if "::" in token or ":/" in token or "/" not in token:
        return False
    if token.startswith(("target/", ".tmp/")):
        return False  # made by a build or a test run, not kept in the repository
    if token.endswith("/"):
        # `states/`, `snapshots/`: prefixes inside a bucket; a directory of
        # the repository is named with its parents (`crates/weft/src/index/`).
        return token.rstrip("/").count("/") >= 1
    return token.endswith(PATH_END)


def problems(root):
    found = []
    bases = roots(root)
    for doc in docs(root):
        text = doc.read_text(encoding="utf-8")
        # Fenced code blocks show commands and output, not references.
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        rel = doc.relative_to(root)
        for target in LINK.findall(prose):
            if re.match(r"^[a-z]+:", target):
                continue  # a URL
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path) if path else doc
            if not dest.exists():
                found.append(f"{rel}: link to {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                found.append(f"{rel}: link to {target}: no such heading")
        for token in CODE.findall(prose):
            token = token.split(":")[0] if re.search(r"\.rs:\d", token) else token
            if looks_like_path(token) and not any((b / token).exists() for b in bases):
                found.append(f"{rel}: names `{token}`, which does not exist")
    return found


def selftest():
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "docs").mkdir()
        (root / "crates/lib/src").mkdir(parents=True)
        (root / "crates/lib/src/here.rs").write_text("")
        (root / "docs/B.md").write_text("# A heading\n")
        (root / "README.md").write_text(
            "[ok](docs/B.md#a-heading) [bad anchor](docs/B.md#nope) [gone](docs/C.md)\n"
            "`src/here.rs` `here.rs` `lib/src/here.rs` `src/gone.rs` `a::b/c.rs` `https://x/y.rs`\n"
            "`states/` `s3://b/p/` `target/x.json` `lib/gone/`\n"
            "```\n`src/in_a_block.rs`\n```\n"
        )
        got = problems(root)
        want = [
            "README.md: link to docs/B.md#nope: no such heading",
            "README.md: link to docs/C.md: no such file",
            "README.md: names `src/gone.rs`, which does not exist",
            "README.md: names `lib/gone/`, which does not exist",
        ]
        assert got == want, got
    print("doc_paths selftest: ok")


def main():
    if sys.argv[1:] == ["selftest"]:
        selftest()
        return 0
    found = problems(ROOT)
    for p in found:
        print(p)
    if found:
        print(f"{len(found)} doc references to nothing", file=sys.stderr)
        return 1
    print("doc_paths: every link and named path exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
