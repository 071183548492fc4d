"""The launch material in cluster/ is checked the way `ray up` and KubeRay would read it.

Launcher YAMLs (every cluster/*.yaml without a top-level `kind:`) go through the JSON
schema that ships inside the installed ray package and then through Ray's own
`prepare_config` + `validate_config`, the steps `ray up` runs before it touches a
cloud. Files with a top-level `kind:` are Kubernetes manifests (KubeRay).
"""

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import ray
import ray.autoscaler
import yaml
from paths import CLUSTER
from ray.autoscaler._private.util import prepare_config, validate_config

CLUSTER_DIR = Path(CLUSTER)
SCHEMA_PATH = Path(ray.autoscaler.__file__).parent / "ray-schema.json"
TOP_LEVEL_KIND = re.compile(r"^kind:", re.MULTILINE)
RAY_IMAGE_TAG = re.compile(r"rayproject/ray:(\d+\.\d+\.\d+)")
EDITABLE_INSTALL = re.compile(r"pip install\s+(?:-U\s+)?-e\s+\"?([^\s\"\[]+)")


def _is_kuberay(path: Path) -> bool:
    return bool(TOP_LEVEL_KIND.search(path.read_text()))


ALL_YAML = sorted(CLUSTER_DIR.glob("*.yaml"))
LAUNCHER_FILES = [p for p in ALL_YAML if not _is_kuberay(p)]
KUBERAY_FILES = [p for p in ALL_YAML if _is_kuberay(p)]


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def validate_launcher_config(config: dict) -> None:
    """Raise if `ray up` would reject `config` before launching anything."""
    jsonschema.validate(config, _schema())
    validate_config(prepare_config(copy.deepcopy(config)))


def _multi_node_type_configs():
    return [p for p in LAUNCHER_FILES if "available_node_types" in _load(p)]


def _all_commands(config: dict) -> list:
    keys = (
        "initialization_commands",
        "setup_commands",
        "head_setup_commands",
        "worker_setup_commands",
        "head_start_ray_commands",
        "worker_start_ray_commands",
    )
    commands = [cmd for key in keys for cmd in config.get(key, [])]
    return commands + config.get("docker", {}).get("run_options", [])


def _by_name(paths):
    return pytest.mark.parametrize("path", paths, ids=[p.name for p in paths])


def test_the_autoscaler_schema_ships_with_the_installed_ray():
    assert SCHEMA_PATH.is_file()
    assert _schema()["required"] == ["cluster_name", "provider"]


def test_launcher_and_kuberay_files_are_told_apart_by_a_top_level_kind_key():
    assert {"local.yaml", "aws.yaml", "gcp.yaml"} <= {p.name for p in LAUNCHER_FILES}
    assert "kuberay-rayjob.yaml" in {p.name for p in KUBERAY_FILES}


@_by_name(LAUNCHER_FILES)
def test_launcher_config_passes_the_checks_ray_up_runs(path):
    validate_launcher_config(_load(path))


@_by_name(LAUNCHER_FILES)
def test_schema_check_rejects_an_unknown_top_level_key(path):
    config = _load(path)
    config["bogus_top_level_key"] = True
    with pytest.raises(jsonschema.ValidationError, match="bogus_top_level_key"):
        validate_launcher_config(config)


@_by_name(LAUNCHER_FILES)
def test_schema_check_rejects_a_config_without_provider(path):
    config = _load(path)
    del config["provider"]
    with pytest.raises(jsonschema.ValidationError, match="provider"):
        validate_launcher_config(config)


@_by_name(_multi_node_type_configs())
def test_schema_check_rejects_a_node_type_without_resources(path):
    config = _load(path)
    del config["available_node_types"][config["head_node_type"]]["resources"]
    with pytest.raises(jsonschema.ValidationError, match="resources"):
        validate_launcher_config(config)


@_by_name(_multi_node_type_configs())
def test_ray_check_rejects_a_head_node_type_that_is_not_defined(path):
    config = _load(path)
    config["head_node_type"] = "no.such.node.type"
    with pytest.raises(ValueError, match="head_node_type"):
        validate_launcher_config(config)


@_by_name(LAUNCHER_FILES)
def test_setup_commands_pip_install_this_package_from_the_synced_repo(path):
    config = _load(path)
    targets = [
        match.group(1).replace("$HOME/", "~/")
        for cmd in config["setup_commands"]
        for match in [EDITABLE_INSTALL.search(cmd)]
        if match
    ]
    assert targets, f"no `pip install -e <repo>` in setup_commands of {path.name}"
    for target in targets:
        assert target.rstrip("/").endswith("distributed_ac")
        assert config["file_mounts"].get(target) == ".", (
            f"{target} is installed but not synced from the repository root"
        )


@_by_name(LAUNCHER_FILES)
def test_dashboard_is_bound_to_localhost_and_nothing_binds_all_interfaces(path):
    config = _load(path)
    head_start = " ".join(config["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head_start
    assert not any("0.0.0.0" in cmd for cmd in _all_commands(config))


@_by_name(LAUNCHER_FILES)
def test_token_authentication_is_on_and_the_token_is_synced(path):
    config = _load(path)
    assert any("RAY_AUTH_MODE=token" in cmd for cmd in _all_commands(config))
    assert config["file_mounts"].get("~/.ray/auth_token") == "~/.ray/auth_token"


@_by_name(_multi_node_type_configs())
def test_head_has_a_gpu_for_the_learner_and_workers_are_cpu_only(path):
    config = _load(path)
    node_types = config["available_node_types"]
    head = config["head_node_type"]
    assert node_types[head]["resources"] == {"CPU": 4, "GPU": 1}
    workers = {name: spec for name, spec in node_types.items() if name != head}
    assert workers
    for name, spec in workers.items():
        assert spec["resources"].get("GPU", 0) == 0, name
        assert spec["resources"]["CPU"] > 0, name
        assert spec["max_workers"] > 0, name
    assert config["max_workers"] >= sum(s.get("min_workers", 0) for s in workers.values())


@_by_name(LAUNCHER_FILES + KUBERAY_FILES)
def test_container_images_run_the_installed_ray_version(path):
    versions = set(RAY_IMAGE_TAG.findall(path.read_text()))
    assert versions <= {ray.__version__}, versions


@_by_name(KUBERAY_FILES)
def test_kuberay_rayjob_trains_through_the_dac_cli(path):
    manifest = _load(path)
    assert manifest["apiVersion"] == "ray.io/v1"
    assert manifest["kind"] == "RayJob"
    spec = manifest["spec"]
    assert "dac train" in spec["entrypoint"]
    assert spec["shutdownAfterJobFinishes"] is True
    assert spec["rayClusterSpec"]["rayVersion"] == ray.__version__


@_by_name(KUBERAY_FILES)
def test_kuberay_rayjob_has_a_head_and_a_worker_group_with_images(path):
    cluster = _load(path)["spec"]["rayClusterSpec"]
    head_containers = cluster["headGroupSpec"]["template"]["spec"]["containers"]
    assert head_containers[0]["image"].startswith("rayproject/ray:")
    groups = cluster["workerGroupSpecs"]
    assert len(groups) >= 1
    for group in groups:
        assert group["groupName"]
        containers = group["template"]["spec"]["containers"]
        assert containers and containers[0]["image"]
        assert "nvidia.com/gpu" not in containers[0].get("resources", {}).get("limits", {})


@_by_name(KUBERAY_FILES)
def test_kuberay_rayjob_installs_this_package(path):
    spec = _load(path)["spec"]
    runtime_env = yaml.safe_load(spec["runtimeEnvYAML"])
    assert any("distributed_ac" in requirement for requirement in runtime_env["pip"])
