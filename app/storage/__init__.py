"""Storage: the engines and the request's unit of work (``engine``), the tables
(``models``), every query (``repositories``) and the classification of database errors
worth a retry (``retry``). Everything that knows a SQL dialect lives here."""
