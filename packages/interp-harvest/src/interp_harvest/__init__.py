"""interp-harvest: dataset jobs on interpoint's standardized points.

A corpus on disk (text, jsonl, parquet, a saved HF dataset) is tokenised and packed into
fixed-length contexts the way SAELens packs them (`pack`); the activations job writes every
context's activations at the declared points as checksummed safetensors shards with a manifest,
resumable after a kill (`harvest_activations`); the statistics job streams per-point mean,
variance and norms (`harvest_stats`); `fit_lens` fits a Jacobian lens (`J_bar` per layer) and
`write_lens` writes it in the public `{"J": {layer: tensor}}` layout. `layout="saelens"` writes
the activations as SAELens's cached-activations `datasets` folder, and `replicas=N` runs the
forwards on N replicas of the model on Ray. The dashboards job reduces SAE
features per feature (top examples, interval samples, histograms, densities, logit tables) and
writes Neuronpedia's batch JSON (`harvest_dashboards`, `write_dashboards`). Models come from
`interp_core.load_model`: any registered backend, none imported here.
"""

from interp_harvest.__about__ import __version__
from interp_harvest.activations import ShardRedone, harvest_activations
from interp_harvest.corpus import Corpus
from interp_harvest.dashboards import DashboardSettings, FeatureDashboards, harvest_dashboards
from interp_harvest.errors import DiskFull, OutputExists, ReplicasLost, ResumeMismatch
from interp_harvest.lens import FittedLens, fit_lens, write_lens
from interp_harvest.neuronpedia_batch import write_dashboards
from interp_harvest.packing import BOS_POLICIES, Context, PackingPolicy, pack, tokenizer_encoder
from interp_harvest.plan import ActivationsPlan, plan_activations
from interp_harvest.progress import Progress, ProgressBar
from interp_harvest.reading import read_activations
from interp_harvest.replicas import ReplicaDied
from interp_harvest.stats import PointStats, harvest_stats, write_stats

__all__ = [
    "BOS_POLICIES",
    "ActivationsPlan",
    "Context",
    "Corpus",
    "DashboardSettings",
    "DiskFull",
    "FeatureDashboards",
    "FittedLens",
    "OutputExists",
    "PackingPolicy",
    "PointStats",
    "Progress",
    "ProgressBar",
    "ReplicaDied",
    "ReplicasLost",
    "ResumeMismatch",
    "ShardRedone",
    "__version__",
    "fit_lens",
    "harvest_activations",
    "harvest_dashboards",
    "harvest_stats",
    "pack",
    "plan_activations",
    "read_activations",
    "tokenizer_encoder",
    "write_dashboards",
    "write_lens",
    "write_stats",
]
