"""deploy/k8s/flinkdeployment.yaml: the Flink Kubernetes Operator's FlinkDeployment of the job, application mode.

No registry package reachable here ships the operator's CRD (Maven Central has no flink-kubernetes-operator or
flink-kubernetes-operator-api artifact; PyPI and npm have no package with it), so the manifest is checked against
the operator's documented fields for a PyFlink job in application mode (its examples/flink-python-example): the
kind and API version, the Flink version of the installed PyFlink, the PythonDriver entry point with the
flink-python jar of that version, and the job's own arguments, which the job's parser must accept.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from driftwarden.jobs.drift_job import job_parser
from tests.conftest import REPO

MANIFEST = REPO / "deploy" / "k8s" / "flinkdeployment.yaml"


@pytest.fixture(scope="module")
def deployment() -> dict:
    return yaml.safe_load(MANIFEST.read_text())


def pyflink_version() -> str:
    from importlib.metadata import version

    return version("apache-flink")


def test_it_is_a_flinkdeployment_in_application_mode(deployment) -> None:
    assert (deployment["apiVersion"], deployment["kind"]) == ("flink.apache.org/v1beta1", "FlinkDeployment")
    spec = deployment["spec"]
    for field in ("image", "flinkVersion", "serviceAccount", "flinkConfiguration", "jobManager", "taskManager", "job"):
        assert field in spec, field
    major, minor, _ = pyflink_version().split(".")
    assert spec["flinkVersion"] == f"v{major}_{minor}"
    for role in ("jobManager", "taskManager"):
        assert set(spec[role]["resource"]) <= {"memory", "cpu", "ephemeralStorage"} and spec[role]["resource"]["memory"]
    job = spec["job"]  # a job section: application mode (a session cluster has none)
    assert job["entryClass"] == "org.apache.flink.client.python.PythonDriver"
    assert job["jarURI"] == f"local:///opt/flink/opt/flink-python-{pyflink_version()}.jar"
    assert job["upgradeMode"] in ("stateless", "savepoint", "last-state") and job["state"] in ("running", "suspended")
    if job["upgradeMode"] != "stateless":
        assert spec["flinkConfiguration"]["execution.checkpointing.savepoint-dir"]
    assert all(isinstance(v, str) for v in spec["flinkConfiguration"].values()), "flinkConfiguration values are text"


def test_the_job_arguments_are_the_jobs_own(deployment) -> None:
    args = deployment["spec"]["job"]["args"]
    start = args.index("-pym")
    assert args[start + 1] == "driftwarden.jobs.drift_job"
    parsed = job_parser().parse_args(args[start + 2:])  # exits (a test failure) on an unknown or missing option
    assert str(parsed.config).startswith("/etc/driftwarden/") and parsed.store_url.startswith("postgresql://")
    assert ":" not in parsed.store_url.split("//", 1)[1].split("@")[0], "no password in the manifest"
    passfile = Path(parsed.store_url.split("?passfile=", 1)[1])  # the TaskManagers read it (docs/store.md)
    container = deployment["spec"]["podTemplate"]["spec"]["containers"][0]
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == str(passfile.parent))
    volume = next(v for v in deployment["spec"]["podTemplate"]["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] and volume["secret"]["defaultMode"] in (0o400, 0o600)  # libpq: private
    assert parsed.parallelism == deployment["spec"]["job"]["parallelism"]
    python = args[args.index("-pyclientexec") + 1]
    assert deployment["spec"]["flinkConfiguration"]["python.executable"] == python


def test_the_image_target_exists_and_matches_the_flink_version() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    stage = re.search(r"^FROM flink:(\S+) AS k8s$", dockerfile, re.M)
    assert stage, "the Dockerfile has no k8s target"
    assert stage.group(1).startswith(pyflink_version() + "-")
