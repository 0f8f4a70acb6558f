"""The program model: what runs together (launch units) and what values can be (roles, rank-varying values,
process groups, configs per call, models), decided before any rule runs. Rules read it through one interface,
`dslint.program.query.Program`."""
