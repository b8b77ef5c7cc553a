#!/usr/bin/env python3
"""Checks the relative links of sluice's Markdown documentation, and that
bench/README.md's table names every benchmark script.

Run from anywhere:

    python3 scripts/check_links.py

Reads README.md, ARCHITECTURE.md and every docs/**/*.md, and checks each
relative link: the target file (or directory) exists, and an `#anchor` names a
heading of the target page, with GitHub's slug rules (lower case, spaces become
`-`, punctuation other than `-` and `_` is removed, a repeated heading gets
`-1`, `-2`, ...). http(s) and mailto links are ignored, as are links inside
code spans and fenced code blocks. Standard library only.

Exit status 0 when every link holds and every bench/*.sh is in that table;
otherwise 1, after one line per fault: `file:line: link: reason`, or
`bench/README.md: bench/NAME.sh is not in the table of scripts`.
"""

import re
import sys
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent

# [text](target) and ![alt](target); the target ends at the first space
# (an optional "title" may follow) or at the closing parenthesis.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# [label]: target  (reference definitions)
REFERENCE_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HTML_ID = re.compile(r"""<[^>]+\s(?:id|name)\s*=\s*["']([^"']+)["']""")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
IGNORED_SCHEMES = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def documents():
    """The Markdown files this script checks."""
    files = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "bench" / "README.md"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    return [path for path in files if path.is_file()]


def lines_outside_code(text):
    """(line number, line) for every line not inside a fenced code block."""
    fence = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = FENCE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)
                continue
            yield number, line
        elif match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
            fence = None


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # \w keeps letters, digits and _
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    """Every anchor a Markdown page offers: its headings' slugs and HTML ids."""
    if path not in _anchors:
        found = set()
        seen = {}
        for _, line in lines_outside_code(path.read_text(encoding="utf-8")):
            match = HEADING.match(line)
            if match:
                base = slug(match.group(2))
                count = seen.get(base, 0)
                seen[base] = count + 1
                found.add(base if count == 0 else f"{base}-{count}")
            found.update(HTML_ID.findall(line))
        _anchors[path] = found
    return _anchors[path]


def links(path):
    """(line number, link target) for every link of a Markdown page."""
    for number, line in lines_outside_code(path.read_text(encoding="utf-8")):
        line = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
        for match in INLINE_LINK.finditer(line):
            yield number, match.group(1)
        match = REFERENCE_DEFINITION.match(line)
        if match:
            yield number, match.group(1)


def problem(page, target):
    """Why a link of `page` is broken, or None when it holds."""
    if IGNORED_SCHEMES.match(target):
        return None  # http:, https:, mailto:, ...
    address, _, anchor = target.partition("#")
    if address:
        destination = (page.parent / unquote(address)).resolve()
        if not destination.exists():
            return f"no such file: {destination.relative_to(ROOT) if destination.is_relative_to(ROOT) else destination}"
    else:
        destination = page
    if anchor:
        if destination.is_dir() or destination.suffix.lower() != ".md":
            return None  # anchors of other files (source lines, ...) are not checked
        if unquote(anchor) not in anchors(destination):
            return f"no heading #{anchor} in {destination.relative_to(ROOT)}"
    return None


def unlisted_benchmarks():
    """The benchmark scripts bench/README.md's table does not name (a row's
    first cell holds `bash bench/NAME.sh ...`)."""
    table = (ROOT / "bench" / "README.md").read_text()
    listed = set(re.findall(r"^\|[^|]*`[^`|]*\bbash bench/([\w.-]+\.sh)\b", table, re.MULTILINE))
    scripts = sorted(path.name for path in (ROOT / "bench").glob("*.sh"))
    return [f"bench/README.md: bench/{name} is not in the table of scripts" for name in scripts if name not in listed]


def main():
    broken = unlisted_benchmarks()
    checked = 0
    for page in documents():
        for number, target in links(page):
            checked += 1
            reason = problem(page, target)
            if reason:
                broken.append(f"{page.relative_to(ROOT)}:{number}: {target}: {reason}")
    for line in broken:
        print(line)
    pages = len(documents())
    if broken:
        print(f"check_links: {len(broken)} broken of {checked} links in {pages} files", file=sys.stderr)
        return 1
    print(f"check_links: {checked} links in {pages} files, none broken", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
