"""The explorer's pages, one module each: what the page shows (its shape, built from
:mod:`memory.selectors`) and its views. What every page does with its request (the actor, the
parameters, the one refusal) is :mod:`explorer.http`; who may see and act, :mod:`explorer.access`.
"""
