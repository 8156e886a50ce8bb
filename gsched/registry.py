"""What a method of the registry is: :class:`Method` and its typed :class:`Option`\\ s.

The registry itself (``gsched.methods.METHODS``) merges the built-in searches and baselines
with the entries each policy package exports (its ``METHODS``); the command line builds its
``optimize`` flags from the options declared here, so a new option needs no CLI edit.

Two kinds of method:

* ``"search"`` — ``build(**options)`` returns a :class:`SearchRunner`: a traceable
  ``runner(key, graphs [B], cost_params, *, num_devices, budget, objective)`` (and
  ``scheduler``, ``fusion`` when the method declares ``exec_model``) returning a
  :class:`~gsched.search.common.SearchResult`, and ``runner.info(objective)``, the JSON scalars
  added to every result row (a learned method names the checkpoint that ran). A method that
  declares :data:`SEED_FROM` also takes ``seeds [B, S, L]`` (padded chromosomes) after
  ``cost_params``: ``gsched.methods.optimize`` computes them from the named heuristics on the
  host and passes them, never to ``build``.
* ``"heuristic"`` — ``build(**options)`` returns a host ``fn(graph, num_devices, seed)``
  giving ``(order [N], placement [N])`` or ``(order, placement, info)``, scored by the cost
  model; it counts ``min_evals`` evaluations.

Optional heavy imports (OR-Tools, checkpoints) happen inside ``build``, never at import.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Protocol

from gsched.costmodel.params import OBJECTIVES


@dataclasses.dataclass(frozen=True)
class Option:
    """A method option: its name (``--name-with-dashes`` on the command line), the type that
    parses a command-line value, and a help line."""

    name: str
    type: Callable[[str], Any]
    help: str


@dataclasses.dataclass(frozen=True)
class Method:
    """An optimizer: ``build(**options)`` returns its runner (see the module docstring)."""

    summary: str
    kind: str  # "search" or "heuristic"
    build: Callable[..., Callable]
    options: tuple[Option, ...] = ()  # the options ``build`` accepts
    min_evals: int = 1  # evaluations a heuristic counts
    max_devices: int | None = None  # largest D the method supports (None: any)
    objectives: tuple[str, ...] = OBJECTIVES  # objectives the method can optimize
    # A search runner that also takes the cost model's static ``scheduler`` and ``fusion``
    # (SPEC §8); others run only under the default list scheduler without fusion. Heuristics
    # are scored by the cost model under any setting (with fusion: every fusion key 1).
    exec_model: bool = False

    def __post_init__(self):
        if self.kind not in ("search", "heuristic"):
            raise ValueError(f"method kind must be 'search' or 'heuristic', got {self.kind!r}")

    @property
    def option_names(self) -> tuple[str, ...]:
        return tuple(option.name for option in self.options)


class SearchRunner(Protocol):
    """What a search method's ``build`` returns."""

    def __call__(self, key, graphs, cost_params, *, num_devices: int, budget: int,
                 objective: str): ...

    def info(self, objective: str) -> dict[str, Any]: ...


@dataclasses.dataclass(frozen=True, eq=False)
class Search:
    """A :class:`SearchRunner` around ``fn(key, graphs, *, cost_params, ...)`` with ``fixed``
    keyword settings and no extra row fields."""

    fn: Callable
    fixed: dict = dataclasses.field(default_factory=dict)

    def __call__(self, key, graphs, cost_params, seeds=None, **settings):
        seeded = {} if seeds is None else {"seeds": seeds}
        return self.fn(key, graphs, cost_params=cost_params, **self.fixed, **seeded, **settings)

    def info(self, objective: str) -> dict[str, Any]:
        return {}


# Options several methods share.
CHECKPOINT = Option("checkpoint", str, "learned methods: checkpoint directory (default: the "
                                       "shipped one for the objective)")
DECODE = Option("decode", str, "learned methods: greedy, sample or beam; gdp / go also brkga, "
                               "local_search or annealing (the rest of the budget: that search "
                               "started from the policy's best)")
SEED_FROM = Option("seed_from", str, "searches (gdp / go: with --decode brkga, local_search "
                                     "or annealing): heuristics whose solutions the search "
                                     "starts from, comma-separated, e.g. metis (their "
                                     "evaluations count)")
TIME_LIMIT = Option("time_limit", float, "exact solvers: time limit in seconds")
GENES = Option("genes", str, "searches: the chromosome parts searched: all (default), "
                             "placement+schedule (no fusion) or placement (GO's pl / pl+sch / "
                             "pl+sch+fu rows)")
