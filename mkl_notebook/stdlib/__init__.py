"""The standard library of mkl machines that ships with mkl_notebook: ten small, domain-free
machines (std_cot, std_self_consistency, std_refine, std_tot, std_debate, std_map_reduce,
std_cascade, std_plan_execute, std_research, std_compress), one ``.mkl`` file each with its
scripted scenarios in a ``.test.yaml`` beside it, which any machine can call by name with
``call:``; each reads ``task`` (and a few documented context keys) and returns ``answer``."""
