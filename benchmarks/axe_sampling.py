"""Print what checking colour rules on one element of each kind saves the browser test, and whether it is exact.

The browser test runs axe-core through tools/axe_run.js, which checks color-contrast and link-in-text-block on
one element of each kind (same computed styles, same backdrop) and every other rule on every element. For each
page of _toc.yml in each theme, this opens the page in Debian's Chromium (served from _build/html on 127.0.0.1)
and prints:

* the seconds axe-core takes as the test runs it (sampled) and on every element (every rule, no sampling),
  and whether both find the same serious and critical violations;
* for each sampled rule, how many elements and kinds it saw, and, from axe-core run on every element: the kinds
  where it found a violation on some elements but not on others (none: checking one element of a kind decides
  whether the kind is found, so the sampling finds what a check of every element finds), the elements it checked
  that belong to no kind (none: the sampling misses nothing), and the kinds where it passed some elements and
  could not decide others ("incomplete", e.g. a text partly covered by another element where the page is
  scrolled; axe reports these as neither).

A benchmark, not a test: it prints figures and never fails on them. Run it after `make book`:
    .venv/bin/python benchmarks/axe_sampling.py [--pages chapters/masks.html ...]
"""

from __future__ import annotations

import argparse
import time

from tools.built_site import (AXE, AXE_RUN, CHROMIUM, CHROMIUM_FLAGS, DARK_THEME_RULES, LOAD_LAZY_IMAGES, SETTLE_PAGE,
                              serve_site, toc_pages)

EVERY_ELEMENT = """async rules => (await axe.run(document, {resultTypes: ['violations'], preload: false,
    ...(rules ? {runOnly: {type: 'rule', values: rules}} : {})})).violations
  .filter(v => v.impact === 'serious' || v.impact === 'critical').map(v => v.id).sort()"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", nargs="*", help="pages to open (default: every page of _toc.yml)")
    pages = parser.parse_args().pages or toc_pages()
    from playwright.sync_api import sync_playwright

    totals = {"sampled": 0.0, "every element": 0.0}
    split = unkinded = undecided = 0
    print(f"{'page':44} {'theme':5} {'sampled s':>9} {'every s':>8} same  elements/kinds (contrast; links)  "
          "split/no kind/undecided")
    with serve_site() as site, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        for path in pages:
            for theme, rules in (("light", None), ("dark", DARK_THEME_RULES)):
                context = browser.new_context(color_scheme=theme, reduced_motion="reduce")
                page = context.new_page()
                page.goto(f"{site}/{path}", wait_until="load")
                page.evaluate(SETTLE_PAGE)
                page.evaluate(LOAD_LAZY_IMAGES)
                page.add_script_tag(path=str(AXE))
                start = time.perf_counter()
                sampled = sorted(v["rule"] for v in page.evaluate(AXE_RUN, rules))
                middle = time.perf_counter()
                every = page.evaluate(EVERY_ELEMENT, rules)
                end = time.perf_counter()
                audit = page.evaluate(f"({AXE_RUN})(null, true)")
                totals["sampled"] += middle - start
                totals["every element"] += end - middle
                outcomes = [o for report in audit.values() for o in report["outcomes"]]
                page_split = sum(1 for o in outcomes if "violations" in o and "+" in o)
                page_unkinded = sum(report["unkinded"] for report in audit.values())
                page_undecided = sum(1 for o in outcomes if o == "incomplete+passes")
                split, unkinded, undecided = split + page_split, unkinded + page_unkinded, undecided + page_undecided
                counts = "; ".join(f"{r['elements']}/{r['kinds']}" for r in audit.values())
                print(f"{path:44} {theme:5} {middle - start:9.1f} {end - middle:8.1f} {'yes' if sampled == every else 'NO':4}  "
                      f"{counts:34} {page_split}/{page_unkinded}/{page_undecided}")
                context.close()
        browser.close()
    print(f"axe-core in all: {totals['sampled']:.0f} s sampled, {totals['every element']:.0f} s on every element; "
          f"kinds found on some elements only: {split}; checked elements of no kind: {unkinded}; "
          f"kinds partly undecided: {undecided}")


if __name__ == "__main__":
    main()
