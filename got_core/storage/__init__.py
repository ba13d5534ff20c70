"""Storage: the one module that talks to pygit2, the git binary, the derived index, and
the ref-transaction primitive every ref move goes through (docs/ARCHITECTURE.md, layer 1).

Nothing here knows about reasoning nodes, memory or frameworks; the repository layer
(:mod:`got_core.repo`) composes these pieces.
"""
