"""The program model: what runs together (launch units) and what values can be (roles), decided before any
rule runs. Rules read it through `dslint.program.project.ProjectView`."""
