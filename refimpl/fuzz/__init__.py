"""``refimpl fuzz``: run the target properties against a backend, shrink, and write reproducers.

Stages, each a module, with plain data between them:

- :mod:`.options`   the frozen :class:`FuzzOptions` (what the command line asked for);
- :mod:`.cli`       arguments, and the preflight checks (target, --out, --database, ...) that
                    end a bad campaign with exit status 2 before any property runs;
- :mod:`.outdir`    a clean --out for every run (--resume / --force);
- :mod:`.suite`     which property files make up each component;
- :mod:`.events`    a pytest plugin, loaded in each worker: the per-example time limit, the
                    stop signal, and one JSON line per property (outcome, examples, reach, the
                    shrunk failing example), from Hypothesis's observability stream;
- :mod:`.examples`  how a failing example is rebuilt (its printed call, its pickled
                    arguments, or Hypothesis's choices), recorded so a reproducer can;
- :mod:`.worker`    one pytest worker process (its own process group): start, stop, watchdog,
                    and what it ran (crashed or stopped workers list what they did not run);
- :mod:`.runner`    rounds of workers (``--jobs`` at a time), --minutes, SIGINT/SIGTERM;
- :mod:`.campaign`  one plain-runner campaign from checked options to the exit status;
- :mod:`.report`    the summary table (examples, failures, reach), report.json, reproducers;
- :mod:`.junit`     JUnit XML for CI systems;
- :mod:`.compare`   ``--compare OLD/report.json``: new failures, fixed ones, reach changes;
- :mod:`.replay`    what every reproducer calls: that one example, rebuilt and run again;
- :mod:`.hypofuzz`  ``--engine hypofuzz``: the same properties under HypoFuzz;
- :mod:`.database`  the example database (a folder or Redis), checked before use.
"""
