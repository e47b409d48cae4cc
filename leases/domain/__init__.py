"""Pure lease logic: owner tokens, the lease states and the state machine's decisions.

Nothing here imports Django; every function that needs the time takes it as an argument.
"""
