"""The stages of a check run, each a module with one job; `dslint.engine.Checker` composes them:

1. `gather`: collect the paths' files and read each once (a fix round's re-check starts from the previous
   check's sources);
2. `rule_set`: the rules the settings enable for those kinds of files, and the triage of the Python files
   none of their trigger words occurs in;
3. `launch_units`: each Python file's facts (from the cache or its outline), the launch units built from
   them, and the view each file is checked in;
4. `workers`: scheduling: outline and analysis workers forked over contiguous runs of files (or this process
   alone on small runs);
5. `rule_runs`: the rules on one file in its view, diagnostics turned into findings;
6. `results`: the report.

`run_cache` is the result cache at the boundaries: the run's entry (before stage 3), each file's program facts
(stage 3), each file's findings (around stages 4-5). docs/architecture.md draws the data flow."""
