"""Data parallelism over a device mesh.

**Sharding.** :func:`data_mesh` is a 1-D mesh over the local devices (axis ``"data"``);
:func:`shard_batch` splits the leading batch axis over it and :func:`replicate` copies the
state to every device. Given a ``mesh``, :func:`run_training` does both, and the jitted
``train_step`` then runs data-parallel (XLA inserts the cross-device reductions) under
``jax.set_mesh(mesh)``, so that the cost model's batch evaluations inside it
(:func:`gsched.costmodel.evaluate.evaluate_batch`) run one schedule loop per device on its own
graphs (``shard_map``) instead of a loop partitioned by XLA, which communicates every step.
:func:`shapes_on` places a tree's shapes on one device, for lowering.

**Host devices.** On a CPU, JAX has one device unless XLA is asked for more before it starts:
:func:`one_device_per_core` asks for one per core, so that a batch can be split over the cores
(the benchmarks and ``python -m train.regal`` do).
"""

from __future__ import annotations

import os
from typing import Sequence, TypeVar

import equinox as eqx
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

T = TypeVar("T")
DATA_AXIS = "data"


HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"


def one_device_per_core() -> None:
    """Asks XLA for one CPU device per core, unless ``XLA_FLAGS`` already sets a count. Takes
    effect only if JAX's backends are not initialized yet (true before a program's first JAX
    computation); it does not change what other platforms (a GPU's) have."""
    flags = os.environ.get("XLA_FLAGS", "")
    if HOST_DEVICES_FLAG not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {HOST_DEVICES_FLAG}={os.cpu_count() or 1}".strip()


def data_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh with axis ``"data"`` over ``devices`` (default: all local devices)."""
    devices = jax.local_devices() if devices is None else list(devices)
    return Mesh(np.asarray(devices), (DATA_AXIS,))


def shard_batch(tree: T, mesh: Mesh) -> T:
    """Puts every array leaf of ``tree`` on ``mesh`` split along its leading (batch) axis.

    The batch size must be divisible by the number of devices on the mesh's ``"data"`` axis
    (:class:`ValueError` naming both otherwise). Non-array leaves are left as they are.
    """
    count = mesh.shape[DATA_AXIS]
    sharding = NamedSharding(mesh, PartitionSpec(DATA_AXIS))

    def put(x):
        if not eqx.is_array(x):
            return x
        if np.ndim(x) == 0:
            raise ValueError("shard_batch: a batch leaf is a scalar; every leaf needs a "
                             "leading batch axis")
        if x.shape[0] % count:
            raise ValueError(f"shard_batch: batch size {x.shape[0]} is not divisible by the "
                             f"{count} devices of mesh axis '{DATA_AXIS}'")
        return jax.device_put(x, sharding)

    return jax.tree.map(put, tree)


def shapes_on(tree: T, device: jax.Device) -> T:
    """``tree`` with each array leaf (a ``jax.Array``, NumPy array or scalar, or
    ``jax.ShapeDtypeStruct``) replaced by its shape and dtype placed on ``device``, weak types
    kept, and other leaves unchanged: what ``jax.jit(f).trace`` lowers for ``device`` without
    moving any data there (a device compiled for without one included)."""
    placed = SingleDeviceSharding(device)

    def shape(x):
        if isinstance(x, (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct)):
            return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=placed,
                                        weak_type=bool(getattr(x, "weak_type", False)))
        return x

    return jax.tree.map(shape, tree)


def replicate(tree: T, mesh: Mesh) -> T:
    """Every array leaf of ``tree`` copied to all devices of ``mesh`` (non-arrays unchanged)."""
    sharding = NamedSharding(mesh, PartitionSpec())
    return jax.tree.map(lambda x: jax.device_put(x, sharding) if eqx.is_array(x) else x, tree)


def barrier(name: str) -> None:
    """Waits until every ``jax.distributed`` process reaches ``name`` (no-op in one process)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils
        multihost_utils.sync_global_devices(name)
