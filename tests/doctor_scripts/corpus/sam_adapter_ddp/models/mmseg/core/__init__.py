from .evaluation import *  # noqa: F401, F403
from .seg import *  # noqa: F401, F403
from .utils import *  # noqa: F401, F403
