"""docs/mechanisms/ is what refimpl.lab.docs_gen.mechanism_pages generates from refimpl/variants.py and
the source: regenerated, every page is the same, and every link points at a line that still
reads its switch (the quick part, without building a processor)."""
import re

from refimpl.lab.docs_gen import mechanism_pages as pages

ROOT = pages.ROOT
REGENERATE = "run python -m refimpl.lab.docs_gen.mechanism_pages"
LINK = re.compile(r"\[(refimpl/[\w/.]+)#L(\d+)\]\(\.\./\.\./\1#L\2\) `(.*)`$")


def test_every_page_is_listed_and_none_is_left_over():
    on_disk = {p.name for p in pages.OUT.glob("*.md")}
    assert on_disk == {f"{p.slug}.md" for p in pages.PAGES} | {"README.md"}
    assert len(pages.PAGES) >= 10


def test_links_point_at_the_lines_they_quote():
    checked = 0
    for page in pages.OUT.glob("*.md"):
        for line in page.read_text().splitlines():
            m = LINK.search(line.strip())
            if not m:
                continue
            rel, n, quoted = m.group(1), int(m.group(2)), m.group(3)
            source = (ROOT / rel).read_text().splitlines()
            assert n <= len(source), f"{page.name}: {rel}#L{n} is past the end; {REGENERATE}"
            shown = source[n - 1].strip()
            assert shown.startswith(quoted.removesuffix("...")), (
                f"{page.name}: {rel}#L{n} is now {shown!r}; {REGENERATE}")
            checked += 1
    assert checked > 30


def test_every_switch_that_a_page_shows_is_read_somewhere():
    sources = pages._sources()
    for name in pages._STARTUP_FIELDS + pages._MM_FIELDS:
        assert len(pages.where(name, sources)) > 1, f"no code reads {name}"
