"""MASPRM: process reward models for multi-agent systems.

The package is split into a pure core (graph routing, search trees, pair
mining, answer checking, aggregation; no torch import) and thin model I/O
behind two interfaces, a policy and a scorer (see ``masprm.interfaces``).
"""

__version__ = "0.1.0"
