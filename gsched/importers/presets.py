"""Device presets for importers (SPEC §8.1): peak flops, HBM bandwidth, kernel launch overhead.

**Time unit: microseconds.** An imported op's ``compute_cost`` is ``flops / peak_flops`` with
``peak_flops`` in flops per microsecond, and ``hbm_bandwidth`` is in bytes per microsecond, so
``CostParams(hbm_bandwidth=preset.hbm_bandwidth, launch_overhead=preset.launch_overhead)``
is in the same unit as the graph's costs (SPEC §8.1). Microseconds keep the costs of small
kernels (a few ns to ms) and whole training steps (ms to s) well inside float32's range.

``peak_flops`` is the **dense 16-bit tensor-core (or MXU) peak** — bf16/fp16 inputs with fp32
accumulation, no structured sparsity — because that is the number the papers' roofline costs
and practitioners quote. Float32 programs run slower on every one of these devices (V100:
15.7 TFLOP/s fp32; A100: 19.5 fp32 / 156 tf32; H100 SXM: 67 fp32 / 495 tf32); pass a custom
:class:`DevicePreset` to model them. ``launch_overhead`` is an order-of-magnitude figure for
dispatching one kernel (CUDA kernel launch from a captured stream ≈ 2–5 µs; on TPU an XLA
op inside one program has no host launch, so it is smaller); it is not a datasheet number.

Sources (vendor datasheets / whitepapers):

* V100 SXM2: "NVIDIA Tesla V100 GPU Architecture" whitepaper (2017) and the "NVIDIA V100
  Tensor Core GPU" datasheet: 125 TFLOP/s fp16 tensor core (deep learning), 900 GB/s HBM2.
* A100 SXM4 80 GB: "NVIDIA A100 Tensor Core GPU" datasheet (2021): 312 TFLOP/s bf16/fp16
  tensor core dense (624 with sparsity), 2,039 GB/s HBM2e.
* H100 SXM5: "NVIDIA H100 Tensor Core GPU" datasheet (2023): 989.4 TFLOP/s bf16/fp16 tensor
  core dense (the datasheet's 1,979 is with sparsity), 3.35 TB/s HBM3.
* TPU v4: Google Cloud "TPU v4" system architecture page and Jouppi et al., "TPU v4: An
  Optically Reconfigurable Supercomputer ..." (ISCA 2023): 275 TFLOP/s bf16 per chip,
  1,200 GB/s HBM2.
"""

from __future__ import annotations

import dataclasses

TIME_UNIT = "microseconds"
_PER_US = 1e-6  # 1/s → 1/µs


@dataclasses.dataclass(frozen=True)
class DevicePreset:
    """One accelerator for roofline costs, all rates per microsecond (see the module doc)."""

    name: str
    peak_flops: float  # flops per µs (dense bf16/fp16 tensor core)
    hbm_bandwidth: float  # bytes per µs
    launch_overhead: float  # µs per kernel
    precision: str  # which peak ``peak_flops`` is
    source: str  # the datasheet it comes from

    def __post_init__(self):
        for field in ("peak_flops", "hbm_bandwidth"):
            value = getattr(self, field)
            if not value > 0 or value == float("inf"):
                raise ValueError(f"{field} must be finite and > 0, got {value!r}")
        if not 0 <= self.launch_overhead < float("inf"):
            raise ValueError(f"launch_overhead must be finite and >= 0, got "
                             f"{self.launch_overhead!r}")

    def compute_cost(self, flops: float) -> float:
        """``flops / peak_flops`` in microseconds (SPEC §8.1)."""
        return float(flops) / self.peak_flops


PRESETS: dict[str, DevicePreset] = {
    # NVIDIA Tesla V100 datasheet / Volta whitepaper: 125 TFLOP/s fp16 tensor, 900 GB/s HBM2.
    "v100": DevicePreset("v100", 125e12 * _PER_US, 900e9 * _PER_US, 5.0,
                         "fp16 tensor core, dense", "NVIDIA V100 Tensor Core GPU datasheet"),
    # NVIDIA A100 datasheet (SXM4 80GB): 312 TFLOP/s bf16 dense, 2,039 GB/s HBM2e.
    "a100": DevicePreset("a100", 312e12 * _PER_US, 2039e9 * _PER_US, 4.0,
                         "bf16/fp16 tensor core, dense", "NVIDIA A100 Tensor Core GPU datasheet"),
    # NVIDIA H100 datasheet (SXM5): 989.4 TFLOP/s bf16 dense (1,979 sparse), 3.35 TB/s HBM3.
    "h100": DevicePreset("h100", 989.4e12 * _PER_US, 3350e9 * _PER_US, 3.0,
                         "bf16/fp16 tensor core, dense", "NVIDIA H100 Tensor Core GPU datasheet"),
    # Google Cloud TPU v4 system architecture; Jouppi et al. ISCA 2023: 275 TFLOP/s bf16,
    # 1,200 GB/s HBM2 per chip.
    "tpu_v4": DevicePreset("tpu_v4", 275e12 * _PER_US, 1200e9 * _PER_US, 1.0,
                           "bf16 MXU", "Google Cloud TPU v4 system architecture; ISCA 2023"),
}
ALIASES = {"tpuv4": "tpu_v4", "tpu-v4": "tpu_v4", "v4": "tpu_v4"}


def preset(device: str | DevicePreset) -> DevicePreset:
    """The preset named ``device`` (case-insensitive; ``tpu-v4``/``tpuv4`` accepted), or
    ``device`` itself when it is a :class:`DevicePreset`; ``ValueError`` lists the names."""
    if isinstance(device, DevicePreset):
        return device
    key = str(device).lower()
    key = ALIASES.get(key, key)
    if key not in PRESETS:
        raise ValueError(f"unknown device preset {device!r} (available: {', '.join(PRESETS)})")
    return PRESETS[key]
