"""The notebooks the book hands out read like its pages (tools/extensions/reader_notebooks.py).

Every notebook a learner can get is checked where they get it: each page's download (``_sources/``), the
JupyterLite site's files, the notebooks zip, and the branch `make publish` pushes for the Colab and Binder
buttons (laid out here from the built site, as tools/publish.py does). In each, no Markdown cell shows a MyST
role, directive fence, target or equation label; every link leads to a built page and anchor of the website,
or to a notebook of the same collection and the cell holding the page's anchor (``#cell-id=``, which JupyterLab
finds before it renders the cell), or outside the book; no script (sphinx-thebe's); the code
cells are the paired notebook's, which strict nbval checks, but the book-internal ones left out, the hidden
ones folded as JupyterLab writes it, the install cell first; the kernel named as JupyterLab names it. Against
each page: every formula reaches MathJax unchanged when JupyterLab reads the Markdown; every number the page
glues appears, in order, in the notebook's Markdown; theorems, exercises and equations carry the page's
numbers; every solution is folded; every figure the page shows is drawn, an interactive one as the picture of
its first state.
"""

from __future__ import annotations

import base64
import functools
import html
import posixpath
import re
import zipfile
from pathlib import Path
from urllib.parse import unquote, urlparse

import nbformat
import pytest
import yaml

from tools import ROOT
from tools.built_site import HTML, PageLinks
from tools.execution import notebook_sources
from tools.extensions.book_pdf import PDF_NAME
from tools.extensions.notebooks_zip import NOTEBOOKS_ZIP
from tools.extensions.reader_notebooks import LITE_PAGES, SOLUTION_IN_CODE, cells_left_out, notebook_raw_myst, one_line
from tools.extensions.static_figures import state_file_name
from tools.install_cell import FIRST_LINE, INSTALL_TAGS
from tools.jupyter_markdown import mathjax_inputs

BASE_URL = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["html"]["baseurl"]
PAGES = sorted(source.relative_to(ROOT).with_suffix("").as_posix() for source in notebook_sources())
CHAPTERS = [page for page in PAGES if page.startswith("chapters/")]
COLLECTIONS = ("page downloads", "JupyterLite", "notebooks zip", "launch branch")
LINK = re.compile(r"\]\((?P<url>[^)\s]+)\)|\bhref=\"(?P<href>[^\"]+)\"")
ANCHOR = re.compile(r'<a id="([^"]+)"></a>')


def read(data: str) -> nbformat.NotebookNode:
    return nbformat.reads(data, as_version=4)


@pytest.fixture(scope="module")
def collections(tmp_path_factory) -> dict[str, dict[str, nbformat.NotebookNode]]:
    """Each place that hands notebooks out: {path inside it: notebook}."""
    from tools.publish import launch_folder

    downloads = HTML / "_sources"
    lite = HTML / "lite" / "files"
    launch = launch_folder(HTML, tmp_path_factory.mktemp("launch") / "branch")
    with zipfile.ZipFile(HTML / NOTEBOOKS_ZIP) as archive:
        zipped = {name: read(archive.read(name).decode("utf-8")) for name in archive.namelist()
                  if name.endswith(".ipynb")}
    return {
        "page downloads": {p.relative_to(downloads).as_posix(): read(p.read_text("utf-8")) for p in downloads.rglob("*.ipynb")},
        "JupyterLite": {p.relative_to(lite).as_posix(): read(p.read_text("utf-8")) for p in lite.rglob("*.ipynb")},
        "notebooks zip": zipped,
        "launch branch": {p.relative_to(launch).as_posix(): read(p.read_text("utf-8")) for p in launch.rglob("*.ipynb")},
    }


def markdown(notebook) -> str:
    return "\n\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")


def test_each_place_hands_out_every_notebook_it_should(collections):
    assert sorted(collections["page downloads"]) == [f"{page}.ipynb" for page in PAGES]
    # the launch branch and the lite site hold the zh-Hant notebooks too (tests/site/test_translated_site.py)
    assert sorted(collections["launch branch"]) == sorted([f"{page}.ipynb" for page in PAGES] +
                                                          [f"zh-Hant/{page}.ipynb" for page in PAGES])
    assert sorted(collections["notebooks zip"]) == [f"{page}.ipynb" for page in CHAPTERS]
    assert sorted(collections["JupyterLite"]) == sorted([f"{Path(page).name}.ipynb" for page in CHAPTERS] +
                                                        [f"{Path(page).name}.zh-Hant.ipynb" for page in CHAPTERS])


@pytest.mark.parametrize("place", COLLECTIONS)
def test_no_markdown_cell_handed_out_shows_a_myst_role_or_directive(collections, place):
    found = {path: notebook_raw_myst(notebook)[:3] for path, notebook in collections[place].items()}
    assert {path: raw for path, raw in found.items() if raw} == {}


def page_of(path: str) -> str:
    """The page of a notebook at ``path`` in one of the collections."""
    return next(page for page in PAGES if path in (f"{page}.ipynb", f"{Path(page).name}.ipynb",
                                                    f"zh-Hant/{page}.ipynb", f"{Path(page).name}.zh-Hant.ipynb"))


@functools.lru_cache(maxsize=None)
def paired_code(page: str) -> tuple[dict, set, set]:
    """The paired notebook's code cells by index, those a reader notebook leaves out and the book-internal ones
    it keeps."""
    paired = nbformat.read(ROOT / f"{page}.ipynb", as_version=4)
    code = {index: cell for index, cell in enumerate(paired.cells) if cell.cell_type == "code"}
    return (code, *cells_left_out(code))


@pytest.mark.parametrize("place", COLLECTIONS)
def test_every_code_cell_is_the_paired_notebooks_but_the_book_internal_ones_left_out(collections, place):
    differ = []
    for path, notebook in collections[place].items():
        code, left_out, _ = paired_code(page_of(path))
        ours = [(c.source, sorted(c.metadata.get("tags", []))) for c in notebook.cells if c.cell_type == "code"]
        theirs = [(c.source, sorted(c.metadata.get("tags", []))) for i, c in code.items() if i not in left_out]
        if ours != theirs:
            differ.append(path)
    assert differ == [], f"code cells that differ from the paired notebook's: {differ}"


def folded(cell) -> bool:
    return cell.metadata.get("jupyter", {}).get("source_hidden") is True


@pytest.mark.parametrize("place", COLLECTIONS)
def test_no_book_internal_cell_is_shown_and_the_hidden_code_is_folded_as_jupyterlab_writes_it(collections, place):
    """remove-cell cells left out (kept folded, without outputs, only when a later cell needs them), hide-input
    folded, the install cell first and shown; every fold of outputs written with JupyterLab's ``collapsed``."""
    shown, unfolded, install, collapsed, kept = [], [], [], [], 0
    for path, notebook in collections[place].items():
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        for number, cell in enumerate(code):
            tags = cell.metadata.get("tags", [])
            if "remove-cell" in tags and "setup" not in tags:
                kept += page_of(path).startswith("chapters/")
                if not folded(cell) or cell.outputs:
                    shown.append(f"{path}: code cell {number}")
            if "hide-input" in tags and not folded(cell):
                unfolded.append(f"{path}: code cell {number}")
            hidden_outputs = cell.metadata.get("jupyter", {}).get("outputs_hidden", False)
            if cell.metadata.get("collapsed", False) != hidden_outputs:
                collapsed.append(f"{path}: code cell {number}")
        if not code or code[0].metadata.get("tags") != INSTALL_TAGS or folded(code[0]) \
                or code[0].source.splitlines()[0] != FIRST_LINE:
            install.append(path)
    assert shown == [] and unfolded == [] and collapsed == [] and install == [], (shown[:3], unfolded[:3],
                                                                                 collapsed[:3], install[:3])
    # the chapters' (a homework's hidden tests import what its solutions use: tools/homework gives students theirs)
    internal = sum(len(paired_code(page_of(path))[1]) + len(paired_code(page_of(path))[2])
                   for path in collections[place] if page_of(path).startswith("chapters/"))
    assert kept < internal / 10, f"{kept} of the chapters' {internal} book-internal cells kept in the {place}"


@pytest.mark.parametrize("place", COLLECTIONS)
def test_no_reader_notebook_holds_a_script(collections, place):
    """sphinx-thebe appends its configuration (an unrelated Binder repository) and kernel name as scripts."""
    found = [path for path, notebook in collections[place].items()
             if "<script" in markdown(notebook) or "thebe" in markdown(notebook).lower()]
    assert found == []


@pytest.mark.parametrize("place", COLLECTIONS)
def test_the_kernel_is_named_as_jupyterlab_names_it(collections, place):
    """What JupyterLab writes into a notebook whose kernel starts (the kernel's spec, here ipykernel's as in a
    reader's environment; JupyterLite's own in the lite site): opening one leaves it unmodified."""
    from jupyter_client.kernelspec import KernelSpecManager

    from tools.extensions.reader_notebooks import LITE_KERNELSPEC

    spec = KernelSpecManager().get_kernel_spec("python3")
    expected = LITE_KERNELSPEC if place == "JupyterLite" else {
        "display_name": spec.display_name, "language": spec.language, "name": "python3"}
    assert {path: nb.metadata.kernelspec for path, nb in collections[place].items()
            if nb.metadata.kernelspec != expected} == {}


def anchors(notebook) -> set[str]:
    return set(ANCHOR.findall(markdown(notebook)))


def cell_anchors(notebook, fragment: str) -> set[str] | None:
    """The anchors of the Markdown cell a ``cell-id=<id>`` fragment opens in ``notebook`` (None: no such cell)."""
    cell_id = fragment.removeprefix("cell-id=")
    cells = [cell for cell in notebook.cells if cell.get("id") == cell_id and cell.cell_type == "markdown"]
    return set(ANCHOR.findall(cells[0].source)) if cells else None


def broken_fragment(fragment: str, notebook) -> str | None:
    """Why ``fragment`` does not lead to an anchor of ``notebook``: a cell id (JupyterLab's ``cell-id=``) of a cell
    holding an anchor, or an anchor; None when it does."""
    if fragment.startswith("cell-id="):
        found = cell_anchors(notebook, fragment)
        return "no such cell" if found is None else None if found else "a cell with no anchor"
    return None if fragment in anchors(notebook) else "no such anchor"


@functools.lru_cache(maxsize=None)
def page_ids(target: Path) -> frozenset[str]:
    """The element ids of a built page, each page parsed once."""
    return frozenset(PageLinks.of(target.read_text(encoding="utf-8")).ids)


def broken_link(url: str, path: str, notebook, collection: dict) -> str | None:
    """Why ``url``, a link in the notebook at ``path`` of ``collection``, does not resolve; None when it does."""
    if url.startswith(BASE_URL):
        page, _, fragment = url[len(BASE_URL):].partition("#")
        target = HTML / unquote(page)
        if target == HTML / PDF_NAME:
            return None  # the book's PDF: `make publish` puts it there (tests/test_publication.py)
        if not target.is_file():
            return "no such page"
        if fragment and unquote(fragment) not in page_ids(target):
            return "no such anchor on the page"
        return None
    parsed = urlparse(url)
    if parsed.scheme in ("http", "https", "mailto"):
        return None  # outside the book
    if parsed.scheme:
        return f"a {parsed.scheme}: link"
    if url.startswith("#"):
        problem = broken_fragment(unquote(url[1:]), notebook)
        return problem and f"{problem} in the notebook"
    target = posixpath.normpath(posixpath.join(posixpath.dirname(path), unquote(parsed.path)))
    if target not in collection:
        return "no such notebook beside it"
    problem = parsed.fragment and broken_fragment(unquote(parsed.fragment), collection[target])
    return problem and f"{problem} in that notebook"


@pytest.mark.parametrize("place", COLLECTIONS)
def test_every_link_leads_to_a_page_and_anchor_of_the_book_or_a_notebook_beside_it(collections, place):
    collection = collections[place]
    broken, count = [], 0
    for path, notebook in collection.items():
        for match in LINK.finditer(markdown(notebook)):
            url = html.unescape(match.group("url") or match.group("href"))
            count += 1
            problem = broken_link(url, path, notebook, collection)
            if problem:
                broken.append(f"{path}: {url} ({problem})")
    assert count > 500, f"only {count} links in the {place}"
    assert broken == [], f"{len(broken)} broken links, e.g. {broken[:5]}"


def test_links_between_chapters_are_relative_in_the_zip_and_jupyterlite(collections):
    for place in ("notebooks zip", "JupyterLite"):
        links = [m.group("url") for notebook in collections[place].values() for m in LINK.finditer(markdown(notebook))]
        assert any(url.startswith("masks.ipynb") for url in links), f"the {place} links no chapter relatively"
        assert not any(url.startswith(f"{BASE_URL}chapters/masks.html") for url in links), place


@pytest.mark.parametrize("place", ("notebooks zip", "JupyterLite"))
def test_a_link_to_another_chapters_item_opens_the_cell_holding_the_pages_anchor(collections, place):
    """JupyterLab looks an ``<a id>`` up before it renders the cell holding it (the notebook stays at its top):
    a link between chapters names the cell (``#cell-id=``) that holds the anchor the page's link names."""
    collection = collections[place]
    downloads = collections["page downloads"]
    wrong, count = [], 0
    for path, notebook in collection.items():
        name = posixpath.basename(path)  # masks.ipynb (the lite site's zh-Hant copy: masks.zh-Hant.ipynb)
        if name.count(".") > 1:
            continue
        page = LITE_PAGES + name
        links = [m.group("url") or m.group("href") for m in LINK.finditer(markdown(notebook))]
        website = [m.group("url") or m.group("href") for m in LINK.finditer(markdown(downloads[page]))]
        assert len(links) == len(website), path
        for here, there in zip(links, website):
            if not there.startswith(BASE_URL) or here == there:
                continue
            anchor = there.partition("#")[2]
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), here.partition("#")[0]))
            fragment = here.partition("#")[2]
            count += bool(anchor)
            if anchor and not (fragment.startswith("cell-id=")
                               and unquote(anchor) in (cell_anchors(collection[target], fragment) or ())):
                wrong.append(f"{path}: {here} for {there}")
    assert count > 50, f"only {count} links between chapters in the {place}"
    assert wrong == [], f"{len(wrong)} links open no cell holding their anchor, e.g. {wrong[:5]}"


def page(name: str) -> str:
    text = (HTML / f"{name}.html").read_text(encoding="utf-8")
    return text[text.index("<article"):text.index("</article>")]


def reader(name: str) -> nbformat.NotebookNode:
    return read((HTML / "_sources" / f"{name}.ipynb").read_text(encoding="utf-8"))


def unescaped(text: str) -> str:
    """Markdown text as it reads: backslash escapes and HTML entities resolved."""
    return html.unescape(re.sub(r"\\([\\`*_{}\[\]()#+\-.!$<>|])", r"\1", text))


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_number_the_page_glues_is_in_its_reader_notebook_in_order(name):
    glued = [html.unescape(re.sub(r"<[^>]+>", "", value))
             for value in re.findall(r'<span class="pasted-text">(.*?)</span>', page(name), re.S)]
    text = unescaped(markdown(reader(name)))
    at, missing = 0, []
    for value in glued:
        found = text.find(value, at)
        if found < 0:
            missing.append(value)
        else:
            at = found + len(value)
    assert glued, f"{name} glues no number"
    assert missing == [], f"{len(missing)} of the {len(glued)} glued values of {name}.html missing from its notebook"


PAGE_MATH = re.compile(r'<(span|div) class="math notranslate nohighlight"[^>]*>(.*?)</\1>', re.S)


def formula(tex: str) -> str:
    """A formula as MathJax reads it, whatever its layout: white space and comments aside, no equation number,
    no Sphinx wrapper (``split``)."""
    tex = re.sub(r"\\tag\{[^}]*\}|\\(?:begin|end)\{split\}", "", tex)
    return " ".join(one_line(tex).split())


def page_formulas(name: str) -> list[str]:
    """Every formula the chapter's page hands MathJax, delimiters off."""
    found = []
    for match in PAGE_MATH.finditer(page(name)):
        tex = html.unescape(re.sub(r'<span class="eqno">.*?</span>', "", match.group(2), flags=re.S)).strip()
        found.append(formula(tex[2:-2] if tex[:2] in ("\\(", "\\[") else tex))
    return found


def notebook_formulas(notebook) -> list[str]:
    """Every formula JupyterLab hands MathJax from the notebook's Markdown cells, delimiters off (but a solution's
    title where it goes on after a code cell, which the page shows once)."""
    return [formula(tex.strip("$")) for cell in notebook.cells if cell.cell_type == "markdown"
            for tex in mathjax_inputs(re.sub(r"<summary>[^\n]*\(continued\)</summary>", "", cell.source))]


@pytest.mark.parametrize("name", PAGES)
def test_every_formula_of_the_page_reaches_mathjax_unchanged_in_jupyterlab(name):
    """The notebook's Markdown read as JupyterLab reads it (tools/jupyter_markdown.py): a formula with a quote's
    ``>`` in it, or one the Markdown broke, is not one of the page's."""
    ours, theirs = notebook_formulas(reader(name)), page_formulas(name)
    assert theirs or name in ("chapters/source_notes",), f"{name}.html shows no formula"
    assert [tex for tex in ours if tex not in set(theirs)] == []
    assert [tex for tex in theirs if tex not in set(ours)] == []
    assert len(ours) == len(theirs)


def test_a_formula_in_a_box_is_written_on_one_line_in_the_quote():
    """Definition 4.1 of "Masks" (the issue's example): its display math in the quote, not a line of it bare."""
    cells = [cell.source for cell in reader("chapters/masks").cells if cell.cell_type == "markdown"]
    definition = next(cell for cell in cells if "**Definition 4.1" in cell)
    displayed = [line for line in definition.splitlines() if "$$" in line]
    assert displayed and all(re.fullmatch(r"> \$\$[^$]+\$\$", line) for line in displayed), displayed


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_plain_table_cell_of_the_page_reads_the_same_in_its_reader_notebook(name):
    """Cells as written: a table writer that reads numbers would print 14.0 as 14 and 0.50 as 0.5."""
    cells = [html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
             for cell in re.findall(r"<td[^>]*>(.*?)</td>", page(name), re.S)]
    plain = [cell for cell in cells if re.fullmatch(r"[0-9][0-9.,]*", cell)]
    rows = [line for line in unescaped(markdown(reader(name))).splitlines() if line.startswith("|")]
    written = {cell.strip().strip("*") for line in rows for cell in line.strip("|").split("|")}  # **bold**
    assert [cell for cell in plain if cell not in written] == []


NUMBERED = re.compile(r'id="(?P<id>[^"]+)">\s*(?:<p class="admonition-title">)?<span class="(?:caption-number|eqno)">'
                      r"(?P<number>[^<]+?)\s*(?:</span>|<a)")


def numbered_items(name: str) -> dict[str, str]:
    """The page's numbered theorems, exercises and equations: {id: the number it shows}."""
    return {m.group("id"): m.group("number").strip() for m in NUMBERED.finditer(page(name))}


def test_the_pages_number_many_theorems_exercises_and_equations():
    assert sum(len(numbered_items(name)) for name in CHAPTERS) > 150


@pytest.mark.parametrize("name", CHAPTERS)
def test_theorems_exercises_and_equations_carry_the_pages_numbers(name):
    numbered = numbered_items(name)
    text = markdown(reader(name))
    wrong = {}
    for anchor, number in numbered.items():
        after = text.split(f'<a id="{anchor}"></a>', 1)
        shown = after[1][:4000] if len(after) == 2 else ""
        if number.startswith("("):  # an equation: (2.1) on the page, \tag{2.1} in the notebook
            expected = f"\\tag{{{number.strip('()')}}}"
        else:
            expected = f"**{number}"
        if expected not in shown.split("<a id=")[0]:
            wrong[anchor] = number
    assert wrong == {}, f"items whose number the notebook does not show after their anchor: {wrong}"


def plain(text: str) -> str:
    """A title as words: tags, math delimiters and runs of white space gone."""
    text = html.unescape(re.sub(r"<[^>]+>", "", text))
    return " ".join(re.sub(r"\\[()]|\$", "", text).split())


# a solution's title: its <details>' summary, or, for one that starts with code, the line before its folded code cell
SUMMARY = re.compile(rf"<summary>(.*?)</summary>|^\*\*(Solution to .*?)\*\*: {re.escape(SOLUTION_IN_CODE)}", re.M)


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_solution_is_folded_under_its_title(name):
    titles = [plain(title) for title in re.findall(
        r'class="solution dropdown admonition" id="[^"]+">\s*<p class="admonition-title">(.*?)</p>', page(name), re.S)]
    cells = [cell.source for cell in reader(name).cells if cell.cell_type == "markdown"]
    summaries = [plain(m.group(1) or m.group(2)) for cell in cells for m in SUMMARY.finditer(cell)]
    assert titles or name == "chapters/source_notes", f"{name}.html shows no solution"
    assert [s for s in summaries if not s.endswith("(continued)")] == titles
    # each cell closes what it opens: a solution around a code cell is folded before it and after it
    assert all(cell.count("<details>") == cell.count("</details>") for cell in cells)


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_figure_the_page_shows_is_drawn_in_the_notebook(name):
    # (not the pictures of an interactive figure's states: the notebook shows the live widget)
    pictures = len(re.findall(r'<img [^>]*src="[^"]*_images/(?!static-figures/)[^"]+\.png"', page(name)))
    drawn = sum("image/png" in output.get("data", {}) for cell in reader(name).cells if cell.cell_type == "code"
                for output in cell.outputs)
    assert drawn >= pictures > 0 or (pictures == drawn == 0), (pictures, drawn)


FIRST_STATE = re.compile(r'<img\b[^>]*\bclass="attn-static-picture"[^>]*\bsrc="[^"]*/static-figures/([0-9a-f]+\.png)"')


def test_the_chapters_show_many_interactive_figures():
    assert sum(len(FIRST_STATE.findall(page(name))) for name in CHAPTERS) >= 16


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_interactive_figure_shows_the_pages_first_state_before_it_runs(name):
    """Its stored output is the picture the page opens the figure with (and its alt text), not the widget's
    text form (``VBox(children=(...``), which is all a notebook shows of a widget it has not run."""
    outputs = [output for cell in reader(name).cells if cell.cell_type == "code" for output in cell.outputs]
    drawn = {state_file_name(base64.b64decode(output.data["image/png"])) for output in outputs
             if "image/png" in output.get("data", {})}
    assert [picture for picture in FIRST_STATE.findall(page(name)) if picture not in drawn] == []
    widgets = [text[:40] for output in outputs if re.match(r"\w+\(children=", text := output.get("data", {}).get(
        "text/plain", ""))]
    assert widgets == []


def test_the_zip_and_lite_notebooks_are_the_downloads_with_relative_links(collections):
    """One reader notebook per page: the other places change its links, nothing else."""
    downloads = collections["page downloads"]
    for name, notebook in collections["notebooks zip"].items():
        download = downloads[name]
        assert [c.source for c in notebook.cells if c.cell_type == "code"] == \
            [c.source for c in download.cells if c.cell_type == "code"]
        strip = lambda text: LINK.sub("]()", text)  # noqa: E731
        assert [strip(c.source) for c in notebook.cells] == [strip(c.source) for c in download.cells], name


@pytest.mark.parametrize("place", COLLECTIONS)
def test_no_box_title_is_bracketed_twice(collections, place):
    # a zh-Hant title comes from its catalog in full-width brackets: "**定義 4.1 (（遮罩注意力）)**" before the fix
    twice = re.compile(r"^> \*\*[^*\n]*[(（][(（]", re.M)
    found = {path: twice.findall(markdown(notebook))[:2] for path, notebook in collections[place].items()}
    assert {path: titles for path, titles in found.items() if titles} == {}
