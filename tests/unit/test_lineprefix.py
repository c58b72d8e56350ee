"""torchrun's --log-line-prefix-template: checked by the supervisor (wire.lineprefix), rendered per worker by the agent
(agent.rankheads) as torch renders it. Pure: no process."""

from __future__ import annotations

from string import Template

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pai_launch.agent.rankheads import RankHeads, head
from pai_launch.wire import lineprefix
from pai_launch.wire.protocol import GenerationRequest, NodeRequest

pytestmark = pytest.mark.timeout(60)


def test_every_macro_is_rendered_for_the_worker():
    template = "[${role_name}|${rank}|${local_rank}|${hostname}] $rank$$ "
    assert lineprefix.problem(template) is None
    assert lineprefix.render(template, rank=5, local_rank=1, hostname="gpu01") == "[default|5|1|gpu01] 5$ "


@pytest.mark.parametrize("template", ["", "plain: ", "$$", "a $ b", "$5", "cost $ 3", "[${rank}]:", "$$rnk"])
def test_templates_without_an_unknown_macro_are_accepted(template):
    assert lineprefix.problem(template) is None


@pytest.mark.parametrize("template, named", [
    ("[${rnk}] ", "${rnk} is not one of its macros"),
    ("$ranks: ", "$ranks is not one of its macros"),
    ("${RANK}", "${RANK} is not one of its macros"),  # torch's names are lower case
    ("${role}", "${role} is not one of its macros"),
    ("[${rank ", "the ${ at character 2 opens no macro"),
    ("${}", "the ${ at character 1 opens no macro"),
])
def test_an_unknown_or_unclosed_macro_is_named_with_the_macros_there_are(template, named):
    why = lineprefix.problem(template)
    assert why is not None and why.startswith(named) and "\n" not in why
    assert "${hostname}" in why or "${rank}" in why


@given(st.text(alphabet="ab$ {}_rnklocahstme", max_size=30))
def test_an_accepted_template_renders_as_torchs_safe_substitute(template):
    """What torch would print for it, on every template pai-launch lets through."""
    values = dict(role_name="default", rank=3, local_rank=1, hostname="h")
    if lineprefix.problem(template) is None:
        assert lineprefix.render(template, rank=3, local_rank=1,
                                 hostname="h") == Template(template).safe_substitute(values)


# --- the heads the agent's relay writes -----------------------------------------------------------------------------
def test_without_a_template_the_head_is_pai_launchs_label():
    assert head(1, 1, None, None, "h") == "[rank1]: "
    assert head(1, 5, 2, None, "h") == "[rank5 node2]: "
    assert head(1, None, 2, None, "h") == "[local rank 1 node2]: "


def test_with_a_template_the_head_is_the_template_rendered_and_an_unknown_rank_is_a_question_mark():
    assert head(1, 5, 2, "${hostname}:${rank}: ", "gpu01") == "gpu01:5: "
    assert head(1, None, 2, "${hostname}:${rank}/${local_rank} ", "gpu01") == "gpu01:?/1 "


def _request(**overrides) -> GenerationRequest:
    return GenerationRequest(**{**dict(generation=1, nproc=4, python="/py", args=("t.py",), env={}, log_dir="/l",
                                       grace=1.0, elastic_run_id="e"), **overrides})


class _Watch:
    group: tuple[int, int] | None = None


def test_a_generations_heads_take_the_global_rank_from_the_group_once_it_is_known():
    nodes = NodeRequest(node_rank=1, min_nodes=2, max_nodes=2, host="h0", port=1, rdzv_timeout=1.0, job_id="j",
                        save_dir="/s", fs_settle=0.0)
    heads = RankHeads(_request(nodes=nodes, line_prefix_template="${hostname} r${rank} "), hostname="gpu07")
    watch = _Watch()
    heads.watch = watch  # type: ignore[assignment]
    assert heads(2) == "gpu07 r? "
    watch.group = (1, 2)
    assert heads(2) == "gpu07 r6 "
    assert RankHeads(_request(), hostname="x")(3) == "[rank3]: "
    assert RankHeads(_request(line_prefix_template="<${rank}>"), hostname="x")(3) == "<3>"
