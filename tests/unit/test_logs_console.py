"""Console log lines (a terminal): a multi-line field (a log tail) is printed below its event line, its name first
and each of its lines indented, so the error at its end is read where it is; single-line fields stay on the event
line, and JSON logs stay one object per line."""

from __future__ import annotations

import io
import json
import re

from pai_launch.supervise.outputs.liveline import CLEAR, LineStream, LiveLine
from pai_launch.supervise.outputs.logs import block_text, is_block, make_logger

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
TAIL = ("usage: train.py [-h] [--save SAVE]\n"
        "train.py: error: unrecognized arguments: --perforate_model_parallel\n")


def console(log_format: str = "console") -> tuple[object, io.StringIO]:
    stream = io.StringIO()
    return make_logger(log_format, stream), stream


def without_time(text: str) -> list[str]:
    return [line[9:] if line[:2].isdigit() else line for line in text.splitlines()]


def test_a_multi_line_field_is_printed_below_the_event_line_one_indented_line_per_line():
    log, stream = console()

    log.error("init_output_tail", tail=TAIL)

    assert without_time(stream.getvalue()) == [
        "[error    ] init_output_tail",
        "  tail:",
        "    usage: train.py [-h] [--save SAVE]",
        "    train.py: error: unrecognized arguments: --perforate_model_parallel",
    ]


def test_single_line_fields_stay_on_the_event_line_before_the_blocks():
    log, stream = console()

    log.error("worker_log_tail", rank=1, node=0, tail="Traceback (most recent call last):\n  File \"train.py\"\n"
              "KeyError: 'x'")

    assert without_time(stream.getvalue()) == [
        "[error    ] worker_log_tail        node=0 rank=1",
        "  tail:",
        "    Traceback (most recent call last):",
        "      File \"train.py\"",
        "    KeyError: 'x'",
    ]


def test_events_without_multi_line_fields_render_as_before():
    log, stream = console()

    log.info("init_exited", exit="exit 2", duration_s=1.2, note="one line")

    assert without_time(stream.getvalue()) == ["[info     ] init_exited            duration_s=1.2 exit='exit 2' "
                                               "note='one line'"]


def test_several_blocks_keep_their_order_and_blank_lines_inside_a_value_stay_blank():
    assert block_text("tail", "a\n\nb\r\nc\n") == "\n  tail:\n    a\n\n    b\n    c"
    assert block_text("detail", "\n") == "\n  detail:\n"
    log, stream = console()

    log.warning("x", first="1\n2", second="3\n4")

    assert without_time(stream.getvalue()) == ["[warning  ] x", "  first:", "    1", "    2", "  second:", "    3",
                                               "    4"]


def test_only_strings_with_a_line_break_are_blocks_and_never_the_event_itself():
    assert is_block("tail", "a\nb") and is_block("tail", "progress\r")
    assert not is_block("tail", "one line")
    assert not is_block("files", ["a\nb"]) and not is_block("code", 2)
    assert not is_block("event", "two\nlines") and not is_block("exception", "Traceback\n...")


def test_json_logs_keep_a_multi_line_field_inside_one_json_line():
    log, stream = console("json")

    log.error("init_output_tail", tail=TAIL, rank=0)

    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["tail"] == TAIL and record["rank"] == 0 and record["event"] == "init_output_tail"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_under_a_live_line_the_whole_block_is_written_at_once_and_the_line_drawn_after_it():
    err = Terminal()
    live = LiveLine(err, Terminal())
    live.set("[pai-launch] init run")
    log = make_logger("console", LineStream(live))

    log.error("init_output_tail", tail=TAIL)

    pieces = ANSI.sub("", err.getvalue().replace(CLEAR, "\0")).split("\0")
    written = [piece for piece in pieces if "init_output_tail" in piece]
    assert len(written) == 1, pieces
    # Colours on (a terminal): the padded event name keeps its padding inside its colour codes.
    assert [line.rstrip() for line in without_time(written[0].removesuffix("[pai-launch] init run"))] == [
        "[error    ] init_output_tail",
        "  tail:",
        "    usage: train.py [-h] [--save SAVE]",
        "    train.py: error: unrecognized arguments: --perforate_model_parallel",
    ]
    assert written[0].endswith("--perforate_model_parallel\n[pai-launch] init run"), "drawn again under the block"
