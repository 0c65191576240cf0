"""`python -m minimal course slides OUT`: one reveal.js deck per lesson, reveal.js found or fetched, and the script
that fits every slide's content to its width.

``slides(out)`` writes one reveal.js deck per lesson
(nbconvert's ``SlidesExporter``, a slide per section, split into sub-slides of about a screen, every slide's
content fitted to its width: wide equations scaled down, long code lines shrunk a little and then wrapped, no
prompts; links to other lessons leading to their decks and no other relative link), with reveal.js copied next to
the decks from a local folder (``local_reveal``) or fetched once from the npm registry (``fetch_reveal``): offline by
default, a CDN only when asked. The exporter and MathJax come as for the site (``minimal.course.site``).
"""
from __future__ import annotations

import copy
import re
import shutil
from pathlib import Path

from ..validate import InputError
from .build import NOTEBOOKS, heading, is_solution, lessons, notebooks_dir, read_lesson, title
from .site import MATHJAX_FONTS, NO_LOADERS, make_exporter, mathjax_for

__all__ = ["local_reveal", "slide_notebook", "slides"]


# The slides. nbconvert's reveal template loads reveal.js through require.js and jQuery from CDNs: plain scripts
# here. Once reveal.js is ready, MathJax typesets the deck (skipStartupTypeset), reveal.js then lays out every slide
# (viewDistance), not only those near the current one, MathJax renders the formulas again, now measured in place,
# fitWidth sizes every slide's content to the slide's width once, and reveal.js goes back to laying out the slides
# near the current one only (cheaper to move between; what was fitted stays so). A display equation wider than its
# box is scaled down to fit; code and text output shrink to at most CODE_MIN of their font size, and lines still too
# long wrap; a table shrinks to TABLE_MIN, and its cells wrap beyond that. Nothing scrolls sideways. The page sets
# data-fitted="yes" on <html> when it is done (the browser test waits for it). Input and output prompts ("In [3]:")
# are left out of the slides: they took an eighth of the width.
_SLIDES = """{%- extends 'reveal/index.html.j2' -%}
{%- block html_head_js_mathjax -%}
<script type="text/x-mathjax-config">
""" + MATHJAX_FONTS + """
MathJax.Hub.Config({skipStartupTypeset: true, messageStyle: "none", displayAlign: "center",
  TeX: {equationNumbers: {autoNumber: "AMS", useLabelIds: true}},
  tex2jax: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]], displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]],
            processEscapes: true, processEnvironments: true}});
</script>
<script src="{{ resources.mathjax_url }}"></script>
{%- endblock html_head_js_mathjax -%}""" + NO_LOADERS + """
{% block footer_js %}
<style>
.reveal pre { box-sizing: border-box; max-width: 100%; }
.reveal pre.fit-wrap { white-space: pre-wrap; overflow-wrap: anywhere; }
.reveal table.fit-wrap td, .reveal table.fit-wrap th { white-space: normal; overflow-wrap: anywhere; }
/* before fitWidth has run (or without JavaScript's measurements) a wide equation scrolls rather than being clipped */
.reveal .MathJax_Display, .reveal .MathJax_SVG_Display, .reveal .MathJax_CHTML { max-width: 100%; }
.reveal .MathJax_Display { overflow-x: auto; overflow-y: hidden; }
</style>
<script src="{{ resources.reveal.url_prefix }}/dist/reveal.js"></script>
<script src="{{ resources.reveal.url_prefix }}/plugin/notes/notes.js"></script>
<script>
Reveal.initialize({controls: true, progress: true, history: true, slideNumber: "{{ reveal_number }}",
                   transition: "{{ reveal_transition }}", width: {{ reveal_width }}, height: {{ reveal_height }},
                   plugins: [RevealNotes]});
var CODE_MIN = 0.8, TABLE_MIN = 0.7;
// Shrink every display equation (no limit), code block and text output (to CODE_MIN of its font size) and table (to
// TABLE_MIN) whose content is wider than its box; code still too wide then wraps (class fit-wrap), a table's cells
// too. Runs once, over the whole deck: all reads, then all writes, so that the browser lays the deck out a few
// times, not several times per element.
function fitWidth(root) {
  var items = [];
  root.querySelectorAll(".MathJax_Display").forEach(function (e) { items.push({e: e, least: 0}); });
  root.querySelectorAll("pre").forEach(function (e) { items.push({e: e, least: CODE_MIN}); });
  root.querySelectorAll(".jp-RenderedHTMLCommon table").forEach(function (e) {
    items.push({e: e, least: TABLE_MIN, table: true});
  });
  var measure = function (it) { it.need = it.table ? it.e.offsetWidth : it.e.scrollWidth - it.pad; };
  items.forEach(function (it) {
    var box = it.table ? it.e.parentElement : it.e, cs = getComputedStyle(box);
    it.room = box.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    it.pad = it.table ? 0 : box.clientWidth - it.room;
    it.first = it.size = parseFloat(getComputedStyle(it.e).fontSize);
    measure(it);
  });
  var wide = items;
  for (var pass = 0; pass < 3; pass++) {
    wide = wide.filter(function (it) { return it.need > it.room + 0.5; });
    var shrink = wide.filter(function (it) { return it.size > it.least * it.first; });
    if (!shrink.length) { break; }
    shrink.forEach(function (it) {
      it.size = Math.max(it.least * it.first, it.size * it.room / it.need * 0.99);
      it.e.style.fontSize = it.size + "px";
    });
    shrink.forEach(measure);
  }
  wide.forEach(function (it) { if (it.need > it.room + 0.5) { it.e.classList.add("fit-wrap"); } });
}
// a section taller than the screen scrolls (nbconvert does this with jQuery): the present ones (the default), or
// every slide, before and after fitWidth, which then measures each slide's width less its scrollbar
function scrollTall(sections) {
  var h = document.querySelector(".reveal").offsetHeight * 0.95;
  (sections || document.querySelectorAll("section.present, section.present section")).forEach(function (s) {
    if (s.offsetHeight > h) { s.style.height = "calc(95vh)"; s.style.overflowY = "scroll"; s.style.marginTop = "20px"; }
  });
}
Reveal.on("ready", function () {
  var config = Reveal.getConfig(), near = {viewDistance: config.viewDistance,
                                            mobileViewDistance: config.mobileViewDistance};
  var everySlide = function () { Reveal.configure({viewDistance: 1000, mobileViewDistance: 1000}); };
  var fit = function () {
    var slides = [].filter.call(document.querySelectorAll(".reveal .slides section"),
                                function (s) { return !s.querySelector("section"); });
    scrollTall(slides);
    fitWidth(document.querySelector(".reveal .slides"));
    scrollTall(slides);
    scrollTall();
    Reveal.configure(near);     // back to laying out the slides near the current one: what is fitted stays fitted
    document.documentElement.dataset.fitted = "yes";
  };
  if (!(window.MathJax && MathJax.Hub)) { everySlide(); fit(); return; }
  // typeset while reveal.js lays out the slides near the current one only (MathJax measures nothing in a hidden
  // slide: fast), then lay out every slide, render the formulas again in place, measured, and fit the slides
  MathJax.Hub.Queue(["Typeset", MathJax.Hub], everySlide, ["Rerender", MathJax.Hub], fit);
});
Reveal.on("slidechanged", function () { scrollTall(); });
</script>
{% endblock footer_js %}
"""
REVEAL_CDN = "https://unpkg.com/reveal.js@4.6.1"
REVEAL_VERSION = "4.6.1"
REVEAL_CACHE = Path.home() / ".cache" / "minimal" / f"reveal.js-{REVEAL_VERSION}"


def local_reveal(reveal=None):
    """A local reveal.js 4 (a folder with ``dist/reveal.js``): ``reveal``, else ``$MINIMAL_REVEAL_JS``, else
    ``node_modules/reveal.js`` of the repository, else the copy ``fetch_reveal`` keeps in ``REVEAL_CACHE``; None if
    there is none."""
    import os
    for cand in (reveal, os.environ.get("MINIMAL_REVEAL_JS"), NOTEBOOKS.parent / "node_modules" / "reveal.js",
                 REVEAL_CACHE):
        if cand and (Path(cand) / "dist" / "reveal.js").is_file():
            return Path(cand)
    if reveal is not None:
        raise InputError(f"reveal must be a reveal.js folder holding dist/reveal.js, got {str(reveal)!r}")
    return None


def fetch_reveal(cache=None):
    """reveal.js ``REVEAL_VERSION`` from the npm registry (``npm pack``, npm's own client), unpacked into ``cache``
    (default ``REVEAL_CACHE``) once; returns the folder. An InputError says what to do where npm or the registry
    cannot be reached."""
    import shutil as sh
    import subprocess
    import tarfile
    import tempfile

    cache = Path(cache) if cache is not None else REVEAL_CACHE
    if (cache / "dist" / "reveal.js").is_file():
        return cache
    npm = sh.which("npm")
    if npm is None:
        raise InputError("slides need reveal.js: no npm to fetch it with (install npm, or give --reveal DIR, a "
                         "reveal.js 4 folder; --reveal-cdn loads it from a CDN, online only)")
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run([npm, "pack", "-q", f"reveal.js@{REVEAL_VERSION}"], cwd=tmp, capture_output=True,
                             text=True, timeout=300)
        packed = list(Path(tmp).glob("reveal.js-*.tgz"))
        if run.returncode != 0 or not packed:
            raise InputError(f"npm pack reveal.js@{REVEAL_VERSION} failed ({run.stderr.strip()[-300:]}); give "
                             f"--reveal DIR, a reveal.js 4 folder, or --reveal-cdn (online only)")
        part = Path(tmp) / "unpacked"
        with tarfile.open(packed[0]) as tar:
            tar.extractall(part, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(part)
        cache.parent.mkdir(parents=True, exist_ok=True)
        staged = cache.with_name(cache.name + ".part")
        sh.rmtree(staged, ignore_errors=True)
        sh.copytree(part / "package", staged)
        staged.rename(cache)
    return cache


SCREEN_LINES = 20    # what fits one slide (reveal's 700 px high here): ~20 lines of text or code


def _cell_lines(cell):
    """A rough height of a cell on a slide, in lines: wrapped text and code, text outputs, ~18 lines a figure."""
    wrap = lambda text: sum(1 + len(line) // 100 for line in text.splitlines())   # noqa: E731
    n = wrap(cell.source) + (1 if cell.cell_type == "code" else 0)
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if any(k.startswith("image/") for k in data):
            n += 18
        elif out.get("output_type") == "stream":
            n += wrap(out.get("text", ""))
        elif "text/plain" in data:
            n += wrap(data["text/plain"])
    return n


def _slide_links(text, decks):
    """Links to notebooks -> links to their decks (``decks``: the lessons whose deck is written beside this one);
    other relative links (the syllabus, a lesson without a deck, a file) -> their text: a deck has no dead link."""
    def sub(m):
        label, target = m.group(1), m.group(2)
        if "://" in target or target.startswith(("#", "mailto:")):
            return m.group(0)
        path, sep, anchor = target.partition("#")
        if path in decks:
            return f"[{label}]({path[:-len('.ipynb')]}.slides.html{sep}{anchor})"
        return label
    return re.sub(r"(?<!!)\[([^\]]*)\]\(([^)\s]+?)\)", sub, text)


def _paragraphs(cell):
    """A markdown cell taller than a screen, cut at its blank lines (never inside a ``$$`` block or a code fence)
    into cells that a sub-slide each can hold; other cells unchanged."""
    if cell.cell_type != "markdown" or _cell_lines(cell) <= SCREEN_LINES:
        return [cell]
    parts, cur = [], []
    for block in cell.source.split("\n\n"):
        cur.append(block)
        text = "\n\n".join(cur)
        if text.count("$$") % 2 == 0 and text.count("```") % 2 == 0:
            parts.append(text)
            cur = []
    if cur:
        parts.append("\n\n".join(cur))
    out, acc = [], []
    for part in parts:                       # regroup into pieces of at most a screen
        if acc and sum(1 + len(line) // 100 for line in "\n\n".join(acc + [part]).splitlines()) > SCREEN_LINES:
            out.append("\n\n".join(acc))
            acc = []
        acc.append(part)
    out.append("\n\n".join(acc))
    cells = []
    for k, text in enumerate(out):
        c = copy.deepcopy(cell)
        c.source = text
        if k and "id" in c:
            c["id"] = f"{cell['id']}-{k}"[:64]
        cells.append(c)
    return cells


def slide_notebook(nb, decks=()):
    """A copy of ``nb`` with reveal.js slide metadata: a new slide at each ``##`` section, a sub-slide (below it)
    at each ``###`` and wherever the cells so far would overflow one screen (``SCREEN_LINES``); solutions are left
    out of the slides; links to lessons lead to their decks (``decks``) and other relative links become text."""
    nb = copy.deepcopy(nb)
    nb.cells = [piece for cell in nb.cells for piece in _paragraphs(cell)]
    used = 0
    for cell in nb.cells:
        level, _ = heading(cell)
        kind = "skip" if is_solution(cell) else {1: "slide", 2: "slide", 3: "subslide"}.get(level, "-")
        if kind != "skip":
            lines = _cell_lines(cell)
            if kind == "-" and used and used + lines > SCREEN_LINES:
                kind = "subslide"
            used = lines if kind != "-" else used + lines
        cell.metadata["slideshow"] = {"slide_type": kind}
        if cell.cell_type == "markdown":
            cell.source = _slide_links(cell.source, set(decks))
    return nb


def slides(out_dir, notebooks=None, mathjax_url=None, reveal=None, notes=None, names=None, cdn=False):
    """Write ``NAME.slides.html`` for every lesson into ``out_dir`` (nbconvert's reveal.js exporter, a slide per
    section, sub-slides that fit a screen, content that fits a slide's width: ``_SLIDES``; ``names``: only these
    lessons); returns the paths. reveal.js is copied
    next to the slides from a local folder (``local_reveal``), else fetched once from the npm registry
    (``fetch_reveal``); ``cdn`` loads it from its CDN instead (online only). MathJax: ``local_mathjax``. ``notes``
    receives a line saying where each came from."""
    src = notebooks_dir(notebooks)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    notes = [] if notes is None else notes
    order = lessons(src)
    unknown = sorted(set(names or ()) - set(order))
    if unknown:
        raise InputError(f"names must be lessons of the syllabus, got {unknown}")
    if cdn:
        prefix = REVEAL_CDN
        notes.append("reveal.js from its CDN (--reveal-cdn): the slides need the network")
    else:
        folder = local_reveal(reveal) or fetch_reveal()
        prefix = "reveal.js"
        for part in ("dist", "plugin"):
            shutil.copytree(folder / part, out / prefix / part, dirs_exist_ok=True)
        notes.append(f"reveal.js from {folder} (works offline)")
    exporter = make_exporter(mathjax_for(out, mathjax_url, notes), template=_SLIDES, kind="SlidesExporter",
                         reveal_url_prefix=prefix, reveal_theme="white",   # "simple" imports Google fonts
                         exclude_input_prompt=True, exclude_output_prompt=True)   # "In [3]:" takes 1/8 of the width
    chosen = order if names is None else [n for n in order if n in names]
    written = []
    for name in chosen:
        nb = slide_notebook(read_lesson(src / name), decks=chosen)
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title(nb)}})
        path = out / (name[:-len(".ipynb")] + ".slides.html")
        path.write_text(body, encoding="utf-8")
        written.append(path)
    return written
