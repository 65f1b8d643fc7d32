"""Results: the run folder's schema (`schema`), its only writer (`write`) and reader (`read`), the summary built
from a finished run (`summary`) and its flat form for tables of runs (`flat`). docs/results.md describes the files."""
