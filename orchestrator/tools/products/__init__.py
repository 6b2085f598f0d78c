"""What the model's *files* may do later, once the sandbox that held its process is gone.

The sandbox (:mod:`orchestrator.tools.sandbox`) decides what a command can touch while it runs.
This package decides what the files it leaves behind may do afterwards, when the user's git, the
harness's own git, a check or the next run reads them outside any sandbox:

- :mod:`.paths`: the protected paths (our own files, hook managers, whatever any git config
  level names inside the work directory), the ``protect`` globs and board stores;
- :mod:`.snapshot`: their digests before and after, and the git dir's allow-list diff;
- :mod:`.git`: how the harness runs git on a repository the model wrote (hooks, fsmonitor,
  global and system config off);
- :mod:`.gitdir`: a git dir's layout, what in it may change, gitlinks, and cleaning a git dir
  the model made;
- :mod:`.landing`: the git dir as an overlay under bwrap, and landing its safe parts;
- :mod:`.guard`: the one object a session holds that does all of this around each call.
"""
