"""``refimpl fuzz``: run the property suite against a backend, shrink, and write reproducers.

Stages, each a module, with plain data between them:

- :mod:`.options`   the frozen :class:`FuzzOptions` (what the command line asked for);
- :mod:`.suite`     which property files make up each component;
- :mod:`.events`    a pytest plugin, loaded in each worker, that streams one JSON line per
                    finished property (outcome, examples run, the shrunk failing example);
- :mod:`.runner`    one pytest worker process per component (``--jobs`` at a time), progress
                    bars fed by the event stream;
- :mod:`.report`    the summary table, the JSON report and the runnable reproducers.
"""
