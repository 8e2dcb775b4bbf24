"""Run SAELens' own encode/decode on SAE folders; executed with the sae-lens environment's python.

argv: a JSON file listing cases {"folder", "inputs" (an .npy of activation rows), "out" (an
.npz to write)}. Each SAE is loaded with `SAE.load_from_disk`, the rows are encoded, and the
features decoded right after (SAELens keeps a normalising SAE's statistics from the encode).
"""

from __future__ import annotations

import json
import sys

import numpy as np
import torch
from sae_lens import SAE


def main() -> None:
    cases = json.loads(open(sys.argv[1]).read())
    for case in cases:
        sae = SAE.load_from_disk(case["folder"], device="cpu")
        x = torch.from_numpy(np.load(case["inputs"]))
        with torch.no_grad():
            features = sae.encode(x)
            out = sae.decode(features)
        np.savez(
            case["out"],
            features=features.reshape(x.shape[0], -1).numpy(),
            out=out.reshape(x.shape[0], -1).numpy(),
        )


if __name__ == "__main__":
    main()
