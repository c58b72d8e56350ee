"""--resume-from checked before anything starts: an unknown stage is a usage error, nothing started or made. (How each
stage resumes is played as histories in tests/unit/test_histories_resume.py; a real script resuming from latest.pt
runs in tests/real/test_resume_latest.py.)"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(90)


def test_resume_from_is_checked_before_anything_starts(scene):
    launch, rc = scene.run("--resume-from", "newest")

    assert rc == 2
    assert "--resume-from 'newest' is unknown: use switch" in launch.stderr
    assert scene.records() == [] and not (scene.work / "PAI").exists()
