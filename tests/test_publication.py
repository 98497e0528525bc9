"""What a reader and an instructor expect of a published book: how to cite it, its licences, its changelog."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "tests" / "publication" / "cff-1.2.0.schema.json"


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

