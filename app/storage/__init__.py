"""Storage: the engines (``engine``), the one unit of work (``unit_of_work``: begin, commit,
roll back, retry), the tables (``models``), every query by what it stores
(``repositories``, API keys among them; ``console_sessions``), the rank blocks (``blocks``), the
reads' validators (``versions``) and the classification of database errors worth a retry
(``retry``). Everything that knows a SQL dialect lives here."""
