"""Static checks of the built site in _build/html (no browser): offline assets, launch and download buttons."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlparse

import pytest
import yaml

from tools import ROOT
from tools.built_site import HTML, PageLinks, toc_pages
from tools.extensions.book_pdf import PDF_NAME

CHAPTER = "chapters/scaled_dot_product_attention"
ASSET_TAG = re.compile(r"<(script|link|img|source|iframe)\b[^>]*>", re.IGNORECASE)
ASSET_URL = re.compile(r"""\b(?:src|href)=["']((?:https?:)?//[^"']+)["']""", re.IGNORECASE)


def read(page: str) -> str:
    return (HTML / page).read_text(encoding="utf-8")


@pytest.mark.parametrize("page", toc_pages())
def test_page_is_built(page):
    assert (HTML / page).is_file(), f"{page} is in _toc.yml but was not built"


@pytest.mark.parametrize("page", toc_pages())
def test_page_loads_no_asset_from_the_internet(page):
    external = []
    for tag in ASSET_TAG.finditer(read(page)):
        text = tag.group(0)
        if text.lower().startswith("<link") and not re.search(r"rel=[\"'](stylesheet|preload|icon)", text):
            continue  # <link rel="search"> and similar are not fetched
        external += ASSET_URL.findall(text)
    assert external == [], f"{page} would fetch {external} from the internet"


def test_mathjax_and_static_figure_script_are_vendored():
    html = read(f"{CHAPTER}.html")
    assert re.search(r'<script[^>]+src="\.\./_static/mathjax/tex-chtml\.js', html)
    assert re.search(r'<script[^>]+src="\.\./_static/static-widgets\.js', html)
    for asset in ("mathjax/tex-chtml.js", "static-widgets.js"):
        assert (HTML / "_static" / asset).is_file(), f"_static/{asset} was not copied into the site"
    fonts = list((HTML / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    assert len(fonts) > 10, "MathJax's fonts are missing"


# what the website no longer needs: its figures work without the ipywidgets HTML manager
WIDGET_MANAGER = ("embed-amd.js", "require.min.js", "widgets-setup.js",
                  "application/vnd.jupyter.widget-state+json", "application/vnd.jupyter.widget-view+json")


@pytest.mark.parametrize("page", toc_pages())
def test_page_loads_no_widget_manager(page):
    html = read(page)
    assert [name for name in WIDGET_MANAGER if name in html] == []
    has_figure = 'class="attn-static-widget"' in html
    loads_script = "static-widgets.js" in html
    assert loads_script == has_figure, (
        "static-widgets.js must be loaded exactly on the pages that show an interactive figure")


def test_site_ships_no_widget_manager():
    shipped = [p.name for p in (HTML / "_static").rglob("*") if p.name in WIDGET_MANAGER[:3]]
    assert shipped == []


def test_static_figure_states_are_files_not_inline_data():
    """A page carries the addresses of its figures' states, not their bytes: each state loads when shown."""
    html = read(f"{CHAPTER}.html")
    figure = re.search(r'<div class="attn-static-widget".*?</script></div>', html, re.S)
    assert figure, "the chapter shows no static interactive figure"
    assert "data:image" not in figure.group(0)
    states = re.findall(r'"(\.\./_images/static-figures/[0-9a-f]+\.png)"', figure.group(0))
    assert len(states) >= 12, len(states)
    for state in states:
        assert (HTML / "chapters" / state).resolve().is_file(), f"{state} is missing"


def test_every_chapter_with_a_widget_shows_its_static_form():
    """Each widget view of a chapter's source is displayed through with_static_page on the website."""
    missing = {}
    for page in toc_pages():
        source = ROOT / page.replace(".html", ".md")
        if not source.is_file():
            continue
        text = source.read_text(encoding="utf-8")
        expected = text.count("display(with_static_page(")
        shown = read(page).count('class="attn-static-widget"')
        if expected != shown or ("ipywidgets" in text and shown == 0):
            missing[page] = (expected, shown)
    assert missing == {}, f"(figures in the source, figures on the page): {missing}"


def test_launch_buttons_open_the_executed_notebook():
    html = read(f"{CHAPTER}.html")
    binder = re.findall(r'href="(https://mybinder\.org/[^"]+)"', html)
    colab = re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', html)
    assert binder and binder[0].endswith(f"{CHAPTER}.ipynb"), binder
    assert colab and colab[0].endswith(f"{CHAPTER}.ipynb"), colab


# --- JupyterLite launch (tools/extensions/lite_build.py; the lite site itself: test_lite.py) ---
def test_every_chapter_notebook_launches_in_the_lite_site_by_a_relative_link():
    notebooks = sorted(ROOT.glob("chapters/*.ipynb"))
    assert notebooks
    for notebook in notebooks:
        html = read(f"chapters/{notebook.stem}.html")
        links = re.findall(r'<a href="([^"]*/notebooks/index\.html\?path=[^"]*)"[^>]*btn-launch-jupyterlite', html)
        assert links == [f"../lite/notebooks/index.html?path={notebook.name}"], (notebook.name, links)
        assert (HTML / "lite" / "files" / notebook.name).is_file(), f"{notebook.name} is not in the lite site"
    assert (HTML / "lite" / "notebooks" / "index.html").is_file()
    assert "btn-launch-jupyterlite" not in read("chapters/intro.html"), "a page with no notebook got a lite button"
# --- end JupyterLite launch ---


def test_download_buttons_offer_the_notebook_and_its_source():
    html = read(f"{CHAPTER}.html")
    assert f'href="../_sources/{CHAPTER}.ipynb"' in html
    assert f'href="../_sources/{CHAPTER}.md"' in html
    assert (HTML / "_sources" / f"{CHAPTER}.ipynb").is_file()


def test_repository_button_links_the_source_repository():
    assert re.search(r'href="https://github\.com/[^"/]+/[^"/]+"', read(f"{CHAPTER}.html"))


def _parse(path):
    return PageLinks.of(path.read_text(encoding="utf-8"))


def test_every_internal_link_and_anchor_of_the_book_resolves():
    """Crawl the pages of the table of contents: each relative link points at a built file and anchor."""
    parsed = {}
    broken = []
    for page in toc_pages():
        source = HTML / page
        for href in _parse(source).hrefs:
            url = urlparse(href)
            if url.scheme or href.startswith(("mailto:", "javascript:")) or href.startswith("//"):
                continue
            target = (source.parent / unquote(url.path)).resolve() if url.path else source
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                if target == HTML / PDF_NAME:
                    continue  # the book's PDF: only `make publish` puts it there (test_publication.py)
                broken.append(f"{page}: {href}")
                continue
            if url.fragment and target.suffix == ".html":
                if target not in parsed:  # each page parsed once (setdefault would parse it on every link)
                    parsed[target] = _parse(target).ids
                ids = parsed[target]
                if unquote(url.fragment) not in ids:
                    broken.append(f"{page}: {href} (no such anchor)")
    assert broken == [], f"{len(broken)} broken links, e.g. {broken[:5]}"


def test_notebooks_zip_holds_every_executed_notebook_and_the_package():
    import zipfile

    archive = HTML / "attention-computed-notebooks.zip"
    assert archive.is_file(), "the notebooks zip was not copied into the site"
    names = set(zipfile.ZipFile(archive).namelist())
    for notebook in ROOT.glob("chapters/*.ipynb"):
        assert f"chapters/{notebook.name}" in names
    assert {"requirements.txt", "code/pyproject.toml", "code/src/attnbook/__init__.py"} <= names
    assert "code/src/attnbook/data/text/glossary.tsv" in names, "the pretrained model's chapter searches it"
    assert 'href="../attention-computed-notebooks.zip"' in read("chapters/intro.html")


# --- publication: licence note, base URL, canonical links, sitemap, logo, favicon, the PDF ---
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
BASE_URL = CONFIG["html"]["baseurl"]
CANONICAL = re.compile(r'<link rel="canonical" href="([^"]*)"')


@pytest.mark.parametrize("page", toc_pages())
def test_page_footer_says_which_licence_applies_to_text_and_to_code(page):
    html = read(page)
    note = re.search(r'<p class="licence-note">(.*?)</p>', html, flags=re.DOTALL)
    assert note, f"{page} has no licence note in its footer"
    links = dict((text, href) for href, text in re.findall(r'<a rel="license" href="([^"]+)">([^<]+)</a>', note.group(1)))
    assert links["CC BY 4.0"].endswith("/LICENSES/CC-BY-4.0.txt") and links["MIT"].endswith("/LICENSE")
    assert (ROOT / "LICENSES" / "CC-BY-4.0.txt").is_file() and (ROOT / "LICENSE").is_file()


def test_base_url_is_the_github_pages_address_of_the_repository():
    owner, name = urlparse(CONFIG["repository"]["url"]).path.strip("/").split("/")
    assert BASE_URL == f"https://{owner}.github.io/{name}/"


@pytest.mark.parametrize("page", toc_pages())
def test_page_has_one_canonical_link_under_the_base_url(page):
    assert CANONICAL.findall(read(page)) == [BASE_URL + page]


def test_sitemap_lists_exactly_the_pages_of_the_book_by_their_canonical_address():
    from xml.etree import ElementTree

    namespace = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9"}
    root = ElementTree.parse(HTML / "sitemap.xml").getroot()
    assert root.tag == f"{{{namespace['s']}}}urlset"
    listed = [loc.text for loc in root.findall("s:url/s:loc", namespace)]
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(BASE_URL + page for page in toc_pages())
    for url in listed:
        assert CANONICAL.findall(read(url.removeprefix(BASE_URL))) == [url]


@pytest.mark.parametrize("page", toc_pages())
def test_page_has_the_favicon_and_the_logo_with_alt_text_naming_the_book(page):
    html = read(page)
    icons = re.findall(r'<link rel="icon" href="([^"]+)"', html)
    assert len(icons) == 1 and (HTML / page).parent.joinpath(icons[0]).resolve() == HTML / "_static" / "logo.svg"
    logos = re.findall(r'<img src="([^"]+)" class="logo__image[^"]*" alt="([^"]*)"', html)
    assert logos, f"{page} shows no logo"
    for src, alt in logos:
        assert (HTML / page).parent.joinpath(src).resolve() == HTML / "_static" / "logo.svg"
        assert CONFIG["title"] in alt, alt


def test_logo_is_an_svg_drawing():
    from xml.etree import ElementTree

    root = ElementTree.parse(HTML / "_static" / "logo.svg").getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert len(root.findall("{http://www.w3.org/2000/svg}rect")) > 5


@pytest.mark.parametrize("page", toc_pages())
def test_download_menu_of_every_page_offers_the_whole_book_as_a_pdf(page):
    links = re.findall(r'<a href="([^"]+)"[^>]*btn-download-book-pdf-button', read(page))
    assert len(links) == 1, links
    assert (HTML / page).parent.joinpath(links[0]).resolve() == HTML / PDF_NAME


def test_intro_links_to_the_pdf_and_to_jupyterlite():
    html = read("chapters/intro.html")
    article = html[html.index("<article"):html.index("</article>")]
    assert f'href="../{PDF_NAME}"' in article
    assert 'href="../lite/tree/index.html"' in article
    assert (HTML / "lite" / "tree" / "index.html").is_file()


def test_a_pdf_in_the_site_is_the_book():
    """`make pdf` before `make book` (and `make publish`) puts the PDF in the site; then it must be one."""
    pdf = HTML / PDF_NAME
    if not pdf.exists():
        pytest.skip("no PDF in this build of the site: `make book` without `make pdf` links to a publish-time file")
    assert pdf.read_bytes()[:5] == b"%PDF-"


def test_downloadable_notebooks_carry_no_static_form():
    """The download button's notebook shows the live widget in Jupyter; the website's states stay out of it."""
    notebooks = list((HTML / "_sources" / "chapters").glob("*.ipynb"))
    assert len(notebooks) >= 10
    heavy = [p.name for p in notebooks if "attn-static-widget" in p.read_text(encoding="utf-8")]
    assert heavy == []
