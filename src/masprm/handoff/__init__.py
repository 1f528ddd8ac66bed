"""Dynamic routing: a team of roles passing private routed messages.

protocol  the four-field routed-turn contract: rendering, strict parsing, fallback turns
team      roles, private histories, the speaker's prompt, route modes, the turn loop
scoring   ranking proposals: policy log-prob, or the handoff PRM on a truncated transcript
stats     route metrics (the paired tests are masprm.paired_stats)
methods   handoff_fixed / handoff_random / handoff_policy / handoff_prm (import to register)
settings  the handoff methods' settings (flags, defaults, checks) and the checks against the MAS config
"""
