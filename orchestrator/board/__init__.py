"""Boards kept outside a run: one plan agents share, in a transactional store with a checked log.

:mod:`.store` holds the SQL store and its operations (every change an item-machine transition),
:mod:`.stores` opens one from a ``--board`` URL, :mod:`.schema` names and upgrades its tables,
:mod:`.inputs` says what the board takes from anyone (names, text, leases), :mod:`.check`
replays a store's log through fresh item machines and checks the board's rules held the whole
time, :mod:`.shared` is one agent's view of a store, and :mod:`.json_file` is the JSON store: a
board file of one agent (``--board FILE.json``).
"""
