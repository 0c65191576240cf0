"""How much of each bench-train row's gap to the fastest framework is the matrix library: from the saved output of
``python -m minimal bench train`` (the step table, with its frameworks) and of ``python -m minimal bench train
--profile`` (each step's matrix products timed with NumPy's sgemm and with each framework's own product, run in the
same session), per row:

    ours, theirs        the step (min over interleaved rounds), ours and the fastest framework version's
    products            the step's matrix products at NumPy's sgemm rate, and at that framework's own rate
    rest                step − products: everything but the products (elementwise passes, scans, Python), both
    ratio               ours / theirs; "products at theirs": (ours − our products + their products) / theirs,
                        the ratio had our products run at the framework's rate; "rest": our rest / their rest

and, where the profile has the time inside the compiled kernels (``minimal.bench.profile.KERNELS``), a second
table of what a target of 0.8 (our step at most 0.8 of the fastest framework's) leaves (``bounds``):

    0.8 theirs          the step the target allows
    floor               our products at NumPy's sgemm rate + our compiled kernels (the elementwise passes and scans
                        in Numba, timed inside the profiled step): what our step costs before any NumPy pass or
                        Python between them; floor / theirs above 0.8 means that, in that pair of runs, the row
                        could not reach 0.8 without faster products or faster kernels, whatever else is removed
                        (the floor comes from the profile's run and theirs from the table's, so it moves with
                        the machine between the two)
    rest                ours − floor: the NumPy passes (allocation, copies, bias sums, dropout's draws), the checks
                        and the Python of the step

The products are the shapes ``minimal.bench.profile.gemm_shapes`` lists; a framework's step may run some of them
otherwise (torch's sdpa computes attention's score and value products inside its own kernel), so "rest" is a
split by the products' count, not a measurement of the frameworks' other kernels.

A table saved with ``--burst`` holds two tables, each burst's first step and the warm steps after it; the last one
read wins, the warm steps, which is how the profile times our step (alone, call after call). To split the first
steps, pass their table alone.

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
    """{row: {"numpy": ms, framework: ms}} of the step's matrix products from ``bench train --profile``, and
    "kernels": ms inside the compiled kernels where the row's profile has that line."""
    out, row = {}, None
    for line in profile.splitlines():
        head = re.match(r"(\S.*?): [\d.]+ ms a step under cProfile.*sgemm alone would take ([\d.]+) ms", line)
        if head:
            row = head.group(1)
            out[row] = {"numpy": float(head.group(2))}
        other = re.match(r"\s+the same shapes with (\w+)'s matrix product: [\d.]+ GFLOP/s, ([\d.]+) ms", line)
        if other and row is not None:
            out[row][other.group(1)] = float(other.group(2))
        kernels = re.match(r"\s+of which compiled kernels \(Numba\), across the parts above: ([\d.]+) ms", line)
        if kernels and row is not None:
            out[row]["kernels"] = float(kernels.group(1))
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


def bounds(table_text, profile_text, target=0.8):
    """The floor of each row against ``target`` times the fastest framework's step (module docstring)."""
    s, p = steps(table_text), products(profile_text)
    lines = [f"{'row':<32}{'ours':>7}{'theirs':>8}{f'{target:g} theirs':>11}{'products':>9}{'kernels':>8}{'floor':>7}"
             f"{'floor /':>8}{'rest':>7}",
             f"{'':<32}{'ms':>7}{'ms':>8}{'ms':>11}{'ms':>9}{'ms':>8}{'ms':>7}{'theirs':>8}{'ms':>7}"]
    for name, (ours, _, theirs) in s.items():
        if "kernels" not in p[name]:
            continue
        mine, kernels = p[name]["numpy"], p[name]["kernels"]
        floor = mine + kernels
        lines.append(f"{name:<32}{ours:7.2f}{theirs:8.2f}{target * theirs:11.2f}{mine:9.1f}{kernels:8.1f}"
                     f"{floor:7.1f}{floor / theirs:8.2f}{ours - floor:7.1f}")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python bench/blas_bound.py TABLE PROFILE (the saved outputs of bench train and of "
                 "bench train --profile)")
    with open(sys.argv[1]) as a, open(sys.argv[2]) as b:
        table_text, profile_text = a.read(), b.read()
    print(table(table_text, profile_text))
    if any("kernels" in row for row in products(profile_text).values()):
        print()
        print(bounds(table_text, profile_text))
