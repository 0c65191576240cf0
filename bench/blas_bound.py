"""How much of each bench-train row's gap to the fastest framework is the matrix library: from the saved output of
``python -m minimal bench train`` (the step table, with its frameworks) and of ``python -m minimal bench train
--profile`` (each step's matrix products timed with NumPy's sgemm and with each framework's own product, run in the
same session), per row:

    ours, theirs        the step (min over interleaved rounds), ours and the fastest framework version's
    products            the step's matrix products at NumPy's sgemm rate, and at that framework's own rate
    rest                step − products: everything but the products (elementwise passes, scans, Python), both
    ratio               ours / theirs; "products at theirs": (ours − our products + their products) / theirs,
                        the ratio had our products run at the framework's rate; "rest": our rest / their rest

The products are the shapes ``minimal.bench.profile.gemm_shapes`` lists; a framework's step may run some of them
otherwise (torch's sdpa computes attention's score and value products inside its own kernel), so "rest" is a
split by the products' count, not a measurement of the frameworks' other kernels.

Usage: python bench/blas_bound.py TABLE PROFILE   (the two saved outputs)
"""
import re
import sys

from minimal.bench.train import models


def steps(table):
    """{row: (our step ms, fastest framework version, its step ms)} from ``bench train``'s table."""
    names = [m.name for m in models(False)]
    ours, theirs = {}, {}
    for line in table.splitlines():
        for name in names:
            if line.startswith(name + " ") and re.match(r"\s+[\d.]+", line[len(name):]):
                ours[name] = float(line[len(name):].split()[0])
            if line.startswith(f"  {name}: "):   # "v1 X ms, v2 Y ms, ...": a version's name may hold a comma
                entries = re.split(r", (?=torch: |jax: )", line[len(name) + 4:])
                versions = [re.fullmatch(r"((?:torch|jax): .+) ([\d.]+) ms", e.strip()) for e in entries]
                if None in versions:
                    raise ValueError(f"{name}: cannot read the versions of {line!r}")
                theirs[name] = min(((v.group(1), float(v.group(2))) for v in versions), key=lambda x: x[1])
    return {name: (ours[name], *theirs[name]) for name in ours if name in theirs}


def products(profile):
    """{row: {"numpy": ms, framework: ms}} of the step's matrix products from ``bench train --profile``."""
    out, row = {}, None
    for line in profile.splitlines():
        head = re.match(r"(\S.*?): [\d.]+ ms a step under cProfile.*sgemm alone would take ([\d.]+) ms", line)
        if head:
            row = head.group(1)
            out[row] = {"numpy": float(head.group(2))}
        other = re.match(r"\s+the same shapes with (\w+)'s matrix product: [\d.]+ GFLOP/s, ([\d.]+) ms", line)
        if other and row is not None:
            out[row][other.group(1)] = float(other.group(2))
    return out


def table(table_text, profile_text):
    s, p = steps(table_text), products(profile_text)
    lines = [f"{'row':<32}{'ours':>7}{'theirs':>8}  {'fastest':<34}{'products':>9}{'theirs':>8}{'rest':>7}"
             f"{'theirs':>8}{'ratio':>7}{'at their':>9}{'rest':>7}",
             f"{'':<32}{'ms':>7}{'ms':>8}  {'':<34}{'ms':>9}{'ms':>8}{'ms':>7}{'ms':>8}{'':>7}{'products':>9}"
             f"{'ratio':>7}"]
    for name, (ours, version, theirs) in s.items():
        framework = version.split(":")[0]
        mine, their_products = p[name]["numpy"], p[name][framework]
        rest, their_rest = ours - mine, theirs - their_products
        lines.append(f"{name:<32}{ours:7.2f}{theirs:8.2f}  {version:<34}{mine:9.1f}{their_products:8.1f}"
                     f"{rest:7.1f}{their_rest:8.1f}{ours / theirs:7.2f}{(rest + their_products) / theirs:9.2f}"
                     f"{rest / their_rest:7.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python bench/blas_bound.py TABLE PROFILE (the saved outputs of bench train and of "
                 "bench train --profile)")
    with open(sys.argv[1]) as a, open(sys.argv[2]) as b:
        print(table(a.read(), b.read()))
