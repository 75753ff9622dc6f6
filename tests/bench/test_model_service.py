"""bench.model_service end to end on the MLP: a coordinator and a worker started, the model tuned
through them under its budget, the artifact downloaded, checked against PyTorch and timed."""

import re

from bench import model_service


def test_a_small_model_goes_from_submission_to_a_timed_artifact(tmp_path, capsys):
    model_service.main(["--model", "mlp", "--trials", "8", "--keep", str(tmp_path)])
    out = capsys.readouterr().out
    assert "mlp: done after 8 trials" in out
    error = float(re.search(r"max abs error (\S+)", out).group(1))
    assert error < 1e-4
    assert re.search(r"artifact [\d.]+ ms \(1\.00x\), graph\.build [\d.]+ ms", out)
    assert (tmp_path / "model.so").exists() and (tmp_path / "model.h").exists()
