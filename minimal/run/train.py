"""The shared training loop: AdamW steps with checkpoints that resume bit for bit, and its one set-up.

    setup = TrainSetup(lr=1e-3, steps=20_000, warmup=100, final_lr=1e-6, weight_decay=0.1, clip=1.0, seed=0)
    params = init(setup.init_rng(), ...)
    result = train(loss_and_grads, params, setup=setup, checkpoint_path="runs/teacher.npz")

``TrainSetup`` is where every experiment's optimiser settings become a run: the warm-up + cosine schedule
(``minimal.optim.cosine_schedule``, ``lr`` -> ``final_lr`` over ``steps``), the weight decay (constant, or none after
the first ``decay_until`` fraction of the steps), the clipping, and the two random streams drawn from ``seed``: the
initialisation's (``init_rng``: seed) and the training batches' (``batch_rng``: seed + 1). An experiment builds one
from its own Config / Job fields (their names and the keys of the committed job files stay as they are) and passes
it to ``train``; an explicit ``lr_schedule`` (a plateau rule's) or ``rng`` (a stream continued from the
initialisation) given beside it takes the place of the setup's.

``loss_and_grads(params, step, rng) -> (loss, grads)`` is the model: it draws its mini-batch from ``rng``
(a ``numpy.random.Generator``) and returns the scalar loss and a dict of gradients with params' keys.
Each step then clips (optional, ``minimal.optim.clip_by_global_norm``) and applies ``minimal.optim.adamw_step``.

A checkpoint (``minimal.run.checkpoint``: its format and checks) is written every ``checkpoint_every`` steps,
after the last step, and when the run is interrupted: Ctrl-C (KeyboardInterrupt) or SIGTERM (what ``timeout``, a
cluster scheduler or a CI cancel send; ``Terminated``, a KeyboardInterrupt), both re-raised after saving, also when
one lands while a compiled (Numba) function returns, which Python reports as a SystemError caused by it
(``minimal.run.interrupt``). ``train`` installs its SIGTERM handler only in the main thread, only while it runs,
and puts the previous one back. Because the rng state is saved with the parameters, a resumed run ends with
bitwise the same parameters as an uninterrupted one (``tests/test_reliability.py`` kills runs with SIGKILL at
random moments and checks it). A checkpoint records the ``config`` of the run that wrote it: resuming it with
another config is refused (``ConfigMismatchError``) instead of continuing the old run under the new run's name.

A NaN or infinite loss stops the run with ``NonFiniteLossError`` before that step's update; finite
gradients too large for the dtype (AdamW's v holds g², inf in float32 for |g| > 1.8e19) stop it with
``NonFiniteUpdateError`` (a NonFiniteLossError) before that update is kept; a NaN or inf that a model's own
checks find inside ``loss_and_grads`` after the parameters were updated (huge parameters overflow a layer)
stops it with ``DivergedError`` (a NonFiniteLossError). All name the step, the tail of the loss history and
the advice to lower the learning rate, and leave the last checkpoint as it was, so a resume never starts from
an overflowed state. A run that ends with its loss far above where it started (``LOSS_ROSE_FACTOR`` times)
warns with a ``LossRoseWarning`` saying the same.
"""
from __future__ import annotations

import functools
import json
import math
import os
import sys
import warnings
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional, Union

import numpy as np
from tqdm import tqdm  # plain tqdm: tqdm.auto needs ipywidgets in notebooks, which we do not depend on

from minimal.optim import (AdamWState, check_params, check_scalar, adamw_init, adamw_step, clip_by_global_norm,
                           cosine_schedule)
from minimal.run.checkpoint import Checkpoint, resume_checkpoint, save_checkpoint
from minimal.run.interrupt import NOT_INSTALLED, catch_sigterm, interrupt_behind, restore_sigterm
from minimal.validate import InputError, OverflowInputError, check_positive_int

__all__ = ["train", "TrainSetup", "TrainResult", "NonFiniteLossError", "NonFiniteUpdateError", "DivergedError",
           "LossRoseWarning", "LOSS_ROSE_FACTOR"]

ADVICE = "Lower the learning rate or clip the gradients (clip=...)."
LOSS_ROSE_FACTOR = 10.0   # a final loss this many times the first one is flagged (LossRoseWarning)


def _tail(losses, n=5):
    """'the last losses were [...]' for an error message (empty before the first step)."""
    if not len(losses):
        return ""
    first = len(losses) - min(n, len(losses))
    return (f" Losses of steps {first}..{len(losses) - 1}: "
            f"[{', '.join(f'{float(v):.4g}' for v in losses[first:])}] (step 0: {float(losses[0]):.4g}).")


class NonFiniteLossError(FloatingPointError):
    """The loss at ``step`` was NaN or inf; the run stopped before applying that step's update."""

    def __init__(self, step, loss, checkpoint_step=None, losses=()):
        self.step, self.loss = int(step), float(loss)
        super().__init__(f"loss became {self.loss} at step {self.step}, parameters not updated"
                         f"{_kept(checkpoint_step)}.{_tail(losses)} {ADVICE}")


def _kept(checkpoint_step):
    return "" if checkpoint_step is None else f"; the last checkpoint (step {checkpoint_step}) was left untouched"


class NonFiniteUpdateError(NonFiniteLossError):
    """The loss at ``step`` was finite but the AdamW update was not (moments or params overflowed); the run
    stopped without keeping that update. A NonFiniteLossError, so one ``except`` catches every divergence."""

    def __init__(self, step, loss, detail, checkpoint_step=None, losses=()):
        self.step, self.loss, self.detail = int(step), float(loss), detail
        FloatingPointError.__init__(self, f"the update of step {self.step} (loss {self.loss:.4g}) was not finite, "
                                          f"parameters not updated{_kept(checkpoint_step)}. {detail}"
                                          f"{_tail(losses)}")


class DivergedError(NonFiniteLossError):
    """``loss_and_grads`` found a NaN or inf inside the model at ``step``, after updates had made the parameters
    huge (its own check, e.g. "dy contains NaN or inf", says where); the run stopped at that step."""

    def __init__(self, step, detail, checkpoint_step=None, losses=()):
        self.step, self.loss, self.detail = int(step), float("nan"), detail
        FloatingPointError.__init__(self, f"the run diverged at step {self.step}: the model's forward / backward "
                                          f"met a NaN or inf ({detail}), parameters not updated"
                                          f"{_kept(checkpoint_step)}.{_tail(losses)} {ADVICE}")


class LossRoseWarning(RuntimeWarning):
    """A run finished with its loss ``LOSS_ROSE_FACTOR`` times or more above its first loss: it diverged."""


class TrainResult(NamedTuple):
    """Final ``params`` and ``opt_state``, the ``losses`` of all steps (steps,), and the step it resumed from.

    ``steps_trained`` is the number of steps this call ran: 0 when it resumed from a finished checkpoint, so
    a timing divided by it must say so (NaN) rather than divide by 1.
    """
    params: dict
    opt_state: AdamWState
    losses: np.ndarray
    resumed_from: int

    @property
    def steps_trained(self) -> int:
        return len(self.losses) - self.resumed_from


@dataclass(frozen=True)
class TrainSetup:
    """One run's optimiser settings and seed; ``train(..., setup=...)`` builds the run from them (module docstring).

    Fields: ``lr`` the peak learning rate; ``steps`` the number of AdamW steps (>= 1); ``warmup`` the linear
    warm-up's steps and ``final_lr`` the cosine's floor at ``steps``; ``weight_decay`` AdamW's decoupled decay,
    applied during the first ``decay_until`` fraction of the steps (``round(decay_until * steps)`` steps; >= 1:
    all) and not after; ``clip`` None or the max global gradient norm; ``seed`` (int >= 0) the seed of both streams.
    """
    lr: float
    steps: int
    warmup: int = 0
    final_lr: float = 0.0
    weight_decay: float = 0.0
    decay_until: float = 1.0
    clip: Optional[float] = None
    seed: int = 0

    def __post_init__(self):
        check_scalar("TrainSetup.lr", self.lr, 0.0)
        check_positive_int("TrainSetup.steps", self.steps)
        check_positive_int("TrainSetup.warmup", self.warmup, minimum=0)
        check_scalar("TrainSetup.final_lr", self.final_lr, 0.0)
        check_scalar("TrainSetup.weight_decay", self.weight_decay, 0.0)
        check_scalar("TrainSetup.decay_until", self.decay_until, 0.0)
        if self.clip is not None:
            check_scalar("TrainSetup.clip", self.clip, 0.0, low_open=True)
        check_positive_int("TrainSetup.seed", self.seed, minimum=0)

    def init_rng(self) -> np.random.Generator:
        """The initialisation's stream: ``default_rng(seed)``."""
        return np.random.default_rng(self.seed)

    def batch_rng(self) -> np.random.Generator:
        """The training batches' stream: ``default_rng(seed + 1)``, apart from the initialisation's."""
        return np.random.default_rng(self.seed + 1)

    def lr_schedule(self) -> Callable:
        """``step -> lr``: warm-up over ``warmup`` steps to ``lr``, cosine to ``final_lr`` at ``steps``."""
        return functools.partial(cosine_schedule, total_steps=self.steps, peak_lr=self.lr,
                                 warmup_steps=self.warmup, final_lr=self.final_lr)

    def weight_decay_schedule(self) -> Callable:
        """``step -> wd``: ``weight_decay`` before step ``round(decay_until * steps)``, 0 from there on."""
        wd, end = float(self.weight_decay), int(round(self.decay_until * self.steps))
        return lambda step: wd if step < end else 0.0


def make_rng(rng):
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) and rng >= 0:
        return np.random.default_rng(int(rng))
    raise InputError(f"rng must be a numpy.random.Generator or a seed (int >= 0), got {rng!r}")


def _json_config(config):
    """``config`` as JSON types (tuples become lists), so that it compares equal to the one read back."""
    if config is None:
        return None
    if not isinstance(config, dict):
        raise InputError(f"config must be a dict (e.g. dataclasses.asdict(Config)), got {type(config).__name__}")
    try:
        return json.loads(json.dumps(config, sort_keys=True))
    except (TypeError, ValueError) as e:
        raise InputError(f"config must hold JSON values (numbers, strings, lists, dicts): {e}") from None


def train(loss_and_grads: Callable, params: dict, steps: Optional[int] = None, *,
          setup: Optional[TrainSetup] = None, lr_schedule: Union[Callable, float, None] = None,
          checkpoint_path=None, checkpoint_every=100, resume=True, progress=True, log_every=10, rng=None,
          clip=None, weight_decay=None, decay_mask=None, beta1=0.9, beta2=0.999, eps=1e-8,
          desc="train", config=None) -> TrainResult:
    """Run ``steps`` AdamW steps on ``loss_and_grads``, checkpointing and resuming (module docstring).

    Args:
        loss_and_grads: ``(params, step, rng) -> (loss, grads)``; loss a scalar, grads a dict with params'
            keys, shapes and dtypes. Draw all randomness from ``rng`` so that resuming is exact.
        params: dict name -> float array, the starting point (not modified). Ignored, except for its keys,
            shapes and dtypes, when resuming from a checkpoint.
        steps: total number of steps (int >= 1), counting those done before a resume. With ``setup``: default
            ``setup.steps``; fewer runs the first steps of the setup's schedule.
        setup: a ``TrainSetup``: gives ``lr_schedule``, ``rng`` (its batch stream), ``clip`` and ``weight_decay``,
            which are then not given here, except an ``lr_schedule`` or ``rng`` that replaces the setup's.
        lr_schedule: ``step -> lr`` (e.g. a ``minimal.optim.cosine_schedule`` partial) or a constant lr;
            required without ``setup``.
        checkpoint_path: ``.npz`` file to write (None: no checkpoints).
        checkpoint_every: save after every this many steps (and after the last one).
        resume: continue from ``checkpoint_path`` when it exists; False starts over and overwrites it.
        progress: show a tqdm bar (on stderr). log_every: refresh the bar's loss every this many steps.
        rng: a ``numpy.random.Generator`` (advanced in place) or an int seed (default 0 without ``setup``).
        clip: None, or the max global gradient norm (> 0) applied before each update.
        weight_decay: AdamW's decoupled decay, a constant >= 0 (default 0) or a ``step -> wd`` schedule like
            ``lr_schedule`` (e.g. decay early to prune, none at the end to reach the loss floor).
        decay_mask, beta1, beta2, eps: passed to ``minimal.optim.adamw_step``.
        desc: the progress bar's label.
        config: None, or a dict of JSON values describing the run (e.g. ``dataclasses.asdict(Config)``):
            saved in each checkpoint; a checkpoint written with another config is refused on resume.
    Returns:
        ``TrainResult(params, opt_state, losses (steps,), resumed_from)``; its ``steps_trained`` is 0 when a
        finished checkpoint was resumed. With ``progress`` a resume says so on stderr ("resumed from
        checkpoint ...").

    Raises:
        NonFiniteLossError: the loss became NaN or inf, or (``NonFiniteUpdateError``) the AdamW update
            overflowed, or (``DivergedError``) the model met a NaN or inf inside ``loss_and_grads`` after an
            update; each names the step and the loss tail, and the last checkpoint is left untouched.
        ConfigMismatchError: ``checkpoint_path`` holds a run with another ``config``.
        KeyboardInterrupt: Ctrl-C, or ``Terminated`` on SIGTERM: re-raised after saving a checkpoint of the
            last completed step.
        CheckpointError: ``checkpoint_path`` is not a readable, consistent checkpoint (delete it to start over).
        ValueError: a bad argument, naming it.
    """
    if not callable(loss_and_grads):
        raise ValueError(f"loss_and_grads must be a callable (params, step, rng) -> (loss, grads), "
                         f"got {type(loss_and_grads).__name__}")
    check_params(params)
    if setup is not None:
        steps, lr_schedule, rng, clip, weight_decay = _from_setup(setup, steps, lr_schedule, rng, clip,
                                                                  weight_decay)
    elif lr_schedule is None:
        raise ValueError("train needs lr_schedule (a step -> lr function or a constant) or setup (a TrainSetup)")
    steps = check_positive_int("steps", steps)
    checkpoint_every = check_positive_int("checkpoint_every", checkpoint_every)
    log_every = check_positive_int("log_every", log_every)
    if clip is not None:
        clip = check_scalar("clip", clip, 0.0, low_open=True)
    if not callable(lr_schedule):
        lr_value = check_scalar("lr_schedule", lr_schedule, 0.0)
        lr_schedule = lambda step: lr_value  # noqa: E731
    if not callable(weight_decay):
        wd_value = check_scalar("weight_decay", 0.0 if weight_decay is None else weight_decay, 0.0)
        weight_decay = lambda step: wd_value  # noqa: E731
    rng = make_rng(0 if rng is None else rng)
    config = _json_config(config)
    path = None if checkpoint_path is None else os.fspath(checkpoint_path)

    resumed = path is not None and resume and os.path.exists(path)
    if resumed:
        done = resume_checkpoint(path, params, steps, rng, config)
    else:
        done = Checkpoint(dict(params), adamw_init(params), 0, rng.bit_generator.state, np.zeros(0))
    done = done._replace(config=config)
    start = done.step
    losses = list(done.losses)
    saved_step = start if resumed else None  # the step of the checkpoint on disk, for error messages

    def save(ckpt):
        nonlocal saved_step
        save_checkpoint(path, ckpt._replace(losses=np.array(losses[:ckpt.step], dtype=np.float64)))
        saved_step = ckpt.step

    bar = tqdm(total=steps, initial=start, disable=not progress, desc=desc)
    if resumed and progress:
        tqdm.write(f"{desc}: resumed from checkpoint {path} at step {start}/{steps}"
                   + (" (finished: no step to run)" if start == steps else ""), file=sys.stderr)
    old_handler = NOT_INSTALLED
    try:
        old_handler = catch_sigterm()
        for step in range(start, steps):
            try:
                loss, grads = loss_and_grads(done.params, step, rng)
            except (InputError, FloatingPointError) as e:
                # after an update, a NaN / inf that the model's own checks meet comes from parameters that the
                # updates made huge: report the run's divergence, not a layer's internal array
                if step > 0 and ("NaN or inf" in str(e) or isinstance(e, (OverflowInputError, FloatingPointError))):
                    raise DivergedError(step, str(e), checkpoint_step=saved_step, losses=losses) from e
                raise
            loss = float(loss)
            if not math.isfinite(loss):
                raise NonFiniteLossError(step, loss, checkpoint_step=saved_step, losses=losses)
            if clip is not None:
                grads, _ = clip_by_global_norm(grads, clip)
            try:
                new_params, opt_state = adamw_step(done.params, grads, done.opt_state, lr_schedule(step),
                                                   beta1=beta1, beta2=beta2, eps=eps,
                                                   weight_decay=weight_decay(step), decay_mask=decay_mask)
            except FloatingPointError as e:
                raise NonFiniteUpdateError(step, loss, str(e), checkpoint_step=saved_step,
                                           losses=losses + [loss]) from None
            losses.append(loss)
            # One assignment commits the step, so an interrupt saves either the old or the new state whole.
            done = Checkpoint(new_params, opt_state, step + 1, rng.bit_generator.state, None, config)
            bar.update(1)
            if done.step % log_every == 0 or done.step == steps:
                bar.set_postfix(loss=f"{loss:.4g}")
            if path is not None and (done.step % checkpoint_every == 0 or done.step == steps):
                save(done)
    except (KeyboardInterrupt, SystemError) as e:
        # Ctrl-C, or SIGTERM through catch_sigterm's handler (Terminated); one that lands while a compiled (Numba)
        # function returns reaches here as a SystemError ("returned a result with an exception set") caused by it
        interrupt = interrupt_behind(e)
        if interrupt is None:
            raise
        if path is not None:
            save(done)
            interrupt.checkpoint = (str(path), int(done.step), int(steps))   # for the one line the CLI prints
        if interrupt is e:
            raise
        raise interrupt from None
    finally:
        restore_sigterm(old_handler)
        bar.close()
    _warn_if_the_loss_rose(losses, desc)
    return TrainResult(done.params, done.opt_state, np.array(losses, dtype=np.float64), start)


def _from_setup(setup, steps, lr_schedule, rng, clip, weight_decay):
    """(steps, lr_schedule, rng, clip, weight_decay) of a ``TrainSetup``, with the given steps / schedule / rng."""
    if not isinstance(setup, TrainSetup):
        raise InputError(f"setup must be a TrainSetup, got {type(setup).__name__}")
    given = [name for name, v in (("clip", clip), ("weight_decay", weight_decay)) if v is not None]
    if given:
        raise InputError(f"train got {' and '.join(given)} beside setup: set {'them' if len(given) > 1 else 'it'} "
                         f"in the TrainSetup")
    return (setup.steps if steps is None else steps, setup.lr_schedule() if lr_schedule is None else lr_schedule,
            setup.batch_rng() if rng is None else rng, setup.clip, setup.weight_decay_schedule())


def _warn_if_the_loss_rose(losses, desc):
    """LossRoseWarning when the last 5% of the losses average LOSS_ROSE_FACTOR x the first loss or more."""
    if len(losses) < 2 or not losses[0] > 0:
        return
    final = float(np.mean(losses[-max(1, len(losses) // 20):]))
    if final >= LOSS_ROSE_FACTOR * losses[0]:
        warnings.warn(f"{desc}: the loss ended at {final:.4g} (mean of the last {max(1, len(losses) // 20)} "
                      f"steps of {len(losses)}), {final / losses[0]:.3g}x its first value {losses[0]:.4g}: the "
                      f"run diverged.{_tail(losses)} {ADVICE}", LossRoseWarning, stacklevel=3)
