"""Parameter validation shared by every public function and estimator of the core.

One wording everywhere: ``"{name}: expected {what}, got {value!r}"``. A value of the wrong
*type* raises :class:`TypeError`; a value of the right type outside its range raises
:class:`ValueError`; both name the parameter. ``bool`` is never accepted as a number.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from aflite_core.cgroup_limits import available_cores  # re-exported: every pool's count

__all__ = [
    "POOL_SCRATCH_BYTES",
    "available_cores",
    "fmt_bytes",
    "check_callback",
    "check_choice",
    "check_fraction",
    "check_int",
    "check_real",
    "check_seed",
    "check_size",
    "make_rng",
    "resolve_n_jobs",
    "resolve_size",
    "scratch_threads",
]


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_int(name: str, value: Any, *, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """Return ``value`` as an int after checking its type and range.

    Raises
    ------
    TypeError
        If ``value`` is not an integer (``bool`` included).
    ValueError
        If it is below ``minimum`` or above ``maximum``.
    """
    what = "an int"
    if minimum is not None and maximum is not None:
        what = f"an int in [{minimum}, {maximum}]"
    elif minimum is not None:
        what = f"an int >= {minimum}"
    elif maximum is not None:
        what = f"an int <= {maximum}"
    if not _is_int(value):
        raise TypeError(f"{name}: expected {what}, got {value!r} ({type(value).__name__})")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name}: expected {what}, got {value!r}")
    return int(value)


def check_real(name: str, value: Any, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False) -> float:
    """Return ``value`` as a finite float after checking its type and interval.

    ``low``/``high`` bound the interval; ``low_open``/``high_open`` exclude the bound.
    """
    left = "(" if low_open else "["
    right = ")" if high_open else "]"
    lo = "-inf" if low is None else f"{low:g}"
    hi = "inf" if high is None else f"{high:g}"
    what = f"a number in {left}{lo}, {hi}{right}"
    if not _is_real(value):
        raise TypeError(f"{name}: expected {what}, got {value!r} ({type(value).__name__})")
    number = float(value)
    bad = not math.isfinite(number)
    if low is not None:
        bad = bad or (number <= low if low_open else number < low)
    if high is not None:
        bad = bad or (number >= high if high_open else number > high)
    if bad:
        raise ValueError(f"{name}: expected {what}, got {value!r}")
    return number


def check_fraction(name: str, value: Any, *, closed: bool = False) -> float:
    """A share: a float in (0, 1), or in [0, 1] with ``closed=True``."""
    return check_real(name, value, low=0.0, high=1.0, low_open=not closed,
                      high_open=not closed)


def check_size(name: str, value: Any, *, allow_all: bool = False) -> int | float:
    """A number of rows (int >= 1) or a fraction of the rows (float in (0, 1)).

    ``allow_all=True`` also accepts the fraction 1.0.
    """
    interval = "(0, 1]" if allow_all else "(0, 1)"
    what = f"an int >= 1 (rows) or a float in {interval} (a fraction of the rows)"
    if not _is_real(value):
        raise TypeError(f"{name}: expected {what}, got {value!r} ({type(value).__name__})")
    if _is_int(value):
        if value < 1:
            raise ValueError(f"{name}: expected {what}, got {value!r}")
        return int(value)
    number = float(value)
    ok = 0.0 < number <= 1.0 if allow_all else 0.0 < number < 1.0
    if not ok:
        raise ValueError(f"{name}: expected {what}, got {value!r} "
                         "(pass an int for a number of rows)")
    return number


def resolve_size(name: str, value: Any, n: int, *, allow_all: bool = False,
                 rounding: str = "ceil") -> int:
    """Rows meant by :func:`check_size`'s ``value`` out of ``n``, at least 1.

    An int is used as is. A fraction becomes ``ceil(value * n)`` with ``rounding="ceil"`` (the
    default), or ``round(value * n)`` (Python's round-half-to-even) with
    ``rounding="nearest"``.
    """
    check_choice("rounding", rounding, ("ceil", "nearest"))
    size = check_size(name, value, allow_all=allow_all)
    if isinstance(size, int):
        return size
    if rounding == "nearest":
        return max(1, round(size * n))
    return max(1, math.ceil(size * n - 1e-9))


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> Any:
    """Return ``value`` if it is one of ``choices``, else raise ValueError listing them."""
    options = tuple(choices)
    try:
        if value in options:
            return value
    except TypeError:  # unhashable or incomparable: not one of them either
        pass
    raise ValueError(f"{name}: expected one of {options}, got {value!r}")


def check_seed(value: Any, name: str = "random_state") -> int | None:
    """A seed as numpy and scikit-learn take it: None or an int in [0, 2**32)."""
    if value is None:
        return None
    return check_int(name, value, minimum=0, maximum=2**32 - 1)


def make_rng(random_state: Any, name: str = "random_state") -> np.random.Generator:
    """A numpy Generator from None, an int seed, a Generator, RandomState or SeedSequence."""
    if random_state is None or isinstance(random_state, np.random.SeedSequence):
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    if _is_int(random_state):
        if random_state < 0:
            raise ValueError(f"{name}: expected a non-negative int, got {random_state!r}")
        return np.random.default_rng(int(random_state))
    raise TypeError(
        f"{name}: expected None, a non-negative int, a numpy Generator, RandomState or "
        f"SeedSequence, got {random_state!r} ({type(random_state).__name__})"
    )


#: What the tasks of one thread pool that declares its tasks' working sets may hold at once
#: (:func:`scratch_threads`): more cores run more tasks side by side, each with its own, and
#: the peak must not grow with the cores by more than a quarter (issue 63, item 5).
POOL_SCRATCH_BYTES = 256 << 20


def scratch_threads(task_bytes: int, cores: int | None = None) -> int:
    """Threads for a pool whose tasks each hold about ``task_bytes`` while they run: one a
    core this process may use (``cores``: default :func:`available_cores`), as many as
    :data:`POOL_SCRATCH_BYTES` holds, and at least two where there are two cores (what two
    cores hold whatever the tasks' size: the peak a 2-core machine has anyway).

    Examples
    --------
    >>> scratch_threads(30 << 20, cores=16), scratch_threads(200 << 20, cores=16)
    (8, 2)
    >>> scratch_threads(200 << 20, cores=1)
    1
    """
    cores = available_cores() if cores is None else int(cores)
    fitting = POOL_SCRATCH_BYTES // max(1, int(task_bytes))
    return max(1, min(cores, max(2, fitting)))


def resolve_n_jobs(n_jobs: Any, name: str = "n_jobs") -> int:
    """Worker count: None -> 1, -1 -> every core this process may use, else an int >= 1."""
    if n_jobs is None:
        return 1
    if not _is_int(n_jobs):
        raise TypeError(f"{name}: expected None, -1 or an int >= 1, got {n_jobs!r}")
    if n_jobs == -1:
        return available_cores()
    if n_jobs < 1:
        raise ValueError(f"{name}: expected None, -1 or an int >= 1, got {n_jobs!r}")
    return int(n_jobs)


def check_callback(value: Any, name: str = "callback") -> Callable[..., Any] | None:
    """A progress callback: None or a callable."""
    if value is not None and not callable(value):
        raise TypeError(
            f"{name}: expected None or a callable, got {value!r} ({type(value).__name__})"
        )
    return value


def fmt_bytes(n: int) -> str:
    """``512 bytes``, ``1.5 MiB``: a size as a message shows it."""
    if n < 1024:
        return f"{n} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")
