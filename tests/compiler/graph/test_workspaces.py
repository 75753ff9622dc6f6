"""The workspace cache an exported library links its kernels against: a freed block goes back to
the next request of its size, never to two holders at once; other sizes and a full cache fall
through to the C library."""

import subprocess
from pathlib import Path

from compiler.graph import workspaces

DRIVER = f"""\
#include <stdio.h>
#include <stdlib.h>
int main(void) {{
  char *a = malloc(1000), *b = malloc(1000);
  if (!a || !b || a == b) return 1;             /* two holders, two blocks */
  free(a);
  char *c = malloc(1000);
  if (c != a) return 2;                         /* the freed block comes back */
  char *d = malloc(2000);
  if (d == a || d == b) return 3;               /* another size, another block */
  free(b); free(c); free(d);
  void *many[{workspaces.SLOTS} + 8];
  for (int i = 0; i < {workspaces.SLOTS} + 8; i++)
    if (!(many[i] = malloc(64 + i))) return 4;  /* more sizes than slots */
  for (int i = 0; i < {workspaces.SLOTS} + 8; i++) free(many[i]);
  free(NULL);
  puts("ok");
  return 0;
}}
"""


def test_the_cache_reuses_a_freed_block_of_the_same_size_only(tmp_path: Path) -> None:
    command, cache = workspaces.compile_command("cc", tmp_path)
    subprocess.run(command, check=True)
    (tmp_path / "driver.c").write_text(DRIVER)
    program = tmp_path / "driver"
    subprocess.run(
        ["cc", "-O0", "-Wall", "-Werror", "-o", str(program), str(tmp_path / "driver.c"), str(cache)]
        + list(workspaces.LINK_FLAGS),
        check=True,
    )
    done = subprocess.run([str(program)], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (0, "ok\n")
