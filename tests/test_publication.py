"""What a reader and an instructor expect of a published book: how to cite it, its licences, its changelog."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml

from tools import ROOT

SCHEMA = ROOT / "tests" / "publication" / "cff-1.2.0.schema.json"
CONFIG_REPOSITORY = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"]


@pytest.fixture(scope="module")
def citation() -> dict:
    # CFF dates are YAML dates; the schema wants them as the strings they were written as
    return yaml.load((ROOT / "CITATION.cff").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)


def package_version() -> str:
    return tomllib.loads((ROOT / "code" / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def test_citation_file_is_valid_cff_1_2_0(citation):
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert schema["$id"] == "https://citation-file-format.github.io/1.2.0/schema.json"
    assert citation["cff-version"] == "1.2.0"
    jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker()).validate(citation)


def test_the_schema_check_is_not_vacuous(citation):
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema)
    for broken in ({k: v for k, v in citation.items() if k != "authors"}, {**citation, "license": "CC-BY-4"},
                   {**citation, "titel": "typo"}):
        assert not validator.is_valid(broken), broken


def test_citation_names_title_authors_version_and_both_licences(citation):
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert citation["title"] == config["title"]
    assert citation["authors"] and all(a.get("name") or a.get("family-names") for a in citation["authors"])
    assert citation["version"] == package_version()
    assert sorted(citation["license"]) == ["CC-BY-4.0", "MIT"]
    assert citation["repository-code"] == config["repository"]["url"]


def test_licence_texts_are_in_the_repository():
    mit = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert mit.startswith("MIT License") and "THE SOFTWARE IS PROVIDED \"AS IS\"" in mit
    cc = (ROOT / "LICENSES" / "CC-BY-4.0.txt").read_text(encoding="utf-8")
    assert "Creative Commons Attribution 4.0 International Public License" in cc
    sections = re.findall(r"^Section (\d) – ", cc, flags=re.MULTILINE)
    assert sections == [str(n) for n in range(1, 9)], sections  # the whole legal code, Sections 1 to 8


def test_readme_says_which_licence_applies_to_what():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    licence = readme[readme.index("## Licence"):]
    assert "(LICENSES/CC-BY-4.0.txt)" in licence and "(LICENSE)" in licence
    assert re.search(r"Text: \[CC BY 4\.0\]", licence) and re.search(r"Code: \[MIT\]", licence)


def test_changelog_follows_keep_a_changelog_and_matches_the_version():
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "keepachangelog.com" in changelog
    versions = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", changelog, flags=re.MULTILINE)
    assert versions[0] == ("Unreleased", "")
    released = [v for v, _ in versions[1:]]
    assert released and released[0] == package_version(), released
    assert all(date for _, date in versions[1:]), "every released version has a date"
    for version in ["Unreleased", *released]:  # every heading has its comparison or release link
        assert re.search(rf"^\[{re.escape(version)}\]: https://", changelog, flags=re.MULTILINE), version
    headings = set(re.findall(r"^### (\w+)$", changelog, flags=re.MULTILINE))
    assert headings <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, headings


# --- the PDF on the website: `make publish` puts it where every page's download menu links ---
def test_publish_copies_the_pdf_to_the_site_root(tmp_path):
    from tools.extensions.book_pdf import PDF_NAME, copy_pdf_into_site

    pdf, site = tmp_path / "book.pdf", tmp_path / "html"
    site.mkdir()
    pdf.write_bytes(b"%PDF-1.5\n% a stand-in for the built book\n")
    assert copy_pdf_into_site(pdf, site) == site / PDF_NAME
    assert (site / PDF_NAME).read_bytes() == pdf.read_bytes()
    assert PDF_NAME == "attention-computed.pdf"


def test_publish_refuses_a_missing_pdf_or_one_that_is_not_a_pdf(tmp_path):
    from tools.extensions.book_pdf import copy_pdf_into_site

    with pytest.raises(FileNotFoundError, match="make pdf"):
        copy_pdf_into_site(tmp_path / "missing.pdf", tmp_path)
    (tmp_path / "page.pdf").write_text("<html>not a pdf</html>")
    with pytest.raises(ValueError, match="not a PDF"):
        copy_pdf_into_site(tmp_path / "page.pdf", tmp_path)


def test_make_publish_builds_the_site_and_the_pdf_then_puts_the_pdf_in_the_site():
    import subprocess

    # --dry-run prints the recipes make would run, in order, without running them
    dry = subprocess.run(["make", "--dry-run", "--always-make", "publish"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.splitlines()
    steps = {name: next(i for i, line in enumerate(dry) if name in line)
             for name in ("-m tools.build_book", "-m tools.build_pdf", "-m tools.publish")}
    assert steps["-m tools.build_book"] < steps["-m tools.publish"]
    assert steps["-m tools.build_pdf"] < steps["-m tools.publish"]


def test_publish_script_puts_the_pdf_in_the_site_before_pushing_it_then_pushes_the_launch_branch(tmp_path,
                                                                                                monkeypatch):
    import subprocess

    from tools import publish
    from tools.extensions.book_pdf import PDF_NAME
    from tools.extensions.reader_notebooks import launch_branch

    site, pdf = tmp_path / "html", tmp_path / "book.pdf"
    (site / "_sources" / "chapters").mkdir(parents=True)
    (site / "index.html").write_text("<html></html>")
    (site / "_sources" / "chapters" / "masks.ipynb").write_text("{}")
    pdf.write_bytes(b"%PDF-1.5\n")
    pushed = []

    def fake_run(command, **options):  # ghp-import would push to origin: record what it was given
        pushed.append((command, (site / PDF_NAME).is_file()))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(publish.subprocess, "run", fake_run)
    assert publish.main(site, pdf) == 0
    (pages, pdf_was_there), (launch, _) = pushed
    assert pages[1:3] == ["-m", "ghp_import"] and pages[-1] == str(site) and pdf_was_there
    assert launch[1:3] == ["-m", "ghp_import"] and launch[launch.index("--branch") + 1] == launch_branch()
    branch = Path(launch[-1])
    assert (branch / "chapters" / "masks.ipynb").read_text() == "{}", "the launch branch holds the site's notebooks"
    assert {"runtime.txt", "requirements.txt", "code/pyproject.toml", "LICENSE"} <= {
        p.relative_to(branch).as_posix() for p in branch.rglob("*")}, "Binder builds from these"
    assert publish.main(tmp_path / "unbuilt", pdf) == 1 and len(pushed) == 2


def test_the_launch_buttons_open_the_branch_make_publish_writes():
    from tools.built_site import HTML
    from tools.extensions.reader_notebooks import launch_branch

    page = (HTML / "chapters" / "masks.html")
    if not page.is_file():
        pytest.skip("the site is not built")
    html = page.read_text(encoding="utf-8")
    owner_name = CONFIG_REPOSITORY.removeprefix("https://github.com/")
    assert f"https://mybinder.org/v2/gh/{owner_name}/{launch_branch()}?urlpath=tree/chapters/masks.ipynb" in html
    assert f"https://colab.research.google.com/github/{owner_name}/blob/{launch_branch()}/chapters/masks.ipynb" in html
