"""Teams: a lead plans on a shared board, worker processes do the items in their own worktrees.

:mod:`.lead` runs ``orchestrator team``; :mod:`.worker` is one worker process (``orchestrator
work``); :mod:`.integration` holds the team's branches and what may merge; :mod:`.view` is the
live view; :mod:`.scripted` the offline lead and worker models. Nothing is imported here: the
CLI loads each part when its command runs.
"""
