"""deploy/Dockerfile and .dockerignore, read as Docker would (no Docker engine runs here): one image for
both roles, `tuner` as its entrypoint, not root, and a build context without secrets or the venv."""

import fnmatch

from deploy_helpers import ROOT, dockerfile, settings_from


def test_one_image_for_both_roles():
    image = dockerfile()
    assert image.base.startswith("python:3.11-slim")
    assert image.entrypoint == ["tuner"]
    assert image.cmd == ["serve"]
    assert not image.healthcheck, "workers share the image and serve no /healthz: check in compose.yaml"


def test_the_image_imports_models_and_builds_artifacts():
    """The probe's image lacked the models extra (every ONNX upload failed with an ImportError 422)
    and a C compiler (artifact builds failed). torch must come from PyTorch's CPU index: PyPI's build
    of the pinned version pulls several GB of CUDA."""
    runs = " ".join(dockerfile().runs)
    assert "gcc" in runs.split() and "libc6-dev" in runs.split()
    install = next(r for r in dockerfile().runs if "pip install" in r)
    assert '"/src[models]"' in install and "--extra-index-url https://download.pytorch.org/whl/cpu" in install


def test_not_root():
    user = dockerfile().user.split(":")[0]
    assert user and user not in ("root", "0")


def test_coordinator_binds_every_interface_inside_the_container():
    assert settings_from(dockerfile().env).host == "0.0.0.0"


def _ignored(path: str, rules: list[str]) -> bool:
    """.dockerignore: the last rule matching the path or one of its parent directories decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for rule in rules:
        negated = rule.startswith("!")
        pattern = rule.lstrip("!").rstrip("/")
        if any(
            fnmatch.fnmatch(c, pattern) or fnmatch.fnmatch(c, pattern.replace("**/", "")) for c in candidates
        ):
            ignored = not negated
    return ignored


def test_build_context_has_the_sources_and_nothing_secret():
    rules = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    copied = dockerfile().copied
    for source in copied:
        assert (ROOT / source).exists(), f"the Dockerfile copies {source}, which does not exist"
    wanted = [*copied, "tuner/service/static/dashboard.html", "tuner/database/migrations/versions/x.py"]
    assert not [p for p in wanted if _ignored(p, rules)], ".dockerignore hides what the image installs"
    unwanted = [
        ".venv/bin/python",
        "tensor-tuner.db",
        "demo.db-wal",
        "deploy/.env",
        ".git",
        "tuner/__pycache__/cli.cpython-311.pyc",
        "tests/deploy/test_image.py",
    ]
    assert [p for p in unwanted if not _ignored(p, rules)] == []
