"""A preload module that keeps the agent starting up (its forkserver preloading) until the file named by
PAI_TEST_RELEASE_PRELOAD exists: a test can act while the agent is not ready yet."""

import os
import time

_release = os.environ.get("PAI_TEST_RELEASE_PRELOAD")
_deadline = time.monotonic() + 120
while _release and not os.path.exists(_release) and time.monotonic() < _deadline:
    time.sleep(0.05)
