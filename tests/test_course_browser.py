"""The course site and slides in a real browser, offline: headless Chromium (Debian's ``chromium`` package, driven
by ``pip install playwright`` with ``executable_path``; never ``playwright install``, which downloads browsers)
opens the pages from ``file://`` with every other request blocked, and checks what a reader sees: every formula
typeset by MathJax (no raw TeX left), every figure loaded, solutions folded and openable, the previous / next links
leading to the neighbouring lessons, the slides running reveal.js with their formulas typeset, and no slide of any
deck wider than its box (nothing scrolls sideways or is cut off at the right edge).

Skipped, with the reason in pytest's summary and a warning, only where no browser can be had (no playwright, or no
Chromium); ``.ci/run`` installs both."""
import os
import shutil
import warnings
from pathlib import Path

import pytest

from minimal.course import build as course
from minimal.course import site as course_site  # `site` is the fixture below
from minimal.course import slides

CHROMIUM = next((p for p in (os.environ.get("MINIMAL_CHROMIUM"), shutil.which("chromium"),
                             shutil.which("chromium-browser"), "/usr/bin/chromium") if p and Path(p).is_file()), None)


def _no_browser():
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package playwright is missing (pip install playwright)"
    if CHROMIUM is None:
        return "no Chromium found (apt-get install chromium, or set MINIMAL_CHROMIUM)"
    return None


WHY = _no_browser()
if WHY:
    warnings.warn(f"BROWSER TESTS SKIPPED: {WHY}")
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"BROWSER TESTS SKIPPED: {WHY}")

TIMEOUT_MS = 180_000       # MathJax on a long lesson takes seconds of a loaded CPU
TABS = 3                   # decks loaded at once by the slide-width test


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    notes = []
    course_site.html(out, notes=notes, instructor=True)     # the instructor's site: solutions folded
    return out, notes


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,   # scrollbars take their width, as on a desktop
                              args=["--no-sandbox", "--allow-file-access-from-files"],
                              ignore_default_args=["--hide-scrollbars"])
        yield b
        b.close()


@pytest.fixture()
def page(browser):
    """A page that may load file:// only; every other request is aborted and recorded."""
    ctx = browser.new_context(offline=True)
    remote = []

    def route(r):
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            remote.append(r.request.url)
            r.abort()
    ctx.route("**/*", route)
    pg = ctx.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    pg.remote = remote
    yield pg
    ctx.close()


def _open_typeset(page, path):
    page.goto(Path(path).as_uri())
    page.wait_for_function("window.MathJax && MathJax.isReady")
    page.evaluate("new Promise(done => MathJax.Hub.Queue(done))")     # after every queued typesetting job


def _math_report(page):
    return page.evaluate("""() => {
        // the prose of markdown cells; code spans and blocks may hold a literal $ (a shell variable)
        const md = [...document.querySelectorAll('.jp-RenderedMarkdown')].map(e => {
            const c = e.cloneNode(true);
            c.querySelectorAll('code, pre, script').forEach(x => x.remove());
            return c.textContent;
        });
        const text = md.join('\\n');
        return {typeset: document.querySelectorAll('script[type^="math/tex"]').length,
                rendered: document.querySelectorAll('.MathJax, .MathJax_Display, .MathJax_CHTML, .MathJax_SVG').length,
                errors: document.querySelectorAll('.MathJax_Error, .merror').length,
                dollars: (text.match(/\\$/g) || []).length,
                raw: (text.match(/\\\\(frac|sum|mathbb|top|odot)/g) || []).length};
    }""")


def _pages(out):
    order = course.lessons()
    first = order[0]
    second = next((n for n in order if n.startswith("gril_a")), order[1])
    return [out / "index.html", out / course_site._page(first), out / course_site._page(second)]


def test_every_formula_is_typeset_offline(site, page):
    out, notes = site
    assert any("works offline" in n for n in notes), notes
    for path in _pages(out):
        _open_typeset(page, path)
        r = _math_report(page)
        assert r["typeset"] > 0 and r["rendered"] >= r["typeset"], (path.name, r)
        assert r["errors"] == 0 and r["dollars"] == 0 and r["raw"] == 0, (path.name, r)
    assert page.remote == [], f"the pages asked the network for {page.remote}"


def test_figures_load_and_solutions_fold(site, page):
    out, _ = site
    widths = []
    for path in _pages(out)[1:]:
        _open_typeset(page, path)
        widths += page.evaluate("[...document.images].map(i => i.complete ? i.naturalWidth : -1)")
    assert widths and min(widths) > 0, widths
    details = page.locator("details.solution")
    assert details.count() > 0
    assert page.evaluate("[...document.querySelectorAll('details.solution')].every(d => !d.open)")
    first = details.first
    body = first.locator(".jp-Cell").first
    assert not body.is_visible()
    first.locator("summary").click()
    assert page.evaluate("document.querySelector('details.solution').open") and body.is_visible()


def test_previous_and_next_lead_to_the_neighbouring_lessons(site, page):
    out, _ = site
    order = course.lessons()
    i = next(k for k, n in enumerate(order) if course_site._page(n) == _pages(out)[2].name)
    page.goto(_pages(out)[2].as_uri())
    for word, j in (("next", i + 1), ("previous", i - 1)):
        nav = page.locator(".jp-RenderedMarkdown").first            # the bar: syllabus, previous, next
        assert word in nav.inner_text()
        nav.locator(f'a[href="{course_site._page(order[j])}"]').click()
        page.wait_for_load_state()
        assert page.url.endswith("/" + course_site._page(order[j])), (word, page.url)
        assert page.title() == course.title(course.read_lesson(course.NOTEBOOKS / order[j]))
        page.go_back()
    page.locator("a", has_text="Course syllabus").first.click()
    assert page.url.endswith("/index.html")
    assert page.remote == []


@pytest.fixture(scope="module")
def decks(tmp_path_factory):
    """Every lesson's deck, reveal.js as ``course slides`` finds it by default (a local copy, else npm's registry
    once)."""
    out = tmp_path_factory.mktemp("slides")
    notes = []
    try:
        slides.slides(out, notes=notes)
    except ValueError as e:                  # no npm and no local reveal.js: say so, loudly
        warnings.warn(f"SLIDES TEST SKIPPED: {e}")
        pytest.skip(f"SLIDES TEST SKIPPED: {e}")
    return out, notes


def _open_deck(page, path):
    """Open a deck and wait until MathJax has typeset it and its content is fitted to the slides' width."""
    page.goto(Path(path).as_uri())
    page.wait_for_function("document.documentElement.dataset.fitted === 'yes'")


def _slide_report(page):
    return page.evaluate("""() => {
        const s = Reveal.getCurrentSlide();
        const wide = [...s.querySelectorAll('.MathJax_Display')].filter(
            e => e.scrollWidth > e.clientWidth + 2 && getComputedStyle(e).overflowX === 'visible').length;
        return {h: s.scrollHeight, H: Reveal.getConfig().height, clipped: wide,
                scrolls: getComputedStyle(s).overflowY === 'scroll'};
    }""")


def test_slides_run_offline_with_navigation_math_and_no_dead_link(decks, page):
    out, notes = decks
    assert any(n.startswith("reveal.js from") and "offline" in n for n in notes), notes
    order = course.lessons()
    for name in (order[0], order[3]):
        deck = out / (name[:-len(".ipynb")] + ".slides.html")
        _open_deck(page, deck)
        total = page.evaluate("Reveal.getTotalSlides()")
        assert total > 10, deck.name
        r = _math_report(page)
        assert r["typeset"] > 0 and r["errors"] == 0, (deck.name, r)
        page.keyboard.press("ArrowRight")
        assert page.evaluate("Reveal.getIndices().h") == 1, "the arrow key moves to the next slide"
        page.evaluate("Reveal.slide(0, 0)")
        fit, overflow = 0, []
        for _ in range(total):                                       # every slide and sub-slide in turn
            page.wait_for_timeout(50)
            rep = _slide_report(page)
            assert rep["clipped"] == 0, (deck.name, page.evaluate("Reveal.getIndices()"), "a clipped equation")
            if rep["h"] <= rep["H"] * 1.05:
                fit += 1
            else:
                overflow.append(page.evaluate("Reveal.getIndices()"))
                assert rep["scrolls"], (deck.name, overflow[-1], "a tall slide that does not scroll")
            page.evaluate("Reveal.next()")
        # one screen per slide, but for a few slides holding one cell taller than a screen (they scroll)
        assert fit >= 0.75 * total, (deck.name, f"{fit} of {total} slides fit a screen; too tall: {overflow}")
        links = page.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))")
        dead = [h for h in links if not h.startswith(("http:", "https:", "#", "mailto:"))
                and not (deck.parent / h.split("#")[0]).exists()]
        assert dead == [], (deck.name, dead)
    assert page.remote == [], f"the slides asked the network for {page.remote}"


def _too_wide(page):
    """Every slide (a section without sub-slides) of the open deck, and for each the elements wider than their box:
    the section itself, a code block, an output, a display equation (MathJax's own inner spans and its hidden
    assistive copy excluded), a table... Every slide is laid out at once (reveal.js's viewDistance, as when the
    deck fitted them), so one call measures the deck."""
    return page.evaluate("""() => {
        Reveal.configure({viewDistance: 1000, mobileViewDistance: 1000});
        const slides = [...document.querySelectorAll('.reveal .slides section')]
            .filter(s => !s.querySelector('section'));
        const wide = [];
        for (const s of slides) {
            const over = [...s.querySelectorAll('*')].filter(e => !e.closest('.MathJax, .MJX_Assistive_MathML')
                && e.clientWidth > 0 && getComputedStyle(e).display !== 'inline' && e.scrollWidth > e.clientWidth + 1);
            const bad = over.filter(e => !over.some(x => x !== e && e.contains(x)))    // the innermost: the culprits
                .map(e => `${e.tagName.toLowerCase()}.${[...e.classList].join('.')} ${e.scrollWidth} px in ` +
                          `${e.clientWidth}: ` + Array.from((e.textContent || '').replace(/\\s+/g, ' ').trim())
                          .slice(0, 40).join(''));
            if (s.scrollWidth > s.clientWidth + 1) bad.push(`the slide: ${s.scrollWidth} px in ${s.clientWidth}`);
            if (bad.length) {
                const i = Reveal.getIndices(s);
                wide.push(`#/${i.h}/${i.v || 0}: ${bad.slice(0, 3).join('; ')}`);
            }
        }
        return {slides: slides.length, wide: wide};
    }""")


def test_no_slide_of_any_deck_is_wider_than_its_box(decks, page):
    """Nothing on any slide of any deck overflows sideways: code lines, outputs, equations and tables fit the
    slide's width (the deck shrinks them to fit, and wraps code that would get too small), so no slide scrolls
    horizontally and nothing is cut off at its right edge. A few decks load at once in tabs (each typesets its own
    formulas, in its own process)."""
    out, _ = decks
    paths = sorted(out.glob("*.slides.html"))
    assert len(paths) == len(course.lessons())
    tabs = [page] + [page.context.new_page() for _ in range(TABS - 1)]
    for tab in tabs:
        tab.set_default_timeout(TIMEOUT_MS)
    wide = {}
    for first in range(0, len(paths), TABS):
        batch = list(zip(tabs, paths[first:first + TABS]))
        for tab, deck in batch:
            tab.goto(deck.as_uri())
        for tab, deck in batch:
            tab.wait_for_function("document.documentElement.dataset.fitted === 'yes'")
            r = _too_wide(tab)
            assert r["slides"] > 10, (deck.name, r)
            if r["wide"]:
                wide[deck.name] = r["wide"]
    assert wide == {}, "content wider than its slide:\n" + "\n".join(
        f"{name} {w}" for name, ws in wide.items() for w in ws)
    assert page.remote == [], f"the slides asked the network for {page.remote}"
