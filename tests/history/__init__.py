"""The history checker: a driver racing every kind of writer against one workspace
(``driver``), the history it records (``record``) and the rules it proves (``check``)."""
