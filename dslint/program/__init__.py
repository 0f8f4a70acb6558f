"""The program model: what runs together (launch units) and what values can be (roles, rank-varying values,
process groups, configs per call, models), decided before any rule runs. Rules read it through one interface,
`dslint.program.query.Program`."""

from dslint.sources import install_reader


def _outline(src):
    from dslint.program.per_file import outline_of      # CPython's tree and the model facts: on first use
    return outline_of(src)


def _facts(src):
    from dslint.program.per_file import facts_of
    return facts_of(src)


install_reader("outline", _outline)      # `PythonSource.outline`, `.facts`: built here, memoised on the source
install_reader("facts", _facts)
