"""`pai-launch doctor --fix`: the protocol's edits made for the user, on the script's concrete syntax tree (libcst),
so every comment and every line the edit does not touch stays as the user wrote it.

Runs in: the tool's process only (never the supervisor's start-up: libcst is imported here, and only here).
May import: the stdlib, libcst, doctor and fix.
"""
