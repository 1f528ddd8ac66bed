"""The instruments: what measures a toy world's searches and scorers against its step truth.

stepbench (where a transcript first goes wrong, and whether the scorers see it), labelbench (whether a label
scheme's records say which messages are right), headroom (the oracle scorers' room), passes (fresh single passes
as supervised records, and a scorer's fit to them), claims (the paper's three claims on a run's logs) and
synthetic_team (a team played by rules, to design a world). Each is a command: ``python -m masprm.instruments.X``.
"""
