"""Runs, calls and approvals as OpenTelemetry traces, exported over OTLP/HTTP when configured.

Export is off unless an endpoint is given (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_ENDPOINT``,
``%mkl config otel=URL`` or ``--otel URL``: see :mod:`.switch`). When it is on, the application wraps a run's oracle
in a :class:`~.tracing.TracingOracle`: it times each call the run makes, and once an advance's journal is written
(``Oracle.advanced``) it turns that advance into spans (:mod:`.spans`) and sends them (:mod:`.otlp`, the only module
that imports the OpenTelemetry SDK, and only then).
"""
