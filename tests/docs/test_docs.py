"""Docs the code points to exist in the repository (no reference to a file outside it)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_background_references_resolve_inside_the_repo():
    files = [*ROOT.glob("refimpl/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("notebooks/*.ipynb"),
             *ROOT.glob("docs/*.md"), ROOT / "README.md", *ROOT.glob("scripts/*")]
    refs = []
    for f in files:
        if f.is_file() and f != Path(__file__).resolve():
            for m in re.finditer(r"[\w./-]*background\.md", f.read_text(errors="replace")):
                refs.append((f.relative_to(ROOT), m.group(0)))
    assert refs, "nothing points to docs/background.md"
    for f, ref in refs:
        # relative links from notebooks/ or docs/, else a path from the repository root
        target = (ROOT / f).parent / ref if ref.startswith(".") or f.parts[0] == "docs" else ROOT / ref
        assert target.resolve() == (ROOT / "docs" / "background.md").resolve(), (f, ref)
    assert (ROOT / "docs" / "background.md").is_file()


def test_readme_and_docs_links_resolve():
    """Every relative link of README.md and docs/*.md points to a file or folder of the repo."""
    for f in [ROOT / "README.md", *ROOT.glob("docs/**/*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", f.read_text()):
            if "://" not in target and not target.startswith("mailto:"):
                assert (f.parent / target).exists(), (f.relative_to(ROOT), target)
