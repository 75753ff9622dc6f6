"""The coordinator's search loop proposes programs for the machine a task runs on, which need not be
the coordinator's own."""

import math

from tests.service.conftest import Api
from tests.service.test_api import lease, register, submit

AVX2_WORKER = {
    "key": "znver3-avx2-64c",
    "cpu": "Test EPYC",
    "features": "+avx,+avx2,+fma,-avx512f",
    "cores": 64,
}


def test_a_task_for_an_avx2_machine_is_searched_for_its_registers_and_cores(api: Api):
    worker = register(api, hardware=AVX2_WORKER)
    task = submit(api, trials=8, hardware=AVX2_WORKER["key"])
    api.loop.tick()
    search = api.loop.states[task["id"]].search
    assert (search.vector_bits, search.cores) == (256, 64)
    leased = lease(api, worker)
    assert len(leased) == 8  # the queue depth of the test settings
    for candidate in leased:
        tiles = [
            i["decision"]
            for i in candidate["trace"]["instructions"]
            if i["kind"] == "sample_perfect_tile" and i["args"]["n"] == 4
        ]
        vector, rows = tiles[0][-1], tiles[1][-1]  # j (vectorized), then i
        assert vector <= 32 and math.ceil(vector / 8) * rows <= 12
