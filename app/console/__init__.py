"""The console: a read-only browser view of the ladders, served under ``/console`` by the
service itself (``routes``: the pages; ``templates``: Jinja2; ``static``: the stylesheet,
the page script and the vendored chart library, uPlot)."""
