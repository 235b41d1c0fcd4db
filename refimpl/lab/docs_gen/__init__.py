"""The generated parts of the docs, each a module tests import and a ``python -m`` command:
``mechanism_pages`` (docs/mechanisms/), ``pass_table`` (docs/background.md's rows and pass tables),
``reliability_table`` (docs/reliability.md's bad-input table). Each takes ``--check``: write nothing,
exit 1 when the doc differs from what the code gives today."""
