"""Every graph operator checks its attributes against its schema before its type rule runs, so a
missing or extra attribute is refused the same way, naming the attribute, whatever the arguments."""

import pytest

from compiler.graph import OPS
from tests.compiler.graph.op_check import check_refused


@pytest.mark.parametrize("op", sorted(OPS))
def test_every_operator_refuses_a_missing_or_extra_attribute_by_name(op):
    missing = r"missing attribute '\w+' \(takes \[.+\]\)"
    extra = r"unexpected attribute 'bogus' \(takes \[\]\)"
    reason = rf"^node 'bad' \({op}\): ({missing}|{extra})$"
    check_refused(op, [((3,), "float32")], {"bogus": 1}, reason)
