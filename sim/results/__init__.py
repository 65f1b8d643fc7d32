"""Results: the run folder's schema (`schema`), its only writer (`write`) and reader (`read`), the summary built
from a finished run (`summary`), its flat form for tables of runs (`flat`) and its
verdicts and findings in words (`text`). docs/results.md describes the files."""
