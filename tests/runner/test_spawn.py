"""The runner's children do not re-run the script that started them: a script without an
`if __name__ == "__main__":` guard (as the MLC course writes them) runs its top level once."""

import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import pathlib, sys
    from runner.spawn import runner_context

    with open(sys.argv[1], "a") as f:
        f.write("ran ")
    ctx = runner_context()
    child = ctx.Process(target=abs, args=(-1,))
    child.start()
    child.join()
    assert child.exitcode == 0, child.exitcode
    with ctx.Pool(2, maxtasksperchild=1) as pool:  # workers replaced after each task
        assert pool.map(abs, range(-4, 0)) == [4, 3, 2, 1]
    """
)


def test_an_unguarded_script_runs_once_however_many_children_it_starts(tmp_path: pathlib.Path):
    script, marker = tmp_path / "unguarded.py", tmp_path / "marker"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(marker)],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert marker.read_text() == "ran "
