"""The workspace cache an exported library links its kernels against: a freed block goes back to
the next request of its size, never to two holders at once; other sizes, a block past the cache's
limit and a full cache fall through to the C library."""

import subprocess
from pathlib import Path

from compiler import workspaces as cache
from compiler.graph import workspaces

DRIVER = f"""\
#include <stdio.h>
#include <stdlib.h>
size_t {cache.KEPT}(size_t size);
int main(void) {{
  char *a = malloc(1000), *b = malloc(1000);
  if (!a || !b || a == b) return 1;             /* two holders, two blocks */
  free(a);
  char *c = malloc(1000);
  if (c != a) return 2;                         /* the freed block comes back */
  char *d = malloc(2000);
  if (d == a || d == b) return 3;               /* another size, another block */
  free(b); free(c); free(d);
  size_t kept = {cache.KEPT}(0);
  if (kept != 4000) return 5;                   /* a and b (1000 each), d (2000) */
  char *big = malloc({cache.KEPT_LIMIT_BYTES}UL + 1);
  if (!big || {cache.KEPT}(0) != kept) return 6;  /* past the limit: not kept */
  free(big);
  void *many[{cache.SLOTS} + 8];
  for (int i = 0; i < {cache.SLOTS} + 8; i++)
    if (!(many[i] = malloc(64 + i))) return 4;  /* more sizes than slots */
  for (int i = 0; i < {cache.SLOTS} + 8; i++) free(many[i]);
  kept = {cache.KEPT}(0);
  char *e = malloc(5000);                       /* a new size takes the oldest unused slot */
  if (!e || {cache.KEPT}(0) != kept + 5000 - 64) return 7;
  free(e);
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
