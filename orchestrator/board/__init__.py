"""Shared boards: one plan several agents work, in a transactional store with a checked log.

:mod:`.store` holds the store and its operations (every change an item-machine transition),
:mod:`.stores` opens one from a ``--board`` URL, :mod:`.check` replays a store's log through
fresh item machines and checks the board's rules held the whole time.
"""
