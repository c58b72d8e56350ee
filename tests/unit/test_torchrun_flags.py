"""torchrun's options read as pai-launch's (cli.torchrun_flags): held to the installed torch's own parser, then each
rule by its values. Pure: no process."""

from __future__ import annotations

import queue

import pytest
import typer

from pai_launch import entry
from pai_launch.cli import completion, optionvalues, specbuilder
from pai_launch.cli import launch as cli
from pai_launch.cli.torchrun_flags import from_env, rewrite, translate
from pai_launch.cli.torchrun_table import POSITIONAL, TORCHRUN, TorchrunFlagError
from pai_launch.core import exitcodes
from pai_launch.supervise.job import plan
from pai_launch.wire import log_events
from tests.unit.test_cli import launched, run  # noqa: F401 - the launch command with its run faked

OWN = cli.own_options(typer.main.get_command(cli.app))


def torch_parser():
    from torch.distributed.run import get_args_parser

    return get_args_parser()


def test_every_option_of_the_installed_torchrun_has_an_entry():
    """A flag a new torch adds fails here until the table says what it means (or why it is refused)."""
    dests = {action.dest for action in torch_parser()._actions}
    assert sorted(dests - set(TORCHRUN) - set(POSITIONAL)) == []


def test_every_spelling_of_torchruns_options_is_read():
    """Each of torch's spellings is either one of pai-launch's options of the same meaning or in the entry's."""
    unread = []
    for action in torch_parser()._actions:
        entry = TORCHRUN.get(action.dest)
        if entry is None:
            continue
        for spelling in action.option_strings:
            if entry.same is not None:
                param = OWN.param(spelling)
                if param != entry.same:
                    unread.append(f"{spelling}: pai-launch's --{entry.same.replace('_', '-')} lacks this spelling")
            elif spelling not in entry.spellings:
                unread.append(f"{spelling}: not among {entry.spellings}")
    assert unread == []


def test_a_flag_is_a_flag_and_an_option_takes_a_value_as_in_torchrun():
    for action in torch_parser()._actions:
        entry = TORCHRUN.get(action.dest)
        if entry is not None and entry.same is None:
            assert entry.takes_value == (action.nargs != 0), action.dest


def test_every_same_meaning_names_a_launch_option():
    params = {param.name for param in typer.main.get_command(cli.app).params}
    assert {entry.same for entry in TORCHRUN.values() if entry.same} <= params


# --- the command line --------------------------------------------------------------------------------------------
def test_a_sagemaker_style_line_becomes_pai_launch_options_before_the_script():
    argv = ["--nnodes", "2", "--nproc_per_node", "2", "--master_addr", "10.0.0.1", "--master_port", "7777",
            "--node_rank", "1", "train.py", "--master_addr", "kept"]
    rewritten = rewrite(argv, OWN)
    assert rewritten.argv == ["--nnodes", "2", "--nproc_per_node", "2", "--node_rank", "1",
                              "--rdzv-endpoint", "10.0.0.1:7777", "train.py", "--master_addr", "kept"]
    assert rewritten.read.sources == {"rdzv_endpoint": "--master_addr, --master_port"}
    assert rewritten.read.notes == []


@pytest.mark.parametrize("argv, endpoint", [
    (["--master-addr", "node0"], "node0:29500"),
    (["--master-port", "1234"], "127.0.0.1:1234"),
    (["--master-addr=::1", "--master-port=5"], "[::1]:5"),
    (["--master-addr", "a", "--rdzv-endpoint", "b:1"], None),  # the endpoint, as torchrun's static rendezvous takes it
])
def test_the_master_address_is_node_0s_store_at_torchruns_default_port(argv, endpoint):
    options = rewrite([*argv, "train.py"], OWN).read.options
    assert options.get("rdzv_endpoint") == endpoint


def test_max_restarts_is_the_failure_budget_plus_one_with_a_note_saying_how_it_differs():
    rewritten = rewrite(["--max_restarts", "2", "train.py"], OWN)
    assert rewritten.argv == ["--max-failures", "3", "train.py"]
    [(event, fields)] = rewritten.read.notes
    assert event == log_events.TORCHRUN_FLAG_MAPPED and event.fields >= set(fields)
    assert (fields["flag"], fields["value"], fields["as_option"]) == ("--max_restarts", "2", "--max-failures 3")
    assert "in a row" in fields["why"]


def test_an_explicit_pai_launch_option_wins_over_the_torchrun_flag_and_its_note_goes():
    rewritten = rewrite(["--max-failures", "9", "--max-restarts", "0", "--shutdown-timeout=5", "--grace", "2",
                         "train.py"], OWN)
    assert rewritten.argv == ["--max-failures", "9", "--grace", "2", "train.py"]
    assert rewritten.read.notes == []


def test_shutdown_timeout_is_the_grace():
    assert rewrite(["--shutdown_timeout", "12", "train.py"], OWN).argv == ["--grace", "12", "train.py"]


@pytest.mark.parametrize("argv, notes", [
    (["--monitor-interval", "5"], ["--monitor-interval"]),
    (["--start_method=fork"], ["--start_method"]),
    (["--role", "trainer"], ["--role"]),
    (["--role", "default", "--event-log-handler", "null"], []),
    (["--run-path"], ["--run-path"]),
    (["--signals-to-handle", "SIGTERM,SIGUSR1"], ["--signals-to-handle"]),
    (["--signals_to_handle", "SIGTERM,SIGINT,SIGHUP,SIGQUIT"], []),
])
def test_flags_that_do_not_apply_are_accepted_with_a_note(argv, notes):
    rewritten = rewrite([*argv, "train.py"], OWN)
    assert rewritten.argv == ["train.py"]
    assert [fields["flag"] for event, fields in rewritten.read.notes] == notes
    assert all(event == log_events.TORCHRUN_FLAG_IGNORED and event.fields >= set(fields)
               for event, fields in rewritten.read.notes)


@pytest.mark.parametrize("argv, message", [
    (["--rdzv-backend", "etcd"], "--rdzv-backend 'etcd' is not supported"),
    (["--rdzv_conf", "is_host=1,timeout=5"], "--rdzv_conf key 'is_host' is not supported"),
    (["--rdzv-conf", "timeout"], "is not KEY=VALUE"),
    (["--logs-specs", "mine"], "--logs-specs is not supported"),
    (["--numa_binding", "node"], "--numa_binding is not supported"),
    (["--virtual-local-rank"], "--virtual-local-rank is not supported"),
    (["--duplicate-stdout-filters", "apple"], "--duplicate-stdout-filters is not supported"),
    (["--signals-to-handle", "SIGTERM,SIGALRM"], "names SIGALRM"),
    (["--standalone", "--nnodes", "2"], "--standalone runs on one machine but --nnodes is 2"),
    (["--max-restarts", "x"], "is not a number of restarts"),
    (["--master-port", "http"], "is not a port"),
])
def test_a_flag_pai_launch_cannot_honour_is_refused_naming_it(argv, message):
    with pytest.raises(TorchrunFlagError, match=message):
        rewrite([*argv, "train.py"], OWN)


def test_a_flag_without_its_value_is_refused_naming_it():
    with pytest.raises(TorchrunFlagError, match="--max-restarts needs a value"):
        rewrite(["--max-restarts"], OWN)


def test_the_rendezvous_backend_is_checked_then_kept_for_how_a_node_finds_its_rank():
    assert rewrite(["--rdzv-backend", "c10d", "--rdzv_backend=static", "t.py"], OWN).argv == [
        "--rdzv-backend", "static", "t.py"]


def test_standalone_is_one_machine_whatever_the_platform_says():
    assert rewrite(["--standalone", "--nproc-per-node", "2", "train.py"], OWN).argv == [
        "--nproc-per-node", "2", "--nnodes", "1", "train.py"]
    assert rewrite(["--standalone", "--nnodes", "1:1", "train.py"], OWN).argv == ["--nnodes", "1:1", "train.py"]


@pytest.mark.parametrize("value", ["abc", "-5", "nan", "0"])
def test_a_bad_rdzv_conf_timeout_is_named_as_given_not_as_the_option_it_would_become(value):
    with pytest.raises(TorchrunFlagError) as caught:
        rewrite(["--rdzv_conf", f"join_timeout={value}", "train.py"], OWN)
    assert str(caught.value).startswith(f"--rdzv_conf join_timeout={value} is not a number of seconds above 0")
    assert "--rdzv-timeout" not in str(caught.value) and "PAI_LAUNCH_RDZV_TIMEOUT" not in str(caught.value)


def test_rdzv_conf_timeouts_are_the_rendezvous_timeout():
    assert rewrite(["--rdzv-conf", "join_timeout=600,timeout=5", "train.py"], OWN).argv == [
        "--rdzv-timeout", "600", "train.py"]


def test_torchruns_short_options_are_pai_launchs_own_with_the_value_attached_as_argparse_reads_them(launched,
                                                                                                   tmp_path):
    assert run(["-r3", "-t0:3", "--log_dir", "logs", "--nproc", "2", "-m", "train"]) == 0
    spec = launched["spec"]
    assert (spec.muted, spec.runs_as, spec.log_dir) == (((1, "stdout"), (1, "stderr")), "module", tmp_path / "logs")


def test_everything_from_the_script_on_is_the_scripts():
    argv = ["--nproc", "2", "train.py", "--max-restarts", "3", "--standalone"]
    assert rewrite(argv, OWN).argv == argv
    assert rewrite(["--", "--max-restarts"], OWN).argv == ["--", "--max-restarts"]


def test_pai_launch_options_and_their_values_pass_through_untouched():
    argv = ["--save-name", "--standalone", "--log-dir=x", "--poll", "train.py"]
    assert rewrite(argv, OWN).argv == argv  # --standalone here is --save-name's value


# --- the environment -----------------------------------------------------------------------------------------------
def test_torchruns_environment_is_read_by_the_same_rules_naming_the_variables():
    read = from_env({"PET_NNODES": "2", "PET_NPROC_PER_NODE": "gpu", "PET_MASTER_ADDR": "pod-0",
                     "PET_MASTER_PORT": "23456", "PET_MAX_RESTARTS": "1", "PET_NODE_RANK": "", "OTHER": "1"})
    assert read.options == {"nnodes": "2", "nproc": "gpu", "rdzv_endpoint": "pod-0:23456", "max_failures": "2"}
    assert read.sources == {"nnodes": "PET_NNODES", "nproc": "PET_NPROC_PER_NODE",
                            "rdzv_endpoint": "PET_MASTER_ADDR, PET_MASTER_PORT", "max_failures": "PET_MAX_RESTARTS"}
    assert [fields["flag"] for _, fields in read.notes] == ["PET_MAX_RESTARTS"]
    with pytest.raises(TorchrunFlagError, match="PET_RDZV_BACKEND 'etcd-v2' is not supported"):
        from_env({"PET_RDZV_BACKEND": "etcd-v2"})
    with pytest.raises(TorchrunFlagError, match="PET_STANDALONE runs on one machine but --nnodes is 2"):
        from_env({"PET_STANDALONE": "1", "PET_NNODES": "2"})


def test_a_flag_is_read_beside_torchruns_variables_as_torchrun_reads_them():
    rewritten = rewrite(["--master_port", "5", "t.py"], OWN, {"PET_MASTER_ADDR": "pod-0"})
    assert rewritten.argv == ["--rdzv-endpoint", "pod-0:5", "t.py"]


def test_translate_names_each_value_as_the_caller_spells_it():
    read = translate({"shutdown_timeout": "3"}, lambda dest: f"<{dest}>")
    assert (read.options, read.sources) == ({"grace": "3"}, {"grace": "<shutdown_timeout>"})


# --- through the launch command ------------------------------------------------------------------------------------
def test_a_torchrun_command_line_becomes_the_spec_with_its_notes(launched):
    assert run(["--nnodes=2", "--nproc_per_node=1", "--rdzv_backend=c10d", "--rdzv_endpoint=10.0.0.1:29400",
                "--node_rank=0", "--max_restarts=3", "--monitor_interval=1", "train.py", "--lr", "1"]) == 0
    spec = launched["spec"]
    assert (spec.nodes.max_nodes, spec.nodes.node_rank, spec.nodes.endpoint, spec.nproc) == (2, 0, "10.0.0.1:29400", 1)
    assert (spec.max_failures, spec.script_args) == (4, ("--lr", "1"))
    assert [event for event, _ in launched["notes"]] == [log_events.TORCHRUN_FLAG_MAPPED,
                                                         log_events.TORCHRUN_FLAG_IGNORED]


@pytest.mark.parametrize("word, gpus, count", [("gpu", "0,1", 2), ("auto", "0,1", 2), ("auto", None, 3),
                                               ("cpu", None, 3)])
def test_nproc_words_count_the_visible_gpus_or_the_cpus(launched, monkeypatch, word, gpus, count):
    monkeypatch.setattr(specbuilder.capacity, "usable_cores", lambda: 3)
    if gpus:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpus)
    assert run(["--nproc_per_node", word, "train.py"]) == 0
    assert launched["spec"].nproc == count


def test_nproc_words_are_parsed_then_counted():
    assert optionvalues.parse_nproc("GPU") == "gpu" and optionvalues.parse_nproc("3") == 3
    with pytest.raises(ValueError, match="not a number of workers"):
        optionvalues.parse_nproc("xpu")
    assert specbuilder.resolve_nproc("gpu", ("0", "1"), 8) == 2
    assert specbuilder.resolve_nproc("auto", ("0",), 8) == 1
    assert specbuilder.resolve_nproc("auto", (), 8) == 8
    assert specbuilder.resolve_nproc("cpu", ("0",), 8) == 8
    assert specbuilder.resolve_nproc(None, ("0",), 8) is None
    with pytest.raises(Exception, match="--nproc gpu: no GPU is visible"):
        specbuilder.resolve_nproc("gpu", (), 8)


@pytest.mark.parametrize("argv, message", [
    (["--rdzv_backend", "etcd", "train.py"], "pai-launch: error: --rdzv_backend 'etcd' is not supported"),
    (["--nproc-per-node", "gpu", "train.py"], "pai-launch: error: --nproc gpu: no GPU is visible"),
    (["--nproc_per_node", "xpu", "train.py"], "pai-launch: error: Invalid value for '--nproc'"),
])
def test_a_refused_torchrun_flag_is_one_line_and_exit_2_with_nothing_started(launched, capsys, argv, message):
    assert run(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(message) and "\n" not in err
    assert "spec" not in launched


def test_as_torchrun_one_worker_is_the_default_below_the_environment_and_the_command_line(launched, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert run(["train.py"]) == 0 and launched["spec"].nproc == 2
    assert cli.run_command_line(["train.py"], queue.SimpleQueue(), as_torchrun=True) == 0
    assert launched["spec"].nproc == 1
    monkeypatch.setenv("PAI_LAUNCH_NPROC", "2")
    assert cli.run_command_line(["train.py"], queue.SimpleQueue(), as_torchrun=True) == 0
    assert launched["spec"].nproc == 2


@pytest.mark.parametrize("argv0, expected", [("/usr/bin/torchrun", True), ("torchrun", True),
                                             ("/venv/bin/pai-launch", False), ("torchrun.py", False)])
def test_the_command_is_torchrun_by_its_own_name(argv0, expected):
    assert entry.invoked_as_torchrun(argv0) is expected


# --- torch 2.14's options: the line prefix template and shell completion -------------------------------------------
def test_the_template_is_pai_launchs_own_option_and_print_completion_an_action_never_read_from_the_environment():
    assert TORCHRUN["log_line_prefix_template"].same == "log_line_prefix_template"
    assert TORCHRUN["log_line_prefix_template"].env
    assert (TORCHRUN["print_completion"].same, TORCHRUN["print_completion"].env) == ("print_completion", False)
    assert {"--log-line-prefix-template", "--log_line_prefix_template"} <= set(OWN.valued)
    assert {"--print-completion", "--print_completion"} <= set(OWN.valued)
    assert from_env({"PET_PRINT_COMPLETION": "bash"}).options == {}
    read = from_env({"PET_LOG_LINE_PREFIX_TEMPLATE": "${rank}| "})
    assert (read.options, read.sources) == ({"log_line_prefix_template": "${rank}| "},
                                            {"log_line_prefix_template": "PET_LOG_LINE_PREFIX_TEMPLATE"})


def test_the_template_parses_through_pai_launch_torchrun_and_reaches_each_generation(launched):
    argv = ["--nproc_per_node", "2", "--log-line-prefix-template", "[R${rank}]", "train.py", "--lr", "1"]
    assert cli.run_command_line(argv, queue.SimpleQueue(), as_torchrun=True) == 0
    spec = launched["spec"]
    assert (spec.line_prefix_template, spec.nproc, spec.script_args) == ("[R${rank}]", 2, ("--lr", "1"))
    assert plan.generation_request(spec, "RID", 1, None, {}, "/logs").line_prefix_template == "[R${rank}]"
    assert cli.run_command_line(["--log_line_prefix_template=${hostname}: ", "train.py"], queue.SimpleQueue(),
                                as_torchrun=True) == 0
    assert launched["spec"].line_prefix_template == "${hostname}: "


@pytest.mark.parametrize("given, env, expected", [
    ([], {}, None),
    ([], {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "T${rank} "}, "T${rank} "),
    ([], {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "T ", "PET_LOG_LINE_PREFIX_TEMPLATE": "P "}, "P "),
    ([], {"PET_LOG_LINE_PREFIX_TEMPLATE": "P ", "PAI_LAUNCH_LOG_LINE_PREFIX_TEMPLATE": "A "}, "A "),
    (["--log-line-prefix-template", "F "], {"PAI_LAUNCH_LOG_LINE_PREFIX_TEMPLATE": "A ",
                                            "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "T "}, "F "),
    (["--log-line-prefix-template", ""], {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "T "}, "T "),  # as torch's `or`
])
def test_the_template_is_taken_as_torch_takes_it_the_flag_over_pet_over_torchelastic(launched, monkeypatch, given,
                                                                                      env, expected):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.run_command_line([*given, "train.py"], queue.SimpleQueue(), as_torchrun=True) == 0
    assert launched["spec"].line_prefix_template == expected


@pytest.mark.parametrize("argv, env, message", [
    (["--log-line-prefix-template", "[${rnk}] "], {},
     "pai-launch: error: --log-line-prefix-template '[${rnk}] ': ${rnk} is not one of its macros (${role_name}, "
     "${rank}, ${local_rank}, ${hostname})"),
    ([], {"PET_LOG_LINE_PREFIX_TEMPLATE": "${rank"}, "pai-launch: error: --log-line-prefix-template '${rank': the ${ "
                                                    "at character 1 opens no macro"),
    ([], {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "$host "},
     "pai-launch: error: TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE "
                                                             "'$host ': $host is not one of its macros"),
    (["--data-parallel", "--log-line-prefix-template", "${rank}"], {},
     "pai-launch: error: --log-line-prefix-template has no effect with --data-parallel"),
])
def test_a_template_that_cannot_be_rendered_is_one_line_and_exit_2_with_nothing_started(launched, capsys, monkeypatch,
                                                                                        argv, env, message):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.run_command_line([*argv, "train.py"], queue.SimpleQueue(), as_torchrun=True) == exitcodes.USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith(message) and "\n" not in err
    assert "spec" not in launched


@pytest.mark.parametrize("argv, prog", [(["--print-completion", "bash"], "pai-launch"),
                                        (["--print_completion", "zsh", "train.py"], "torchrun")])
def test_print_completion_prints_the_commands_own_script_and_starts_nothing(launched, capsys, argv, prog):
    assert cli.run_command_line(argv, queue.SimpleQueue(), as_torchrun=prog == "torchrun") == 0
    out = capsys.readouterr().out
    assert completion.complete_var(prog) in out and prog in out
    assert "spec" not in launched


def test_print_completion_for_tcsh_is_refused_in_one_line_naming_the_shells_there_are(launched, capsys):
    assert cli.run_command_line(["--print-completion", "tcsh"], queue.SimpleQueue(), as_torchrun=True) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pai-launch: error: ") and "'tcsh' is not supported" in err and "bash, zsh and fish" in err
    assert "\n" not in err and "spec" not in launched


def test_the_command_answers_the_shell_that_its_script_asks(launched, capsys, monkeypatch):
    """What the bash script runs on TAB: the command, with the words typed so far, lists what completes them."""
    assert "_PAI_LAUNCH_COMPLETE=complete_bash" in completion.script("pai-launch", "bash")
    monkeypatch.setenv("_PAI_LAUNCH_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", "pai-launch --log-line")
    monkeypatch.setenv("COMP_CWORD", "1")
    with pytest.raises(SystemExit) as ended:
        cli.run_command_line([], queue.SimpleQueue())
    assert ended.value.code == 0
    assert capsys.readouterr().out.split() == ["--log-line-prefix-template"]
    assert "spec" not in launched
