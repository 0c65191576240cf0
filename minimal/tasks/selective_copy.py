"""The selective copying task of Gu & Dao (2024, Mamba, Sec. 3.1 and App. E.1), as Feng et al. ("Were RNNs All We
Needed?", Sec. 4.1 Table 1, Sec. 4.2 Table 2, App. C.3) use it: "a vocabulary of 16 and sequences of length 4096.
Each sequence includes 16 randomly placed data tokens. The remainder of the tokens are noise."

The vocabulary of 16 holds every token, noise and marker included, as in the generator of the S4 / Mamba code
(``copying.py``, ``torch_copying_data(L, M, A, variable=True)``, A = 16):

    0            noise (the blank the data tokens sit among)
    1 .. 14      data tokens (A - 2 = 14 values), drawn uniformly and independently
    15           marker: "output the next data token now"

One sequence of T tokens is a region of T - M tokens holding the M data tokens d_1 .. d_M at M distinct random
positions (sorted, so their order is kept) among noise, followed by M markers:

    x = [0 0 d_1 0 d_2 0 0 0 d_3 ... d_M 0 0 | 15 15 ... 15]         T - M tokens | M markers
    y = [d_1, d_2, ..., d_M]                                          at the M marker (output) positions

The model reads x causally and, at the i-th marker, must output d_i. The positions are random, so a model cannot
count its way to the data (that is the plain Copying task of Arjovsky et al. 2016, fixed spacing): it has to
decide from each token's content whether to keep it (Sec. 4.2: "content-aware reasoning, memorizing relevant and
filtering out irrelevant tokens").

Length: the S4 code builds L noise + M data + M markers = L + 2M tokens; "sequences of length 4096" may be T or L.
Here ``T`` is the whole input length, markers included.

Glossary: B batch, T sequence length (markers included), M = ``n_data`` data tokens, V = ``vocab`` = 16.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..validate import check_positive_int

__all__ = ["Batch", "sample", "most_frequent_accuracy", "VOCAB", "N_DATA", "NOISE", "marker", "PAPER_T"]

VOCAB = 16      # App. C.3: "a vocabulary of 16" (noise and marker included)
N_DATA = 16     # App. C.3: "16 randomly placed data tokens"
PAPER_T = 4096  # App. C.3: "sequences of length 4096"
NOISE = 0


def marker(vocab=VOCAB):
    """The marker token id: the last one, V - 1."""
    return vocab - 1


class Batch(NamedTuple):
    """A batch of selective-copying sequences."""
    inputs: np.ndarray     # (B, T) int64 token ids
    targets: np.ndarray    # (B, M) int64 the data tokens in order, the answers at the M output positions
    positions: np.ndarray  # (B, M) int64 where each data token sits in ``inputs`` (sorted, < T - M)
    mask: np.ndarray       # (B, T) bool, True at the output positions (the last M)


def sample(rng, B, T, n_data=N_DATA, vocab=VOCAB):
    """Draw ``B`` sequences of length ``T`` (module docstring).

    Args:
        rng: ``numpy.random.Generator`` (the only source of randomness: same state, same batch);
        B: batch size; T: sequence length, markers included (T >= 2 n_data); n_data: M; vocab: V >= 3.
    Returns:
        ``Batch``; ``inputs[:, -n_data:]`` are markers and ``targets == inputs[b, positions[b]]`` per row.
    """
    B = check_positive_int("B", B)
    T = check_positive_int("T", T)
    M = check_positive_int("n_data", n_data)
    V = check_positive_int("vocab", vocab)
    if V < 3:
        raise ValueError(f"vocab must be >= 3 (noise, marker and at least one data token), got {V}")
    if T < 2 * M:
        raise ValueError(f"T must be >= 2 n_data = {2 * M} (the data tokens and their markers), got {T}")
    span = T - M
    # M distinct positions per row, uniformly among the span: the first M of a random permutation, then sorted
    positions = np.sort(np.argsort(rng.random((B, span)), axis=1)[:, :M], axis=1)
    targets = rng.integers(1, V - 1, size=(B, M))   # data tokens 1 .. V - 2
    inputs = np.full((B, T), NOISE, dtype=np.int64)
    np.put_along_axis(inputs, positions, targets, axis=1)
    inputs[:, span:] = marker(V)
    mask = np.zeros((B, T), dtype=bool)
    mask[:, span:] = True
    return Batch(inputs, targets.astype(np.int64), positions.astype(np.int64), mask)


def most_frequent_accuracy(batch):
    """Accuracy (%) of a model that knows which data tokens a sequence holds but not their order: at every marker it
    answers the sequence's most frequent data token, scoring (count of that token) / M per sequence.

    Every gate of a one-layer minimal RNN is a function of the current token (Feng et al. Sec. 4.1), yet its state
    can still count tokens, so this bag-of-tokens answer is within one layer's reach; a model above it uses order.

    Args:
        batch: a ``Batch`` (its ``targets``, (B, M)).
    Returns:
        float, 100 x the mean over sequences of max_v #{i: d_i = v} / M.
    """
    targets = np.asarray(batch.targets)
    if targets.ndim != 2 or targets.shape[1] < 1:
        raise ValueError(f"batch.targets must be (B, M) with M >= 1, got shape {targets.shape}")
    V = int(targets.max()) + 1
    counts = np.zeros((targets.shape[0], V), dtype=np.int64)
    np.add.at(counts, (np.arange(targets.shape[0])[:, None], targets), 1)
    return 100.0 * float(counts.max(1).mean()) / targets.shape[1]
