"""gsched: learned placement and scheduling of ML computation graphs in pure JAX.

The public surface, re-exported here name by name (code lives in the sub-modules):

* graphs: :class:`Graph`, :func:`make_graph`, :class:`GraphError`, :func:`topological_order`;
* files: :func:`load_graph`, :func:`load_graphs`, :func:`save_graph`, :func:`load_dataset`,
  :func:`save_dataset`, :class:`FormatError`; programs: :func:`import_jax` (a JAX function
  → a graph, at the jaxpr or compiled-HLO level);
* generators: :func:`layered_graph`, :func:`random_computation_graph`, :func:`synthetic_dataset`,
  :func:`augment`, :func:`split_by_topology`, :func:`dedup`;
* device-side graphs: :class:`PaddedGraph`, :class:`Bucket`, :func:`bucket_for`,
  :func:`pad_graph`, :func:`batch_graphs`, :func:`pad_keys`;
* the cost model (SPEC §2–§4, §8): :class:`CostParams`, :class:`Evaluation`, :func:`evaluate`,
  :func:`evaluate_population`, :func:`evaluate_population_sharded`,
  :func:`evaluate_batch`, :func:`score`, :func:`order_keys`,
  and the host-side :func:`evaluate_graph` / :func:`evaluate_order`;
* BRKGA (REGAL §3.2): :class:`BRKGAConfig`, :class:`BRKGAParams`, :class:`BRKGAResult`,
  :func:`uniform_params`, :func:`brkga_run`, :func:`brkga_run_batch`;
* baselines on the same budget: :func:`random_search_batch`, :func:`local_search_batch`;
* every optimizer by name (what ``python -m gsched optimize`` runs): :data:`METHODS`,
  :class:`Method`, :func:`optimize`; and :func:`optimize_jax`: a JAX program → XLA's schedule
  vs an optimizer's, in one call.
"""

from gsched.core.graph import Graph, GraphError, make_graph, topological_order
from gsched.core.padding import (
                                       Bucket,
                                       PaddedGraph,
                                       batch_graphs,
                                       bucket_for,
                                       pad_graph,
                                       pad_keys,
)
from gsched.costmodel.evaluate import (
                                       Evaluation,
                                       evaluate,
                                       evaluate_batch,
                                       evaluate_population,
                                       evaluate_population_sharded,
                                       order_keys,
                                       score,
)
from gsched.costmodel.host import evaluate_graph, evaluate_order
from gsched.costmodel.params import CostParams
from gsched.formats import (
                                       FormatError,
                                       load_dataset,
                                       load_graph,
                                       load_graphs,
                                       save_dataset,
                                       save_graph,
)
from gsched.generators import (
                                       augment,
                                       dedup,
                                       layered_graph,
                                       random_computation_graph,
                                       split_by_topology,
                                       synthetic_dataset,
)
from gsched.importers import import_jax
from gsched.methods import METHODS, Method, optimize
from gsched.programs import optimize_jax
from gsched.search.brkga import BRKGAConfig, BRKGAParams, BRKGAResult, uniform_params
from gsched.search.brkga import run as brkga_run
from gsched.search.brkga import run_batch as brkga_run_batch
from gsched.search.local import run_batch as local_search_batch
from gsched.search.random import run_batch as random_search_batch

__version__ = "0.1.0"

__all__ = [
    "BRKGAConfig", "BRKGAParams", "BRKGAResult", "Bucket", "CostParams", "Evaluation",
    "FormatError", "Graph", "GraphError", "METHODS", "Method", "PaddedGraph", "augment",
    "batch_graphs", "brkga_run",
    "brkga_run_batch", "bucket_for", "dedup", "evaluate", "evaluate_batch", "evaluate_graph",
    "evaluate_order", "evaluate_population", "evaluate_population_sharded", "import_jax",
    "layered_graph",
    "load_dataset", "load_graph", "load_graphs", "local_search_batch", "make_graph", "optimize",
    "optimize_jax",
    "order_keys", "pad_graph", "pad_keys", "random_computation_graph", "random_search_batch",
    "save_dataset",
    "save_graph", "score", "split_by_topology", "synthetic_dataset", "topological_order",
    "uniform_params",
]
