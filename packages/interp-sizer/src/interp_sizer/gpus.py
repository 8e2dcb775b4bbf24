"""Which GPUs does the sizer know, and how much of each can a process actually use?

Each row carries the memory a CUDA process sees (not the board figure: ECC on GDDR6 and the
driver's reservation take a share), the HBM/GDDR bandwidth and the dense bf16 tensor rate
(datasheets quote 2:4-sparse figures; those are halved here), plus the source of every figure.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from interp_sizer.errors import UnknownGpu

__all__ = ["GPUS", "GpuSpec", "get_gpu", "gpu_names"]


@dataclass(frozen=True)
class GpuSpec:
    """One accelerator as the sizer prices it."""

    name: str
    memory_gib: float  # what a process can allocate (driver reservation and ECC already taken)
    board_memory_gb: float  # the marketed figure; the chips hold that many GiB before reservations
    bandwidth_tb_s: float
    bf16_tflops: float  # dense; fp16 on cards without bf16 (see `has_bf16`)
    has_bf16: bool
    fp8_tensor_cores: bool  # compute capability >= 8.9 (Ada, Hopper, Blackwell) or CDNA3
    interconnect_gb_s: float  # per-direction GPU-to-GPU bandwidth for all-reduces
    aliases: tuple[str, ...]
    source: str

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * (1 << 30))


def _gpu(
    name: str,
    memory_gib: float,
    board_memory_gb: float,
    bandwidth_tb_s: float,
    bf16_tflops: float,
    *,
    has_bf16: bool = True,
    fp8: bool = False,
    link: float = 32.0,  # PCIe Gen4 x16 per direction, when the card has no NVLink/Infinity Fabric
    aliases: tuple[str, ...] = (),
    source: str,
) -> GpuSpec:
    return GpuSpec(
        name,
        memory_gib,
        board_memory_gb,
        bandwidth_tb_s,
        bf16_tflops,
        has_bf16,
        fp8,
        link,
        aliases,
        " ".join(source.split()),
    )


# Ordered small to large, so a table over the catalogue reads as a ladder.
GPUS: tuple[GpuSpec, ...] = (
    _gpu(
        "T4",
        14.6,
        16,
        0.320,
        65,
        has_bf16=False,
        aliases=("tesla-t4",),
        source="""usable 14.6 GiB: decoderesearch/interp-engine `interp_engine/memory.py`
        GPUS (ECC on); 65 TFLOP/s fp16 tensor: hmc-tech L4-vs-T4; 320 GB/s:
        pcpartcomparison. Turing has no bf16""",
    ),
    _gpu(
        "L4",
        22.0,
        24,
        0.300,
        121,
        fp8=True,
        source="""usable 22.0 GiB: decoderesearch/interp-engine `memory.py` GPUS; 242
        TFLOP/s sparse on the datasheet, halved; 300 GB/s: fpsbench""",
    ),
    _gpu(
        "A10G",
        22.0,
        24,
        0.600,
        70,
        source="""24 GB / 600 GB/s and a lower tensor rate than the A10 (125): baseten.co
        'A10 vs A10G'; usable as the L4 (same 24 GB GDDR6 with ECC)""",
    ),
    _gpu(
        "RTX-3090",
        23.6,
        24,
        0.936,
        71,
        aliases=("3090", "rtx3090"),
        source="""GA102 whitepaper: 71 TFLOP/s bf16 with fp32 accumulate; 936 GB/s GDDR6X,
        no ECC; usable as the 4090""",
    ),
    _gpu(
        "RTX-4090",
        23.6,
        24,
        1.008,
        165,
        fp8=True,
        aliases=("4090", "rtx4090"),
        source="""waredb.com: 165.15 TFLOP/s dense (330.3 sparse), 1,008 GB/s; usable 23.6
        GiB: decoderesearch/interp-engine `memory.py` GPUS""",
    ),
    _gpu(
        "A100-40GB",
        39.4,
        40,
        1.555,
        312,
        link=300,
        aliases=("a100-40", "a100_40gb"),
        source="""glennklockwood.com A100 (datasheet): 312 TFLOP/s, 1,555 GB/s; usable 39.4
        GiB: decoderesearch/interp-engine `memory.py` GPUS; NVLink3 600 GB/s
        bidirectional""",
    ),
    _gpu(
        "A40",
        44.4,
        48,
        0.696,
        149.7,
        source="""NVIDIA A40 sheet (ecer.com copy): bf16 149.7 dense / 299.4 sparse; 696
        GB/s; 44.4 GiB with ECC on: decoderesearch/interp-engine `memory.py` GPUS""",
    ),
    _gpu(
        "L40S",
        44.3,
        48,
        0.864,
        362,
        fp8=True,
        source="""L40S sheet (mullet.se): bf16 362.05 dense / 733 sparse; 864 GB/s; usable
        44.3 GiB: decoderesearch/interp-engine `memory.py` GPUS""",
    ),
    _gpu(
        "A100-80GB",
        79.1,
        80,
        2.039,
        312,
        link=300,
        aliases=("a100", "a100-80", "a100-sxm"),
        source="""glennklockwood.com A100 80GB SXM: 2,039 GB/s (PCIe 1,935), 312 TFLOP/s;
        usable 79.1 GiB: decoderesearch/interp-engine `memory.py` GPUS""",
    ),
    _gpu(
        "H100-PCIe",
        79.0,
        80,
        2.0,
        756,
        fp8=True,
        link=64,
        aliases=("h100-pcie-80gb",),
        source="""archive-lib.hpctech.co.jp H100 PCIe: 1,513 TFLOP/s sparse, halved; 2.0
        TB/s HBM2e; usable as the SXM part less the same reservation""",
    ),
    _gpu(
        "H100-80GB",
        79.1,
        80,
        3.35,
        989,
        fp8=True,
        link=450,
        aliases=("h100", "h100-sxm", "h100-sxm5", "h100-80gb-sxm"),
        source="""hpctech (1,979 sparse) and glennklockwood (989.4 dense): 989 TFLOP/s; 3.35
        TB/s HBM3; usable 79.1 GiB: decoderesearch/interp-engine `memory.py` GPUS;
        NVLink4 900 GB/s bidirectional""",
    ),
    _gpu(
        "H200",
        139.0,
        141,
        4.8,
        989,
        fp8=True,
        link=450,
        aliases=("h200-sxm", "h200-141gb"),
        source="""itkb.uw.cz H200 vs B300: dense ~989 TFLOP/s, 4.8 TB/s HBM3e; 139 GiB
        measured on an H200 NVL (decoderesearch/interp-engine `memory.py` GPUS)""",
    ),
    _gpu(
        "B200",
        178.35,
        180,
        8.0,
        2250,
        fp8=True,
        link=900,
        aliases=("b200-180gb",),
        source="""glennklockwood.com B200: 2,250 TFLOP/s bf16 dense (HGX, 1000 W), 8 TB/s;
        178.35 GiB measured (decoderesearch/interp-engine `memory.py` GPUS);
        NVLink5 1.8 TB/s bidirectional""",
    ),
    _gpu(
        "MI300X",
        190.0,
        192,
        5.3,
        1307,
        fp8=True,
        link=448,
        aliases=("mi300",),
        source="""jaredwatkins.com (~1.3 PFLOP/s fp16 dense), aiwiki (5.3 TB/s HBM3); ~190
        GiB usable; Infinity Fabric 896 GB/s bidirectional""",
    ),
)

_BY_KEY = {
    key.casefold(): gpu
    for gpu in GPUS
    for key in (gpu.name, *gpu.aliases, gpu.name.replace("-", ""))
}


def gpu_names() -> tuple[str, ...]:
    """The catalogue's names, smallest card first."""
    return tuple(gpu.name for gpu in GPUS)


def get_gpu(name: str | GpuSpec) -> GpuSpec:
    """The catalogue row for `name` (case-blind; aliases such as 'h100' accepted)."""
    if isinstance(name, GpuSpec):
        return name
    if isinstance(name, str):
        found = _BY_KEY.get(name.strip().casefold())
        if found is not None:
            return found
    close = difflib.get_close_matches(str(name).casefold(), list(_BY_KEY), n=3, cutoff=0.5)
    nearest = sorted({_BY_KEY[key].name for key in close})
    hint = f"did you mean {', '.join(nearest)}? " if nearest else ""
    error = UnknownGpu.build(
        f"unknown GPU {name!r}",
        "the sizer prices only GPUs whose memory, bandwidth and tensor rate it has a source for",
        f"{hint}Known GPUs: {', '.join(gpu_names())}",
    )
    raise error
