"""A preload module that starts a thread in the forkserver, which no forked worker would have: refused."""

import threading
import time

threading.Thread(target=time.sleep, args=(3600,), daemon=True, name="preloaded-thread").start()
